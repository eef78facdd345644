package register

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/example/tenantpipeline/internal/breaker"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// How Register keeps its core system's breaker (internal/breaker, docs/data-path.md "Breaker"):
// it reads the breaker item once when the invocation starts and then only around failures and
// state changes, so a healthy core system costs one GetItem per invocation and no write. A
// failure of the core system's health (healthFailure) is counted; once the breaker is open
// (or whenever it is), the invocation holds at its cursor instead of failing: it polls the item
// while its time lasts and ends with the cursor at the unsent record, as for a long Retry-After
// (errSlowDown), so no file fails and no Retry is spent. When the probe time comes, one
// invocation claims the probe and sends one request; its answer closes or reopens the breaker.
// A breaker item that cannot be read or written is logged at WARN, and Register goes on as it
// would without one: the breaker never loses or holds back a record on its own account.

// breakerStore is the part of breaker.Store the guard uses.
type breakerStore interface {
	Read(ctx context.Context, consistent bool) (breaker.State, error)
	Apply(ctx context.Context, cur breaker.State, decide func(breaker.State) (breaker.State, bool)) (breaker.State, bool, error)
}

// BreakerPoll is how often a held invocation looks at the breaker again, so that a close is seen
// within about this long.
const BreakerPoll = time.Second

// maxHoldWithoutDeadline bounds one hold of an invocation whose context has no deadline (a test
// or a local caller): it then ends as a Lambda invocation would at its deadline.
const maxHoldWithoutDeadline = 30 * time.Second

// probeLeaseMargin is added to one HTTP timeout for the probe's lease: long enough for its one
// request, after which another invocation may claim the probe.
const probeLeaseMargin = 5 * time.Second

// guard is one invocation's view of its core system's breaker. Its methods are safe for the keyed
// sink's concurrent sends.
type guard struct {
	store     breakerStore
	set       spec.BreakerSettings
	execution string
	lease     time.Duration
	poll      time.Duration
	now       func() time.Time
	sleep     func(context.Context, time.Duration) error
	log       *slog.Logger
	attrs     []any

	mu      sync.Mutex
	state   breaker.State
	probing bool // this invocation's probe request is in flight
	held    bool // the invocation held at least once
	sawOpen bool // it saw the breaker open or half-open
	opened  int  // opens this invocation's writes made
	closed  bool // this invocation's write closed it
	writes  sync.Mutex
}

// newGuard is the guard of req's core system, nil when it has none: no core system, no admission
// table, a DynamoDB sink (no HTTP core system), the breaker disabled, or no client.
func (h *Handler) newGuard(req pipeline.ChunkRequest, p *pace) *guard {
	c := req.Tenant.CoreSystem
	if c == nil || c.Table == "" || req.Tenant.DynamoDB != nil {
		return nil
	}
	set := c.Spec().BreakerSettings()
	if set.Disabled {
		return nil
	}
	var store breakerStore
	switch {
	case h.breakers != nil:
		store = h.breakers(*c)
	case h.DynamoDB != nil:
		store = breaker.Store{API: h.DynamoDB, Table: c.Table, Name: c.Name}
	default:
		return nil
	}
	timeout := h.HTTPTimeout
	if timeout == 0 {
		timeout = DefaultHTTPTimeout
	}
	g := &guard{store: store, set: set, execution: req.ExecutionName, lease: timeout + probeLeaseMargin, poll: BreakerPoll,
		now: h.now, sleep: p.sleep, log: h.Log, attrs: append(append([]any{}, p.attrs...), "coreSystem", c.Name)}
	if g.now == nil {
		g.now = time.Now
	}
	return g
}

// start reads the breaker once, eventually consistent: a look before sending needs no more.
func (g *guard) start(ctx context.Context, b budget) {
	if g == nil {
		return
	}
	g.refresh(ctx, b, false)
}

// refresh reads the breaker under the budget; a failed read is a WARN and leaves the view closed.
func (g *guard) refresh(ctx context.Context, b budget, consistent bool) {
	st, err := func() (breaker.State, error) {
		ctx, cancel, err := b.call(ctx, "reading the core system's breaker", minCallTime, minCallTime)
		if err != nil {
			return breaker.State{}, err
		}
		defer cancel()
		return g.store.Read(ctx, consistent)
	}()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		g.log.Warn("breaker not read; sending as without one", append(g.attrs, "error", err.Error())...)
		g.state = breaker.State{}
		return
	}
	g.state = st
	if g.state.Effective(g.now()) != breaker.Closed {
		g.sawOpen = true
	}
}

