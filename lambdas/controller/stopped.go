package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
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
// least the later of the two stop dates plus the Register timeout plus releaseMargin. A FAILED
// execution needs no such wait: it failed because a task returned, so nothing of it still runs.
const (
	// releaseMargin covers the clock skew between Step Functions and Lambda and the time a timed-out
	// invocation takes to be torn down.
	releaseMargin = 30 * time.Second
	// segmentTaskResource is the taskSubmittedEventDetails.resource of the RegisterSegment task.
	segmentTaskResource = "startExecution.sync:2"
	// historyPageSize is how many events one GetExecutionHistory call reads, newest first. The
	// newest RegisterSegment task is within the first page in every state of the file workflow; a
	// file stopped before its first segment has a history of a few pages at most.
	historyPageSize = 25
	// maxHistoryPages bounds the search for the segment task. A longer search is a fault.
	maxHistoryPages = 40
)

// stopped reports whether the stopped (TIMED_OUT or ABORTED) file execution's message must still be
// held because an invocation of the file may be running, and if so the decision that holds it. It
// never releases on a guess: anything it cannot read holds the message.
func (h *Handler) stopped(ctx context.Context, d *delivery, arn string, st *sfn.DescribeExecutionOutput) (decision, bool) {
	if st.Status != sfntypes.ExecutionStatusTimedOut && st.Status != sfntypes.ExecutionStatusAborted {
		return decision{}, false
	}
	if st.StopDate == nil {
		return h.serviceError(ctx, d, "read the stopped file's stop date", fmt.Errorf("execution %s is %s without a stopDate", arn, st.Status)), true
	}
	stoppedAt := *st.StopDate

	child, err := h.segmentChild(ctx, arn)
	if err != nil {
		return h.serviceError(ctx, d, "find the stopped file's segment execution", err), true
	}
	attrs := []any{"status", string(st.Status), "executionArn", arn}
	if child != "" {
		cst, err := h.describe(ctx, child)
		if err != nil {
			return h.serviceError(ctx, d, "describe the stopped file's segment execution", fmt.Errorf("describe %s: %w", child, err)), true
		}
		attrs = append(attrs, "segmentExecutionArn", child, "segmentStatus", string(cst.Status))
		if running(cst.Status) {
			return h.stopSegment(ctx, d, child, attrs), true
		}
		if cst.StopDate == nil {
			return h.serviceError(ctx, d, "read the segment execution's stop date", fmt.Errorf("execution %s is %s without a stopDate", child, cst.Status)), true
		}
		if cst.StopDate.After(stoppedAt) {
			stoppedAt = *cst.StopDate
		}
	}
	releaseAt := stoppedAt.Add(h.cfg.RegisterTimeout + releaseMargin)
	if left := releaseAt.Sub(h.now()); left > 0 {
		return h.stoppedHold(ctx, d, left, "a Register invocation of the stopped file may still be running",
			append(attrs, "stoppedAt", stoppedAt.UTC().Format(time.RFC3339Nano), "releaseAt", releaseAt.UTC().Format(time.RFC3339Nano))), true
	}
	return decision{}, false
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

// segmentChild returns the ARN of the segment execution the file execution started last, or ""
// if it started none. It reads the history newest first: the newest TaskSubmitted event of the
// startExecution.sync:2 task carries the StartExecution response, {"ExecutionArn": ..., ...}.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_GetExecutionHistory.html
func (h *Handler) segmentChild(ctx context.Context, fileARN string) (string, error) {
	in := &sfn.GetExecutionHistoryInput{
		ExecutionArn:         aws.String(fileARN),
		ReverseOrder:         true,
		MaxResults:           historyPageSize,
		IncludeExecutionData: aws.Bool(true),
	}
	for range maxHistoryPages {
		out, err := h.sfn.GetExecutionHistory(ctx, in)
		if err != nil {
			return "", fmt.Errorf("get execution history %s: %w", fileARN, err)
		}
		for _, ev := range out.Events {
			td := ev.TaskSubmittedEventDetails
			if ev.Type != sfntypes.HistoryEventTypeTaskSubmitted || td == nil || aws.ToString(td.Resource) != segmentTaskResource {
				continue
			}
			return h.childARN(fileARN, ev.Id, aws.ToString(td.Output))
		}
		if aws.ToString(out.NextToken) == "" {
			return "", nil
		}
		in.NextToken = out.NextToken
	}
	return "", fmt.Errorf("execution %s: %w (%d)", fileARN, errNoSegmentTask, maxHistoryPages*historyPageSize)
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
