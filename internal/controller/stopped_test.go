package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Segment executions of the file arn1: child0 ran first, child1 after it.
const (
	child0 = testSegPrefix + evID1 + "-0"
	child1 = testSegPrefix + evID1 + "-1"
)

const (
	reasonMayRun  = "a Register invocation of the stopped file may still be running"
	reasonStopped = "the segment execution was still running: stop requested"
)

func event(typ sfntypes.HistoryEventType) sfntypes.HistoryEvent {
	return sfntypes.HistoryEvent{Type: typ}
}

// submitted is the TaskSubmitted event of a task of resource whose response was output.
func submitted(resource, output string) sfntypes.HistoryEvent {
	return sfntypes.HistoryEvent{Type: sfntypes.HistoryEventTypeTaskSubmitted, TaskSubmittedEventDetails: &sfntypes.TaskSubmittedEventDetails{
		ResourceType: aws.String("states"), Resource: aws.String(resource), Output: aws.String(output)}}
}

// startOutput is the StartExecution response Step Functions records for a started child.
func startOutput(arn string) string {
	return fmt.Sprintf(`{"ExecutionArn":%q,"SdkHttpMetadata":{"HttpStatusCode":200},"SdkResponseMetadata":{"RequestId":"r"},"StartDate":1714546800000}`, arn)
}

// splitEvents is the start of every file execution's history: Split, then the Segments Map.
func splitEvents() []sfntypes.HistoryEvent {
	return []sfntypes.HistoryEvent{
		event(sfntypes.HistoryEventTypeExecutionStarted), event(sfntypes.HistoryEventTypeTaskStateEntered),
		event(sfntypes.HistoryEventTypeTaskScheduled), event(sfntypes.HistoryEventTypeTaskStarted),
		event(sfntypes.HistoryEventTypeTaskSucceeded), event(sfntypes.HistoryEventTypeTaskStateExited),
		event(sfntypes.HistoryEventTypeMapStateEntered), event(sfntypes.HistoryEventTypeMapStateStarted),
	}
}

// segmentEvents is one RegisterSegment iteration that started child; done adds its end.
func segmentEvents(child string, done bool) []sfntypes.HistoryEvent {
	evs := []sfntypes.HistoryEvent{
		event(sfntypes.HistoryEventTypeMapIterationStarted), event(sfntypes.HistoryEventTypeTaskStateEntered),
		event(sfntypes.HistoryEventTypeTaskScheduled), event(sfntypes.HistoryEventTypeTaskStarted),
		submitted(segmentTaskResource, startOutput(child)),
	}
	if done {
		evs = append(evs, event(sfntypes.HistoryEventTypeTaskSucceeded), event(sfntypes.HistoryEventTypeTaskStateExited),
			event(sfntypes.HistoryEventTypeMapIterationSucceeded))
	}
	return evs
}

// inlineHistory is a file execution of one segment, which runs its Register loop itself, stopped
// in its Register task after invocations earlier ones (Register and NextChunks each), with no Map
// and no segment execution.
func inlineHistory(end sfntypes.HistoryEventType, invocations int) []sfntypes.HistoryEvent {
	entered := func(typ sfntypes.HistoryEventType, name string) sfntypes.HistoryEvent {
		return sfntypes.HistoryEvent{Type: typ, StateEnteredEventDetails: &sfntypes.StateEnteredEventDetails{Name: aws.String(name)}}
	}
	exited := func(typ sfntypes.HistoryEventType, name string) sfntypes.HistoryEvent {
		return sfntypes.HistoryEvent{Type: typ, StateExitedEventDetails: &sfntypes.StateExitedEventDetails{Name: aws.String(name)}}
	}
	task := func(name string, done bool) []sfntypes.HistoryEvent {
		evs := []sfntypes.HistoryEvent{entered(sfntypes.HistoryEventTypeTaskStateEntered, name),
			event(sfntypes.HistoryEventTypeTaskScheduled), event(sfntypes.HistoryEventTypeTaskStarted)}
		if done {
			evs = append(evs, event(sfntypes.HistoryEventTypeTaskSucceeded), exited(sfntypes.HistoryEventTypeTaskStateExited, name),
				entered(sfntypes.HistoryEventTypeChoiceStateEntered, "NextChunks"), exited(sfntypes.HistoryEventTypeChoiceStateExited, "NextChunks"))
		}
		return evs
	}
	evs := append(splitEvents()[:6], event(sfntypes.HistoryEventTypeChoiceStateEntered), event(sfntypes.HistoryEventTypeChoiceStateExited))
	name := "Register"
	for range invocations {
		evs = append(evs, task(name, true)...)
	}
	return append(append(evs, task(name, false)...), event(end))
}

