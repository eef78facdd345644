package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// wakeEnv turns wake-up events on with the default 5-minute safety net, and a queue visibility
// timeout (MAX_WAIT_SECONDS) that has grown to hold it.
var wakeEnv = map[string]string{
	pipeline.EnvWakeEvents:       "true",
	pipeline.EnvMaxWaitSeconds:   "600",
	pipeline.EnvSafetyNetSeconds: "300",
}

const (
	wakeStateObject = testBucket + "/control/acme/wake.json"
	wakeDoneObject  = testBucket + "/control/acme/wake-done.json"
	statusEventID   = "315c1398-40ff-a850-213b-158f73e60175"
)

// statusPayload is the fixture status change event (an AWS example with this tenant's ARNs) for
// the execution name with status.
func statusPayload(t *testing.T, name, status string) json.RawMessage {
	t.Helper()
	s := strings.ReplaceAll(fixture(t, "status-change.json"), evID1, name)
	s = strings.Replace(s, `"status": "SUCCEEDED"`, fmt.Sprintf("%q: %q", "status", status), 1)
	return json.RawMessage(s)
}

func statusEvent(t *testing.T, name, status string) events.EventBridgeEvent {
	t.Helper()
	var ev events.EventBridgeEvent
	if err := json.Unmarshal(statusPayload(t, name, status), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// headQueue is the tenant's FIFO head message as SQS treats its receipt handles: only the handle
// of the current receive changes its visibility; an older one is rejected with
// ReceiptHandleIsInvalid, and any handle of a visible message with MessageNotInflight
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html).
type headQueue struct {
	mu      sync.Mutex
	current string // the current receive's handle; "" while the message is visible
	deleted bool
	changes []visibilityChange
	err     error // returned instead of any answer, when set
	// afterChange runs after a successful change, outside the lock.
	afterChange func(visibilityChange)
}

func (q *headQueue) receive(handle string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.current = handle
}

func (q *headQueue) visible() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.current == "" && !q.deleted
}

func (q *headQueue) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	if aws.ToString(in.QueueUrl) != testQueueURL {
		return nil, fmt.Errorf("wrong queue %s", aws.ToString(in.QueueUrl))
	}
	q.mu.Lock()
	c := visibilityChange{aws.ToString(in.ReceiptHandle), in.VisibilityTimeout}
	q.changes = append(q.changes, c)
	var err error
	switch {
	case q.err != nil:
		err = q.err
	case q.deleted:
		err = &sqstypes.ReceiptHandleIsInvalid{Message: aws.String("The input receipt handle is invalid.")}
	case q.current == "":
		err = &sqstypes.MessageNotInflight{Message: aws.String("The message is not in flight.")}
	case c.Receipt != q.current:
		err = &sqstypes.ReceiptHandleIsInvalid{Message: aws.String("The input receipt handle is invalid.")}
	case c.Seconds == 0:
		q.current = ""
	}
	hook := q.afterChange
	q.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if hook != nil {
		hook(c)
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// hookS3 runs afterPut once an object is stored.
type hookS3 struct {
	*fakeS3
	afterPut func(key string)
}

func (s *hookS3) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	out, err := s.fakeS3.PutObject(ctx, in, opts...)
	if err == nil && s.afterPut != nil {
		s.afterPut(aws.ToString(in.Key))
	}
	return out, err
}

// hookSFN runs afterDescribe once a DescribeExecution answer is computed.
type hookSFN struct {
	*fakeSFN
	afterDescribe func()
}

func (s *hookSFN) DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, opts ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	out, err := s.fakeSFN.DescribeExecution(ctx, in, opts...)
	if s.afterDescribe != nil {
		s.afterDescribe()
	}
	return out, err
}

type wakeRig struct {
	*rig
	q   *headQueue
	s3h *hookS3
	sfh *hookSFN
}

func newWakeRig(t *testing.T, env map[string]string) *wakeRig {
	t.Helper()
	all := maps.Clone(wakeEnv)
	maps.Copy(all, env)
	r := newRig(t, all)
	w := &wakeRig{rig: r, q: &headQueue{}, s3h: &hookS3{fakeS3: r.s3}, sfh: &hookSFN{fakeSFN: r.sfn}}
	r.h.sqs, r.h.s3, r.h.sfn = w.q, w.s3h, w.sfh
	return w
}

// deliver hands the head message (the event for key1, id evID1) to the controller as its
// receives'th receive, with receipt handle rh-<receives>, and deletes it if released.
func (w *wakeRig) deliver(t *testing.T, receives int) bool {
	t.Helper()
	msg := message("m1", eventBody(t, evID1, key1), receives)
	msg.ReceiptHandle = fmt.Sprintf("rh-%d", receives)
	w.q.receive(msg.ReceiptHandle)
	resp, err := w.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}})
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	released := len(resp.BatchItemFailures) == 0
	if released {
		w.q.mu.Lock()
		w.q.deleted = true
		w.q.mu.Unlock()
	}
	return released
}

