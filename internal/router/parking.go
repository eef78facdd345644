package router

import (
	"context"

	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/parking"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// The router's half of a pooled tenant's bounded backlog (internal/parking): it counts each file
// it sends, parks a file past the bound or of a tenant the settings do not name yet, feeds the
// tenant's parked files back while there is room, and sweeps the index of tenants with parked
// files now and then.

// admit counts a routed file in its tenant's backlog, or parks it. send is true when the caller
// sends it to the pool queue now. With no bound, every known tenant's file is sent.
//
// behindParked says that an earlier file of the tenant in the same intake batch was parked: this
// one is parked straight away, without the count's read and conditional write, which could only
// fail while anything of the tenant is parked (Backlog.Admit). Parking a file that could have
// been sent keeps its order too: it waits behind the earlier one and is fed back after it. The
// caller feeds the tenant's parked files back once, after the batch (drainParked), not after each
// file, so a flood of one tenant costs the router its parking calls and little else.
func (r *Router) admit(ctx context.Context, m routed, behindParked bool) (send bool, err error) {
	if r.backlog == nil {
		return true, nil
	}
	log := r.log.With("tenant", m.tenant, "key", m.key, "eventId", m.id)
	msg := backlog.Message{Tenant: m.tenant, ID: deduplicationID(m.id, m.body), Body: m.body}
	if m.unknown {
		slot, err := r.backlog.Park(ctx, msg)
		if err != nil {
			log.ErrorContext(ctx, "file of a tenant the pool's settings do not name yet could not be parked; it stays on the intake queue", "error", err)
			return false, err
		}
		log.WarnContext(ctx, "file of a tenant the pool's settings do not name yet parked: it is routed, in order, once the settings name the tenant",
			"slot", slot, "parkedKey", backlog.ParkedKey(pipeline.PoolOwner(r.cfg.KeysPool, m.tenant), slot))
		if err := r.metrics.Emit(metrics.Count(metrics.FilesParkedForUnknownTenant, 1)); err != nil {
			log.WarnContext(ctx, "metrics not written", "error", err)
		}
		return false, nil
	}
	if behindParked {
		_, err = r.backlog.Park(ctx, msg)
	} else {
		send, err = r.backlog.Route(ctx, msg)
	}
	if err != nil {
		log.ErrorContext(ctx, "the tenant's backlog could not be kept; the file stays on the intake queue", "error", err)
		return false, err
	}
	if send {
		return true, nil
	}
	log.InfoContext(ctx, "file parked: the tenant has its most files queued or earlier files parked", "maxQueuedFilesPerTenant", r.backlog.Max)
	if err := r.tenantMetrics(m.tenant).Emit(metrics.Count(metrics.FilesParked, 1)); err != nil {
		log.WarnContext(ctx, "metrics not written", "error", err)
	}
	return false, nil
}

// drainParked feeds back the parked files of the tenants, in order, once nothing of theirs waits
// to be sent (parking.Drain).
func (r *Router) drainParked(ctx context.Context, tenants []string) {
	for _, t := range tenants {
		parking.Drain(ctx, r.backlog, r.log.With("tenant", t), t)
	}
}

// sweepParked drains the tenants of the index the router knows, a page at a time.
func (r *Router) sweepParked(ctx context.Context) {
	if r.backlog == nil {
		return
	}
	r.sweep.Run(ctx, r.backlog, r.log, func(id string) bool { _, ok := r.cfg.Settings.Entry(id); return ok })
}
