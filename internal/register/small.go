package register

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/split"
)

// SmallFile is the file state machine's SmallFile task (pipeline.TaskSmallFile), which the Register
// function serves beside Register: for a file of one chunk it runs, in one invocation, what the
// full path runs in three tasks and two executions: Split (Split.Small: the same checks and
// writes), Register of the one chunk as the segment's first invocation (the same cursor, progress
// and idempotency keys), and the results task (Split.Results). So a file is registered alike
// whichever path it takes, and a file the task hands to the full path (a *pipeline.NotSmallError)
// is resumed there, never registered twice:
//   - a file of more than one chunk, or of more bytes than the bound, is handed on before
//     anything is registered or written;
//   - a run that does not end in this invocation (its budget ran out, or the core system asked it
//     to wait) is handed on after Register wrote the segment's progress, where the full path's
//     Register of segment 0 resumes.
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
	sleep           func(context.Context, time.Duration) error
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
		if len(ss.Spans) != 1 {
			return pipeline.SmallFileResult{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: the small file split into %d chunks and %d spans", file, sp.Chunks, len(ss.Spans))}
		}
		// The chunk in memory: no manifest is written or read, nor the object read again.
		mem := &memChunk{span: ss.Spans[0], data: ss.Data}
		res, err := s.Register.handle(ctx, s.chunkRequest(req, sp), runOptions{lastRun: true, chunk: mem})
		if err != nil {
			return pipeline.SmallFileResult{}, err
		}
		if !res.Done {
			// Register wrote the segment's progress: the full path resumes there.
			from := "its first record"
			if res.NextRecord > 0 {
				from = fmt.Sprintf("record %d", res.NextRecord)
			}
			msg := fmt.Sprintf("%s: the small file's registration did not end in one invocation (%d records registered, it resumes at %s): the full path goes on from there",
				file, res.Registered, from)
			log.Info("small file handed to the full path", "registered", res.Registered, "nextRecord", res.NextRecord)
			return pipeline.SmallFileResult{}, &pipeline.NotSmallError{Message: msg}
		}
		out.Registered, out.Rejected = res.Registered, out.Rejected+res.Rejected
	}
	s.results(ctx, req, sp)
	return out, nil
}

// chunkRequest is the Register request of the file's one chunk, as the segment's first invocation
// would send it: segment 0 from its first record, so that Register reads and writes segment 0's
// progress.
func (s *SmallFile) chunkRequest(req pipeline.SmallFileRequest, sp pipeline.SplitResult) pipeline.ChunkRequest {
	return pipeline.ChunkRequest{
		Tenant:        req.Input.Tenant,
		Source:        sp.Source,
		ExecutionName: req.ExecutionName,
		Manifest:      sp.Manifest,
		Records:       sp.Records,
		Header:        sp.Header,
		Chunk:         0,
		LastChunk:     0,
		Segment:       &pipeline.Segment{Index: 0, FirstChunk: 0, LastChunk: 0, FileStarted: req.StartTime},
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
