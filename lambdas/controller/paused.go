package main

import (
	"context"
	"time"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Pausing one pooled tenant (pipeline.PauseMarkerKey). A silo tenant is paused by disabling its
// event source mapping, so its controller is never invoked; a pooled tenant shares the pool's
// mapping, so its controller decides, before anything else, whether the tenant is paused. A paused
// tenant's message starts nothing: no execution, no redrive, no replay. It is held in flight, which
// keeps the tenant's message group locked while every other group of the pool flows, for the
// safety net (MAX_WAIT without wake-up events): at most one invocation per interval, no busy loop.
//
// The held delivery's receipt handle goes to the tenant's wake state with Paused set, so that
// pipectl resume, after it deletes the marker, makes the message visible at once
// (ChangeMessageVisibility 0). The order closes the race with a resume: the wake state is written
// and the visibility set before the marker is read a second time. A resume that deletes the marker
// after that second read finds this delivery's handle; one that deleted it before is seen by the
// second read, and the delivery goes on as usual.

// pausedHold holds the delivery if its pooled tenant is paused. held is false for a silo tenant,
// for a tenant that is not paused, and for one resumed while the hold was being set up.
func (h *Handler) pausedHold(ctx context.Context, d *delivery) (decision, bool) {
	if h.cfg.Pool == "" {
		return decision{}, false
	}
	key := pipeline.PauseMarkerKey(h.cfg.Tenant.ID)
	body, paused, err := h.getControl(ctx, key)
	if err != nil {
		// Unknown: start nothing until the marker can be read.
		return h.serviceError(ctx, d, "read the tenant's pause marker", err), true
	}
	if !paused {
		return decision{}, false
	}
	wait := h.pausedWait()
	state, err := pipeline.EncodeWakeState(pipeline.WakeState{
		Version: pipeline.WakeStateVersion, MessageID: d.rec.MessageId, ReceiptHandle: d.rec.ReceiptHandle,
		QueueURL: h.cfg.QueueURL, WrittenAt: h.now().UTC(), Paused: true,
	})
	if err == nil {
		err = h.putControl(ctx, pipeline.WakeStateKey(h.cfg.Tenant.ID), state)
	}
	if err != nil {
		d.log.Log(ctx, stateErrorLevel(err), "paused hold not recorded: a resume takes effect only after the hold", "error", err, "nextWaitSeconds", wait.Seconds())
		d.count(metrics.WakeStateErrors)
	}
	held := h.hold(ctx, d, wait)
	if _, still, err := h.getControl(ctx, key); err == nil && !still {
		d.log.InfoContext(ctx, "tenant resumed while its message was being held; going on")
		return decision{}, false
	}
	attrs := []any{"pauseMarkerKey", key, "nextWaitSeconds", wait.Seconds()}
	if rec, err := pipeline.DecodePauseRecord(body); err == nil {
		attrs = append(attrs, "pausedBy", rec.RequestedBy, "pausedAt", rec.RequestedAt, "reason", rec.Reason)
	} else {
		attrs = append(attrs, "pauseRecordError", err.Error())
	}
	d.log.InfoContext(ctx, "tenant paused by an operator: nothing started, message held", attrs...)
	return held, true
}

// pausedWait is how long a paused tenant's message is held between looks: the safety net with
// wake-up events (a resume makes it visible at once anyway), MAX_WAIT otherwise.
func (h *Handler) pausedWait() time.Duration {
	if h.cfg.WakeEvents && h.cfg.SafetyNet > 0 {
		return h.cfg.SafetyNet
	}
	return h.cfg.MaxWait
}
