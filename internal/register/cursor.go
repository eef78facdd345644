package register

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/source"
)

// errNearDeadline is the cause of every RetryableError the budget raises: the invocation stopped
// because its Lambda timeout is near, not because anything failed.
var errNearDeadline = errors.New("the Lambda timeout is near")

// registerRun registers the request's chunks in order, from req.Chunk (from its record req.Record
// when the cursor stopped inside it) through req.Until(), while the invocation's time budget
// lasts, and returns the cursor where the next invocation starts: a chunk, and a record within it
// when the invocation stopped inside that chunk. The cursor travels in the segment execution's
// state (the next Register task's input), never only in this process, so a Retry or a redrive of
// the task resumes at this invocation's first record, and re-sends at most this invocation's
// records, with the same idempotency keys (they depend only on the file execution's name and the
// record or chunk number, never on where an invocation starts). With the request's segment it also
// keeps the cursor, chunk and record, in the work bucket (progress.go), so that a new segment
// execution, which a redrive of the file starts at the segment's first chunk, resumes there too.
//
// It stops early, returning the cursor as a success, when:
//   - the time left (after the margin) is less than one more chunk needs: the slowest chunk of
//     this invocation so far plus one HTTP timeout, since the chunk's last POST starts only with a
//     whole HTTP timeout left (the deadline guard); the cursor is the next chunk;
//   - after this invocation registered at least one record, the deadline guard stops it inside
//     its first chunk: the cursor is the first record not written, so the next invocation sends
//     none of this one's records again. No POST is cut short by the budget (one starts only with
//     a whole HTTP timeout left), so no record is in flight; one that timed out is re-sent with
//     the same key;
//   - a later chunk stops on the deadline guard, a RetryableError or a RecordLatencyError: the
//     cursor is that chunk's first record not written. If the failure persists there, before any
//     progress, the state machine's Retry (with its backoff) applies;
//   - any chunk, the first included, stops to wait for the core system (errSlowDown: its rate
//     limit or a 429's or 503's Retry-After does not fit the invocation, pace.go). Waiting is not
//     a failure, so it spends none of the state machine's Retry budget: the next invocation
//     resumes at the record that waits.
//
// So a file finishes whatever the core system's latency, unless one POST alone gets no answer
// within the HTTP timeout, which every POST starts with: that is a RecordLatencyError naming the
// record (coreClient.latencyError), retried like a RetryableError and then failing the file. Any
// other failure is returned as is: records are sent in order and nothing after the first failure
// is sent.
func (h *Handler) registerRun(ctx context.Context, req pipeline.ChunkRequest, p *pace, o runOptions) (pipeline.ChunkResult, error) {
	now := h.now
	if now == nil {
		now = time.Now
	}
	from, at := req.Chunk, req.Record
	var reserve time.Duration // kept for writing the progress after the last chunk
	if req.Segment != nil {
		if err := checkSegment(req); err != nil {
			return pipeline.ChunkResult{}, err
		}
		reserve = minCallTime + o.reserve
		var (
			stored *pipeline.Progress
			err    error
		)
		// Every invocation reads the segment's progress: where it starts, and for a keyed file the
		// window the file's previous invocation left.
		if from, at, stored, err = h.resume(ctx, req); err != nil {
			return pipeline.ChunkResult{}, err
		}
		if stored != nil {
			p.window.restore(stored.Window)
		}
		if o.horizon, err = h.openHorizon(ctx, req, from, at, stored); err != nil {
			return pipeline.ChunkResult{}, err
		}
	}
	if req.Tenant.KeyedOrder() && req.Tenant.DynamoDB == nil && !o.horizon.active() {
		// Records looked up before they are sent are never sent ahead of their chunk's lookup.
		o.ahead = &readAhead{until: req.Until(), chunk: -1}
	}
	// The keyed sink's requests of a chunk past the last one registered end before the
	// invocation does.
	defer func() { p.keyed.finish() }()
	// keep is the record cursor the result carries: only the per-invocation segment (which sends
	// its segment) keeps it in its state; any other caller gets the chunk cursor it always had,
	// and a chunk it resumes starts again at its first record, with the same keys.
	keep := func(record int64) int64 {
		if req.Segment == nil {
			return 0
		}
		return record
	}
	res := pipeline.ChunkResult{Chunk: req.Chunk, Next: from, NextRecord: keep(at)}
	var (
		slowest    time.Duration
		first      int64      // the first record this invocation sends, which names its part
		rejections []rejected // those the cursor passes, in record order
		stopped    bool       // on a failure or a wait, inside a chunk whose records may have been sent
	)
	for c := from; c <= req.Until(); c++ {
		if c > from && !h.roomForChunk(ctx, now, slowest+reserve) {
			break
		}
		one := req
		one.Chunk, one.LastChunk, one.Record = c, 0, 0
		if c == from {
			one.Record = at
		}
		started := now()
		out, err := h.register(ctx, one, p, o)
		if c == from {
			first = out.first
		}
		stop := stopAt(one, out.done, err)
		// The rejections the cursor passes: all of a chunk done, those before the stop record of
		// a chunk the next invocation resumes inside, none of a chunk it starts again.
		var passed []rejected
		if out.rejects != nil && (err == nil || keep(stop) > 0) {
			passed = out.rejects.before(keep(stop))
		}
		var (
			we   *WriteError
			past []int64 // key order: records after the stop registered all the same
		)
		if errors.As(err, &we) {
			err, past = we.Err, we.Registered // the pipeline error, unwrapped for the state machine
		}
		// handsOn: the invocation returns a cursor rather than this error (see below).
		handsOn := err == nil || errors.Is(err, errSlowDown) ||
			retryable(err) && (c > from || errors.Is(err, errNearDeadline) && keep(stop) > 0 && out.done > 0)
		if handsOn {
			// A cursor is handed on past these: count them and keep them for the part.
			res.Registered += out.done - int64(len(passed))
			res.Rejected += int64(len(passed))
			rejections = append(rejections, passed...)
		} else {
			res.Registered += out.done
		}
		if errors.Is(err, errSlowDown) {
			// Waiting for the core system fails nothing and spends no Retry: the next invocation
			// resumes at the record that waits, even when it is the invocation's first.
			h.Log.Info("invocation ends to wait for the core system; the next invocation resumes there",
				"tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName,
				"chunk", c, "record", stop, "reason", err.Error())
			res.NextRecord, stopped = keep(stop), true
			break
		}
		if err != nil {
			// A stop that hands on a cursor: in a later chunk (the invocation registered whole
			// chunks, so there are at most as many as chunks), or inside the first one when its
			// budget ran out (it spent its whole budget, so there are at most as many as the
			// segment's time holds budgets). Any other failure, before progress or inside the first
			// chunk, is the task's Retry's, from this invocation's cursor: a core system that fails
			// every few records cannot make a segment run one invocation per few records.
			if handsOn {
				h.Log.Warn("invocation ends before a failed record; the next invocation resumes there",
					"tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName,
					"chunk", c, "record", stop, "nearDeadline", errors.Is(err, errNearDeadline), "error", err.Error())
				res.NextRecord, stopped = keep(stop), true
				break
			}
			if req.Segment != nil && (res.Registered > 0 || len(past) > 0) && !retryable(err) {
				// The file fails here (no Retry follows), and the records before the failed one
				// are registered: the progress says so, so that a redrive resumes at the failed
				// record and the file's results list as unprocessed exactly the records from
				// there on (under key order, but for those past it that other keys registered:
				// Progress.Registered). A retryable failure leaves the progress alone: the task's
				// Retry re-sends this invocation's records from its own cursor.
				h.putProgress(ctx, req, pipeline.Progress{Next: c, Record: keep(stop), Registered: pipeline.RangesOf(past), SentAt: o.horizon.carry(true), Window: p.window.carried()})
			}
			return pipeline.ChunkResult{}, err
		}
		slowest = max(slowest, now().Sub(started))
		res.Next, res.NextRecord = c+1, 0
	}
	res.Done = res.Next > req.Until()
	if len(rejections) > 0 {
		// Before the cursor passes them: a crash from here re-sends the same records with the same
		// keys, and rewrites the same part.
		if err := h.writeRejections(ctx, req, from, first, rejections, o.file); err != nil {
			return pipeline.ChunkResult{}, err
		}
	}
	if req.Segment != nil && res.Registered+res.Rejected > 0 && !(o.lastRun && res.Done) {
		// Records past a keyed cursor that were registered are not listed: the next invocation
		// sends them again with the same keys.
		h.putProgress(ctx, req, pipeline.Progress{Next: res.Next, Record: res.NextRecord, SentAt: o.horizon.carry(stopped), Window: p.window.carried()})
	}
	return res, nil
}

