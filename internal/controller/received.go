package controller

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/tenantpipeline/internal/admission"
)

// SQS counts a received message's longest visibility, 12 hours, from the receive, not from the
// ChangeMessageVisibility call
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-visibility-timeout.html).
// The record does not carry its receive's time, but the poller receives a batch before it invokes
// the function with it: the invocation's start bounds the receive of every record of it. A first
// delivery's receive is exact (ApproximateFirstReceiveTimestamp).

type invokedKey struct{}

// withInvoked records when the invocation began handling its batch, unless an outer handler (the
// pool's) recorded it first.
func withInvoked(ctx context.Context, now time.Time) context.Context {
	if _, ok := ctx.Value(invokedKey{}).(time.Time); ok {
		return ctx
	}
	return context.WithValue(ctx, invokedKey{}, now)
}

// receivedAt is the latest the record can have been received: its first receive's timestamp on its
// first delivery, else the invocation's start.
func receivedAt(ctx context.Context, rec events.SQSMessage, attempt int, now time.Time) time.Time {
	at := now
	if t, ok := ctx.Value(invokedKey{}).(time.Time); ok && t.Before(at) {
		at = t
	}
	if attempt == 1 {
		if ms, err := strconv.ParseInt(rec.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64); err == nil && ms > 0 {
			if t := time.UnixMilli(ms); t.Before(at) {
				at = t
			}
		}
	}
	return at
}

// holdable is wait, shortened so that the hold ends within SQS's 12 hours from the receive.
func (h *Handler) holdable(d *delivery, wait time.Duration) time.Duration {
	if d.received.IsZero() {
		return min(wait, admission.MaxHold)
	}
	return min(wait, admission.HoldLeft(d.received, h.now()))
}
