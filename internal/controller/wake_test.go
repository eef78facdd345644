package controller

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

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
