package controller

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// quarantineKey is where a message body that can never be processed is kept:
// quarantine/<tenant>/<message id>.json in the ingest bucket. A redelivery overwrites the same key.
func quarantineKey(o pipeline.Owner, messageID string) string {
	return pipeline.QuarantineDir(o) + messageID + ".json"
}

// quarantine copies a message body that is not an event of this tenant's files to the quarantine
// prefix, and releases the message only once the copy is stored: nothing is lost, and the tenant
// is not blocked by a message that could never succeed.
func (h *Handler) quarantine(ctx context.Context, d *delivery, reason error) decision {
	key := quarantineKey(h.owner(), d.rec.MessageId)
	in := &s3.PutObjectInput{
		Bucket: aws.String(h.cfg.Bucket),
		Key:    aws.String(key),
		Body:   strings.NewReader(d.rec.Body),
	}
	if json.Valid([]byte(d.rec.Body)) {
		in.ContentType = aws.String("application/json")
	}
	if _, err := h.s3.PutObject(ctx, in); err != nil {
		wait := backoff(h.cfg.FirstWait, h.cfg.MaxWait, d.attempt)
		d.log.ErrorContext(ctx, "message can never be processed and could not be quarantined; message kept",
			"reason", reason.Error(), "quarantineKey", key, "error", err, "nextWaitSeconds", wait.Seconds())
		d.count(metrics.ServiceErrors)
		return h.hold(ctx, d, wait)
	}
	// The reason names fields and offsets, never the body.
	d.log.ErrorContext(ctx, "message can never be processed; body quarantined and message released",
		"reason", reason.Error(), "quarantineBucket", h.cfg.Bucket, "quarantineKey", key, "bodyBytes", len(d.rec.Body))
	d.count(metrics.Quarantined)
	return released
}