func (w *wakeRig) wake(t *testing.T, name, status string) {
	t.Helper()
	if err := w.h.Wake(context.Background(), statusEvent(t, name, status)); err != nil {
		t.Fatalf("wake: got error %v, want none", err)
	}
}

func (w *wakeRig) putState(t *testing.T, name, handle string) {
	t.Helper()
	b, err := pipeline.EncodeWakeState(pipeline.WakeState{Version: 1, ExecutionName: name, ExecutionARN: testExecPrefix + name,
		MessageID: "m1", ReceiptHandle: handle, QueueURL: testQueueURL, WrittenAt: testStart})
	if err != nil {
		t.Fatal(err)
	}
	w.s3.objects[wakeStateObject] = string(b)
}

func (w *wakeRig) putDone(t *testing.T, name, status string) {
	t.Helper()
	b, err := pipeline.EncodeWakeDone(pipeline.WakeDone{Version: 1, ExecutionName: name, ExecutionARN: testExecPrefix + name,
		Status: status, EventID: statusEventID, WrittenAt: testStart})
	if err != nil {
		t.Fatal(err)
	}
	w.s3.objects[wakeDoneObject] = string(b)
}

func (w *wakeRig) state(t *testing.T) pipeline.WakeState {
	t.Helper()
	s, err := pipeline.DecodeWakeState([]byte(w.s3.objects[wakeStateObject]))
	if err != nil {
		t.Fatalf("wake state: %v", err)
	}
	return s
}

// checkMetrics compares the EMF sums of the named metrics.
func (w *wakeRig) checkMetrics(t *testing.T, want map[string]float64) {
	t.Helper()
	sums := w.metricSums(t)
	for name, v := range want {
		if got := sums[name]; got != v {
			t.Errorf("got metric %s = %v, want %v", name, got, v)
		}
	}
}

