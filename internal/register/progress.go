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
// chunk. (A file of one segment runs the loop in its own execution, whose state keeps the cursor
// across a redrive of the file; its first Register task asks for the segment's first chunk, and
// so reads the progress too, under the same key.) So after each successful invocation Register writes where the next one starts, and an
// invocation that begins the segment reads it and starts there: a redriven file re-sends at most
// the failed invocation's records, with the same idempotency keys. It costs one GET per segment
// execution and one PUT per successful invocation, in the work bucket beside the manifest.

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

// resume returns the chunk a new segment execution starts at, and the record within it (0: its
// first): the stored progress when it lies in (Chunk, Until+1], or at Chunk inside it, else Chunk. Absent progress (404, or the 403 S3 answers a caller without
// s3:ListBucket: source.Absent) and progress that is corrupt or outside the segment are ignored;
// the latter with a WARN, since only a foreign write makes it. Any other failure to read it is
// retryable: starting at the segment's first chunk without knowing would write a lower progress
// over the stored one.
func (h *Handler) resume(ctx context.Context, req pipeline.ChunkRequest) (int, int64, *pipeline.Progress, error) {
	p, err := h.loadProgress(ctx, req)
	if err != nil || p == nil {
		return req.Chunk, 0, p, err
	}
	b := h.budget(ctx, req)
	ignore := func(why string) (int, int64, *pipeline.Progress, error) {
		h.Log.Warn("segment progress ignored; the segment starts at its first chunk",
			"tenant", req.Tenant.ID, "file", b.file, "execution", req.ExecutionName, "segment", req.Segment.Index,
			"key", progressKey(req), "reason", why)
		return req.Chunk, 0, nil, nil
	}
	if p.Next < req.Chunk || p.Next > req.Until()+1 {
		return ignore(fmt.Sprintf("next %d is outside the segment's chunks %d..%d", p.Next, req.Chunk, req.Until()+1))
	}
	if p.Record > 0 && p.Next > req.Until() {
		return ignore(fmt.Sprintf("record %d is past the segment's end", p.Record))
	}
	if p.Next > req.Chunk || p.Record > 0 {
		h.Log.Info("segment resumes from its progress", "tenant", req.Tenant.ID, "file", b.file,
			"execution", req.ExecutionName, "segment", req.Segment.Index, "chunk", p.Next, "record", p.Record)
	}
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
	bucket, key := req.Manifest.Bucket, progressKey(req)
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
			"segment", req.Segment.Index, "next", p.Next, "key", progressKey(req), "error", err.Error())
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
		Key:           aws.String(progressKey(req)),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("application/json"),
	})
	return err
}

func progressKey(req pipeline.ChunkRequest) string {
	return pipeline.ProgressKey(req.Tenant.ID, req.ExecutionName, req.Segment.Index)
}
