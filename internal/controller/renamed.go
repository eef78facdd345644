package controller

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
)

// otherIdempotencyKey is the naming scheme the tenant does not use now.
func otherIdempotencyKey(key string) string {
	if key == pipeline.IdempotencyObjectVersion {
		return pipeline.IdempotencyEventID
	}
	return pipeline.IdempotencyObjectVersion
}

// startOrAdopt runs when the file has no execution under its current name. If the tenant's
// idempotencyKey was changed while this file was queued, its execution may exist under the other
// naming scheme: that execution, whatever its status, is this file's, and no second one is
// started beside it. Both names derive from the same message body (event id, bucket, key, version,
// sequencer), so neither can belong to another file. This costs one extra DescribeExecution, only
// on this not-found path. Otherwise the file's execution is started under its current name.
func (h *Handler) startOrAdopt(ctx context.Context, d *delivery, ev s3event.Event, name, arn string) (string, string, *sfn.DescribeExecutionOutput, error) {
	other := executionName(otherIdempotencyKey(h.cfg.IdempotencyKey), ev)
	otherARN := h.cfg.ExecutionARN(other)
	st, err := h.describe(ctx, otherARN)
	switch {
	case err == nil:
		d.log = d.log.With("executionName", other)
		d.log.InfoContext(ctx, "file's execution found under the previous idempotency key; continuing with it",
			"executionArn", otherARN, "status", string(st.Status), "idempotencyKey", h.cfg.IdempotencyKey, "unusedName", name)
		return other, otherARN, st, nil
	case !isNotFound(err):
		return name, arn, nil, err
	}
	st, err = h.start(ctx, d, ev, name, arn)
	return name, arn, st, err
}
