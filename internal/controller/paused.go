package controller

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
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
	key := pipeline.PauseMarkerKey(h.owner())
	body, paused, err := h.readPauseMarker(ctx, key)
	if err != nil {
		return h.pauseUnknown(ctx, d, key, err), true
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
		err = h.putControl(ctx, pipeline.WakeStateKey(h.owner()), state)
	}
	if err != nil {
		d.log.Log(ctx, stateErrorLevel(err), "paused hold not recorded: a resume takes effect only after the hold", "error", err, "nextWaitSeconds", wait.Seconds())
		d.count(metrics.WakeStateErrors)
	}
	held := h.hold(ctx, d, wait)
	if _, still, err := h.readPauseMarker(ctx, key); err == nil && !still {
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

// objectLister is the S3 call that tells a missing pause marker from one the controller may not
// read.
type objectLister interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

var _ objectLister = (*s3.Client)(nil)

// readPauseMarker reads the tenant's pause marker. It fails closed: paused is false only when the
// marker is known to be absent, and every other answer is an error, which holds the tenant.
//
// Absent is 404 (NoSuchKey, NotFound). S3 answers a read of a missing key with 403 instead to a
// caller without s3:ListBucket (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html,
// "Permissions"), and whether the controller's ListBucket grant, narrowed to control/ by an
// s3:prefix condition, counts for that rule is not documented. A 403 therefore only counts as
// absent when a listing of the marker's exact key, which that grant does allow
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html, s3:prefix),
// shows no such key; listings are strongly consistent
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/Welcome.html#ConsistencyModel). A listed
// marker that cannot be read (a mis-scoped s3:GetObject grant), a denied listing, 5xx and
// throttling all hold the tenant: a pause must never turn off because its marker is unreadable.
func (h *Handler) readPauseMarker(ctx context.Context, key string) ([]byte, bool, error) {
	out, err := h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key)})
	if err == nil {
		defer out.Body.Close()
		b, err := io.ReadAll(io.LimitReader(out.Body, pipeline.MaxWakeObjectBytes+1))
		if err != nil {
			return nil, false, fmt.Errorf("read s3://%s/%s: %w", h.cfg.Bucket, key, err)
		}
		return b, true, nil
	}
	if source.NotFound(err) {
		return nil, false, nil
	}
	getErr := fmt.Errorf("get s3://%s/%s: %w", h.cfg.Bucket, key, err)
	if source.HTTPStatus(err) != http.StatusForbidden && source.ErrorCode(err) != "AccessDenied" {
		return nil, false, getErr
	}
	lister, ok := h.s3.(objectLister)
	if !ok {
		return nil, false, fmt.Errorf("%w; and its absence cannot be checked without ListObjectsV2", getErr)
	}
	list, lerr := lister.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(h.cfg.Bucket), Prefix: aws.String(key), MaxKeys: aws.Int32(1)})
	switch {
	case lerr != nil:
		return nil, false, fmt.Errorf("%w; and listing it failed: %w", getErr, lerr)
	case len(list.Contents) > 0 && aws.ToString(list.Contents[0].Key) == key:
		return nil, false, fmt.Errorf("%w; the marker exists: check the controller's s3:GetObject on %s*/paused.json", getErr, pipeline.ControlPrefix)
	}
	return nil, false, nil
}

// pauseUnknown holds a delivery whose tenant may be paused: nothing starts until the marker can be
// read. It logs ERROR whatever the cause, throttling included, because a tenant that stays held
// for it needs an operator.
func (h *Handler) pauseUnknown(ctx context.Context, d *delivery, key string, err error) decision {
	wait := backoff(h.cfg.FirstWait, h.cfg.MaxWait, d.attempt)
	d.log.ErrorContext(ctx, "the tenant's pause marker could not be read: nothing started, message kept", "pauseMarkerKey", key, "error", err, "nextWaitSeconds", wait.Seconds())
	d.count(metrics.ServiceErrors)
	return h.hold(ctx, d, wait)
}
