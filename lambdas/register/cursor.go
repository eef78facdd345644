package main

import (
	"context"
	"errors"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
)

// errNearDeadline is the cause of every RetryableError the budget raises: the invocation stopped
// because its Lambda timeout is near, not because anything failed.
var errNearDeadline = errors.New("the Lambda timeout is near")

// registerRun registers the request's chunks in order, from req.Chunk through req.Until(), while
// the invocation's time budget lasts, and returns the cursor where the next invocation starts. The
// cursor travels in the segment execution's state (the next Register task's input), never only in
// this process, so a Retry or a redrive of the task resumes at this invocation's first chunk, and
// re-sends at most this invocation's records, with the same idempotency keys (they depend only on
// the file execution's name and the record or chunk number). With the request's segment it also
// keeps the cursor in the work bucket (progress.go), so that a new segment execution, which a
// redrive of the file starts at the segment's first chunk, resumes there too.
//
// It stops early, returning the cursor of the next chunk as a success, when:
//   - the time left (after the margin) is less than one more chunk needs: the slowest chunk of
//     this invocation so far plus one HTTP timeout, since the chunk's last POST starts only with a
//     whole HTTP timeout left (the deadline guard);
//   - a later chunk stops on the deadline guard or on a RetryableError: the records of that chunk
//     already sent are re-sent by the next invocation with the same keys, and if the failure
//     persists there, before any progress, the state machine's Retry (with its backoff) applies;
//   - any chunk, the first included, stops to wait for the core system (errSlowDown: its rate
//     limit or a 429's or 503's Retry-After does not fit the invocation, pace.go). Waiting is not
//     a failure, so it spends none of the state machine's Retry budget: the next invocation
//     resumes at that chunk, re-sending its records already sent with the same keys.
//
// Any other failure, and any failure of the invocation's first chunk, is returned as is: records
// are sent in order and nothing after the first failure is sent.
func (h *Handler) registerRun(ctx context.Context, req pipeline.ChunkRequest, p *pace) (pipeline.ChunkResult, error) {
	now := h.now
	if now == nil {
		now = time.Now
	}
	from := req.Chunk
	var reserve time.Duration // kept for writing the progress after the last chunk
	if req.Segment != nil {
		if err := checkSegment(req); err != nil {
			return pipeline.ChunkResult{}, err
		}
		reserve = minCallTime
		if req.Chunk == req.Segment.FirstChunk {
			var err error
			if from, err = h.resume(ctx, req); err != nil {
				return pipeline.ChunkResult{}, err
			}
		}
	}
	res := pipeline.ChunkResult{Chunk: req.Chunk, Next: from}
	var slowest time.Duration
	for c := from; c <= req.Until(); c++ {
		if c > from && !h.roomForChunk(ctx, now, slowest+reserve) {
			break
		}
		one := req
		one.Chunk, one.LastChunk = c, 0
		started := now()
		n, err := h.register(ctx, one, p)
		res.Registered += n
		var we *WriteError
		if errors.As(err, &we) {
			err = we.Err // the pipeline error, unwrapped for the state machine
		}
		if errors.Is(err, errSlowDown) {
			// Waiting for the core system fails nothing and spends no Retry: the next invocation
			// resumes at this chunk, even when it is the invocation's first.
			h.Log.Info("invocation ends to wait for the core system; the next invocation resumes there",
				"tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName,
				"chunk", c, "reason", err.Error())
			break
		}
		if err != nil {
			if c > from && source.ErrorType(err) == pipeline.ErrRetryable {
				h.Log.Warn("invocation ends before a failed chunk; the next invocation resumes there",
					"tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName,
					"chunk", c, "nearDeadline", errors.Is(err, errNearDeadline), "error", err.Error())
				break
			}
			return pipeline.ChunkResult{}, err
		}
		slowest = max(slowest, now().Sub(started))
		res.Next = c + 1
	}
	res.Done = res.Next > req.Until()
	if req.Segment != nil && res.Next > from {
		h.saveProgress(ctx, req, res.Next)
	}
	return res, nil
}

// roomForChunk reports whether one more chunk fits before the deadline (minus the margin): the
// slowest chunk so far plus one HTTP timeout (what its last POST is allowed).
func (h *Handler) roomForChunk(ctx context.Context, now func() time.Time, slowest time.Duration) bool {
	deadline, ok := ctx.Deadline()
	if !ok {
		return true
	}
	margin := h.DeadlineMargin
	if margin == 0 {
		margin = DefaultDeadlineMargin
	}
	return deadline.Sub(now())-margin >= slowest+h.HTTPTimeout
}
