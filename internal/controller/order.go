package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// The tenant's order counter (docs/data-path.md, "DynamoDB sink").
//
// The DynamoDB sink ranks a file's records by the file's place in the tenant's queue
// (pipeline.Source.Order). The controller takes that place when it is about to start a file's
// execution, and only then: a delivery that finds the execution reuses the order in its input. It
// holds the tenant's lock at that moment (the head message of the FIFO group is in flight), so
// the counter needs no lock of its own; its conditional write is a second guard, for the time a
// tenant moves between two queues and both may start files.
//
//   - The counter is control/<tenant>/order.json in the ingest bucket, per tenant, not per queue:
//     SQS's SequenceNumber grows only within one queue's message group
//     (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/FIFO-key-terms.html,
//     https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html),
//     and a tenant that moves to another queue, stack or tier must keep counting up.
//   - The next order is max(stored + 1, the clock in Unix microseconds): it always grows, and it
//     starts from the clock when the object is missing, so a deleted counter cannot restart below
//     the orders already stored in the table (every order taken so far is at most the clock of its
//     time). A missing object is a 404 NoSuchKey, or a 403 AccessDenied for that exact key, which
//     S3 answers for a missing key to a caller without s3:ListBucket
//     (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html).
//   - The write is conditional: If-Match the ETag read, or If-None-Match * when the object was
//     missing (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html). If
//     another writer came first (412, or 409 for a concurrent conditional write) the controller
//     reads again. A 403 that hid an existing object therefore never overwrites it.
//   - The counter is written before StartExecution. A crash in between leaves a gap, never a
//     repeat; a message body can name no order.

// maxOrderAttempts bounds the read-increment-write rounds of one start.
const maxOrderAttempts = 3

// orderStateVersion is the only orderState.Version this code reads and writes.
const orderStateVersion = 1

// maxOrderObjectBytes bounds the counter object; anything larger is not one this code wrote.
const maxOrderObjectBytes = 4 * 1024

// orderState is the body of control/<tenant>/order.json.
type orderState struct {
	Version int   `json:"version"`
	Order   int64 `json:"order"`
	// ExecutionName is the execution the order was taken for, for an operator reading the object.
	ExecutionName string    `json:"executionName"`
	WrittenAt     time.Time `json:"writtenAt"`
}

// errOrderContended: the counter changed under every attempt of one start.
var errOrderContended = errors.New("the tenant's order counter changed during every attempt to take the next order")

// ordered reports whether the tenant's executions carry an order: only the DynamoDB sink uses it.
func (h *Handler) ordered() bool { return h.cfg.Tenant.DynamoDB != nil }

// nextOrder takes the tenant's next order for the execution name and stores it.
func (h *Handler) nextOrder(ctx context.Context, name string) (int64, error) {
	key := pipeline.OrderKey(h.owner())
	for range maxOrderAttempts {
		st, etag, found, err := h.readOrder(ctx)
		if err != nil {
			return 0, err
		}
		now := h.now()
		next := max(st.Order+1, now.UnixMicro())
		if next > pipeline.MaxOrder {
			return 0, fmt.Errorf("s3://%s/%s: the next order %d is above %d", h.cfg.Bucket, key, next, int64(pipeline.MaxOrder))
		}
		body, err := json.Marshal(orderState{Version: orderStateVersion, Order: next, ExecutionName: name, WrittenAt: now.UTC()})
		if err != nil {
			return 0, err
		}
		in := &s3.PutObjectInput{
			Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key),
			Body: bytes.NewReader(body), ContentType: aws.String("application/json"),
		}
		if found {
			in.IfMatch = aws.String(etag)
		} else {
			in.IfNoneMatch = aws.String("*")
		}
		_, err = h.s3.PutObject(ctx, in)
		if conditionFailed(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("put s3://%s/%s: %w", h.cfg.Bucket, key, err)
		}
		return next, nil
	}
	return 0, fmt.Errorf("s3://%s/%s: %w", h.cfg.Bucket, key, errOrderContended)
}

// orderLimit is the largest order the tenant can have given out so far: the stored one, or the
// clock when there is none (every order taken is at most the clock of its time).
func (h *Handler) orderLimit(ctx context.Context) (int64, error) {
	st, _, found, err := h.readOrder(ctx)
	if err != nil {
		return 0, err
	}
	if !found {
		return min(h.now().UnixMicro(), pipeline.MaxOrder), nil
	}
	return st.Order, nil
}

// readOrder reads the counter and its ETag; found is false for a missing object.
func (h *Handler) readOrder(ctx context.Context) (st orderState, etag string, found bool, err error) {
	key := pipeline.OrderKey(h.owner())
	out, err := h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key)})
	var noKey *s3types.NoSuchKey
	if errors.As(err, &noKey) || accessDeniedError(err) {
		return orderState{}, "", false, nil
	}
	if err != nil {
		return orderState{}, "", false, fmt.Errorf("get s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxOrderObjectBytes+1))
	if err != nil {
		return orderState{}, "", false, fmt.Errorf("read s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || len(b) > maxOrderObjectBytes || dec.More() ||
		st.Version != orderStateVersion || st.Order < 1 || st.Order > pipeline.MaxOrder {
		// Never quoted: the controller did not write it. Deleting it is safe (the next order
		// starts from the clock).
		return orderState{}, "", false, fmt.Errorf("s3://%s/%s is not an order counter of version %d (%d bytes); delete it to start again from the clock",
			h.cfg.Bucket, key, orderStateVersion, len(b))
	}
	return st, aws.ToString(out.ETag), true, nil
}

// conditionFailed reports a conditional write that lost: 412 PreconditionFailed, or 409
// ConditionalRequestConflict for a concurrent one
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
func conditionFailed(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "PreconditionFailed" || api.ErrorCode() == "ConditionalRequestConflict")
}