// fileHistory is a file execution stopped while running its last segment of children.
func fileHistory(end sfntypes.HistoryEventType, children ...string) []sfntypes.HistoryEvent {
	evs := splitEvents()
	for i, c := range children {
		evs = append(evs, segmentEvents(c, i < len(children)-1)...)
	}
	return append(evs, event(end))
}

type childState struct {
	status  sfntypes.ExecutionStatus
	stopAgo time.Duration // before testStart; ignored while RUNNING
	errName string        // a FAILED execution's error; States.TaskFailed if empty
}

// A TIMED_OUT or ABORTED file is released only when none of its invocations can still run:
// now ≥ max(file stopDate, segment stopDate) + REGISTER_TIMEOUT_SECONDS (20 s here) + 30 s, and
// no segment execution RUNNING. MAX_WAIT_SECONDS is 60.
func TestStoppedFile(t *testing.T) {
	halt := map[string]string{pipeline.EnvOnFailure: pipeline.OnFailureHalt}
	skipKey := testBucket + "/control/acme/skip/" + evID1
	aborted := sfntypes.ExecutionStatusAborted
	timedOut := sfntypes.ExecutionStatusTimedOut
	ended := func(ago time.Duration) childState { return childState{status: aborted, stopAgo: ago} }
	tests := []struct {
		name        string
		env         map[string]string
		status      sfntypes.ExecutionStatus
		stopAgo     time.Duration // the file's stop date, before testStart
		history     []sfntypes.HistoryEvent
		children    map[string]childState
		marker      bool
		setup       func(r *rig)
		wantRelease bool
		wantWait    int32
		wantStops   []string
		wantPages   int // GetExecutionHistory calls
		wantErrors  int
		wantMetrics map[string]float64
		wantLog     *wantLog
		wantChild   sfntypes.ExecutionStatus // status of child1 afterwards, if set
	}{
		{
			name:        "stopped long ago: released",
			status:      aborted,
			stopAgo:     time.Hour,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child0, child1),
			children:    map[string]childState{child0: {status: sfntypes.ExecutionStatusSucceeded, stopAgo: 2 * time.Hour}, child1: ended(time.Hour)},
			wantRelease: true,
			wantPages:   1,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1, metrics.StoppedFileHolds: 0},
		},
		{
			name:        "timed out 10 s ago: held for the rest of the bound",
			status:      timedOut,
			stopAgo:     10 * time.Second,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionTimedOut, child0, child1),
			children:    map[string]childState{child0: {status: sfntypes.ExecutionStatusSucceeded, stopAgo: time.Hour}, child1: {status: sfntypes.ExecutionStatusTimedOut, stopAgo: 10 * time.Second}},
			wantWait:    40,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1, metrics.FailedFiles: 0, metrics.Waits: 0},
			wantLog: &wantLog{"INFO", "waiting for stopped file's invocations to end", map[string]any{
				"reason": reasonMayRun, "status": "TIMED_OUT", "segmentExecutionArn": child1, "segmentStatus": "TIMED_OUT",
				"nextWaitSeconds": 40.0, "registerTimeoutSeconds": 20.0, "key": key1, "executionName": evID1,
				"stoppedAt": "2024-05-01T08:59:50Z", "releaseAt": "2024-05-01T09:00:40Z"}},
		},
		{
			name:        "one second before the bound: held 1 s",
			status:      aborted,
			stopAgo:     49 * time.Second,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child1),
			children:    map[string]childState{child1: ended(49 * time.Second)},
			wantWait:    1,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1},
		},
		{
			name:        "at the bound: released",
			status:      aborted,
			stopAgo:     50 * time.Second,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child1),
			children:    map[string]childState{child1: ended(50 * time.Second)},
			wantRelease: true,
			wantPages:   1,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1, metrics.StoppedFileHolds: 0},
		},
		{
			name:        "segment execution still running: stopped, and held for the whole bound",
			status:      aborted,
			stopAgo:     time.Hour,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child0, child1),
			children:    map[string]childState{child0: {status: sfntypes.ExecutionStatusSucceeded, stopAgo: 2 * time.Hour}, child1: {status: sfntypes.ExecutionStatusRunning}},
			wantWait:    50,
			wantStops:   []string{child1},
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1, metrics.FailedFiles: 0},
			wantLog: &wantLog{"INFO", "waiting for stopped file's invocations to end", map[string]any{
				"reason": reasonStopped, "segmentExecutionArn": child1, "segmentStatus": "RUNNING", "nextWaitSeconds": 50.0}},
			wantChild: aborted,
		},
		{
			name:        "segment execution stopped later than its file: bound from the segment's stop",
			status:      aborted,
			stopAgo:     5 * time.Minute,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child0, child1),
			children:    map[string]childState{child0: {status: sfntypes.ExecutionStatusSucceeded, stopAgo: time.Hour}, child1: ended(30 * time.Second)},
			wantWait:    20,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1},
			wantLog: &wantLog{"INFO", "waiting for stopped file's invocations to end", map[string]any{
				"reason": reasonMayRun, "segmentExecutionArn": child1, "stoppedAt": "2024-05-01T08:59:30Z", "nextWaitSeconds": 20.0}},
		},
		{
			name:    "a newer task of another resource is not the segment task",
			status:  aborted,
			stopAgo: time.Hour,
			history: append(fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child0)[:13],
				submitted("startExecution.waitForTaskToken", startOutput(child1)), event(sfntypes.HistoryEventTypeExecutionAborted)),
			children:    map[string]childState{child0: ended(time.Hour), child1: {status: sfntypes.ExecutionStatusRunning}},
			wantRelease: true,
			wantPages:   1,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1},
		},
		{
			name:        "stopped during Split, long ago: released",
			status:      timedOut,
			stopAgo:     time.Hour,
			history:     append(splitEvents()[:4], event(sfntypes.HistoryEventTypeExecutionTimedOut)),
			wantRelease: true,
			wantPages:   1,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1},
		},
		{
			name:        "stopped during Split 5 s ago: held",
			status:      aborted,
			stopAgo:     5 * time.Second,
			history:     append(splitEvents()[:4], event(sfntypes.HistoryEventTypeExecutionAborted)),
			wantWait:    45,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1},
			wantLog:     &wantLog{"INFO", "waiting for stopped file's invocations to end", map[string]any{"reason": reasonMayRun, "nextWaitSeconds": 45.0}},
		},
		{
			name:    "segment task beyond the first page of history is found",
			status:  aborted,
			stopAgo: time.Hour,
			history: func() []sfntypes.HistoryEvent {
				evs := fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child0, child1)
				evs = evs[:len(evs)-1]
				for range 30 {
					evs = append(evs, event(sfntypes.HistoryEventTypeTaskStateAborted))
				}
				return append(evs, event(sfntypes.HistoryEventTypeExecutionAborted))
			}(),
			children:    map[string]childState{child0: ended(2 * time.Hour), child1: {status: sfntypes.ExecutionStatusRunning}},
			wantWait:    50,
			wantStops:   []string{child1},
			wantPages:   2,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1},
			wantChild:   aborted,
		},
		{
			name:    "no segment task within the 1,000 newest events: held, ERROR",
			status:  aborted,
			stopAgo: time.Hour,
			history: func() []sfntypes.HistoryEvent {
				evs := splitEvents()
				for range 1000 {
					evs = append(evs, event(sfntypes.HistoryEventTypeTaskFailed))
				}
				return append(evs, event(sfntypes.HistoryEventTypeExecutionAborted))
			}(),
			wantWait:    4, // the backoff of the third delivery
			wantPages:   40,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.ServiceErrors: 1, metrics.FailedFiles: 0},
		},
		{
			// A file of one segment runs its Register loop itself: no segment execution to look
			// for, and its last invocation is bounded by the file's own stop. The search ends at the
			// loop's newest event, however long the history.
			name:        "a file of one segment, aborted 10 s ago in its own Register loop: held by its own stop, no child",
			status:      aborted,
			stopAgo:     10 * time.Second,
			history:     inlineHistory(sfntypes.HistoryEventTypeExecutionAborted, 200),
			wantWait:    40,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1, metrics.FailedFiles: 0, metrics.ServiceErrors: 0},
			wantLog:     &wantLog{"INFO", "waiting for stopped file's invocations to end", map[string]any{"reason": reasonMayRun, "nextWaitSeconds": 40.0}},
		},
		{
			name:        "a file of one segment, timed out long ago in its own Register loop: released",
			status:      timedOut,
			stopAgo:     time.Hour,
			history:     inlineHistory(sfntypes.HistoryEventTypeExecutionTimedOut, 200),
			wantRelease: true,
			wantPages:   1,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1, metrics.ServiceErrors: 0},
		},
		{
			name:        "long wait capped at the longest wait",
			env:         map[string]string{pipeline.EnvRegisterTimeoutSeconds: "900"},
			status:      aborted,
			stopAgo:     10 * time.Second,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child1),
			children:    map[string]childState{child1: ended(10 * time.Second)},
			wantWait:    60,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1},
		},
		{
			name:        "history throttled: held, never released blindly",
			status:      aborted,
			stopAgo:     time.Hour,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child1),
			children:    map[string]childState{child1: ended(time.Hour)},
			setup:       func(r *rig) { r.sfn.historyErrs = []error{throttled()} },
			wantWait:    4, // the backoff of the third delivery
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.ServiceErrors: 1, metrics.FailedFiles: 0, metrics.StoppedFileHolds: 0},
			wantLog:     &wantLog{"WARN", "could not find the stopped file's segment execution; message kept", nil},
		},
		{
			name:        "history denied: held, ERROR",
			status:      aborted,
			stopAgo:     time.Hour,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child1),
			children:    map[string]childState{child1: ended(time.Hour)},
			setup:       func(r *rig) { r.sfn.historyErrs = []error{accessDenied()} },
			wantWait:    4, // the backoff of the third delivery
			wantPages:   1,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.ServiceErrors: 1, metrics.FailedFiles: 0},
		},
		{
			name:        "segment execution cannot be described: held",
			status:      aborted,
			stopAgo:     time.Hour,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child1),
			wantWait:    4, // the backoff of the third delivery
			wantPages:   1,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.ServiceErrors: 1, metrics.FailedFiles: 0},
			wantLog:     &wantLog{"ERROR", "could not describe the stopped file's segment execution", nil},
		},
		{
			name:        "StopExecution of the running segment throttled: held",
			status:      aborted,
			stopAgo:     time.Hour,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child1),
			children:    map[string]childState{child1: {status: sfntypes.ExecutionStatusRunning}},
			setup:       func(r *rig) { r.sfn.stopErrs = []error{throttled()} },
			wantWait:    4, // the backoff of the third delivery
			wantStops:   []string{child1},
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.ServiceErrors: 1, metrics.StoppedFileHolds: 0},
			wantLog:     &wantLog{"WARN", "could not stop the stopped file's segment execution", nil},
			wantChild:   sfntypes.ExecutionStatusRunning,
		},
		{
			name:        "segment execution of another state machine: held, ERROR",
			status:      aborted,
			stopAgo:     time.Hour,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, testExecPrefix+"other"),
			children:    map[string]childState{testExecPrefix + "other": ended(time.Hour)},
			wantWait:    4, // the backoff of the third delivery
			wantPages:   1,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.ServiceErrors: 1, metrics.FailedFiles: 0},
		},
		{
			name:        "halt, skip marker, timed out 10 s ago: held",
			env:         halt,
			status:      timedOut,
			stopAgo:     10 * time.Second,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionTimedOut, child1),
			children:    map[string]childState{child1: {status: sfntypes.ExecutionStatusTimedOut, stopAgo: 10 * time.Second}},
			marker:      true,
			wantWait:    40,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1, metrics.Skipped: 0, metrics.Blocked: 0},
			wantLog:     &wantLog{"INFO", "waiting for stopped file's invocations to end", map[string]any{"policy": nil, "reason": reasonMayRun}},
		},
		{
			name:        "halt, skip marker, segment still running: stopped and held",
			env:         halt,
			status:      aborted,
			stopAgo:     time.Hour,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child1),
			children:    map[string]childState{child1: {status: sfntypes.ExecutionStatusRunning}},
			marker:      true,
			wantWait:    50,
			wantStops:   []string{child1},
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.StoppedFileHolds: 1, metrics.Skipped: 0},
			wantChild:   aborted,
		},
		{
			name:        "halt, skip marker, stopped long ago: skipped",
			env:         halt,
			status:      timedOut,
			stopAgo:     time.Hour,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionTimedOut, child1),
			children:    map[string]childState{child1: ended(time.Hour)},
			marker:      true,
			wantRelease: true,
			wantPages:   1,
			wantMetrics: map[string]float64{metrics.Skipped: 1, metrics.StoppedFileHolds: 0},
		},
		{
			name:        "halt without a skip marker: blocked, history not read",
			env:         halt,
			status:      aborted,
			stopAgo:     5 * time.Second,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child1),
			children:    map[string]childState{child1: {status: sfntypes.ExecutionStatusRunning}},
			wantWait:    900,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.Blocked: 1, metrics.StoppedFileHolds: 0},
			wantChild:   sfntypes.ExecutionStatusRunning,
		},
		{
			name:        "failed 1 s ago in a segment that failed on a returned error: released at once",
			status:      sfntypes.ExecutionStatusFailed,
			stopAgo:     time.Second,
			history:     fileHistory(sfntypes.HistoryEventTypeExecutionFailed, child1),
			children:    map[string]childState{child1: {status: sfntypes.ExecutionStatusFailed, stopAgo: time.Second}},
			wantRelease: true,
			wantPages:   1,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1, metrics.StoppedFileHolds: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.env)
			r.sfn.setStopped(arn1, tt.status, testStart.Add(-tt.stopAgo))
			r.sfn.setHistory(arn1, tt.history...)
			for arn, c := range tt.children {
				if c.status == sfntypes.ExecutionStatusRunning {
					r.sfn.set(arn, c.status)
				} else {
					r.sfn.setStopped(arn, c.status, testStart.Add(-c.stopAgo))
				}
			}
			if tt.marker {
				r.s3.objects[skipKey] = "OPS-9"
			}
			if tt.setup != nil {
				tt.setup(r)
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
			for i, in := range r.sfn.historyCalls {
				if aws.ToString(in.ExecutionArn) != arn1 || !in.ReverseOrder || in.MaxResults != 25 {
					t.Errorf("GetExecutionHistory call %d: got arn %s, reverseOrder %v, maxResults %d; want %s, true, 25",
						i, aws.ToString(in.ExecutionArn), in.ReverseOrder, in.MaxResults, arn1)
				}
			}
			if got := r.countLevel(t, "ERROR"); got != tt.wantErrors {
				t.Errorf("got %d ERROR log lines, want %d; logs:\n%v", got, tt.wantErrors, r.logs(t))
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
			if tt.wantChild != "" {
				if got := r.sfn.execs[child1].status; got != tt.wantChild {
					t.Errorf("got segment execution %s, want %s", got, tt.wantChild)
				}
			}
		})
	}
}

