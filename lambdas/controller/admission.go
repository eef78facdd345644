package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/metrics"
)

// Admission before StartExecution (docs/controller.md, "Admission").
//
// A file starts only when its core system and its pool each have a free running-file slot
// (internal/admission). A waiting file keeps its head message in flight, which keeps the tenant's
// lock: no Lambda error, no execution, and no S3 or Step Functions call while it waits. Its leases
// are released by the execution's status event (Wake), and by every delivery that finds the
// execution ended; a running file's deliveries renew them.
//
// Admission is asked first on every delivery, before the execution is looked up:
//   - a file admission has never seen, on a later delivery (Unknown), or one that already holds its
//     leases (Held), goes the usual way: its execution may exist, so it is looked up, and start
//     asks admission again just before StartExecution;
//   - a file that waits is held for admissionWait;
//   - a file admitted now, that waited since an earlier delivery or is on its first delivery, has
//     no execution yet (admission is asked before every start), so it starts at once, with no
//     DescribeExecution: StartExecution answers ExecutionAlreadyExists if it does exist after all.

// admitter is the part of admission.Store the controller uses.
type admitter interface {
	Admit(ctx context.Context, r admission.Request) (admission.Decision, error)
	Release(ctx context.Context, gates []admission.Gate, execution string) (int, error)
	Renew(ctx context.Context, gates []admission.Gate, execution string) (bool, error)
}

var _ admitter = (*admission.Store)(nil)

// maxAdmissionWait is the longest a waiting file is held before it asks again. Tenants next in line
// (fewer waiting ahead of them than the gate's limit) ask every FirstWait, so a freed slot is taken
// within about a second; the rest back off to this.
const maxAdmissionWait = 30 * time.Second

// maxFastPollers bounds the waiting tenants of one gate that look again every FirstWait.
const maxFastPollers = 20

// newAdmission is the controller's admission store. It is asked only for tenants with a gate.
func newAdmission(cfg Config, db admission.ItemAPI) *admission.Store {
	return &admission.Store{DB: db, LeaseTTL: cfg.leaseTTL(), WaiterTTL: waiterTTL}
}

// waiterTTL: a waiting entry whose tenant has not asked again for this long no longer counts.
// Waiting tenants ask at least every maxAdmissionWait; three of those, plus a margin for a slow or
// throttled invocation.
const waiterTTL = 3*maxAdmissionWait + time.Minute

// leaseTTL is how long a lease stays taken without a renewal. A running file's delivery comes back
// at least every safety net (with wake events) or MaxWait (without), and renews it; twice that
// plus two minutes rides out one lost visibility change and a slow invocation.
func (c Config) leaseTTL() time.Duration {
	return 2*max(c.SafetyNet, c.MaxWait) + 2*time.Minute
}

// gates are the gates the tenant's files pass, in the order they are taken: the core system (the
// scarcer, shared by both tiers), then the pool.
func (c Config) gates() []admission.Gate {
	var gs []admission.Gate
	if cs := c.Tenant.CoreSystem; cs != nil && cs.Table != "" {
		gs = append(gs, admission.Gate{Table: cs.Table, Key: admission.CoreGate(cs.Name), Limit: cs.MaxRunningFiles, Adaptive: cs.Adaptive})
	}
	if c.Pool != "" && c.PoolAdmissionTable != "" && c.PoolMaxRunningFiles > 0 {
		gs = append(gs, admission.Gate{Table: c.PoolAdmissionTable, Key: admission.PoolGate(c.Pool), Limit: c.PoolMaxRunningFiles})
	}
	return gs
}

func (h *Handler) admits() bool { return h.admission != nil && len(h.cfg.gates()) > 0 }

// admissionWaitError is start's answer when the file may not start yet.
type admissionWaitError struct{ dec admission.Decision }

func (e *admissionWaitError) Error() string {
	return fmt.Sprintf("waiting for admission by %s (%d of %d running, %d waiting ahead)", e.dec.Gate, e.dec.Running, e.dec.Limit, e.dec.Ahead)
}

// admit asks admission whether the delivery's file may start. fresh: no execution of the file can
// exist unless admission knows of it.
func (h *Handler) admit(ctx context.Context, d *delivery, name string, fresh bool) (admission.Decision, error) {
	dec, err := h.admission.Admit(ctx, admission.Request{
		Execution: name, Tenant: h.cfg.Tenant.ID, Weight: h.cfg.Tenant.AdmissionWeight(), Gates: h.cfg.gates(), Fresh: fresh,
	})
	if err != nil {
		return dec, err
	}
	h.emitCore(ctx, d, dec)
	if dec.Admitted {
		d.admitted = true
		if !dec.Held {
			d.log.InfoContext(ctx, "file admitted", "admissionWaitSeconds", dec.WaitedFor.Seconds(), "running", dec.Running, "limit", dec.Limit)
			d.metrics = append(d.metrics, metrics.Count(metrics.Admissions, 1),
				metrics.Seconds(metrics.AdmissionWaitSeconds, dec.WaitedFor))
		}
	}
	return dec, nil
}

