package register

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/example/tenantpipeline/internal/deployed"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/split"
)

// SmallFile is the file state machine's SmallFile task (pipeline.TaskSmallFile), which the Register
// function serves beside Register: for a file of one segment it runs, in one invocation, what the
// full path runs in three tasks: Split (Split.Small: the same checks and writes), Register of
// segment 0 as its first invocation (the same run of chunks from the same cursor, the same
// progress and idempotency keys: chunk after chunk while the budget lasts), and the results task
// (Split.Results). So a file is registered alike whichever path it takes, and a file the task
// hands to the full path (a *pipeline.NotSmallError) is resumed there, never registered twice:
//   - a file of more than one segment, or of more bytes than the bound, is handed on before
//     anything is registered or written;
//   - a run that does not end in this invocation (its budget ran out after some chunks, the core
//     system asked it to wait, its breaker or a maintenance window holds it) is handed on after
//     Register wrote the segment's progress, where the full path's Register of segment 0 resumes;
//   - a run that ended with too little time left for the results (less than two S3 calls': the
//     progress's write and the summary's) is handed on with the progress at the segment's end:
//     the full path registers nothing and writes the results.
//
// The bound is in bytes only. A file within it that cannot be registered in one invocation at the
// core system's pace (its rate limit, its latency) is handed on when the budget runs out, with
// every record registered so far kept: what the invocation did is not lost, so a bound on the
// records that handed such a file on before registering would save only the second split of at
// most the bound's bytes and one Choice, and would cost a full path to files it misjudged.
//
// A failure is Register's or Split's own error, so the state machine retries and fails the file as
// it would on the full path, and a redrive re-runs this task, which resumes from the progress.
type SmallFile struct {
	Register *Handler
	// Split splits and writes the results; its WorkBucket is where the manifest goes.
	Split *split.Handler
	// ResultsAttempts is how many times the results are tried before the task gives up on them
	// (the file's status never depends on its results, as on the full path). Default: 3.
	ResultsAttempts int
	// ResultsTime is kept free for the results after the registration (a few S3 writes and the
	// completion's POST): no chunk after the first starts unless it fits after it. Default: one
	// HTTP timeout (Register's, which the completion's POST has too) and one S3 call.
	ResultsTime time.Duration
	sleep       func(context.Context, time.Duration) error
}

// Invoke is the Register function's entry point: the SmallFile task when the request's kind says
// so, else Register (a pipeline.ChunkRequest, which has no kind).
func (s *SmallFile) Invoke(ctx context.Context, in json.RawMessage) (any, error) {
	var k struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(in, &k); err != nil {
		return nil, &pipeline.PermanentError{Message: "the request is not a JSON object: " + pipeline.JSONProblem(err, "")}
	}
	if k.Kind == pipeline.TaskSmallFile {
		var req pipeline.SmallFileRequest
		if err := json.Unmarshal(in, &req); err != nil {
			return nil, &pipeline.PermanentError{Message: "the small-file request: " + pipeline.JSONProblem(err, "")}
		}
		return s.Handle(ctx, req)
	}
	var req pipeline.ChunkRequest
	if err := json.Unmarshal(in, &req); err != nil {
		return nil, &pipeline.PermanentError{Message: "the register request: " + pipeline.JSONProblem(err, "")}
	}
	return s.Register.Handle(ctx, req)
}