// The hold ends: a file aborted while its segment ran is held until the segment is stopped and
// the bound has passed, then released once, with one ERROR line.
func TestStoppedFileReleasedAfterTheBound(t *testing.T) {
	r := newRig(t, nil)
	r.sfn.setStopped(arn1, sfntypes.ExecutionStatusAborted, testStart.Add(-time.Minute))
	r.sfn.setHistory(arn1, fileHistory(sfntypes.HistoryEventTypeExecutionAborted, child0, child1)...)
	r.sfn.setStopped(child0, sfntypes.ExecutionStatusSucceeded, testStart.Add(-2*time.Minute))
	r.sfn.set(child1, sfntypes.ExecutionStatusRunning)
	body := eventBody(t, evID1, key1)

	steps := []struct {
		advance     time.Duration
		wantRelease bool
	}{
		{0, false},                // child1 RUNNING: stopped now (09:00:00), held 50 s
		{49 * time.Second, false}, // 09:00:49: 1 s left
		{time.Second, true},       // 09:00:50: released
	}
	for i, s := range steps {
		r.mu.Lock()
		r.now = r.now.Add(s.advance)
		r.mu.Unlock()
		resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, i+1)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(resp.BatchItemFailures) == 0; got != s.wantRelease {
			t.Errorf("delivery %d at %s: got released %v, want %v", i+1, r.clock().Format(time.TimeOnly), got, s.wantRelease)
		}
	}
	if got, want := r.sqs.changes, []visibilityChange{{"rh-m1", 50}, {"rh-m1", 1}}; !slices.Equal(got, want) {
		t.Errorf("got visibility changes %v, want %v", got, want)
	}
	if got, want := r.sfn.stops, []string{child1}; !slices.Equal(got, want) {
		t.Errorf("got StopExecution calls %v, want %v", got, want)
	}
	if got := r.countLevel(t, "ERROR"); got != 1 {
		t.Errorf("got %d ERROR lines, want 1 (the failed file, at release)", got)
	}
	if got := r.metricSums(t); got[metrics.StoppedFileHolds] != 2 || got[metrics.FailedFiles] != 1 {
		t.Errorf("got StoppedFileHolds %v and FailedFiles %v, want 2 and 1", got[metrics.StoppedFileHolds], got[metrics.FailedFiles])
	}
}
