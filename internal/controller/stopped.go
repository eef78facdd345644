package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// A file execution that ended TIMED_OUT or ABORTED may still have invocations running. A Lambda
// invocation keeps running after the execution that started it is stopped: StopExecution ends the
// execution, not the task it is waiting for
// (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StopExecution.html), and an
// invocation ends only when it returns or reaches the function's timeout
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html). A segment child
// started with startExecution.sync:2 is stopped with its parent only on a best-effort basis
// (https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html#connect-sync), and
// a child that goes on running starts new Register invocations. So the file's message is released
// only once no invocation of that file can still run: no segment child is RUNNING, and now is at
// least the later of the two stop dates plus the Register timeout plus releaseMargin.
//
// A file of one segment runs its Register loop in its own execution (workflows.StateOneSegment):
// its history has no segment task, and its last Register invocation is bounded by the file's own
// stop date, as the SmallFile task's is.
//
// A FAILED file usually failed because a task returned, and then nothing of it still runs. Two
// exceptions are held the same way:
//   - its segment execution failed on a Register attempt whose outcome Step Functions could not
//     learn (outcomeUnknownErrors): that invocation may still be running, and it is held until the
//     segment's stopDate plus the Register timeout plus releaseMargin;
//   - its segment execution still runs: the file's start of it failed after Step Functions had
//     created it (an SDK client error on a start that succeeded), so the file failed beside a child
//     it never recorded. The controller finds that child by its name and stops it.
const (
	// releaseMargin covers the clock skew between Step Functions and Lambda and the time a timed-out
	// invocation takes to be torn down.
	releaseMargin = 30 * time.Second
	// segmentTaskResource is the taskSubmittedEventDetails.resource of the RegisterSegment task.
	segmentTaskResource = "startExecution.sync:2"
	// segmentsMapState is the file workflow's Map state over the segments (workflows.StateSegments);
	// each of its iterations starts one segment execution, named by pipeline.SegmentExecutionName.
	segmentsMapState = "Segments"
	// historyPageSize is how many events one GetExecutionHistory call reads, newest first. The
	// newest RegisterSegment task is within the first page in every state of the file workflow; a
	// file stopped before its first segment has a history of a few pages at most.
	historyPageSize = 25
	// maxHistoryPages bounds the search for the segment task. A longer search is a fault.
	maxHistoryPages = 40
)

// inlineLoopStates are the file workflow's states of the Register loop that a file of one segment
// runs in its own execution (workflows.StateRegister, StateNextChunks): a
// history that shows one of them has no segment execution. They are newest in such a file's
// history whenever it stopped after Split, and only Results comes after them.
var inlineLoopStates = []string{"Register", "NextChunks"}

// outcomeUnknownErrors are the errors of a Lambda task whose invocation may still be running when
// Step Functions reports them: the Invoke call timed out on Step Functions' side
// (ClientExecutionTimeoutException), or failed in the SDK client or the Lambda service after the
// request may have reached Lambda. A segment that failed on one of them may have left its last
// Register invocation running.
// https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html
// https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html#API_Invoke_Errors
var outcomeUnknownErrors = []string{
	"Lambda.ClientExecutionTimeoutException",
	"Lambda.SdkClientException",
	"Lambda.ServiceException",
	"Lambda.AWSLambdaException",
}