// admit returns when a request may go: the breaker is closed, or this request is the probe
// (probe true). While the breaker holds it, it polls the item; when the probe time comes it tries
// to claim the probe. A hold that does not fit the invocation, with need left for the request,
// ends it with the errSlowDown stop.
func (g *guard) admit(ctx context.Context, b budget, what string, need time.Duration) (probe bool, err error) {
	if g == nil {
		return false, nil
	}
	var waited time.Duration
	for {
		g.mu.Lock()
		st, probing := g.state, g.probing
		switch {
		case !breaker.Holds(st, g.execution) && !probing:
			// Closed, or this invocation holds the probe and none of its requests carries it yet.
			probe = st.Status == breaker.HalfOpen
			g.probing = probe
			g.mu.Unlock()
			return probe, nil
		}
		g.mu.Unlock()
		if !probing {
			if _, ok := breaker.Claim(st, g.now(), g.execution, g.lease); ok && g.claim(ctx, b) {
				continue
			}
		}
		g.noteHeld()
		d, err := g.hold(ctx, b, what, need, waited)
		if err != nil {
			return false, err
		}
		waited += d
		g.refresh(ctx, b, false)
	}
}

// claim claims the probe for this invocation; it reports whether it holds it.
func (g *guard) claim(ctx context.Context, b budget) bool {
	st, ok := g.apply(ctx, b, "claiming the breaker's probe", func(s breaker.State) (breaker.State, bool) {
		return breaker.Claim(s, g.now(), g.execution, g.lease)
	})
	if ok {
		g.log.Info("breaker probe claimed; one request goes to the core system", append(g.attrs, "opensTotal", st.Opens)...)
	}
	return ok && st.Prober == g.execution
}

// hold waits one poll (less when the probe time comes sooner) and reports the wait; the
// errSlowDown stop when no more waiting fits the invocation, having waited what did.
func (g *guard) hold(ctx context.Context, b budget, what string, need, waited time.Duration) (time.Duration, error) {
	now := g.now()
	d := g.poll
	g.mu.Lock()
	if st := g.state; st.Status == breaker.Open && st.NextProbe.After(now) {
		d = min(d, st.NextProbe.Sub(now))
	}
	g.mu.Unlock()
	d = max(d, 10*time.Millisecond)
	if b.deadline.IsZero() {
		if waited >= maxHoldWithoutDeadline {
			return 0, g.stop(b, what, waited)
		}
	} else {
		// Room for the next look at the item and for the request after it.
		left := b.deadline.Sub(now) - b.margin - need - minCallTime
		if left <= 0 {
			return 0, g.stop(b, what, waited)
		}
		d = min(d, left)
	}
	if err := g.sleep(ctx, d); err != nil {
		return 0, g.stop(b, what, waited)
	}
	return d, nil
}

// stop is the stop of a held invocation: a wait for the core system, not a failure.
func (g *guard) stop(b budget, what string, waited time.Duration) error {
	g.log.Info("the core system's breaker is open; the invocation holds at its cursor", append(g.attrs, "chunk", b.chunk, "what", what, "heldMs", waited.Milliseconds())...)
	return b.slowedDown(what, waited)
}

func (g *guard) noteHeld() {
	g.mu.Lock()
	g.held, g.sawOpen = true, true
	g.mu.Unlock()
}

