package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/corecontrol"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/schema"
)

// Admission before StartExecution (docs/controller.md, "Admission").
//
// A file starts only when its core system and its pool each have a running-file slot for it
// (internal/admission). A file that may not start keeps its head message in flight, which keeps
// the tenant's lock: no Lambda error, no execution, and no S3, STS or Step Functions call while it
// waits. Its message is held for the safety net, and its receipt handle is recorded in its waiting
// entry: the release that hands it a slot makes the message visible at once, the way the status
// event wakes a tenant's next file. Nothing polls.
//
// Admission is asked first on every delivery of a file, before the execution is looked up:
//   - a file admission has never seen, on a later delivery (Unknown), or one that already holds its
//     leases (Held), goes the usual way: its execution may exist, so it is looked up, and start
//     asks admission again just before StartExecution;
//   - a file that waits is held for the safety net (admissionWait);
//   - a file admitted now (a free slot, or one handed to it) has no execution yet (admission is
//     asked before every start), so it starts at once, with no DescribeExecution: StartExecution
//     answers ExecutionAlreadyExists if it does exist after all. A pooled tenant's pause is read
//     here, just before the start, and never while the file waits.

// admitter is the part of admission.Store the controller uses.
type admitter interface {
	Admit(ctx context.Context, r admission.Request) (admission.Decision, error)
	Arm(ctx context.Context, e admission.EntryRef, w admission.Wake, hold time.Duration) (bool, error)
	Release(ctx context.Context, gates []admission.Gate, tenant, execution string) (int, []admission.Wake, error)
	Renew(ctx context.Context, gates []admission.Gate, tenant, execution string) (admission.RenewResult, error)
	Pause(ctx context.Context, gates []admission.Gate, tenant, execution string) ([]admission.Wake, error)
	Resume(ctx context.Context, gates []admission.Gate, tenant, execution string) error
	ReconcileDue(ctx context.Context, g admission.Gate) ([]admission.Wake, error)
}

var _ admitter = (*admission.Store)(nil)

// newAdmission is the controller's admission store. It is asked only for tenants with a gate.
func newAdmission(cfg Config, db admission.ItemAPI) *admission.Store {
	return &admission.Store{DB: db, LeaseTTL: cfg.leaseTTL(), WaiterTTL: cfg.waiterTTL()}
}

// admissionHold is how long a waiting file next in line is held: the safety net with wake-up
// events, MAX_WAIT without; one further back, longer (admission.WaitHold). A release wakes it at
// once; the hold only bounds how long a lost wake-up costs.
func (c Config) admissionHold() time.Duration {
	if c.WakeEvents && c.SafetyNet > 0 {
		return c.SafetyNet
	}
	return c.MaxWait
}

// waiterTTL: a waiting entry whose file has not come back for this long is skipped by a handover
// (its message is gone). A waiting file comes back at least every admissionHold.
func (c Config) waiterTTL() time.Duration { return admission.WaiterTTLFor(c.admissionHold()) }

// leaseTTL is how long a lease stays taken without a renewal. A running file's delivery comes back
// at least every safety net (with wake events) or MaxWait (without), and renews it.
func (c Config) leaseTTL() time.Duration { return admission.LeaseTTLFor(c.SafetyNet, c.MaxWait) }

// gates are the gates the tenant's files pass, in the order they are taken: the core system (the
// scarcer, shared by both tiers), then the pool.
func (c Config) gates() []admission.Gate {
	var gs []admission.Gate
	if cs := c.Tenant.CoreSystem; cs != nil && cs.Table != "" {
		gs = append(gs, admission.Gate{Table: cs.Table, Key: schema.CoreGate(cs.Name), Limit: cs.MaxRunningFiles, Adaptive: cs.Adaptive,
			Breaker: !cs.Spec().BreakerSettings().Disabled,
			Core:    &corecontrol.Settings{Name: cs.Name, MaxRunningFiles: cs.MaxRunningFiles, MaxRequestsInFlight: cs.RequestsInFlight(), Maintenance: cs.Maintenance}})
	}
	if c.Pool != "" && c.PoolAdmissionTable != "" && c.PoolMaxRunningFiles > 0 {
		gs = append(gs, admission.Gate{Table: c.PoolAdmissionTable, Key: schema.PoolGate(c.Pool), Limit: c.PoolMaxRunningFiles})
	}
	return gs
}

