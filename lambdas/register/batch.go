package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

// sendBatch POSTs the whole chunk, its records in file order, as one request. The status classes
// are record mode's (classify): a 2xx or 409 means every record of the chunk is registered. A 401
// with a secret configured refreshes the secret and resends once, as in record mode.
func (h *Handler) sendBatch(ctx context.Context, b budget, req pipeline.ChunkRequest, target string, auth *string, recs []records.Record) error {
	first, last := recs[0].Number, recs[len(recs)-1].Number
	what := fmt.Sprintf("chunk %d (records %d-%d)", req.Chunk, first, last)
	objs := make([]json.RawMessage, len(recs))
	for i, rec := range recs {
		obj, err := rec.BatchJSON(req.Header)
		if err != nil {
			return &pipeline.PermanentError{Message: fmt.Sprintf("%s: record %d: %v", b.file, rec.Number, err), Err: err}
		}
		objs[i] = obj
	}
	body, err := json.Marshal(wireBatch{
		Tenant:            req.Tenant.ID,
		Source:            wireSource{Bucket: req.Source.Bucket, Key: req.Source.Key, VersionID: req.Source.VersionID},
		FirstRecordNumber: first,
		Records:           objs,
	})
	if err != nil {
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: %s: %v", b.file, what, err), Err: err}
	}
	key := BatchIdempotencyKey(req.ExecutionName, req.Chunk)
	resp, err := h.post(ctx, b, what, target, key, *auth, body)
	if err == nil && resp.status == http.StatusUnauthorized && req.Tenant.RegisterAuthSecretARN != "" {
		if *auth, err = h.auth(ctx, b, req, true); err != nil {
			return err
		}
		resp, err = h.post(ctx, b, "resending "+what+" after a 401", target, key, *auth, body)
	}
	var stop *pipeline.RetryableError
	if errors.As(err, &stop) {
		return stop // the budget stopped before the POST
	}
	return classify(b.file, what, resp, err)
}
