package register

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
)

// Sink writes the records of one chunk to where the tenant registers them: one POST per record
// (record.go), one POST per chunk (batch.go) or one item per record in a DynamoDB table
// (dynamo.go). Register's loop drives a Sink without knowing which one it is, as database/sql
// drives a driver.Conn.
type Sink interface {
	// Write writes recs, the records of req's chunk, in file order (under key order, in file order
	// per key), each exactly once (a record already written by an earlier attempt is written again
	// with the same idempotency key or _seq, which the destination deduplicates). It returns how
	// many records, from the first, are written and, if not all, a *WriteError for the first
	// record in file order that was not: no record after it is started, except under key order
	// (keyedSink), where records of other keys after it may be written already
	// (WriteError.Registered). Every call runs under the invocation's budget b.
	Write(ctx context.Context, b budget, req pipeline.ChunkRequest, recs []records.Record) (int64, error)
}

// openSink chooses the tenant's sink: its DynamoDB table when it has one, else its registerUrl in
// batch or record mode, record mode in order per key for a tenant in key order. target is the registerUrl as validateRequest parsed it ("" for DynamoDB);
// p paces the writes toward the tenant's core system.
func (h *Handler) openSink(t pipeline.Tenant, target string, p *pace, rej *chunkRejects) Sink {
	return h.sinkFor(t, target, p, &TenantClients{S3: h.S3, DynamoDB: h.DynamoDB, Secrets: h.Secrets}, rej)
}

// sinkFor is openSink with the tenant's clients c: its table and its secret are read and written
// with them. Under skipRecord the sink rejects into rej the records the destination refuses
// (Tenant.CanReject) and goes on.
func (h *Handler) sinkFor(t pipeline.Tenant, target string, p *pace, c *TenantClients, rej *chunkRejects) Sink {
	if t.DynamoDB != nil {
		return &dynamoSink{api: c.DynamoDB, pace: p, rejects: rej}
	}
	core := coreClient{http: h.HTTP, secrets: c.Secrets, timeout: h.HTTPTimeout, target: target, pace: p, answers: t.CanReject()}
	if t.BatchMode() {
		return &batchSink{core, rej}
	}
	core.rejects = t.CanReject()
	if t.KeyedOrder() {
		// One for the invocation: its requests may outlive a chunk's Write (keyedSink).
		core.window = p.window
		if p.keyed == nil {
			p.keyed = newKeyedSink(core, rej, p.window, h.keyedAnswered)
		}
		p.keyed.record.rejects = rej
		return p.keyed
	}
	return &recordSink{core, rej}
}

// Rejection is why a sink did not write a record: what a policy that skips records (or one that
// waits) needs to know about the failure, apart from the error the state machine sees.
type Rejection int

const (
	// RejectedRecord: the destination refused this record for what it holds (HTTP 400, 413 or
	// 422; a DynamoDB ValidationException; a record that cannot become an item). Resending it never
	// helps; the records after it may still be accepted.
	RejectedRecord Rejection = iota + 1
	// RejectedSink: a permanent failure that is not about the record (a redirect, 401, 403, 404, a
	// missing table, no permission): every record after it would fail too.
	RejectedSink
	// RejectedRetryable: a transient failure (408, a 5xx other than 503, a transport failure,
	// DynamoDB throttling that outlasted the SDK's retries). The same record may be accepted later.
	// A 429 or 503 is never one: the sink waits and resends (pace.go), or stops (Stopped).
	RejectedRetryable
	// Stopped: nothing is wrong with the record; the sink stopped because the invocation's time
	// ran out (the deadline guard) before it was written, or because a wait for the core system
	// (its rate limit, its Retry-After) does not fit the invocation.
	Stopped
)

func (r Rejection) String() string {
	switch r {
	case RejectedRecord:
		return "record rejected"
	case RejectedSink:
		return "sink failed"
	case RejectedRetryable:
		return "retryable"
	case Stopped:
		return "stopped"
	}
	return fmt.Sprintf("Rejection(%d)", int(r))
}

// WriteError is the first record a sink did not write (under key order, the low-water mark: the
// first record not acknowledged; Err is then the error of the lowest record that failed). Err is
// the pipeline error (RetryableError, PermanentError, ValidationError) that crosses into Step
// Functions, unchanged; Error() is its message.
type WriteError struct {
	Record int64 // the record's number in the file
	Kind   Rejection
	Err    error
	// Registered are the records after Record that are registered all the same, in file order:
	// under key order, records of other keys acknowledged past the low-water mark. Empty in file
	// order.
	Registered []int64
}

func (e *WriteError) Error() string { return e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// rejection is the Kind of a pipeline error err that a sink raised: Stopped for the deadline
// guard's, RejectedRetryable for any other RetryableError and for a RecordLatencyError, RejectedRecord for a ValidationError,
// and for a PermanentError RejectedRecord only when the core system's status says the record was
// at fault (recordStatus), else RejectedSink.
func rejection(err error, status int) Rejection {
	var (
		re *pipeline.RetryableError
		le *pipeline.RecordLatencyError
		ve *pipeline.ValidationError
	)
	switch {
	case errors.Is(err, errNearDeadline), errors.Is(err, errSlowDown):
		return Stopped
	case errors.As(err, &re), errors.As(err, &le):
		return RejectedRetryable
	case errors.As(err, &ve):
		return RejectedRecord
	case recordStatus(status):
		return RejectedRecord
	}
	return RejectedSink
}

// recordStatus reports whether a 4xx answer is about the request's content rather than the
// endpoint or the credentials: 400 Bad Request, 413 Content Too Large and 422 Unprocessable
// Content (https://www.rfc-editor.org/rfc/rfc9110#section-15.5). Any other 4xx would refuse every
// record alike, so it is never taken for the record's fault.
func recordStatus(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}