func (h *Handler) admits() bool { return h.admission != nil && len(h.cfg.gates()) > 0 }

// admissionWaitError is start's answer when the file may not start yet; held is the delivery's
// decision (admitFile).
type admissionWaitError struct {
	dec  admission.Decision
	held decision
}

func (e *admissionWaitError) Error() string {
	return fmt.Sprintf("waiting for admission by %s (%d of %d running, %d waiting ahead)", e.dec.Gate, e.dec.Running, e.dec.Limit, e.dec.Ahead)
}

// admit asks admission whether the delivery's file may start, and wakes the waiters the call
// handed a slot to. fresh: no execution of the file can exist unless admission knows of it.
func (h *Handler) admit(ctx context.Context, d *delivery, name string, fresh bool) (admission.Decision, error) {
	dec, err := h.admission.Admit(ctx, admission.Request{
		Execution: name, Tenant: h.cfg.Tenant.ID, Weight: h.cfg.Tenant.AdmissionWeight(), Gates: h.cfg.gates(), Fresh: fresh,
	})
	if err != nil {
		return dec, err
	}
	h.wakeWaiters(ctx, d.log, dec.Wakes)
	h.emitCore(ctx, d, dec)
	if dec.Admitted {
		d.admitted = true
		if !dec.Held {
			d.log.InfoContext(ctx, "file admitted", "admissionWaitSeconds", dec.WaitedFor.Seconds(), "running", dec.Running, "limit", dec.Limit,
				"handedOver", dec.Claimed)
			d.metrics = append(d.metrics, metrics.Count(metrics.Admissions, 1),
				metrics.Seconds(metrics.AdmissionWaitSeconds, dec.WaitedFor))
		}
	}
	return dec, nil
}

// admitFile asks admission for the file until it may go on (admitted now, held, or unknown: ok)
// or must be held (the returned decision): it waits, or its pooled tenant is paused. A file
// admitted now whose tenant turns out paused gives its slots back first (Pause), so they go to
// the next waiter, and its pause does not count as waiting.
func (h *Handler) admitFile(ctx context.Context, d *delivery, name string, fresh bool) (admission.Decision, decision, bool) {
	for try := 0; ; try++ {
		dec, err := h.admit(ctx, d, name, fresh)
		switch {
		case err != nil:
			return dec, h.serviceError(ctx, d, "ask admission whether the file may start", err), false
		case dec.Paused:
			if held, paused := h.pausedHold(ctx, d); paused {
				return dec, held, false
			}
			if err := h.admission.Resume(ctx, h.cfg.gates(), h.cfg.Tenant.ID, name); err != nil {
				return dec, h.serviceError(ctx, d, "record that the tenant was resumed", err), false
			}
			fresh = true // a paused file never started (see Pause above)
		case dec.Unknown || dec.Held:
			return dec, decision{}, true
		case !dec.Admitted:
			held, armed := h.admissionWait(ctx, d, dec)
			if armed || try >= 2 {
				return dec, held, false
			}
			// A release handed the file a slot while it was being held: claim it now.
			fresh = false
		default:
			if held, paused := h.pausedHold(ctx, d); paused {
				wakes, err := h.admission.Pause(ctx, h.cfg.gates(), h.cfg.Tenant.ID, name)
				if err != nil {
					d.log.WarnContext(ctx, "paused tenant's slots not given back; they are handed on when its lease expires", "error", err)
				}
				h.wakeWaiters(ctx, d.log, wakes)
				return dec, held, false
			}
			return dec, decision{}, true
		}
	}
}