// The wake-up handler makes the head message visible only for the end of the execution it waits
// for, through the current receipt handle; everything else is harmless and never an error.
func TestWake(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(t *testing.T, w *wakeRig)
		event       string // status of the event for evID1; default SUCCEEDED
		wantChanges []visibilityChange
		wantVisible bool
		wantDone    string // status recorded in wake-done.json; "" none
		wantMetrics map[string]float64
		wantLog     wantLog
		wantErrors  int
	}{
		{
			name:        "match: recorded, then made visible",
			setup:       func(t *testing.T, w *wakeRig) { w.putState(t, evID1, "rh-1"); w.q.receive("rh-1") },
			wantChanges: []visibilityChange{{"rh-1", 0}},
			wantVisible: true,
			wantDone:    "SUCCEEDED",
			wantMetrics: map[string]float64{metrics.WakeUps: 1, metrics.WakeIgnored: 0},
			wantLog:     wantLog{"INFO", "head message made visible", map[string]any{"executionName": evID1, "messageId": "m1", "eventId": statusEventID}},
		},
		{
			name:        "failed execution wakes too; the delivery describes it",
			setup:       func(t *testing.T, w *wakeRig) { w.putState(t, evID1, "rh-1"); w.q.receive("rh-1") },
			event:       "FAILED",
			wantChanges: []visibilityChange{{"rh-1", 0}},
			wantVisible: true,
			wantDone:    "FAILED",
			wantMetrics: map[string]float64{metrics.WakeUps: 1},
		},
		{
			name:        "mismatch: the head waits for another execution",
			setup:       func(t *testing.T, w *wakeRig) { w.putState(t, evID2, "rh-1"); w.q.receive("rh-1") },
			wantMetrics: map[string]float64{metrics.WakeIgnored: 1, metrics.WakeUps: 0},
			wantLog:     wantLog{"INFO", "does not wait for", map[string]any{"waitingFor": evID2}},
		},
		{
			name:        "stale handle: the message was received again",
			setup:       func(t *testing.T, w *wakeRig) { w.putState(t, evID1, "rh-1"); w.q.receive("rh-2") },
			wantChanges: []visibilityChange{{"rh-1", 0}},
			wantDone:    "SUCCEEDED",
			wantMetrics: map[string]float64{metrics.WakeStale: 1, metrics.WakeUps: 0},
			wantLog:     wantLog{"INFO", "no longer current", nil},
		},
		{
			name: "stale handle: the message was deleted",
			setup: func(t *testing.T, w *wakeRig) {
				w.putState(t, evID1, "rh-1")
				w.q.receive("rh-1")
				w.q.deleted = true
			},
			wantChanges: []visibilityChange{{"rh-1", 0}},
			wantDone:    "SUCCEEDED",
			wantMetrics: map[string]float64{metrics.WakeStale: 1},
		},
		{
			name: "stale handle: InvalidParameterValue",
			setup: func(t *testing.T, w *wakeRig) {
				w.putState(t, evID1, "rh-1")
				w.q.receive("rh-1")
				w.q.err = &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.InvalidParameterValue", Message: "Value rh-1 for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change."}
			},
			wantChanges: []visibilityChange{{"rh-1", 0}},
			wantDone:    "SUCCEEDED",
			wantMetrics: map[string]float64{metrics.WakeStale: 1},
		},
		{
			name:        "missing state",
			setup:       func(t *testing.T, w *wakeRig) { w.q.receive("rh-1") },
			wantMetrics: map[string]float64{metrics.WakeIgnored: 1},
			wantLog:     wantLog{"INFO", "no wake-up state", nil},
		},
		{
			name: "duplicate event: the first woke the message, the second finds it visible",
			setup: func(t *testing.T, w *wakeRig) {
				w.putState(t, evID1, "rh-1")
				w.q.receive("rh-1")
				w.wake(t, evID1, "SUCCEEDED")
			},
			wantChanges: []visibilityChange{{"rh-1", 0}, {"rh-1", 0}},
			wantVisible: true,
			wantDone:    "SUCCEEDED",
			wantMetrics: map[string]float64{metrics.WakeUps: 1, metrics.WakeStale: 1},
		},
		{
			name:        "non-terminal status",
			setup:       func(t *testing.T, w *wakeRig) { w.putState(t, evID1, "rh-1"); w.q.receive("rh-1") },
			event:       "RUNNING",
			wantMetrics: map[string]float64{metrics.WakeIgnored: 1, metrics.WakeUps: 0},
			wantLog:     wantLog{"INFO", "not an end", nil},
		},
		{
			name:        "pending redrive is not an end",
			setup:       func(t *testing.T, w *wakeRig) { w.putState(t, evID1, "rh-1"); w.q.receive("rh-1") },
			event:       "PENDING_REDRIVE",
			wantMetrics: map[string]float64{metrics.WakeIgnored: 1},
		},
		{
			name: "unreadable state: ERROR, the safety net decides",
			setup: func(t *testing.T, w *wakeRig) {
				w.putState(t, evID1, "rh-1")
				w.q.receive("rh-1")
				w.s3.getErr = accessDenied()
			},
			wantMetrics: map[string]float64{metrics.WakeStateErrors: 1},
			wantErrors:  1,
		},
		{
			name: "no state and no s3:ListBucket: the 403 reads as no state, not an error",
			setup: func(t *testing.T, w *wakeRig) {
				w.q.receive("rh-1")
				w.s3.noListBucket = true
			},
			wantMetrics: map[string]float64{metrics.WakeIgnored: 1, metrics.WakeStateErrors: 0},
		},
		{
			name: "corrupt state",
			setup: func(t *testing.T, w *wakeRig) {
				w.s3.objects[wakeStateObject] = `{"version":1}{}`
				w.q.receive("rh-1")
			},
			wantMetrics: map[string]float64{metrics.WakeStateErrors: 1, metrics.WakeUps: 0},
			wantErrors:  1,
		},
		{
			name: "failed record still wakes: the delivery describes",
			setup: func(t *testing.T, w *wakeRig) {
				w.putState(t, evID1, "rh-1")
				w.q.receive("rh-1")
				w.s3.putErr = throttled()
			},
			wantChanges: []visibilityChange{{"rh-1", 0}},
			wantVisible: true,
			wantMetrics: map[string]float64{metrics.WakeUps: 1, metrics.WakeStateErrors: 1},
			wantLog:     wantLog{"WARN", "could not be recorded", nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWakeRig(t, nil)
			tt.setup(t, w)
			w.q.mu.Lock()
			before := len(w.q.changes)
			w.q.mu.Unlock()
			status := tt.event
			if status == "" {
				status = "SUCCEEDED"
			}
			w.wake(t, evID1, status)

			if got := w.q.changes[before:]; !slices.Equal(got, tt.wantChanges[min(before, len(tt.wantChanges)):]) {
				t.Errorf("got visibility changes %v, want %v", w.q.changes, tt.wantChanges)
			}
			if got := w.q.visible(); got != tt.wantVisible {
				t.Errorf("got message visible %v, want %v", got, tt.wantVisible)
			}
			done, ok := w.s3.objects[wakeDoneObject]
			switch {
			case tt.wantDone == "" && ok:
				t.Errorf("got wake-done %s, want none", done)
			case tt.wantDone != "":
				d, err := pipeline.DecodeWakeDone([]byte(done))
				if err != nil || d.Status != tt.wantDone || d.ExecutionName != evID1 || d.EventID != statusEventID {
					t.Errorf("got wake-done %+v (%v), want status %s of %s from event %s", d, err, tt.wantDone, evID1, statusEventID)
				}
				// The fixture's detail.startDate and detail.stopDate (epoch ms).
				if d.StartDate == nil || d.StopDate == nil || d.StartDate.UnixMilli() != 1714554000000 || d.StopDate.UnixMilli() != 1714554250000 {
					t.Errorf("got start %v and stop %v, want the event's 1714554000000 and 1714554250000 ms", d.StartDate, d.StopDate)
				}
			}
			w.checkMetrics(t, tt.wantMetrics)
			if got := w.countLevel(t, "ERROR"); got != tt.wantErrors {
				t.Errorf("got %d ERROR lines, want %d: %v", got, tt.wantErrors, w.logs(t))
			}
			if tt.wantLog.msg != "" {
				l := w.findLog(t, tt.wantLog.level, tt.wantLog.msg)
				for k, v := range tt.wantLog.attrs {
					if l[k] != v {
						t.Errorf("log %q: got %s = %v, want %v", tt.wantLog.msg, k, l[k], v)
					}
				}
			}
			for _, l := range w.logs(t) {
				if b, _ := json.Marshal(l); strings.Contains(string(b), "rh-") {
					t.Errorf("got a log line with a receipt handle: %s", b)
				}
			}
		})
	}
}

