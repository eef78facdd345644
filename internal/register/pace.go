package register

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"golang.org/x/time/rate"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
)

// How Register paces itself toward a core system (docs/data-path.md, "Rate limits and slow-down
// answers"): a token bucket of the file's share of the records per second, waits on the core
// system's 429 and 503 answers (Retry-After, else a capped jittered backoff), and, for an adaptive
// core system, the shared running-file limit that those answers halve and success grows back.
// None of it ever fails a file: a wait that does not fit the invocation ends the invocation with
// its cursor, and the next one resends the same records with the same idempotency keys.

// errSlowDown is the cause of the RetryableError a sink stops with when a wait for the core
// system (its rate limit or its Retry-After) does not fit the invocation. registerRun ends the
// invocation with the cursor at the chunk instead of failing it.
var errSlowDown = errors.New("waiting for the core system")

// MaxRetryAfter bounds one wait on a Retry-After: a longer one is taken as this, so a mistaken
// header cannot hold a file for days. The file still waits again if the core system answers 429
// once more.
const MaxRetryAfter = time.Hour

// SlowDownMaxBackoff caps the jittered exponential backoff after a 429 or 503 without a usable
// Retry-After.
const SlowDownMaxBackoff = 20 * time.Second

// slowDown reports whether a status asks the client to slow down: 429 Too Many Requests
// (https://www.rfc-editor.org/rfc/rfc6585#section-4) and 503 Service Unavailable
// (https://www.rfc-editor.org/rfc/rfc9110#section-15.6.4), both of which may carry Retry-After.
func slowDown(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// parseRetryAfter reads a Retry-After value, "delay-seconds / HTTP-date"
// (https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3), as the wait from now: a date in the
// past is no wait, a wait above MaxRetryAfter is MaxRetryAfter. ok is false when the value is
// absent or neither form, and the caller backs off on its own.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true // all digits, only too many of them
		}
		return time.Duration(n) * time.Second, true
	}
	// http.ParseTime accepts the three date formats a recipient must (IMF-fixdate, RFC 850,
	// asctime).
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(MaxRetryAfter, max(0, t.Sub(now))), true
}

// recordRate is the records per second one running file of tenant t may send: its core system's
// maxRecordsPerSecond divided equally among the core system's maxRunningFiles, capped by the
// tenant's own maxRecordsPerSecond. The static share is sound because admission never lets more
// than maxRunningFiles of the core system's files run at once (fewer, when its adaptive limit is
// lower), and a tenant runs one file at a time (its queue's message group is its lock). 0: no
// limit.
func recordRate(t pipeline.Tenant) float64 {
	var r float64
	if c := t.CoreSystem; c != nil && c.MaxRecordsPerSecond > 0 {
		r = c.MaxRecordsPerSecond / float64(max(1, c.MaxRunningFiles))
	}
	if t.MaxRecordsPerSecond > 0 && (r == 0 || t.MaxRecordsPerSecond < r) {
		r = t.MaxRecordsPerSecond
	}
	return r
}

// rateBurst is the bucket's size for rate r: one second of records, at least one.
func rateBurst(r float64) int { return max(1, int(math.Ceil(r))) }

// limiters keeps the token bucket of the file the execution environment registers, so that the
// next invocation of that file in the same environment continues the bucket instead of starting
// with a full one. An environment runs one invocation at a time, so one slot is enough.
type limiters struct {
	mu   sync.Mutex
	key  string
	rate float64
	lim  *rate.Limiter
}

// get returns the bucket for the file execution, new unless the slot holds it at the same rate.
func (l *limiters) get(execution string, r float64) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lim == nil || l.key != execution || l.rate != r {
		l.key, l.rate, l.lim = execution, r, rate.NewLimiter(rate.Limit(r), rateBurst(r))
	}
	return l.lim
}

// pace is one invocation's pacing toward the tenant's core system. Its methods are safe for the
// DynamoDB sink's concurrent writers.
type pace struct {
	lim    *rate.Limiter // nil: no rate limit
	core   *pipeline.CoreSystem
	limits *admission.LimitStore // nil unless the core system is adaptive
	// admitted is when the file was admitted (its execution's start), zero when unknown: the
	// store lets only a file admitted after the limit's last decrease lower it again.
	admitted time.Time
	sleep    func(context.Context, time.Duration) error
	backoff  *retry.ExponentialJitterBackoff
	log      *slog.Logger
	attrs    []any // the tenant, file and execution, for logs

	mu           sync.Mutex
	throttles    int           // 429 and 503 answers
	requests     int           // POSTs sent to the core system
	rateWait     time.Duration // waited on the token bucket
	lastDecrease time.Time     // the last ask to lower the adaptive limit, by this invocation
	inFlight     int           // POSTs sent and not yet answered
	peakInFlight int           // the most of them at once

	// window is a keyed file's requests in flight (keyedSink), for the whole invocation; it
	// starts at what the file's previous invocation left (restoreWindow).
	window *window
	// keyed is a keyed file's sink, for the whole invocation (its requests may cross a chunk's
	// end); nil until its first chunk.
	keyed *keyedSink
	// guard keeps the core system's breaker (breaker.go); nil without one.
	guard *guard
	// shares keeps the file's share of the core system's requests in flight (shares.go); nil
	// when they are not shared.
	shares *keeper
	now    func() time.Time
	// noWindowUntil: no maintenance window opens before it (holdForMaintenance's cache).
	noWindowUntil time.Time
}