// admissionWait holds a file that may not start yet for the safety net, then records the
// message's receipt handle in its waiting entry, in that order: a release that hands it a slot
// after the record makes the message visible after this hold, never before. armed is false when
// a release took the entry first: the caller asks again and claims the slot.
func (h *Handler) admissionWait(ctx context.Context, d *delivery, dec admission.Decision) (decision, bool) {
	// The entry is armed for the hold the message gets: sized from its expected wait
	// (Decision.Hold), no longer than an open maintenance window (the first file back after it
	// finds the gate open), and counted from its receive (holdable).
	hold := dec.Hold(h.cfg.admissionHold(), max(dec.Entry.Gate.Limit, 1))
	if c := dec.Entry.Gate.Core; c != nil {
		hold = corecontrol.Hold(hold, c.Maintenance, h.now())
	}
	wait := h.holdable(d, hold)
	held := h.hold(ctx, d, wait)
	armed, err := h.admission.Arm(ctx, dec.Entry, admission.Wake{QueueURL: h.cfg.QueueURL, ReceiptHandle: d.rec.ReceiptHandle, MessageID: d.rec.MessageId}, wait)
	if err != nil {
		// Not woken by a release: the safety net brings it back. Look again sooner.
		wait = backoff(h.cfg.FirstWait, h.cfg.MaxWait, d.attempt)
		d.log.WarnContext(ctx, "waiting entry not armed; looking again after the backoff", "error", err, "nextWaitSeconds", wait.Seconds())
		return h.hold(ctx, d, wait), true
	}
	if !armed {
		return held, false
	}
	d.log.InfoContext(ctx, "waiting for admission", "gate", dec.Gate, "running", dec.Running, "limit", dec.Limit,
		"waitingAhead", dec.Ahead, "admissionWaitSeconds", dec.WaitedFor.Seconds(), "nextWaitSeconds", wait.Seconds())
	d.count(metrics.AdmissionWaits)
	d.metrics = append(d.metrics, metrics.Seconds(metrics.AdmissionWaitSeconds, dec.WaitedFor))
	return held, true
}

// wakeWaiters makes the messages of the files a release handed a slot to visible at once. A
// receipt that is no longer current (the file's message is being delivered right now) is no
// loss: that delivery asks admission and claims its slot; an unarmed entry's file does the same
// when it arms. Any other failure leaves the file to its safety net, and the slot to the
// reconciler once the reservation expires.
func (h *Handler) wakeWaiters(ctx context.Context, log *slog.Logger, wakes []admission.Wake) {
	var core map[string]string
	if cs := h.cfg.Tenant.CoreSystem; cs != nil {
		core = map[string]string{schema.CoreGate(cs.Name): cs.Name}
	}
	wakeAll(ctx, h.sqs, log, h.metrics, core, h.coreMetrics, wakes)
}

// wakeAll makes the messages of wakes visible (wakeWaiters) and counts each on m: a handover, or a
// failed wake. core names the core system of each core gate whose failed wakes are also counted
// on the core system's emitter (coreMetrics), so that its alarm covers the tenants of both tiers.
func wakeAll(ctx context.Context, q queue, log *slog.Logger, m *metrics.Emitter, core map[string]string,
	coreMetrics func(string) *metrics.Emitter, wakes []admission.Wake) {
	for _, w := range wakes {
		if w.ReceiptHandle == "" || w.QueueURL == "" {
			continue
		}
		_, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(w.QueueURL), ReceiptHandle: aws.String(w.ReceiptHandle), VisibilityTimeout: 0,
		})
		attrs := []any{"gate", w.Gate, "wokenTenant", w.Tenant, "wokenExecution", w.Execution, "wokenMessageId", w.MessageID, "wokenAgain", w.Again}
		counted := metrics.AdmissionHandovers
		switch {
		case err == nil:
			log.InfoContext(ctx, "running-file slot handed over; waiting file woken", attrs...)
		case staleReceipt(err):
			log.InfoContext(ctx, "running-file slot handed over; the waiting file is being delivered already", append(attrs, "errorCode", errorCode(err))...)
		default:
			counted = metrics.AdmissionWakeFailures
			log.Log(ctx, stateErrorLevel(err), "running-file slot handed over; the waiting file could not be woken, its safety net brings it back", append(attrs, "error", err)...)
		}
		if w.Again && counted == metrics.AdmissionHandovers {
			continue // a waiter woken again after its reservation expired: no slot handed to it now
		}
		if err := m.Emit(metrics.Count(counted, 1)); err != nil {
			log.WarnContext(ctx, "metrics not written", "error", err)
		}
		if name, ok := core[w.Gate]; ok && counted == metrics.AdmissionWakeFailures && coreMetrics != nil {
			if err := coreMetrics(name).Emit(metrics.Count(metrics.AdmissionWakeFailures, 1)); err != nil {
				log.WarnContext(ctx, "core system metrics not written", "error", err)
			}
		}
	}
}