// stopped reports whether the unsuccessful file execution's message must still be held because an
// invocation of the file may be running, and if so the decision that holds it. It never releases on
// a guess: anything it cannot read holds the message.
func (h *Handler) stopped(ctx context.Context, d *delivery, arn string, st *sfn.DescribeExecutionOutput) (decision, bool) {
	failed := st.Status == sfntypes.ExecutionStatusFailed
	if !failed && st.Status != sfntypes.ExecutionStatusTimedOut && st.Status != sfntypes.ExecutionStatusAborted {
		return decision{}, false
	}
	// The file execution's own task failed without a known outcome: the SmallFile task, and the
	// Register loop of a file of one segment, register in the file execution itself, so the last
	// invocation may still be running, and it is held as a segment's would be. (Split's and
	// Results' register nothing; they are held alike, which costs a wait at most.)
	ownTask := failed && slices.Contains(outcomeUnknownErrors, aws.ToString(st.Error))
	if failed && !ownTask && !segmentTaskError(aws.ToString(st.Error)) {
		return decision{}, false
	}
	if st.StopDate == nil {
		return h.serviceError(ctx, d, "read the stopped file's stop date", fmt.Errorf("execution %s is %s without a stopDate", arn, st.Status)), true
	}
	stoppedAt := *st.StopDate
	if ownTask {
		return h.holdUntil(ctx, d, stoppedAt, "the failed file's last attempt of its own task ended without a known outcome ("+aws.ToString(st.Error)+"): its invocation may still be running",
			[]any{"status", string(st.Status), "executionArn", arn})
	}

	child, err := h.segmentChild(ctx, arn, aws.ToInt32(st.RedriveCount))
	if err != nil {
		return h.serviceError(ctx, d, "find the stopped file's segment execution", err), true
	}
	attrs := []any{"status", string(st.Status), "executionArn", arn}
	reason := "a Register invocation of the stopped file may still be running"
	if child.arn != "" {
		cst, err := h.describe(ctx, child.arn)
		var missing *sfntypes.ExecutionDoesNotExist
		switch {
		case child.byName && errors.As(err, &missing):
			// The iteration never started its child, or started it before children were named.
			child.arn = ""
		case err != nil:
			return h.serviceError(ctx, d, "describe the stopped file's segment execution", fmt.Errorf("describe %s: %w", child.arn, err)), true
		}
		if child.arn != "" {
			attrs = append(attrs, "segmentExecutionArn", child.arn, "segmentStatus", string(cst.Status))
			if running(cst.Status) {
				return h.stopSegment(ctx, d, child.arn, attrs), true
			}
			if cst.StopDate == nil {
				return h.serviceError(ctx, d, "read the segment execution's stop date", fmt.Errorf("execution %s is %s without a stopDate", child.arn, cst.Status)), true
			}
			if failed {
				if !outcomeUnknown(cst) {
					return decision{}, false
				}
				// Only the segment's end bounds its last invocation.
				stoppedAt = *cst.StopDate
				reason = "the failed file's last Register attempt ended without a known outcome (" + aws.ToString(cst.Error) + "): its invocation may still be running"
				attrs = append(attrs, "segmentError", aws.ToString(cst.Error))
			} else if cst.StopDate.After(stoppedAt) {
				stoppedAt = *cst.StopDate
			}
		}
	}
	if failed && child.arn == "" {
		return decision{}, false
	}
	return h.holdUntil(ctx, d, stoppedAt, reason, attrs)
}

// holdUntil holds the file's message until the Register timeout plus releaseMargin after
// stoppedAt, when no invocation of the file can still run.
func (h *Handler) holdUntil(ctx context.Context, d *delivery, stoppedAt time.Time, reason string, attrs []any) (decision, bool) {
	releaseAt := stoppedAt.Add(h.cfg.RegisterTimeout + releaseMargin)
	if left := releaseAt.Sub(h.now()); left > 0 {
		return h.stoppedHold(ctx, d, left, reason,
			append(attrs, "stoppedAt", stoppedAt.UTC().Format(time.RFC3339Nano), "releaseAt", releaseAt.UTC().Format(time.RFC3339Nano))), true
	}
	return decision{}, false
}

// segmentTaskError reports whether a file execution's error can come from its RegisterSegment task:
// States.TaskFailed when the segment execution failed, timed out or was aborted, a StepFunctions.*
// error when its start failed. Any other error (Split's, a limit) failed the file with no segment
// running. https://docs.aws.amazon.com/step-functions/latest/dg/connect-stepfunctions.html
func segmentTaskError(name string) bool {
	return name == "States.TaskFailed" || strings.HasPrefix(name, "StepFunctions.")
}

// outcomeUnknown reports whether a finished segment execution may have left a Register invocation
// running: it was stopped (TIMED_OUT, ABORTED), or it failed on an attempt of unknown outcome.
func outcomeUnknown(st *sfn.DescribeExecutionOutput) bool {
	if st.Status == sfntypes.ExecutionStatusTimedOut || st.Status == sfntypes.ExecutionStatusAborted {
		return true
	}
	return st.Status == sfntypes.ExecutionStatusFailed && slices.Contains(outcomeUnknownErrors, aws.ToString(st.Error))
}

// stopSegment stops a segment execution that outlived its stopped file, and holds the file's
// message: the segment stops now, so its Register invocations end by now + the bound.
func (h *Handler) stopSegment(ctx context.Context, d *delivery, child string, attrs []any) decision {
	if _, err := h.sfn.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: aws.String(child)}); err != nil {
		return h.serviceError(ctx, d, "stop the stopped file's segment execution", fmt.Errorf("stop %s: %w", child, err))
	}
	return h.stoppedHold(ctx, d, h.cfg.RegisterTimeout+releaseMargin, "the segment execution was still running: stop requested", attrs)
}

// stoppedHold holds a stopped file's message for left, at most the longest wait.
func (h *Handler) stoppedHold(ctx context.Context, d *delivery, left time.Duration, reason string, attrs []any) decision {
	wait := min(time.Duration(math.Ceil(left.Seconds()))*time.Second, h.cfg.MaxWait)
	d.log.InfoContext(ctx, "waiting for stopped file's invocations to end", append(attrs,
		"reason", reason, "registerTimeoutSeconds", h.cfg.RegisterTimeout.Seconds(), "nextWaitSeconds", wait.Seconds())...)
	d.count(metrics.StoppedFileHolds)
	return h.hold(ctx, d, wait)
}