// An event of another state machine means the tenant's rule is wrong: ERROR and an error.
func TestWakeRejectsAnotherStateMachine(t *testing.T) {
	w := newWakeRig(t, nil)
	w.putState(t, evID1, "rh-1")
	w.q.receive("rh-1")
	ev := statusEvent(t, evID1, "SUCCEEDED")
	ev.Detail = json.RawMessage(strings.ReplaceAll(string(ev.Detail), "acme-files", "other-files"))
	if err := w.h.Wake(context.Background(), ev); err == nil {
		t.Fatal("got no error, want one for another state machine's event")
	}
	if len(w.q.changes) != 0 {
		t.Errorf("got visibility changes %v, want none", w.q.changes)
	}
	w.findLog(t, "ERROR", "another state machine")
}

// The controller's binary serves both event shapes and refuses any other.
func TestInvoke(t *testing.T) {
	sqsEvent := fixture(t, "sqs-event.json")
	tests := []struct {
		name      string
		payload   string
		wantErr   string
		wantShape string // "sqs" or "wake"
	}{
		{name: "SQS event", payload: sqsEvent, wantShape: "sqs"},
		{name: "status change event", payload: string(statusPayload(t, evID1, "SUCCEEDED")), wantShape: "wake"},
		{name: "empty object", payload: `{}`, wantErr: "neither"},
		{name: "array", payload: `[]`, wantErr: "not a JSON object"},
		{name: "not JSON", payload: `x`, wantErr: "not a JSON object"},
		{name: "SNS records", payload: strings.Replace(sqsEvent, `"aws:sqs"`, `"aws:sns"`, 1), wantErr: `eventSource "aws:sns"`},
		{name: "S3 Object Created event", payload: strings.Replace(string(statusPayload(t, evID1, "SUCCEEDED")), `"aws.states"`, `"aws.s3"`, 1), wantErr: `source "aws.s3"`},
		{name: "CloudTrail API call from aws.states", payload: strings.Replace(string(statusPayload(t, evID1, "SUCCEEDED")), "Step Functions Execution Status Change", "AWS API Call via CloudTrail", 1), wantErr: "detail-type"},
		{name: "both shapes", payload: `{"Records":[],"source":"aws.states","detail-type":"Step Functions Execution Status Change"}`, wantErr: "neither"},
		{name: "status event without detail", payload: `{"source":"aws.states","detail-type":"Step Functions Execution Status Change","id":"e"}`, wantErr: "detail lacks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWakeRig(t, nil)
			w.putState(t, evID1, "rh-1")
			w.q.receive("rh-1")
			out, err := w.h.Invoke(context.Background(), json.RawMessage(tt.payload))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				w.findLog(t, "ERROR", "")
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			switch tt.wantShape {
			case "sqs":
				resp, ok := out.(events.SQSEventResponse)
				if !ok || len(resp.BatchItemFailures) != 0 {
					t.Errorf("got %#v, want an SQS response releasing m1", out)
				}
				if _, ok := w.s3.objects[testBucket+"/quarantine/acme/m1.json"]; !ok {
					t.Errorf("got no quarantined body, want the SQS record processed")
				}
			case "wake":
				if out != nil {
					t.Errorf("got %#v, want nil", out)
				}
				if !slices.Equal(w.q.changes, []visibilityChange{{"rh-1", 0}}) {
					t.Errorf("got visibility changes %v, want [{rh-1 0}]", w.q.changes)
				}
			}
		})
	}
}