// releaseLeases frees the execution's running-file slots once it has ended, handing each to the
// next waiting file and waking it. It reports an error only when a lease may still be held: the
// caller then keeps the message, so that the slot is released before the tenant moves on.
func (h *Handler) releaseLeases(ctx context.Context, log *slog.Logger, name string) error {
	if !h.admits() {
		return nil
	}
	n, wakes, err := h.admission.Release(ctx, h.cfg.gates(), h.cfg.Tenant.ID, name)
	h.wakeWaiters(ctx, log, wakes)
	if err != nil {
		log.WarnContext(ctx, "running-file slots could not be released", "error", err)
		return fmt.Errorf("release the file's running-file slots: %w", err)
	}
	if n > 0 {
		log.InfoContext(ctx, "running-file slots released", "slots", n, "handedOver", len(wakes))
	}
	return nil
}

// renewLeases records that the file is still running, so its slots are not taken for lost. A
// lease that went anyway (not renewed within its time to live and taken, or released) is taken
// again, beyond the gate's limit if need be: LostLeases says so, and its alarm fires.
func (h *Handler) renewLeases(ctx context.Context, d *delivery, name string) {
	if !h.admits() {
		return
	}
	res, err := h.admission.Renew(ctx, h.cfg.gates(), h.cfg.Tenant.ID, name)
	h.wakeWaiters(ctx, d.log, res.Wakes)
	switch {
	case err != nil:
		d.log.WarnContext(ctx, "running-file slots could not be renewed", "error", err)
	case res.Adopted > 0:
		d.log.InfoContext(ctx, "running execution admission had not admitted took its running-file slots", "gates", res.Adopted, "overLimit", res.Overflow)
	}
	if err == nil && res.Regained > 0 {
		d.log.WarnContext(ctx, "running file had lost its running-file slot; taken again", "gates", res.Regained, "overLimit", res.Overflow,
			"leaseTtlSeconds", h.cfg.leaseTTL().Seconds())
		d.metrics = append(d.metrics, metrics.Count(metrics.LostLeases, float64(res.Regained)))
		// By core system too: its LostLeases alarm covers the tenants of both tiers.
		if cs := h.cfg.Tenant.CoreSystem; h.coreMetrics != nil && cs != nil {
			if err := h.coreMetrics(cs.Name).Emit(metrics.Count(metrics.LostLeases, float64(res.Regained))); err != nil {
				d.log.WarnContext(ctx, "core system metrics not written", "error", err)
			}
		}
	}
}

// admissionHeldOf is the decision of a start that may not happen yet.
func admissionHeldOf(err error) (decision, bool) {
	var w *admissionWaitError
	if errors.As(err, &w) {
		return w.held, true
	}
	return decision{}, false
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
		if l.Gate == schema.CoreGate(cs.Name) {
			ms = append(ms, metrics.Count(metrics.CoreRunningFiles, float64(l.Running)), metrics.Count(metrics.CoreRunningFileLimit, float64(l.Limit)))
		}
	}
	if err := h.coreMetrics(cs.Name).Emit(ms...); err != nil {
		d.log.WarnContext(ctx, "core system metrics not written", "error", err)
	}
}
