package register

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/shares"
)

// How Register shares its core system's requests in flight with the core system's other running
// files (internal/shares, docs/configuration.md "Core systems"). An invocation joins the core
// system's shares item when it starts, with its demand (a key-ordered file's maxRecordsInFlight,
// else 1) and its tenant's weight; reads the item about once a second while it runs, moving its
// grant toward its target; and leaves when it ends, whether it succeeded or not. What it may
// keep in flight (its limit) caps the keyed window; while it is 0 every send holds, polling as
// the breaker's holds do, and an invocation whose time runs out first ends at its cursor
// (errSlowDown), so a file that waits for a share never fails.
//
// An invocation that cannot join (the item cannot be read or written) sends nothing and tries
// again at each refresh, and says so at WARN: sending outside the shares could take the core
// system past its maxRequestsInFlight. Once it has joined, a read or write that fails leaves its
// grant as it was: the item still counts it.

// ParseRequestShares reads pipeline.EnvRequestShares: "" is pipeline.RequestSharesShared.
// It reports whether the shares are static.
func ParseRequestShares(v string) (static bool, err error) {
	switch v {
	case "", pipeline.RequestSharesShared:
		return false, nil
	case pipeline.RequestSharesStatic:
		return true, nil
	}
	return false, fmt.Errorf("%s %q is not %q or %q", pipeline.EnvRequestShares, v, pipeline.RequestSharesShared, pipeline.RequestSharesStatic)
}

// sharer is the part of shares.Member an invocation's keeper uses.
type sharer interface {
	Join(ctx context.Context) (int, error)
	Refresh(ctx context.Context, inFlight int) (int, error)
	Leave(ctx context.Context) error
}

var _ sharer = (*shares.Member)(nil)

// lambdaMaxTimeout is the longest a Lambda invocation runs
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html): the deadline of an
// entry whose context has none, so that it is pruned after any invocation could have ended.
const lambdaMaxTimeout = 15 * time.Minute

// leaveTimeout bounds the write that leaves the shares, after the invocation's work.
const leaveTimeout = time.Second

// keeper is one invocation's share of its core system's requests in flight. Its methods are safe
// for the keyed sink's concurrent sends.
type keeper struct {
	member sharer
	poll   time.Duration
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
	window *window // the keyed window the limit caps; nil in file order and batch
	log    *slog.Logger
	attrs  []any

	calls    sync.Mutex // one call of the member at a time
	mu       sync.Mutex
	limit    int
	out      int           // requests admit let through and not yet released: what is in flight
	released chan struct{} // closed and replaced at each release
	joined   bool
	held     bool // a send held at least once for a share of 0
	peak     int  // the largest limit
	warned   bool // a failed refresh was logged
	stop     chan struct{}
	done     chan struct{}
}

// newKeeper is the keeper of req's core system, nil when its requests are not shared: no core
// system or admission table, the DynamoDB sink (no HTTP core system), static shares, or no
// client.
func (h *Handler) newKeeper(req pipeline.ChunkRequest, p *pace) *keeper {
	c := req.Tenant.CoreSystem
	if c == nil || c.Table == "" || req.Tenant.DynamoDB != nil || h.StaticShares {
		return nil
	}
	var member sharer
	switch {
	case h.sharers != nil:
		member = h.sharers(req)
	case h.DynamoDB != nil:
		now := p.now
		joined := fileAdmitted(req)
		if joined.IsZero() {
			joined = now()
		}
		member = &shares.Member{Store: shares.Store{API: h.DynamoDB, Table: c.Table, Name: c.Name}, Core: *c, Now: now,
			Self: shares.Entry{Execution: req.ExecutionName, Demand: req.Tenant.RecordsInFlight(),
				Weight: req.Tenant.AdmissionWeight(), Joined: joined}}
	default:
		return nil
	}
	k := &keeper{member: member, poll: shares.RefreshInterval, now: p.now, sleep: p.sleep,
		released: make(chan struct{}), log: p.log, attrs: append(append([]any{}, p.attrs...), "coreSystem", c.Name)}
	if h.sharesPoll > 0 {
		k.poll = h.sharesPoll
	}
	if req.Tenant.KeyedOrder() {
		k.window = p.window
	}
	return k
}

// join adds the invocation to the shares and starts its refreshes; a join that fails for want of
// the store leaves the limit at 0 until a refresh joins.
func (k *keeper) join(ctx context.Context, b budget) {
	if k == nil {
		return
	}
	if m, ok := k.member.(*shares.Member); ok {
		if dl, ok := ctx.Deadline(); ok {
			m.Self.Until = dl
		} else {
			m.Self.Until = k.now().Add(lambdaMaxTimeout)
		}
	}
	limit, err := func() (int, error) {
		ctx, cancel, err := b.call(ctx, "joining the core system's request shares", minCallTime, minCallTime)
		if err != nil {
			return 0, err
		}
		defer cancel()
		return k.member.Join(ctx)
	}()
	if err != nil && !errors.Is(err, shares.ErrBusy) {
		// Fail closed: sending outside the shares could take the core system over its
		// maxRequestsInFlight, since the other files' grants may already add up to all of it.
		k.log.Warn("request shares not joined; the file waits and joins at its next refresh", append(k.attrs, "error", err.Error())...)
		limit = 0
	}
	// Joined, or not (every attempt lost to other writers, or the store failed): then the limit
	// is 0 and the next refresh joins, so the file waits rather than sending outside the shares.
	k.mu.Lock()
	k.joined = true
	k.stop, k.done = make(chan struct{}), make(chan struct{})
	k.mu.Unlock()
	k.set(limit)
	if limit == 0 {
		k.log.Info("no share of the core system's requests is free yet; the file waits for one", k.attrs...)
	}
	go k.run(ctx, b)
}