func (h *Handler) newPace(req pipeline.ChunkRequest) *pace {
	p := &pace{
		core:    req.Tenant.CoreSystem,
		sleep:   h.sleep,
		backoff: retry.NewExponentialJitterBackoff(SlowDownMaxBackoff),
		log:     h.Log,
		attrs:   []any{"tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName},
		window:  newWindow(req.Tenant.RecordsInFlight(), 0),
		now:     h.now,
	}
	if p.sleep == nil {
		p.sleep = sleepContext
	}
	if p.now == nil {
		p.now = time.Now
	}
	if r := recordRate(req.Tenant); r > 0 {
		p.lim = h.limiters.get(req.ExecutionName, r)
	}
	if c := p.core; c != nil && c.Adaptive && c.Table != "" && h.DynamoDB != nil {
		p.limits = &admission.LimitStore{API: h.DynamoDB, Now: h.now}
		p.admitted = fileAdmitted(req)
	}
	p.guard = h.newGuard(req, p)
	p.shares = h.newKeeper(req, p)
	if p.shares == nil && p.core != nil {
		// Static shares: admission runs at most maxRunningFiles of the core system's files.
		p.window.setCap(p.core.FileShare())
	}
	return p
}

// fileAdmitted is when the file of req was admitted: its execution's start, which the file state
// machine puts in each segment. Zero, the store's "unknown", for a request without one (an
// execution started before the state machine passed it on, or the per-chunk design) or with one
// that does not parse; the store's rule for an unknown admission is the safe one for both.
func fileAdmitted(req pipeline.ChunkRequest) time.Time {
	if req.Segment == nil || req.Segment.FileStarted == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, req.Segment.FileStarted)
	if err != nil {
		return time.Time{}
	}
	return t
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait sleeps d when it fits the budget with need left after it (what the next call needs), and
// returns nil. When it does not fit it sleeps as much of it as leaves need, so that the next
// invocation does not come straight back to the core system, and returns the RetryableError of
// errSlowDown that ends this invocation with its cursor.
func (p *pace) wait(ctx context.Context, b budget, what string, d, need time.Duration) error {
	if d <= 0 {
		return nil
	}
	part := d
	if !b.deadline.IsZero() {
		left := b.deadline.Sub(b.now()) - b.margin - need
		part = min(d, max(0, left))
	}
	if part > 0 {
		if err := p.sleep(ctx, part); err != nil {
			return b.slowedDown(what, d)
		}
	}
	if part < d {
		return b.slowedDown(what, d)
	}
	return nil
}

// slowedDown is the RetryableError of a wait for the core system that does not fit the invocation.
func (b budget) slowedDown(what string, d time.Duration) error {
	return &pipeline.RetryableError{Message: fmt.Sprintf(
		"%s: stopped before %s of chunk %d: it waits %s for the core system, past this invocation's time; the next invocation resends it with the same idempotency key",
		b.file, what, b.chunk, d.Round(time.Millisecond)), Err: errSlowDown}
}

// take waits for a maintenance window to close, for a free request of the file's share (shares.go)
// and for n tokens of the rate limit (a batch of n records takes n), or returns the errSlowDown
// stop when a wait does not fit. A request take lets go holds its place in the share until
// release.
func (p *pace) take(ctx context.Context, b budget, what string, n int, need time.Duration) error {
	if err := p.holdForMaintenance(ctx, b, what, need); err != nil {
		return err
	}
	if err := p.shares.admit(ctx, b, what, need); err != nil {
		return err
	}
	if p.lim == nil {
		return nil
	}
	now := b.now()
	if n > p.lim.Burst() {
		p.lim.SetBurstAt(now, n) // else a batch larger than a second's records could never go
	}
	r := p.lim.ReserveN(now, n)
	d := r.DelayFrom(now)
	if err := p.wait(ctx, b, what, d, need); err != nil {
		r.CancelAt(b.now())
		p.shares.release()
		return err
	}
	p.mu.Lock()
	p.rateWait += d
	p.mu.Unlock()
	return nil
}

// slowedDown handles one 429 or 503 answer to the attempt-th send of what: it counts it, lowers an
// adaptive core system's limit, and waits the Retry-After (else the backoff). nil means resend
// the same request; an errSlowDown stop means the wait did not fit.
func (p *pace) slowedDown(ctx context.Context, b budget, what string, resp response, attempt int, need time.Duration) error {
	p.mu.Lock()
	p.throttles++
	p.mu.Unlock()
	p.decrease(ctx, b)
	d, ok := parseRetryAfter(resp.retryAfter, b.now())
	if !ok {
		d, _ = p.backoff.BackoffDelay(attempt, nil)
	}
	p.log.Info("the core system asks to slow down; waiting to resend", append(p.attrs,
		"chunk", b.chunk, "what", what, "status", resp.status, "retryAfter", ok, "waitMs", d.Milliseconds())...)
	return p.wait(ctx, b, what, d, need)
}

// decreaseAskInterval is the least time between two of one invocation's asks to lower the limit.
// The store decides (one decrease per generation of files, aimd.go); this only bounds the reads a
// file's many 429s cost, since the store's answer for one file rarely changes within seconds.
const decreaseAskInterval = 2 * time.Second

// decrease asks the store to halve an adaptive core system's limit for this file's 429, at most
// once per decreaseAskInterval from this invocation. A store failure is a WARN: the limit is
// advice to admission, and the file goes on.
func (p *pace) decrease(ctx context.Context, b budget) {
	if p.limits == nil {
		return
	}
	p.mu.Lock()
	now := b.now()
	due := p.lastDecrease.IsZero() || !now.Before(p.lastDecrease.Add(decreaseAskInterval))
	if due {
		p.lastDecrease = now
	}
	p.mu.Unlock()
	if !due {
		return
	}
	p.adjust(ctx, b, "lowering", func(ctx context.Context, core pipeline.CoreSystem) (int, bool, error) {
		return p.limits.Decrease(ctx, core, p.admitted)
	})
}

// settle ends a successful invocation: an adaptive core system that took records without a single
// slow-down answer counts one clean invocation, and a limit's worth of them since the limit's last
// change add one running file (the store counts).
func (p *pace) settle(ctx context.Context, b budget, registered int64) {
	if p.limits == nil || registered == 0 || p.throttles > 0 {
		return
	}
	p.adjust(ctx, b, "raising", p.limits.Increase)
}

func (p *pace) adjust(ctx context.Context, b budget, verb string, op func(context.Context, pipeline.CoreSystem) (int, bool, error)) {
	warn := func(err error) {
		p.log.Warn("adaptive limit not changed", append(p.attrs, "coreSystem", p.core.Name, "change", verb, "error", err.Error())...)
	}
	ctx, cancel, err := b.call(ctx, verb+" the adaptive limit", minCallTime, minCallTime)
	if err != nil {
		warn(err)
		return
	}
	defer cancel()
	limit, changed, err := op(ctx, *p.core)
	if err != nil {
		warn(err)
		return
	}
	if changed {
		p.log.Info("adaptive limit changed", append(p.attrs, "coreSystem", p.core.Name, "change", verb, "limit", limit)...)
	}
}

// sent counts one POST sent to the core system, in flight until answered.
func (p *pace) sent() {
	p.mu.Lock()
	p.requests++
	p.inFlight++
	p.peakInFlight = max(p.peakInFlight, p.inFlight)
	p.mu.Unlock()
}

// answered ends one POST's time in flight, answered or not.
func (p *pace) answered() {
	p.mu.Lock()
	p.inFlight--
	p.mu.Unlock()
}

// release ends the place in the file's share of one request take let go, once it is answered or
// will not be sent.
func (p *pace) release() { p.shares.release() }

// peak is the most POSTs this invocation had in flight at once.
func (p *pace) peak() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peakInFlight
}

// metrics are the invocation's pacing datapoints, each only when not zero: CoreSystemRequests
// only when the tenant names a core system, since it has no other dimension (metrics.InCoreSystem).
func (p *pace) metrics() []metrics.Metric {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ms []metrics.Metric
	if p.throttles > 0 {
		ms = append(ms, metrics.Count(metrics.CoreSystemThrottles, float64(p.throttles)))
	}
	if p.requests > 0 && p.coreSystem() != "" {
		ms = append(ms, metrics.Count(metrics.CoreSystemRequests, float64(p.requests)))
	}
	if p.rateWait > 0 {
		ms = append(ms, metrics.Seconds(metrics.RateLimitWaitSeconds, p.rateWait))
	}
	if p.coreSystem() != "" {
		ms = append(ms, p.guard.metrics()...)
		ms = append(ms, p.shares.metrics()...)
	}
	return ms
}

// coreSystem is the name of the tenant's core system, "" when it names none.
func (p *pace) coreSystem() string {
	if p.core == nil {
		return ""
	}
	return p.core.Name
}