// A delivery with wake-up events on: what it writes, calls and waits.
func TestWakeDelivery(t *testing.T) {
	tests := []struct {
		name          string
		env           map[string]string
		setup         func(t *testing.T, w *wakeRig)
		receives      int
		wantRelease   bool
		wantChanges   []visibilityChange
		wantDescribes int
		wantStarts    int
		wantState     bool // wake.json names this delivery afterwards
		wantMetrics   map[string]float64
		wantSleeps    int
		wantErrors    int
	}{
		{
			name:        "first delivery: state, safety net, StartExecution without a describe",
			receives:    1,
			wantChanges: []visibilityChange{{"rh-1", 300}},
			wantStarts:  1,
			wantState:   true,
			wantMetrics: map[string]float64{metrics.Starts: 1, metrics.Waits: 1},
		},
		{
			name:        "first delivery of a finished execution: ExecutionAlreadyExists, then describe",
			setup:       func(t *testing.T, w *wakeRig) { w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded) },
			receives:    1,
			wantRelease: true,
			// The safety net was set before the lookup; the released message is deleted anyway.
			wantChanges:   []visibilityChange{{"rh-1", 300}},
			wantDescribes: 1,
			wantStarts:    1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Completions: 1, metrics.Starts: 0},
		},
		{
			name:          "safety-net delivery of a running execution: one describe, no poll",
			env:           map[string]string{pipeline.EnvPollBudgetSeconds: "10"},
			setup:         func(t *testing.T, w *wakeRig) { w.sfn.set(arn1, sfntypes.ExecutionStatusRunning) },
			receives:      5,
			wantChanges:   []visibilityChange{{"rh-5", 300}},
			wantDescribes: 1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Waits: 1},
		},
		{
			name:        "the delivery that starts the execution polls (budget 10 s)",
			env:         map[string]string{pipeline.EnvPollBudgetSeconds: "10"},
			receives:    1,
			wantChanges: []visibilityChange{{"rh-1", 300}},
			wantStarts:  1, wantDescribes: 3, wantSleeps: 3,
			wantState:   true,
			wantMetrics: map[string]float64{metrics.Waits: 1},
		},
		{
			name: "recorded SUCCEEDED: confirmed by one describe, released with no state and no visibility change",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				w.putDone(t, evID1, "SUCCEEDED")
			},
			receives:      3,
			wantRelease:   true,
			wantDescribes: 1,
			wantMetrics:   map[string]float64{metrics.Completions: 1, metrics.WakeReleases: 1},
		},
		{
			name: "recorded SUCCEEDED, control/ protected: released on the record, no describe, no state, no visibility change",
			env:  map[string]string{pipeline.EnvControlPrefixProtected: "true"},
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				w.putDone(t, evID1, "SUCCEEDED")
			},
			receives:    3,
			wantRelease: true,
			wantMetrics: map[string]float64{metrics.Completions: 1, metrics.WakeReleases: 1},
		},
		{
			// Anyone who may write control/ can write the record: Step Functions decides.
			name: "forged SUCCEEDED record of a running execution: not released",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				w.putDone(t, evID1, "SUCCEEDED")
			},
			receives:    3,
			wantChanges: []visibilityChange{{"rh-3", 300}},
			// The confirmation, then the lookup after the wake-up state is written (the order of
			// writes that keeps a real end from waiting for the safety net).
			wantDescribes: 2,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.WakeReleases: 0, metrics.Completions: 0, metrics.WakeStateErrors: 1},
			wantErrors:    1,
		},
		{
			name: "forged SUCCEEDED record of a failed execution: the failure policy applies",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				w.putDone(t, evID1, "SUCCEEDED")
			},
			receives:      3,
			wantRelease:   true,
			wantChanges:   []visibilityChange{{"rh-3", 300}},
			wantDescribes: 2,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.FailedFiles: 1, metrics.WakeReleases: 0, metrics.Completions: 0},
			wantErrors:    2, // the contradicted record and the failed file
		},
		{
			name: "recorded SUCCEEDED, the confirmation throttled: held, not released",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				w.putDone(t, evID1, "SUCCEEDED")
				w.sfn.describeErrs = []error{throttled()}
			},
			receives:      3,
			wantChanges:   []visibilityChange{{"rh-3", 4}}, // the throttled wait (no jitter in tests)
			wantDescribes: 1,
			wantMetrics:   map[string]float64{metrics.Throttles: 1, metrics.WakeReleases: 0, metrics.Completions: 0},
		},
		{
			name: "recorded FAILED is described: the policy needs its details",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				w.putDone(t, evID1, "FAILED")
			},
			receives:      3,
			wantRelease:   true,
			wantChanges:   []visibilityChange{{"rh-3", 300}},
			wantDescribes: 1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.FailedFiles: 1, metrics.WakeReleases: 0},
			wantErrors:    1, // the failed file's ERROR line
		},
		{
			name: "recorded SUCCEEDED of another execution is not this file's",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				w.putDone(t, evID2, "SUCCEEDED")
			},
			receives:      3,
			wantChanges:   []visibilityChange{{"rh-3", 300}},
			wantDescribes: 1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.WakeReleases: 0},
		},
		{
			name: "unreadable record: describe",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				w.s3.objects[wakeDoneObject] = "garbage"
			},
			receives:      3,
			wantChanges:   []visibilityChange{{"rh-3", 300}},
			wantDescribes: 1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.WakeStateErrors: 1},
			wantErrors:    1, // only this code writes the record: a corrupt one is a fault
		},
		{
			name: "no record and no s3:ListBucket: the 403 reads as no record, not an error",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				w.s3.noListBucket = true
			},
			receives:      3,
			wantChanges:   []visibilityChange{{"rh-3", 300}},
			wantDescribes: 1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.WakeStateErrors: 0},
		},
		{
			name: "state not written: not armed, the backoff wait",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				w.s3.putErr = throttled()
			},
			receives:      4,
			wantChanges:   []visibilityChange{{"rh-4", 8}},
			wantDescribes: 1,
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.WakeStateErrors: 1},
		},
		{
			name:          "events off: no state, the backoff wait",
			env:           map[string]string{pipeline.EnvWakeEvents: "false"},
			setup:         func(t *testing.T, w *wakeRig) { w.sfn.set(arn1, sfntypes.ExecutionStatusRunning) },
			receives:      4,
			wantChanges:   []visibilityChange{{"rh-4", 8}},
			wantDescribes: 1,
			wantMetrics:   map[string]float64{metrics.Waits: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWakeRig(t, tt.env)
			if tt.setup != nil {
				tt.setup(t, w)
			}
			if got := w.deliver(t, tt.receives); got != tt.wantRelease {
				t.Errorf("got released %v, want %v", got, tt.wantRelease)
			}
			if !slices.Equal(w.q.changes, tt.wantChanges) {
				t.Errorf("got visibility changes %v, want %v", w.q.changes, tt.wantChanges)
			}
			if w.sfn.describes != tt.wantDescribes || w.sfn.starts != tt.wantStarts {
				t.Errorf("got %d describes and %d starts, want %d and %d", w.sfn.describes, w.sfn.starts, tt.wantDescribes, tt.wantStarts)
			}
			if len(w.sleeps) != tt.wantSleeps {
				t.Errorf("got sleeps %v, want %d", w.sleeps, tt.wantSleeps)
			}
			_, written := w.s3.objects[wakeStateObject]
			if written != tt.wantState {
				t.Fatalf("got wake state written %v, want %v", written, tt.wantState)
			}
			if written {
				s := w.state(t)
				want := pipeline.WakeState{Version: 1, ExecutionName: evID1, ExecutionARN: arn1, MessageID: "m1",
					ReceiptHandle: fmt.Sprintf("rh-%d", tt.receives), QueueURL: testQueueURL, WrittenAt: testStart}
				if s != want {
					t.Errorf("got wake state %+v, want %+v", s, want)
				}
			}
			w.checkMetrics(t, tt.wantMetrics)
			if got := w.countLevel(t, "ERROR"); got != tt.wantErrors {
				t.Errorf("got %d ERROR lines, want %d: %v", got, tt.wantErrors, w.logs(t))
			}
		})
	}
}