// Handle runs one small file. It returns only the *pipeline error types, unwrapped.
func (s *SmallFile) Handle(ctx context.Context, req pipeline.SmallFileRequest) (pipeline.SmallFileResult, error) {
	in := req.Input
	file := source.Name(in.Source)
	log := s.Register.Log.With("tenant", in.Tenant.ID, "file", file, "execution", req.ExecutionName)
	if s.Split == nil || s.Split.WorkBucket == "" {
		return pipeline.SmallFileResult{}, &pipeline.PermanentError{Message: file + ": the Register function has no " + pipeline.EnvWorkBucket + " for the small-file path"}
	}
	// Completed from the deployed settings, and refused before the file is read when it is not
	// theirs: a request that is not the deployed settings' reads nothing.
	if err := deployed.Resolve(s.Register.Deployed, &req.Input.Tenant, in.Source); err != nil {
		log.Error("small file failed", "errorType", source.ErrorType(err), "error", err.Error())
		return pipeline.SmallFileResult{}, err
	}
	in = req.Input
	// The tenant's own bound, when it has one, else the state machine's: the one FileSize chose by.
	bound := req.MaxBytes
	if own := in.Tenant.SmallFileBytes; own != 0 {
		bound = own
	}
	if bound == -1 {
		err := &pipeline.NotSmallError{Message: file + ": the tenant has no small-file path (smallFileBytes -1): the full path splits it"}
		log.Info("small file handed to the full path", "reason", err.Message)
		return pipeline.SmallFileResult{}, err
	}
	if bound <= 0 || bound > pipeline.MaxSmallFileBytes {
		return pipeline.SmallFileResult{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: the small-file bound %d is outside 1..%d", file, bound, pipeline.MaxSmallFileBytes)}
	}
	ss, err := s.Split.Small(ctx, pipeline.SplitRequest{Tenant: in.Tenant, Source: in.Source, ExecutionName: req.ExecutionName}, bound)
	if err != nil {
		log.Log(ctx, source.LogLevel(err), "small file not split", "errorType", source.ErrorType(err), "error", err.Error())
		return pipeline.SmallFileResult{}, err
	}
	sp := ss.Result
	out := pipeline.SmallFileResult{Records: sp.Records, Rejected: sp.Rejected}
	if sp.Chunks > 0 {
		if len(ss.Spans) != sp.Chunks || sp.Chunks > pipeline.SegmentChunks {
			return pipeline.SmallFileResult{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: the small file split into %d chunks and %d spans", file, sp.Chunks, len(ss.Spans))}
		}
		// The chunks in memory: no manifest is written or read, nor the object read again.
		mem := &memFile{spans: ss.Spans, lines: ss.Lines, data: ss.Data}
		cr := s.chunkRequest(req, sp)
		res, err := s.Register.handle(ctx, cr, runOptions{lastRun: true, file: mem, reserve: s.resultsTime()})
		if err != nil {
			return pipeline.SmallFileResult{}, err
		}
		if res.Done && !s.roomFor(ctx, 2*minCallTime) && s.Register.writeProgress(ctx, cr, pipeline.Progress{Next: cr.Until() + 1}) == nil {
			// Every record is registered; the full path's Register of segment 0 finds the progress
			// at its end and sends nothing, and its results task has an invocation of its own.
			log.Info("small file handed to the full path for its results", "registered", res.Registered)
			return pipeline.SmallFileResult{}, &pipeline.NotSmallError{Message: fmt.Sprintf(
				"%s: the small file's %d records are registered, with too little of the invocation left for its results: the full path writes them", file, sp.Records)}
		}
		if !res.Done {
			// Register wrote the segment's progress: the full path resumes there.
			from := "its first record"
			switch {
			case res.NextRecord > 0:
				from = fmt.Sprintf("record %d", res.NextRecord)
			case res.Next > 0:
				from = fmt.Sprintf("chunk %d", res.Next)
			}
			msg := fmt.Sprintf("%s: the small file's registration did not end in one invocation (%d records registered, it resumes at %s): the full path goes on from there",
				file, res.Registered, from)
			log.Info("small file handed to the full path", "registered", res.Registered, "next", res.Next, "nextRecord", res.NextRecord)
			return pipeline.SmallFileResult{}, &pipeline.NotSmallError{Message: msg}
		}
		out.Registered, out.Rejected = res.Registered, out.Rejected+res.Rejected
	}
	s.results(ctx, req, sp)
	return out, nil
}

// resultsTime is ResultsTime or its default.
func (s *SmallFile) resultsTime() time.Duration {
	if s.ResultsTime > 0 {
		return s.ResultsTime
	}
	return s.Register.HTTPTimeout + minCallTime
}

// roomFor reports whether d is left before the deadline, less the margin.
func (s *SmallFile) roomFor(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return true
	}
	margin := s.Register.DeadlineMargin
	if margin == 0 {
		margin = DefaultDeadlineMargin
	}
	now := s.Register.now
	if now == nil {
		now = time.Now
	}
	return dl.Sub(now())-margin >= d
}

// chunkRequest is the Register request of the file's chunks, as segment 0's first invocation
// would send it: from its first record through its last chunk, so that Register reads and writes
// segment 0's progress.
func (s *SmallFile) chunkRequest(req pipeline.SmallFileRequest, sp pipeline.SplitResult) pipeline.ChunkRequest {
	last := max(sp.Chunks-1, 0)
	return pipeline.ChunkRequest{
		Tenant:        req.Input.Tenant,
		Source:        sp.Source,
		ExecutionName: req.ExecutionName,
		Manifest:      sp.Manifest,
		Records:       sp.Records,
		Header:        sp.Header,
		Chunk:         0,
		LastChunk:     last,
		Segment:       &pipeline.Segment{Index: 0, FirstChunk: 0, LastChunk: last, FileStarted: req.StartTime},
	}
}

// results writes the file's results as the full path's Results task does, retried a few times;
// after the last attempt the file succeeds without them, as the full path's Catch lets it.
func (s *SmallFile) results(ctx context.Context, req pipeline.SmallFileRequest, sp pipeline.SplitResult) {
	rr := pipeline.ResultsRequest{
		Kind:          pipeline.TaskResults,
		Status:        pipeline.StatusSucceeded,
		ExecutionName: req.ExecutionName,
		ExecutionARN:  req.ExecutionARN,
		StartTime:     req.StartTime,
		RedriveCount:  req.RedriveCount,
		State:         pipeline.ResultsState{Tenant: req.Input.Tenant, Source: req.Input.Source, Split: &sp, Admitted: req.Input.Admitted},
	}
	attempts := s.ResultsAttempts
	if attempts <= 0 {
		attempts = 3
	}
	if dl, ok := ctx.Deadline(); ok {
		// The results end before the Lambda timeout would kill the invocation: a killed task is
		// retried whole, and its records, all registered, would be sent again (with the same keys).
		margin := s.Register.DeadlineMargin
		if margin == 0 {
			margin = DefaultDeadlineMargin
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-margin))
		defer cancel()
	}
	sleep := s.sleep
	if sleep == nil {
		sleep = sleepContext
	}
	wait := time.Second
	for i := 1; ; i++ {
		// Results logs its own failure at ERROR and counts it (split.MetricResultsFailed).
		if err := s.Split.Results(ctx, rr); err == nil || i == attempts || sleep(ctx, wait) != nil {
			return
		}
		wait *= 2
	}
}