// retryable reports whether the state machine retries err: a RetryableError, or a RecordLatencyError
// (retried alike, because one invocation cannot tell it from a core system that hangs a while).
func retryable(err error) bool {
	t := source.ErrorType(err)
	return t == pipeline.ErrRetryable || t == pipeline.ErrRecordLatency
}

// stopAt is the record where the next invocation resumes chunk one after a stop: the first record
// the sink did not write, once any record of the chunk is written (now or by an earlier
// invocation); else 0, the chunk's start.
func stopAt(one pipeline.ChunkRequest, n int64, err error) int64 {
	var we *WriteError
	if n > 0 && errors.As(err, &we) {
		return we.Record
	}
	return one.Record
}

// fromRecord drops the records of the chunk that an earlier invocation registered: those before
// req.Record. A Record that is not one of the chunk's, or that lies inside a batch-mode chunk (one
// POST under one key, so the cursor never stops inside it), is a wiring fault no retry fixes:
// sending from there could skip records or re-send them under another key.
func fromRecord(b budget, req pipeline.ChunkRequest, recs []records.Record) ([]records.Record, error) {
	if req.Record == 0 {
		return recs, nil
	}
	i := slices.IndexFunc(recs, func(r records.Record) bool { return r.Number == req.Record })
	if i < 0 || i > 0 && req.Tenant.BatchMode() {
		return nil, &pipeline.PermanentError{Message: fmt.Sprintf(
			"%s: the cursor's record %d is not a record Register can resume chunk %d at (records %d-%d, batch mode %v)",
			b.file, req.Record, req.Chunk, recs[0].Number, recs[len(recs)-1].Number, req.Tenant.BatchMode())}
	}
	return recs[i:], nil
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