// The order of writes: whenever the execution ends and its status event is handled, relative to
// the delivery's steps, the end is noticed: the delivery releases the message, or the message is
// visible again when the delivery is over. A lost event aside, no end waits for the safety net.
func TestWakeWriteOrder(t *testing.T) {
	points := []string{
		"before the delivery",
		"after the wake-state write",
		"after the safety-net visibility",
		"after the describe",
		"after the delivery",
	}
	for _, protected := range []bool{false, true} {
		for _, receives := range []int{1, 3} { // the delivery that starts, and a safety-net delivery
			for _, at := range points {
				if receives == 1 && at == "before the delivery" {
					continue // the execution does not exist before its first delivery
				}
				t.Run(fmt.Sprintf("protected %v, receive %d, ends %s", protected, receives, at), func(t *testing.T) {
					w := newWakeRig(t, map[string]string{pipeline.EnvControlPrefixProtected: fmt.Sprint(protected)})
					if receives > 1 {
						w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
						w.putState(t, evID1, "rh-1") // the previous delivery's state
					}
					var once sync.Once
					end := func() {
						once.Do(func() {
							w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
							w.wake(t, evID1, "SUCCEEDED")
						})
					}
					switch at {
					case "before the delivery":
						end()
					case "after the wake-state write":
						w.s3h.afterPut = func(key string) {
							if key == pipeline.WakeStateKey("acme") {
								end()
							}
						}
					case "after the safety-net visibility":
						w.q.afterChange = func(c visibilityChange) {
							if c.Seconds > 0 {
								end()
							}
						}
					case "after the describe":
						w.sfh.afterDescribe = end
						if receives == 1 {
							// The first delivery does not describe: it ends right after its start.
							w.sfn.afterStart = end
						}
					}
					released := w.deliver(t, receives)
					if at == "after the delivery" {
						end()
					}
					// An end before the lookup is noticed by the lookup, in this very delivery.
					beforeLookup := at != "after the describe" && at != "after the delivery"
					if beforeLookup && !released {
						t.Errorf("got the message kept, want it released in the same delivery (the lookup comes after the wake-up state)")
					}
					if !released && !w.q.visible() {
						t.Errorf("got the message neither released nor visible (changes %v): the end waits for the safety net", w.q.changes)
					}
					if w.sfn.describes > 1 {
						t.Errorf("got %d describes in one delivery, want at most 1", w.sfn.describes)
					}
					// The woken delivery releases the file from the record: confirmed by one describe, or
					// on the record alone when control/ is protected.
					if !released {
						before := w.sfn.describes
						if !w.deliver(t, receives+1) {
							t.Errorf("got the woken delivery kept, want it released")
						}
						want := 1
						if protected {
							want = 0
						}
						if w.sfn.describes != before+want {
							t.Errorf("got %d describes in the woken delivery, want %d", w.sfn.describes-before, want)
						}
					}
				})
			}
		}
	}
}

