package register

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
)

// The segment's progress (pipeline.Progress) carries the cursor across segment executions. The
// cursor in the segment execution's state covers a Retry and a redrive of that execution, but a
// redrive of the file execution starts a new segment execution (-r<n>) at the segment's first
// chunk; and a file of one segment, which runs the loop in its own execution, re-runs the failed
// Register task at that invocation's first chunk and record, which its state kept. Neither knows
// how far the failed invocation got. So after each successful invocation, and at the record that
// failed a file after others were registered, Register writes where the next one starts, and
// every invocation reads it and starts there when it lies ahead of the request's cursor within
// the segment: a redriven file re-sends at most the failed invocation's records, with the same
// idempotency keys, and none it registered before a record that failed it. Progress is written
// only once the records before it are registered, so it never skips a record. A keyed file's
// progress also carries the window the previous invocation left (Progress.Window, window.go). It
// costs one GET and one PUT per invocation, in the work bucket beside the manifest.

// checkSegment rejects a request whose segment does not hold its run: a wiring fault no retry
// fixes, and progress read under the wrong segment could skip records.
func checkSegment(req pipeline.ChunkRequest) error {
	s := req.Segment
	if s.Index < 0 || s.FirstChunk < 0 || req.Chunk < s.FirstChunk || req.Chunk > s.LastChunk || req.Until() != s.LastChunk {
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunks %d..%d are not a run of segment %d (chunks %d..%d)",
			source.Name(req.Source), req.Chunk, req.Until(), s.Index, s.FirstChunk, s.LastChunk)}
	}
	return nil
}

// resume returns the chunk an invocation starts at, and the record within it (0: its first): the
// stored progress when it lies ahead of the request's cursor (Chunk, Record) and no further than
// the segment's end (Until+1), else the request's cursor. Progress behind the cursor is a write
// that failed (putProgress) and is passed over. Absent progress (404, or the 403 S3 answers a
// caller without s3:ListBucket: source.Absent) and progress that is corrupt or outside the
// segment are ignored; the latter with a WARN, since only a foreign write makes it. Any other
// failure to read it is retryable: starting at the request's cursor without knowing would write a
// lower progress over the stored one.
func (h *Handler) resume(ctx context.Context, req pipeline.ChunkRequest) (int, int64, *pipeline.Progress, error) {
	p, err := h.loadProgress(ctx, req)
	if err != nil || p == nil {
		return req.Chunk, req.Record, p, err
	}
	b := h.budget(ctx, req)
	ignore := func(why string) (int, int64, *pipeline.Progress, error) {
		h.Log.Warn("segment progress ignored; the invocation starts at its request's cursor",
			"tenant", req.Tenant.ID, "file", b.file, "execution", req.ExecutionName, "segment", req.Segment.Index,
			"key", h.progressKey(req), "reason", why)
		return req.Chunk, req.Record, nil, nil
	}
	if p.Next < req.Segment.FirstChunk || p.Next > req.Until()+1 {
		return ignore(fmt.Sprintf("next %d is outside the segment's chunks %d..%d", p.Next, req.Segment.FirstChunk, req.Until()+1))
	}
	if p.Record > 0 && p.Next > req.Until() {
		return ignore(fmt.Sprintf("record %d is past the segment's end", p.Record))
	}
	if p.Next < req.Chunk || p.Next == req.Chunk && p.Record <= req.Record {
		// At the cursor (the previous invocation's end), or behind it.
		return req.Chunk, req.Record, p, nil
	}
	h.Log.Info("segment resumes from its progress", "tenant", req.Tenant.ID, "file", b.file,
		"execution", req.ExecutionName, "segment", req.Segment.Index, "chunk", p.Next, "record", p.Record)
	// A record that is not one of chunk Next's fails that chunk (fromRecord): nothing is skipped.
	return p.Next, p.Record, p, nil
}

