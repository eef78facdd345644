package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// iterationStarted is the MapIterationStarted event of iteration index of the file's Segments Map.
func iterationStarted(index int32) sfntypes.HistoryEvent {
	return sfntypes.HistoryEvent{Type: sfntypes.HistoryEventTypeMapIterationStarted,
		MapIterationStartedEventDetails: &sfntypes.MapIterationEventDetails{Name: aws.String("Segments"), Index: index}}
}

// lostStart is a file history whose segment iteration index failed to start its child as far as
// the file knows (the StartExecution answer was lost, so no TaskSubmitted), ending in end.
func lostStart(index int32, end sfntypes.HistoryEventType) []sfntypes.HistoryEvent {
	evs := append(splitEvents(), iterationStarted(index), event(sfntypes.HistoryEventTypeTaskStateEntered),
		event(sfntypes.HistoryEventTypeTaskScheduled), event(sfntypes.HistoryEventTypeTaskStarted),
		event(sfntypes.HistoryEventTypeTaskFailed), event(sfntypes.HistoryEventTypeMapIterationFailed),
		event(sfntypes.HistoryEventTypeMapStateFailed))
	return append(evs, event(end))
}

// named is the ARN of the segment execution the file evID1 names for segment index at redrive r.
func named(index, r int) string {
	return testSegPrefix + pipeline.SegmentExecutionName(evID1, index, r)
}