// Lost and duplicated events over a run of several files: each file's end either wakes its head
// message or is found by the safety-net delivery; nothing is started twice.
func TestWakeLostAndDuplicatedEvents(t *testing.T) {
	tests := []struct {
		name             string
		deliver          int // copies of the status event delivered: 0 lost, 2 duplicated
		wantNextDelivery time.Duration
	}{
		{"delivered once", 1, 0},
		{"duplicated", 2, 0},
		{"lost", 0, 300 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWakeRig(t, nil)
			if w.deliver(t, 1) {
				t.Fatal("first delivery: got released, want the file waited for")
			}
			w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
			for range tt.deliver {
				w.wake(t, evID1, "SUCCEEDED")
			}
			next := 300 * time.Second
			if w.q.visible() {
				next = 0
			}
			if next != tt.wantNextDelivery {
				t.Errorf("got the next delivery after %v, want %v", next, tt.wantNextDelivery)
			}
			if !w.deliver(t, 2) {
				t.Errorf("got the next delivery kept, want it released")
			}
			if got := len(w.sfn.created); got != 1 {
				t.Errorf("got %d executions, want 1", got)
			}
			// A copy that arrives after the release finds a deleted message.
			w.wake(t, evID1, "SUCCEEDED")
			if w.countLevel(t, "ERROR") != 0 {
				t.Errorf("got ERROR lines, want none: %v", w.logs(t))
			}
		})
	}
}