// loadProgress reads the segment's stored progress: nil when it is absent, or corrupt (with a
// WARN, since only a foreign write makes it); a RetryableError when it cannot be read.
func (h *Handler) loadProgress(ctx context.Context, req pipeline.ChunkRequest) (*pipeline.Progress, error) {
	c, err := h.clientsFor(req.Tenant.ID) // the progress is under the tenant's work/ keys
	if err != nil {
		return nil, err
	}
	b := h.budget(ctx, req)
	ctx, cancel, err := b.call(ctx, "reading the segment's progress", minCallTime, 0)
	if err != nil {
		return nil, err
	}
	defer cancel()
	bucket, key := req.Manifest.Bucket, h.progressKey(req)
	out, err := c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if source.Absent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, &pipeline.RetryableError{Message: fmt.Sprintf("%s: reading the segment's progress s3://%s/%s failed: %v", b.file, bucket, key, err), Err: err}
	}
	body, err := io.ReadAll(io.LimitReader(out.Body, pipeline.MaxProgressBytes+1))
	out.Body.Close()
	if err != nil {
		return nil, &pipeline.RetryableError{Message: fmt.Sprintf("%s: reading the segment's progress s3://%s/%s failed: %v", b.file, bucket, key, err), Err: err}
	}
	ignore := func(why string) (*pipeline.Progress, error) {
		h.Log.Warn("segment progress ignored; the segment starts at its first chunk",
			"tenant", req.Tenant.ID, "file", b.file, "execution", req.ExecutionName, "segment", req.Segment.Index,
			"key", key, "reason", why)
		return nil, nil
	}
	if len(body) > pipeline.MaxProgressBytes {
		return ignore(fmt.Sprintf("the object is over %d bytes", pipeline.MaxProgressBytes))
	}
	p, err := pipeline.DecodeProgress(body)
	if err != nil {
		return ignore(err.Error())
	}
	return &p, nil
}

// saveProgress writes where the segment's next invocation starts, and the records past it that a
// keyed file registered already (registered, none in file order). The invocation's records are
// registered whatever happens here, so a failure is a WARN: its only cost is that a redrive of the
// file re-sends this invocation's records again, with the same idempotency keys.
func (h *Handler) saveProgress(ctx context.Context, req pipeline.ChunkRequest, next int, record int64, registered ...int64) {
	h.putProgress(ctx, req, pipeline.Progress{Next: next, Record: record, Registered: pipeline.RangesOf(registered)})
}

// putProgress writes p as the segment's progress; a failure is a WARN (saveProgress).
func (h *Handler) putProgress(ctx context.Context, req pipeline.ChunkRequest, p pipeline.Progress) {
	if err := h.writeProgress(ctx, req, p); err != nil {
		h.Log.Warn("segment progress not written; a redrive of the file re-sends this invocation's records",
			"tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName,
			"segment", req.Segment.Index, "next", p.Next, "key", h.progressKey(req), "error", err.Error())
	}
}

// writeProgress PUTs p as the segment's progress under the invocation's budget.
func (h *Handler) writeProgress(ctx context.Context, req pipeline.ChunkRequest, p pipeline.Progress) error {
	c, err := h.clientsFor(req.Tenant.ID)
	if err != nil {
		return err
	}
	b := h.budget(ctx, req)
	ctx, cancel, err := b.call(ctx, "writing the segment's progress", minCallTime, 0)
	if err != nil {
		return err
	}
	defer cancel()
	body := p.Encode()
	_, err = c.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(req.Manifest.Bucket),
		Key:           aws.String(h.progressKey(req)),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("application/json"),
	})
	return err
}

// owner is whose keys the request's are: its tenant, in the handler's pool ("" in a silo).
func (h *Handler) owner(req pipeline.ChunkRequest) pipeline.Owner {
	return pipeline.PoolOwner(h.KeysPool, req.Tenant.ID)
}

func (h *Handler) progressKey(req pipeline.ChunkRequest) string {
	return pipeline.ProgressKey(h.owner(req), req.ExecutionName, req.Segment.Index)
}
