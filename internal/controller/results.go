package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// A failed file's results (README, "Results of each file").
//
// The file state machine writes a file's results as its last state only on success: a Catch that
// ran them on the failure path would end in a Fail state, the step a redrive continues from. So the
// controller, which sees every end of every file (fileevent.go), has the Split function's results
// task write them when an end is FAILED, TIMED_OUT or ABORTED, before it announces that end: the
// File Processed event then carries the summary's counts. The request carries Split's result, read
// from the execution's history (splitResult), as the state machine's own request carries it in $.
//
// The invocation is synchronous (RequestResponse) and bounded by the controller's own deadline. A
// results task that fails, is throttled, or outlasts that wait (a very large unprocessed tail) does
// not hold the file: the end is announced with the execution's counts, and ResultsErrors counts it.
// Lambda's documentation does not say what becomes of a synchronous invocation whose caller stopped
// waiting (https://docs.aws.amazon.com/lambda/latest/dg/invocation-sync.html); the controller relies
// on neither answer: if the task runs on, its summary appears a little later for pipectl results,
// and the event has already gone out without it. Every write has a deterministic key, so a second
// invocation of the same end (the status event's and a delivery's at once) rewrites the same files.

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
	req := h.resultsRequest(end)
	sp, small, err := h.splitResult(ctx, end.ARN)
	if err != nil {
		// Without Split's result the summary would count nothing: better none than a wrong one.
		h.resultsFailed(ctx, log, end, err)
		return
	}
	req.State.Split, req.State.SmallFile = sp, small
	payload, err := json.Marshal(req)
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

// The history read for Split's result: it is among the first events (entered, scheduled, started,
// succeeded, exited, and three more per retry of its few attempts), so one page of 100 suffices
// and a second is the bound.
const (
	splitStateName       = "Split"     // workflows.StateSplit
	smallFileStateName   = "SmallFile" // workflows.StateSmallFile
	splitHistoryPageSize = 100
	splitHistoryPages    = 2
)

// splitResult reads Split's result from the file execution's history, oldest first: the output of
// the Split state's TaskStateExited event is the state with Split's result at $.split
// (workflows.StateSplit). A failed execution has no output, and its history keeps every run's
// events, so a redriven run finds its first run's Split. nil when Split never returned (the file
// failed in it). The controller may read the history (states:GetExecutionHistory on the file
// executions); the call costs nothing but its quota, once per failed end.
//
// small reports a file that failed in the SmallFile task, which splits in memory and leaves no
// Split result: its history entered SmallFile and never Split, so the results task splits it again
// (pipeline.ResultsState.SmallFile). A SmallFile task that handed the file on is followed by Split.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_GetExecutionHistory.html
func (h *Handler) splitResult(ctx context.Context, arn string) (sp *pipeline.SplitResult, small bool, err error) {
	in := &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn), MaxResults: splitHistoryPageSize, IncludeExecutionData: aws.Bool(true)}
	for range splitHistoryPages {
		out, err := h.sfn.GetExecutionHistory(ctx, in)
		if err != nil {
			return nil, false, fmt.Errorf("read Split's result from the history of %s: %w", arn, err)
		}
		for _, ev := range out.Events {
			if d := ev.StateEnteredEventDetails; ev.Type == sfntypes.HistoryEventTypeTaskStateEntered && d != nil {
				switch aws.ToString(d.Name) {
				case smallFileStateName:
					small = true
				case splitStateName:
					small = false
				}
			}
			d := ev.StateExitedEventDetails
			if ev.Type != sfntypes.HistoryEventTypeTaskStateExited || d == nil || aws.ToString(d.Name) != splitStateName {
				continue
			}
			var state struct {
				Split *pipeline.SplitResult `json:"split"`
			}
			if err := json.Unmarshal([]byte(aws.ToString(d.Output)), &state); err != nil || state.Split == nil {
				return nil, false, fmt.Errorf("execution %s, event %d: the Split state's output holds no split result", arn, ev.Id)
			}
			return state.Split, false, nil
		}
		if aws.ToString(out.NextToken) == "" {
			return nil, small, nil
		}
		in.NextToken = out.NextToken
	}
	return nil, false, fmt.Errorf("execution %s: Split's end is not among its first %d history events", arn, splitHistoryPages*splitHistoryPageSize)
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