// A FAILED file is held like a stopped one when its last Register attempt ended without a known
// outcome, or when a segment execution it never recorded still runs. REGISTER_TIMEOUT_SECONDS is
// 20 here and the margin 30 s, so the bound is the segment's stopDate + 50 s; MAX_WAIT_SECONDS is 60.
func TestFailedFileHold(t *testing.T) {
	const reasonAmbiguous = "the failed file's last Register attempt ended without a known outcome (Lambda.ClientExecutionTimeoutException): its invocation may still be running"
	halt := map[string]string{pipeline.EnvOnFailure: pipeline.OnFailureHalt}
	failed := sfntypes.ExecutionStatusFailed
	seg := func(errName string, ago time.Duration) childState {
		return childState{status: failed, stopAgo: ago, errName: errName}
	}
	tests := []struct {
		name         string
		env          map[string]string
		fileError    string // the file execution's error; States.TaskFailed if empty
		redriveCount int32
		history      []sfntypes.HistoryEvent
		children     map[string]childState
		marker       bool
		wantRelease  bool
		wantWait     int32
		wantStops    []string
		wantPages    int
		wantMetrics  map[string]float64
		wantLog      *wantLog
	}{
		{
			name:        "last attempt timed out on the client 10 s ago: held for the rest of the bound",
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionFailed, child0, child1),
			children:    map[string]childState{child0: {status: sfntypes.ExecutionStatusSucceeded, stopAgo: time.Hour}, child1: seg("Lambda.ClientExecutionTimeoutException", 10*time.Second)},
			wantWait:    40,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1, metrics.FailedFiles: 0},
			wantLog: &wantLog{"INFO", "waiting for stopped file's invocations to end", map[string]any{
				"reason": reasonAmbiguous, "status": "FAILED", "segmentExecutionArn": child1, "segmentStatus": "FAILED",
				"segmentError": "Lambda.ClientExecutionTimeoutException", "stoppedAt": "2024-05-01T08:59:50Z", "releaseAt": "2024-05-01T09:00:40Z",
				"nextWaitSeconds": 40.0}},
		},
		{
			name:        "last attempt timed out on the client, at the bound: released",
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionFailed, child1),
			children:    map[string]childState{child1: seg("Lambda.ClientExecutionTimeoutException", 50*time.Second)},
			wantRelease: true,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1, metrics.StoppedFileHolds: 0},
		},
		{
			name:        "last attempt an SDK client error 1 s ago: held",
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionFailed, child1),
			children:    map[string]childState{child1: seg("Lambda.SdkClientException", time.Second)},
			wantWait:    49,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1},
		},
		{
			name:        "last attempt a Lambda service error 1 s ago: held",
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionFailed, child1),
			children:    map[string]childState{child1: seg("Lambda.ServiceException", time.Second)},
			wantWait:    49,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1},
		},
		{
			name:        "segment timed out 5 s ago under a failed file: held",
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionFailed, child1),
			children:    map[string]childState{child1: {status: sfntypes.ExecutionStatusTimedOut, stopAgo: 5 * time.Second}},
			wantWait:    45,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1},
		},
		{
			name:        "last attempt returned an error (function timeout): released at once",
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionFailed, child1),
			children:    map[string]childState{child1: seg("Sandbox.Timedout", time.Second)},
			wantRelease: true,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1, metrics.StoppedFileHolds: 0},
		},
		{
			name:        "failed in Split: released at once, history not read",
			fileError:   pipeline.ErrValidation,
			history:     append(splitEvents()[:4], event(sfntypes.HistoryEventTypeExecutionFailed)),
			wantRelease: true,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1},
		},
		{
			name:        "start's answer lost, child running unrecorded: found by name, stopped, held",
			fileError:   "StepFunctions.SdkClientException",
			history:     lostStart(0, sfntypes.HistoryEventTypeExecutionFailed),
			children:    map[string]childState{named(0, 0): {status: sfntypes.ExecutionStatusRunning}},
			wantWait:    50,
			wantStops:   []string{named(0, 0)},
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1, metrics.FailedFiles: 0},
			wantLog: &wantLog{"INFO", "waiting for stopped file's invocations to end", map[string]any{
				"reason": reasonStopped, "segmentExecutionArn": named(0, 0), "segmentStatus": "RUNNING"}},
		},
		{
			name:        "start failed and no child by that name: released",
			fileError:   "StepFunctions.ExecutionLimitExceededException",
			history:     lostStart(3, sfntypes.HistoryEventTypeExecutionFailed),
			wantRelease: true,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1},
		},
		{
			name:         "redriven file: the child of this redrive is found by name",
			fileError:    "StepFunctions.SdkClientException",
			redriveCount: 1,
			history: append(append(fileHistory(sfntypes.HistoryEventTypeExecutionFailed, child1),
				event(sfntypes.HistoryEventTypeExecutionRedriven)), lostStart(1, sfntypes.HistoryEventTypeExecutionFailed)[len(splitEvents()):]...),
			children:    map[string]childState{child1: seg("PermanentError", time.Hour), named(1, 1): {status: sfntypes.ExecutionStatusRunning}},
			wantWait:    50,
			wantStops:   []string{named(1, 1)},
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1},
		},
		{
			name:         "redrive that started no segment: the child before it is named with the earlier count",
			fileError:    "StepFunctions.SdkClientException",
			redriveCount: 1,
			history: append(lostStart(2, sfntypes.HistoryEventTypeExecutionFailed),
				event(sfntypes.HistoryEventTypeExecutionRedriven), event(sfntypes.HistoryEventTypeExecutionFailed)),
			children:    map[string]childState{named(2, 0): {status: sfntypes.ExecutionStatusRunning}},
			wantWait:    50,
			wantStops:   []string{named(2, 0)},
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1},
		},
		{
			// A file of one segment runs its Register loop itself: its own error says the outcome.
			name:        "a file of one segment, its own last Register attempt timed out on the client 1 s ago: held by its own stop",
			fileError:   "Lambda.ClientExecutionTimeoutException",
			history:     inlineHistory(sfntypes.HistoryEventTypeExecutionFailed, 3),
			wantWait:    49,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1, metrics.FailedFiles: 0},
			wantLog: &wantLog{"INFO", "waiting for stopped file's invocations to end", map[string]any{
				"reason": "the failed file's last attempt of its own task ended without a known outcome (Lambda.ClientExecutionTimeoutException): its invocation may still be running"}},
		},
		{
			name:        "a file of one segment, its own Register returned an error: released at once",
			fileError:   pipeline.ErrPermanent,
			history:     inlineHistory(sfntypes.HistoryEventTypeExecutionFailed, 3),
			wantRelease: true,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1, metrics.StoppedFileHolds: 0},
		},
		{
			name:        "halt, skip marker, ambiguous last attempt 10 s ago: held",
			env:         halt,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionFailed, child1),
			children:    map[string]childState{child1: seg("Lambda.ClientExecutionTimeoutException", 10*time.Second)},
			marker:      true,
			wantWait:    40,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1, metrics.Skipped: 0},
		},
		{
			name:        "halt without a skip marker: blocked, history not read",
			env:         halt,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionFailed, child1),
			children:    map[string]childState{child1: seg("Lambda.ClientExecutionTimeoutException", 10*time.Second)},
			wantWait:    900,
			wantMetrics: map[string]float64{metrics.Blocked: 1, metrics.StoppedFileHolds: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.env)
			r.sfn.setStopped(arn1, failed, testStart.Add(-time.Second))
			r.sfn.execs[arn1].redriveCount = tt.redriveCount
			if tt.fileError != "" {
				r.sfn.execs[arn1].errName = tt.fileError
			}
			r.sfn.setHistory(arn1, tt.history...)
			for arn, c := range tt.children {
				if c.status == sfntypes.ExecutionStatusRunning {
					r.sfn.set(arn, c.status)
				} else {
					r.sfn.setStopped(arn, c.status, testStart.Add(-c.stopAgo))
				}
				if c.errName != "" {
					r.sfn.execs[arn].errName = c.errName
				}
			}
			if tt.marker {
				r.s3.objects[testBucket+"/control/acme/skip/"+evID1] = "OPS-9"
			}

			resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", eventBody(t, evID1, key1), 3)}})
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}

			wantFailures, wantChanges := []string{"m1"}, []visibilityChange{{"rh-m1", tt.wantWait}}
			if tt.wantRelease {
				wantFailures, wantChanges = []string{}, nil
			}
			if got := r.failures(resp); !slices.Equal(got, wantFailures) {
				t.Errorf("got batch item failures %v, want %v", got, wantFailures)
			}
			if !slices.Equal(r.sqs.changes, wantChanges) {
				t.Errorf("got visibility changes %v, want %v", r.sqs.changes, wantChanges)
			}
			if !slices.Equal(r.sfn.stops, tt.wantStops) {
				t.Errorf("got StopExecution calls %v, want %v", r.sfn.stops, tt.wantStops)
			}
			if got := len(r.sfn.historyCalls); got != tt.wantPages {
				t.Errorf("got %d GetExecutionHistory calls, want %d", got, tt.wantPages)
			}
			sums := r.metricSums(t)
			for name, want := range tt.wantMetrics {
				if got := sums[name]; got != want {
					t.Errorf("got metric %s = %v, want %v", name, got, want)
				}
			}
			if wl := tt.wantLog; wl != nil {
				l := r.findLog(t, wl.level, wl.msg)
				for k, want := range wl.attrs {
					if got := l[k]; got != want {
						t.Errorf("log %q: got %s = %v, want %v", wl.msg, k, got, want)
					}
				}
			}
		})
	}
}