// errNoSegmentTask is a history too long to search for the segment task.
var errNoSegmentTask = errors.New("no RegisterSegment task among the newest events searched")

// segmentRef is a file execution's newest segment execution: its ARN, and whether the ARN was
// computed from the child's name rather than read from the history (the child may not exist).
type segmentRef struct {
	arn    string
	byName bool
}

// segmentChild returns the segment execution the file execution started last, or a zero segmentRef
// if it started none. It reads the history newest first and stops at the first of:
//   - a TaskSubmitted event of the startExecution.sync:2 task, whose output is the StartExecution
//     response, {"ExecutionArn": ..., ...};
//   - a MapIterationStarted event of the Segments Map: the iteration's child, if it started one, is
//     named from the file's name, the iteration's index and the redrive count of that attempt
//     (pipeline.SegmentExecutionName). This finds a child whose start succeeded although the file
//     saw an error, which no TaskSubmitted event records.
//
// It returns a zero segmentRef, with no further page read, at an event of the Register loop a file
// of one segment runs itself (inlineLoopStates): that file has no segment execution.
//
// redriveCount is the file execution's; each ExecutionRedriven event passed on the way back lowers
// it by one. https://docs.aws.amazon.com/step-functions/latest/apireference/API_GetExecutionHistory.html
func (h *Handler) segmentChild(ctx context.Context, fileARN string, redriveCount int32) (segmentRef, error) {
	in := &sfn.GetExecutionHistoryInput{
		ExecutionArn:         aws.String(fileARN),
		ReverseOrder:         true,
		MaxResults:           historyPageSize,
		IncludeExecutionData: aws.Bool(true),
	}
	fileName := fileARN[strings.LastIndex(fileARN, ":")+1:]
	for range maxHistoryPages {
		out, err := h.sfn.GetExecutionHistory(ctx, in)
		if err != nil {
			return segmentRef{}, fmt.Errorf("get execution history %s: %w", fileARN, err)
		}
		for _, ev := range out.Events {
			if inlineLoop(ev) {
				return segmentRef{}, nil
			}
			switch ev.Type {
			case sfntypes.HistoryEventTypeExecutionRedriven:
				redriveCount--
			case sfntypes.HistoryEventTypeTaskSubmitted:
				td := ev.TaskSubmittedEventDetails
				if td == nil || aws.ToString(td.Resource) != segmentTaskResource {
					continue
				}
				arn, err := h.childARN(fileARN, ev.Id, aws.ToString(td.Output))
				return segmentRef{arn: arn}, err
			case sfntypes.HistoryEventTypeMapIterationStarted:
				md := ev.MapIterationStartedEventDetails
				if md == nil || aws.ToString(md.Name) != segmentsMapState || redriveCount < 0 {
					continue
				}
				name := pipeline.SegmentExecutionName(fileName, int(md.Index), int(redriveCount))
				return segmentRef{arn: h.cfg.segmentExecutionPrefix + name, byName: true}, nil
			}
		}
		if aws.ToString(out.NextToken) == "" {
			return segmentRef{}, nil
		}
		in.NextToken = out.NextToken
	}
	return segmentRef{}, fmt.Errorf("execution %s: %w (%d)", fileARN, errNoSegmentTask, maxHistoryPages*historyPageSize)
}

// inlineLoop reports whether a file execution's history event is a state of the Register loop a
// file of one segment runs itself.
func inlineLoop(ev sfntypes.HistoryEvent) bool {
	if d := ev.StateEnteredEventDetails; d != nil && slices.Contains(inlineLoopStates, aws.ToString(d.Name)) {
		return true
	}
	d := ev.StateExitedEventDetails
	return d != nil && slices.Contains(inlineLoopStates, aws.ToString(d.Name))
}

// childARN reads the segment execution's ARN from a TaskSubmitted output and checks that it is an
// execution of the tenant's segment state machine (the only one the role may describe or stop).
func (h *Handler) childARN(fileARN string, eventID int64, output string) (string, error) {
	var started struct {
		ExecutionArn string `json:"ExecutionArn"`
	}
	if err := json.Unmarshal([]byte(output), &started); err != nil || started.ExecutionArn == "" {
		return "", fmt.Errorf("execution %s, event %d: TaskSubmitted output has no ExecutionArn (%d bytes)", fileARN, eventID, len(output))
	}
	if !strings.HasPrefix(started.ExecutionArn, h.cfg.segmentExecutionPrefix) {
		return "", fmt.Errorf("execution %s, event %d: segment execution %s is not an execution of the segment state machine %s",
			fileARN, eventID, started.ExecutionArn, h.cfg.SegmentStateMachineARN)
	}
	return started.ExecutionArn, nil
}
