package register

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
)

// BatchIdempotencyKey is the Idempotency-Key header of one batch POST: the file execution's name
// and the chunk's index. Chunk boundaries are fixed by the manifest Split wrote once, so the key
// names the same records on every retry and redrive.
func BatchIdempotencyKey(executionName string, chunk int) string {
	return executionName + "-c" + strconv.Itoa(chunk)
}

// wireBatch is the JSON body of one batch POST (docs/data-path.md, "Batch mode").
type wireBatch struct {
	Tenant            string            `json:"tenant"`
	Source            wireSource        `json:"source"`
	FirstRecordNumber int64             `json:"firstRecordNumber"`
	Records           []json.RawMessage `json:"records"`
}

// batchSink is batch mode: the whole chunk, its records in file order, as one POST with the
// chunk's idempotency key. The status classes are record mode's (classify): a 2xx or 409 means
// every record of the chunk is registered, and any failure leaves all of them unwritten. Under
// skipRecord, a 2xx answer may reject some of the records (batchRejections): those go into
// rejects, the others are registered.
type batchSink struct {
	core    coreClient
	rejects *chunkRejects
}

func (s *batchSink) Write(ctx context.Context, b budget, req pipeline.ChunkRequest, recs []records.Record) (int64, error) {
	auth, err := s.core.auth(ctx, b, req, false)
	if err != nil {
		return 0, &WriteError{Record: recs[0].Number, Kind: rejection(err, 0), Err: err}
	}
	resp, kind, err := s.send(ctx, b, req, &auth, recs)
	if err != nil {
		return 0, &WriteError{Record: recs[0].Number, Kind: kind, Err: err}
	}
	if req.Tenant.CanReject() && resp.status >= 200 && resp.status < 300 {
		what := fmt.Sprintf("chunk %d (records %d-%d)", req.Chunk, recs[0].Number, recs[len(recs)-1].Number)
		if err := batchRejections(b.file, what, req.Tenant, resp.body, recs, s.rejects); err != nil {
			return 0, &WriteError{Record: recs[0].Number, Kind: RejectedSink, Err: err}
		}
	}
	return int64(len(recs)), nil
}

// send POSTs the chunk (coreClient.deliver) and returns the answer and its Rejection.
func (s *batchSink) send(ctx context.Context, b budget, req pipeline.ChunkRequest, auth *string, recs []records.Record) (response, Rejection, error) {
	first, last := recs[0].Number, recs[len(recs)-1].Number
	what := fmt.Sprintf("chunk %d (records %d-%d)", req.Chunk, first, last)
	objs := make([]json.RawMessage, len(recs))
	for i, rec := range recs {
		obj, err := rec.BatchJSON(req.Header)
		if err != nil {
			return response{}, RejectedRecord, &pipeline.PermanentError{Message: fmt.Sprintf("%s: record %d: %v", b.file, rec.Number, err), Err: err}
		}
		objs[i] = obj
	}
	body, err := json.Marshal(wireBatch{
		Tenant:            req.Tenant.ID,
		Source:            wireSourceOf(req.Source),
		FirstRecordNumber: first,
		Records:           objs,
	})
	if err != nil {
		return response{}, RejectedSink, &pipeline.PermanentError{Message: fmt.Sprintf("%s: %s: %v", b.file, what, err), Err: err}
	}
	return s.core.deliver(ctx, b, req, what, BatchIdempotencyKey(req.ExecutionName, req.Chunk), len(recs), auth, body)
}
