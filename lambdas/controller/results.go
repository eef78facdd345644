package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// A failed file's results (README, "Results of each file").
//
// The file state machine writes a file's results as its last state only on success: a Catch that
// ran them on the failure path would end in a Fail state, the step a redrive continues from. So the
// controller, which sees every end of every file (fileevent.go), has the Split function's results
// task write them when an end is FAILED, TIMED_OUT or ABORTED, before it announces that end: the
// File Processed event then carries the summary's counts.
//
// The invocation is synchronous (RequestResponse) and bounded by the controller's own deadline. A
// results task that fails, is throttled, or outlasts that wait (a very large unprocessed tail) does
// not hold the file: the end is announced with the execution's counts, and ResultsErrors counts it.
// Lambda does not stop a synchronous invocation whose caller stopped waiting
// (https://docs.aws.amazon.com/lambda/latest/dg/invocation-sync.html), so the summary usually
// appears shortly after; every write has a deterministic key, so a second invocation of the same end
// (the status event's and a delivery's at once) rewrites the same files.

// functionInvoker is the slice of the Lambda client the controller uses.
type functionInvoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

var _ functionInvoker = (*lambda.Client)(nil)

// minResultsWait is the least time worth giving the results task; with less left before the
// controller's deadline, the results are not asked for.
const minResultsWait = 2 * time.Second

// writeResults has the results task write the results of a failed end, unless its summary.json
// describes that end already. It never fails the caller: a failure is logged and counted.
func (h *Handler) writeResults(ctx context.Context, log *slog.Logger, end fileEnd) {
	if h.results == nil || h.cfg.ResultsFunction == "" || end.Status == pipeline.StatusSucceeded {
		return
	}
	if _, ok := h.readSummary(ctx, log, end); ok {
		return
	}
	payload, err := json.Marshal(h.resultsRequest(end))
	if err != nil {
		h.resultsFailed(ctx, log, end, fmt.Errorf("encode the results request: %w", err))
		return
	}
	wait := time.Until(h.deadline(ctx)) - deadlineMargin
	if wait < minResultsWait {
		h.resultsFailed(ctx, log, end, fmt.Errorf("only %s left before the controller's deadline", wait.Round(time.Millisecond)))
		return
	}
	ictx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	out, err := h.results.Invoke(ictx, &lambda.InvokeInput{FunctionName: aws.String(h.cfg.ResultsFunction), Payload: payload})
	if err == nil && out.FunctionError != nil {
		// A function error answers 200 with X-Amz-Function-Error and the error as the payload
		// (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html).
		err = fmt.Errorf("%s: %s", aws.ToString(out.FunctionError), truncate(string(out.Payload), 300))
	}
	if err != nil {
		h.resultsFailed(ctx, log, end, err)
		return
	}
	log.InfoContext(ctx, "results of the failed file written", "executionName", end.Name, "status", end.Status, "redriveCount", end.RedriveCount)
}

// resultsRequest is the results task's request for end, from the execution's input and
// description: the tenant and source it ran with, and its error.
func (h *Handler) resultsRequest(end fileEnd) pipeline.ResultsRequest {
	var in pipeline.WorkflowInput
	_ = json.Unmarshal([]byte(end.Input), &in)
	tenant := in.Tenant
	if tenant.ID != h.cfg.Tenant.ID {
		// An input that cannot be read, or names another tenant, is never trusted for the tenant.
		tenant = h.cfg.Tenant
	}
	req := pipeline.ResultsRequest{
		Kind:          pipeline.TaskResults,
		Status:        end.Status,
		ExecutionName: end.Name,
		ExecutionARN:  end.ARN,
		RedriveCount:  end.RedriveCount,
		StartTime:     rfc3339(end.Start),
		StopTime:      rfc3339(end.Stop),
		State:         pipeline.ResultsState{Tenant: tenant, Source: in.Source, Admitted: in.Admitted},
	}
	if end.Error != "" || end.Cause != "" {
		req.State.Error = &pipeline.TaskError{Error: end.Error, Cause: end.Cause}
	}
	return req
}

func (h *Handler) resultsFailed(ctx context.Context, log *slog.Logger, end fileEnd, err error) {
	log.WarnContext(ctx, "results of the failed file not written; its File Processed event counts from the execution",
		"executionName", end.Name, "status", end.Status, "function", h.cfg.ResultsFunction, "error", err)
	h.countEvent(ctx, log, metrics.ResultsErrors)
}

// deadline is the invocation's deadline; without one (tests), a minute from now.
func (h *Handler) deadline(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(time.Minute)
}

func rfc3339(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