// The wake-up path through the real aws-sdk-go-v2 clients over a stubbed transport: the S3 keys and
// bodies, the receipt handle and queue URL, and SQS's stale-handle errors as the SDK decodes them.
func TestWakeWithSDKClients(t *testing.T) {
	h, stub, out := sdkHandler(t, wakeEnv)
	body := eventBody(t, evID1, key1)
	notFound := exchange{status: 404, header: map[string]string{"Content-Type": "application/xml"},
		body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><RequestId>R</RequestId><HostId>H</HostId></Error>`}
	stateOp := "S3 PUT " + testBucket + "/control/acme/wake.json"
	doneGet := "S3 GET " + testBucket + "/control/acme/wake-done.json"

	// The first delivery: no record yet, the state, the safety net, then StartExecution.
	stub.expect(
		with(notFound, doneGet, nil),
		exchange{op: stateOp, s3Body: `"executionName":"` + evID1 + `","executionArn":"` + arn1 + `","messageId":"m1","receiptHandle":"rh-m1","queueUrl":"` + testQueueURL + `"`,
			status: 200, header: map[string]string{"ETag": `"x"`}},
		with(exchange{status: 200, body: `{}`}, opVisibility, wantFields(map[string]any{"QueueUrl": testQueueURL, "ReceiptHandle": "rh-m1", "VisibilityTimeout": 300.0})),
		with(exchange{status: 200, body: fmt.Sprintf(`{"executionArn":%q,"startDate":1714554000}`, arn1)}, opStart, wantFields(map[string]any{"name": evID1})),
	)
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("first delivery: got failures %v, want [m1]", got)
	}
	stub.done(t)

	state, err := pipeline.EncodeWakeState(pipeline.WakeState{Version: 1, ExecutionName: evID1, ExecutionARN: arn1, MessageID: "m1",
		ReceiptHandle: "rh-m1", QueueURL: testQueueURL, WrittenAt: testStart})
	if err != nil {
		t.Fatal(err)
	}
	stateGet := exchange{op: "S3 GET " + testBucket + "/control/acme/wake.json", status: 200, header: map[string]string{"Content-Type": "application/json"}, body: string(state)}
	donePut := exchange{op: "S3 PUT " + testBucket + "/control/acme/wake-done.json", s3Body: `"executionName":"` + evID1 + `","executionArn":"` + arn1 + `","status":"SUCCEEDED","eventId":"` + statusEventID + `"`,
		status: 200, header: map[string]string{"ETag": `"y"`}}
	sqsError := func(code, query string) exchange {
		return exchange{status: 400, header: map[string]string{"x-amzn-query-error": query},
			body: fmt.Sprintf(`{"__type":"com.amazonaws.sqs#%s","message":"Value rh-m1 for parameter ReceiptHandle is invalid."}`, code)}
	}
	// The status event: the state, the record, then the message made visible; then the same event
	// again, answered as SQS answers a stale handle.
	stub.expect(
		stateGet, donePut,
		with(exchange{status: 200, body: `{}`}, opVisibility, wantFields(map[string]any{"QueueUrl": testQueueURL, "ReceiptHandle": "rh-m1", "VisibilityTimeout": 0.0})),
		stateGet, donePut,
		with(sqsError("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid;Sender"), opVisibility, nil),
		stateGet, donePut,
		with(sqsError("MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight;Sender"), opVisibility, nil),
	)
	for range 3 {
		if _, err := h.Invoke(context.Background(), statusPayload(t, evID1, "SUCCEEDED")); err != nil {
			t.Fatalf("got error %v, want none", err)
		}
	}
	stub.done(t)

	// The woken delivery reads the record, confirms it with one DescribeExecution and releases the
	// file: no wake-up state, no visibility change.
	doneBody, err := pipeline.EncodeWakeDone(pipeline.WakeDone{Version: 1, ExecutionName: evID1, ExecutionARN: arn1, Status: "SUCCEEDED", EventID: statusEventID, WrittenAt: testStart})
	if err != nil {
		t.Fatal(err)
	}
	stub.expect(exchange{op: doneGet, status: 200, header: map[string]string{"Content-Type": "application/json"}, body: string(doneBody)},
		with(describeOK(arn1, "SUCCEEDED"), opDescribe, wantFields(map[string]any{"executionArn": arn1})))
	resp, err = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); len(got) != 0 {
		t.Errorf("woken delivery: got failures %v, want none", got)
	}
	stub.done(t)

	var woke, stale int
	for _, l := range out.Lines(t) {
		if l["level"] == "ERROR" || l["level"] == "WARN" {
			t.Errorf("got %s line %v, want none", l["level"], l)
		}
		if l["level"] == "INFO" && l["msg"] == "execution ended; head message made visible" {
			woke++
		}
		if l["level"] == "INFO" && strings.Contains(fmt.Sprint(l["msg"]), "no longer current") {
			stale++
		}
	}
	if woke != 1 || stale != 2 {
		t.Errorf("got %d wake-ups and %d stale handles, want 1 and 2", woke, stale)
	}
}

// The call budget of the wake-up design: a file whose SUCCEEDED event arrives costs one
// StartExecution and one DescribeExecution per safety-net delivery while it runs (at most 12 per
// running file-hour with the 5-minute safety net), plus, only when control/ is not protected, the
// one that confirms the recorded end. Protected, a file shorter than the safety net costs no
// describe at all.
func TestWakeCallBudget(t *testing.T) {
	for _, protected := range []bool{true, false} {
		for _, safetyNets := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("protected %v, %d safety-net deliveries", protected, safetyNets), func(t *testing.T) {
				w := newWakeRig(t, map[string]string{pipeline.EnvControlPrefixProtected: fmt.Sprint(protected)})
				if w.deliver(t, 1) {
					t.Fatal("first delivery: got released, want the file waited for")
				}
				receives := 1
				for range safetyNets {
					receives++
					if w.deliver(t, receives) {
						t.Fatalf("safety-net delivery %d: got released, want held", receives)
					}
				}
				w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				w.wake(t, evID1, "SUCCEEDED")
				if !w.q.visible() {
					t.Fatal("got the head message not woken, want it visible")
				}
				receives++
				if !w.deliver(t, receives) {
					t.Fatal("woken delivery: got held, want released")
				}
				want := safetyNets // one per safety net
				if !protected {
					want++ // the confirmation
				}
				if w.sfn.starts != 1 || w.sfn.describes != want {
					t.Errorf("got %d starts and %d describes, want 1 and %d", w.sfn.starts, w.sfn.describes, want)
				}
				if got := w.countLevel(t, "ERROR"); got != 0 {
					t.Errorf("got %d ERROR lines, want none: %v", got, w.logs(t))
				}
			})
		}
	}
}

// Through the real aws-sdk-go-v2 clients: with control/ protected, the woken delivery reads the
// record and releases the file with that one S3 GET: no DescribeExecution, no wake-up state, no
// visibility change.
func TestReleaseOnRecordWithSDKClients(t *testing.T) {
	env := maps.Clone(wakeEnv)
	env[pipeline.EnvControlPrefixProtected] = "true"
	h, stub, _ := sdkHandler(t, env)
	doneBody, err := pipeline.EncodeWakeDone(pipeline.WakeDone{Version: 1, ExecutionName: evID1, ExecutionARN: arn1, Status: "SUCCEEDED",
		EventID: statusEventID, WrittenAt: testStart})
	if err != nil {
		t.Fatal(err)
	}
	stub.expect(exchange{op: "S3 GET " + testBucket + "/control/acme/wake-done.json", status: 200,
		header: map[string]string{"Content-Type": "application/json"}, body: string(doneBody)})
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", eventBody(t, evID1, key1), 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); len(got) != 0 {
		t.Errorf("woken delivery: got failures %v, want none", got)
	}
	stub.done(t)
}