// run refreshes the share every poll until leave stops it.
func (k *keeper) run(ctx context.Context, b budget) {
	defer close(k.done)
	t := time.NewTicker(k.poll)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !k.refresh(ctx, b) {
			return
		}
	}
}

// refresh reads the share once, with the invocation's requests in flight, and reports whether
// the budget had room for it. One refresh at a time: the member is not safe for concurrent use.
func (k *keeper) refresh(ctx context.Context, b budget) bool {
	k.calls.Lock()
	defer k.calls.Unlock()
	limit, err := func() (int, error) {
		ctx, cancel, err := b.call(ctx, "reading the core system's request shares", minCallTime, minCallTime)
		if err != nil {
			return 0, err
		}
		defer cancel()
		k.mu.Lock()
		out := k.out
		k.mu.Unlock()
		return k.member.Refresh(ctx, out)
	}()
	var stopped *pipeline.RetryableError
	switch {
	case err == nil || errors.Is(err, shares.ErrBusy):
		k.set(limit)
	case errors.As(err, &stopped):
		return false // the budget is spent: the invocation ends soon
	default:
		k.mu.Lock()
		warn := !k.warned
		k.warned = true
		k.mu.Unlock()
		if warn {
			k.log.Warn("request shares not read; the file keeps its grant", append(k.attrs, "error", err.Error())...)
		}
	}
	return true
}

// set makes limit the invocation's limit, and wakes the sends that hold.
func (k *keeper) set(limit int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.window != nil {
		k.window.setCap(limit)
	}
	k.peak = max(k.peak, limit)
	k.limit = limit
}

// admit returns when a request may go: fewer than the invocation's limit are out, and it takes
// one place until release. While the limit is 0 it waits a poll and reads the share again, as the
// breaker's holds do; while the limit is taken (a limit lowered under sends the keyed window let
// go) it waits for a release. A hold that does not fit the invocation, with need left for the
// request, ends it with the errSlowDown stop.
func (k *keeper) admit(ctx context.Context, b budget, what string, need time.Duration) error {
	if k == nil {
		return nil
	}
	var waited time.Duration
	for {
		k.mu.Lock()
		limit, released := k.limit, k.released
		if limit > 0 && k.out < limit {
			k.out++
			k.mu.Unlock()
			return nil
		}
		if limit == 0 {
			k.held = true
		}
		k.mu.Unlock()
		now := k.now()
		d := k.poll
		if b.deadline.IsZero() {
			if waited >= maxHoldWithoutDeadline {
				return k.stopHold(b, what, waited)
			}
		} else {
			// Room for the next look at the item and for the request after it.
			left := b.deadline.Sub(now) - b.margin - need - minCallTime
			if left <= 0 {
				return k.stopHold(b, what, waited)
			}
			d = min(d, left)
		}
		if limit > 0 {
			t := time.NewTimer(d)
			select {
			case <-released:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			if ctx.Err() != nil {
				return k.stopHold(b, what, waited)
			}
			waited += k.now().Sub(now)
			continue
		}
		if err := k.sleep(ctx, d); err != nil {
			return k.stopHold(b, what, waited)
		}
		waited += d
		if !k.refresh(ctx, b) {
			return k.stopHold(b, what, waited)
		}
	}
}

// release gives back the place of one request admit let through.
func (k *keeper) release() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.out = max(0, k.out-1)
	close(k.released)
	k.released = make(chan struct{})
}

// stopHold is the stop of an invocation that waited for a share: a wait, not a failure.
func (k *keeper) stopHold(b budget, what string, waited time.Duration) error {
	k.log.Info("no share of the core system's requests came free; the invocation holds at its cursor",
		append(k.attrs, "chunk", b.chunk, "what", what, "heldMs", waited.Milliseconds())...)
	return b.slowedDown(what, waited)
}

// leave stops the refreshes and removes the invocation from the shares, a few times if other
// writers keep winning, within leaveTimeout. An entry left behind is pruned past the
// invocation's deadline.
func (k *keeper) leave(ctx context.Context) {
	if k == nil {
		return
	}
	k.mu.Lock()
	joined := k.joined
	k.mu.Unlock()
	if !joined {
		return
	}
	close(k.stop)
	<-k.done
	ctx, cancel := context.WithTimeout(ctx, leaveTimeout)
	defer cancel()
	err := shares.ErrBusy
	for attempt := 0; attempt < shares.MaxAttempts && errors.Is(err, shares.ErrBusy); attempt++ {
		err = k.member.Leave(ctx)
	}
	if err != nil {
		k.log.Warn("request shares not left; the entry is pruned after the invocation's deadline", append(k.attrs, "error", err.Error())...)
	}
}

// metrics are the invocation's share datapoints: CoreSystemRequestGrant its largest limit,
// CoreSystemShareHolds 1 when a send held for a share.
func (k *keeper) metrics() []metrics.Metric {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var ms []metrics.Metric
	if k.peak > 0 {
		ms = append(ms, metrics.Count(metrics.CoreSystemRequestGrant, float64(k.peak)))
	}
	if k.held {
		ms = append(ms, metrics.Count(metrics.CoreSystemShareHolds, 1))
	}
	return ms
}