// admissionWait holds a file that may not start yet. The tenant's lock stays taken (the message
// stays in flight), and nothing is started.
func (h *Handler) admissionWait(ctx context.Context, d *delivery, dec admission.Decision) decision {
	wait := admissionPace(h.cfg.FirstWait, dec, d.attempt)
	wait = min(wait, h.cfg.MaxWait)
	d.log.InfoContext(ctx, "waiting for admission", "gate", dec.Gate, "running", dec.Running, "limit", dec.Limit,
		"waitingAhead", dec.Ahead, "admissionWaitSeconds", dec.WaitedFor.Seconds(), "nextWaitSeconds", wait.Seconds())
	d.count(metrics.AdmissionWaits)
	d.metrics = append(d.metrics, metrics.Seconds(metrics.AdmissionWaitSeconds, dec.WaitedFor))
	return h.hold(ctx, d, wait)
}

// admissionPace is when a waiting file looks again: every first (FirstWait) while fewer tenants
// are ahead of it than a round (the gate's limit, at most maxFastPollers, so that a large gate's
// partition is not read by a thousand tenants a second), a freed slot being taken within about
// that; then one more first per round ahead of it, at most maxAdmissionWait; a tenant further back
// than admission counts backs off by its deliveries.
func admissionPace(first time.Duration, dec admission.Decision, attempt int) time.Duration {
	limit := max(dec.Limit, 1)
	round := min(limit, maxFastPollers)
	switch {
	case dec.Ahead < dec.Counted:
		return min(first*time.Duration(1+dec.Ahead/round), maxAdmissionWait)
	default:
		return min(backoff(first, maxAdmissionWait, attempt), maxAdmissionWait)
	}
}

// releaseLeases frees the execution's running-file slots once it has ended. It reports an error
// only when a lease may still be held: the caller then keeps the message, so that the slot is
// released before the tenant moves on.
func (h *Handler) releaseLeases(ctx context.Context, log *slog.Logger, name string) error {
	if !h.admits() {
		return nil
	}
	n, err := h.admission.Release(ctx, h.cfg.gates(), name)
	if err != nil {
		log.WarnContext(ctx, "running-file slots could not be released", "error", err)
		return fmt.Errorf("release the file's running-file slots: %w", err)
	}
	if n > 0 {
		log.InfoContext(ctx, "running-file slots released", "slots", n)
	}
	return nil
}

// renewLeases records that the file is still running, so its slots are not taken for lost.
func (h *Handler) renewLeases(ctx context.Context, d *delivery, name string) {
	if !h.admits() {
		return
	}
	ok, err := h.admission.Renew(ctx, h.cfg.gates(), name)
	switch {
	case err != nil:
		d.log.WarnContext(ctx, "running-file slots could not be renewed", "error", err)
	case !ok:
		// Started before admission was configured, or held past the lease's time to live (a
		// lost message or a long throttle): the file runs on; the gate may admit one more.
		d.log.WarnContext(ctx, "running file holds no running-file slot in every gate")
	}
}

func admissionWaitOf(err error) (admission.Decision, bool) {
	var w *admissionWaitError
	if errors.As(err, &w) {
		return w.dec, true
	}
	return admission.Decision{}, false
}

// emitCore records the core system's gate as this look at it found it: running files, the
// effective limit and the tenant's admission wait (the maximum over tenants is the oldest wait).
func (h *Handler) emitCore(ctx context.Context, d *delivery, dec admission.Decision) {
	cs := h.cfg.Tenant.CoreSystem
	if h.coreMetrics == nil || cs == nil || dec.Unknown || dec.Held {
		return
	}
	ms := []metrics.Metric{metrics.Seconds(metrics.CoreAdmissionWaitSeconds, dec.WaitedFor)}
	if dec.Admitted {
		ms = append(ms, metrics.Count(metrics.CoreAdmissions, 1))
	} else {
		ms = append(ms, metrics.Count(metrics.CoreAdmissionWaits, 1))
	}
	for _, l := range dec.Looks {
		if l.Gate == admission.CoreGate(cs.Name) {
			ms = append(ms, metrics.Count(metrics.CoreRunningFiles, float64(l.Running)), metrics.Count(metrics.CoreRunningFileLimit, float64(l.Limit)))
		}
	}
	if err := h.coreMetrics(cs.Name).Emit(ms...); err != nil {
		d.log.WarnContext(ctx, "core system metrics not written", "error", err)
	}
}
