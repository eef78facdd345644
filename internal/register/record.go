package register

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
)

// IdempotencyKey is the Idempotency-Key header of one record: the file execution's name (the same
// in every segment execution, retry and redrive of the file) and the record's number in the file.
func IdempotencyKey(executionName string, record int64) string {
	return executionName + "-" + strconv.FormatInt(record, 10)
}

// wireRecord is the JSON body of one POST (docs/data-path.md, "Register wire format").
type wireRecord struct {
	Tenant       string          `json:"tenant"`
	Source       wireSource      `json:"source"`
	RecordNumber int64           `json:"recordNumber"`
	Record       json.RawMessage `json:"record"`
}

// recordSink is record mode: one POST per record, in file order, each with its own idempotency
// key; it stops at the first record the core system does not accept.
//
// Under skipRecord, a record the core system answers with a status of the tenant's rejectStatuses
// is rejected (into rejects) and the next record is sent.
type recordSink struct {
	core    coreClient
	rejects *chunkRejects
}

func (s *recordSink) Write(ctx context.Context, b budget, req pipeline.ChunkRequest, recs []records.Record) (int64, error) {
	auth, err := s.core.auth(ctx, b, req, false)
	if err != nil {
		return 0, &WriteError{Record: recs[0].Number, Kind: rejection(err, 0), Err: err}
	}
	for i, rec := range recs {
		resp, kind, err := s.send(ctx, b, req, &auth, rec)
		if kind == RejectedRecord && s.core.rejects && req.Tenant.RejectsStatus(resp.status) {
			s.rejects.add(rec, resp.status, coreRejection(resp.status, resp.body))
			continue
		}
		if err != nil {
			return int64(i), &WriteError{Record: rec.Number, Kind: kind, Err: err}
		}
	}
	return int64(len(recs)), nil
}

// send POSTs one record (coreClient.deliver) and returns the answer and its Rejection.
func (s *recordSink) send(ctx context.Context, b budget, req pipeline.ChunkRequest, auth *string, rec records.Record) (response, Rejection, error) {
	obj, err := rec.Object(req.Header)
	if err != nil {
		return response{}, RejectedRecord, &pipeline.PermanentError{Message: fmt.Sprintf("%s: record %d: %v", b.file, rec.Number, err), Err: err}
	}
	body, err := json.Marshal(wireRecord{
		Tenant:       req.Tenant.ID,
		Source:       wireSourceOf(req.Source),
		RecordNumber: rec.Number,
		Record:       obj,
	})
	if err != nil {
		return response{}, RejectedRecord, &pipeline.PermanentError{Message: fmt.Sprintf("%s: record %d: %v", b.file, rec.Number, err), Err: err}
	}
	return s.core.deliver(ctx, b, req, fmt.Sprintf("record %d", rec.Number), IdempotencyKey(req.ExecutionName, rec.Number), 1, auth, body)
}