// answered takes one answer of the core system to a request admit let go (the probe when probe),
// and reports whether the request must hold rather than fail: a failure of the core system's
// health with the breaker open. A failure that does not open it fails as it always did.
func (g *guard) answered(ctx context.Context, b budget, probe bool, resp response, err error) (hold bool) {
	if g == nil {
		return false
	}
	if probe {
		defer func() {
			g.mu.Lock()
			g.probing = false
			g.mu.Unlock()
		}()
	}
	if reason, failed := healthFailure(resp, err); failed {
		before := g.view()
		st, wrote := g.apply(ctx, b, "recording a failure in the core system's breaker", func(s breaker.State) (breaker.State, bool) {
			return breaker.Failure(s, g.set, g.now(), g.execution, reason)
		})
		if wrote && st.Status == breaker.Open && st.Opens > before.Opens && !probe {
			g.mu.Lock()
			g.opened++
			g.mu.Unlock()
			g.log.Warn("breaker opened: the core system's files hold at their cursor", append(g.attrs, "reason", st.Reason,
				"failuresInARow", st.Failures, "failuresInWindow", st.WindowFailures, "nextProbe", st.NextProbe)...)
		} else if wrote && probe {
			g.log.Warn("breaker probe failed; the breaker stays open", append(g.attrs, "reason", st.Reason, "nextProbe", st.NextProbe, "backoffMs", st.Backoff.Milliseconds())...)
		}
		return st.Effective(g.now()) != breaker.Closed
	}
	cur := g.view()
	if _, changed := breaker.Success(cur); !changed && !probe {
		return false // the usual case: nothing to write
	}
	st, wrote := g.apply(ctx, b, "recording a success in the core system's breaker", breaker.Success)
	if wrote && cur.Effective(g.now()) != breaker.Closed && st.Effective(g.now()) == breaker.Closed {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		g.log.Info("breaker closed: the core system answers again", append(g.attrs, "openedAt", cur.OpenedAt, "probe", probe)...)
	}
	return false
}

// view is the guard's last known state.
func (g *guard) view() breaker.State {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state
}

// apply moves the breaker by decide from the guard's view, under the budget, one writer of the
// invocation at a time, and keeps the state it leaves. A store that fails is a WARN: the view
// stays, and the invocation goes on as without a breaker.
func (g *guard) apply(ctx context.Context, b budget, what string, decide func(breaker.State) (breaker.State, bool)) (breaker.State, bool) {
	g.writes.Lock()
	defer g.writes.Unlock()
	cur := g.view()
	ctx, cancel, err := b.call(ctx, what, minCallTime, 2*minCallTime)
	if err != nil {
		g.log.Warn("breaker not changed", append(g.attrs, "change", what, "error", err.Error())...)
		return cur, false
	}
	defer cancel()
	st, wrote, err := g.store.Apply(ctx, cur, decide)
	if err != nil {
		g.log.Warn("breaker not changed", append(g.attrs, "change", what, "error", err.Error())...)
		return cur, false
	}
	g.mu.Lock()
	g.state = st
	if st.Effective(g.now()) != breaker.Closed {
		g.sawOpen = true
	}
	g.mu.Unlock()
	return st, wrote
}

// abandon ends the probe this invocation claimed without a request carrying it (the budget
// stopped first): the claim's lease runs out, or this execution's next invocation claims again.
func (g *guard) abandon(probe bool) {
	if g == nil || !probe {
		return
	}
	g.mu.Lock()
	g.probing = false
	g.mu.Unlock()
}

// healthFailure reports whether an answer (or its absence) is a failure of the core system's
// health, which the breaker counts, and says it in one line without the URL, file or record: no
// answer at all (refused, reset, timed out), or a 5xx other than 503 (which, like 429, asks to
// slow down: pace.go). A 4xx is about the request, not the core system's health.
func healthFailure(resp response, err error) (string, bool) {
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return "", false
		}
		reason := err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			reason = ue.Err.Error()
			if ue.Timeout() {
				reason = "timed out: " + reason
			}
		}
		return "the core system did not answer: " + reason, true
	}
	if resp.status >= 500 && resp.status != http.StatusServiceUnavailable {
		return fmt.Sprintf("the core system answered %d %s", resp.status, http.StatusText(resp.status)), true
	}
	return "", false
}

// metrics are the invocation's breaker datapoints: CoreSystemBreakerOpen 1 when it saw the
// breaker open or half-open and 0 when its write closed it, CoreSystemBreakerOpens when its write
// opened it, CoreSystemBreakerHolds 1 when it held.
func (g *guard) metrics() []metrics.Metric {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var ms []metrics.Metric
	switch {
	case g.closed && g.state.Effective(g.now()) == breaker.Closed:
		ms = append(ms, metrics.Count(metrics.CoreSystemBreakerOpen, 0))
	case g.sawOpen:
		ms = append(ms, metrics.Count(metrics.CoreSystemBreakerOpen, 1))
	}
	if g.opened > 0 {
		ms = append(ms, metrics.Count(metrics.CoreSystemBreakerOpens, float64(g.opened)))
	}
	if g.held {
		ms = append(ms, metrics.Count(metrics.CoreSystemBreakerHolds, 1))
	}
	return ms
}
