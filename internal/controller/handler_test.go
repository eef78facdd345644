package controller

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

const (
	key1 = "inbox/acme/2024-05-01 orders.csv"
	arn1 = testExecPrefix + evID1
	arn2 = testExecPrefix + evID2
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantLog is a log line that must appear, with attributes that must match.
type wantLog struct {
	level string
	msg   string
	attrs map[string]any
}

func TestHandle(t *testing.T) {
	halt := map[string]string{pipeline.EnvOnFailure: pipeline.OnFailureHalt}
	skipKey := testBucket + "/control/acme/skip/" + evID1
	tests := []struct {
		name         string
		env          map[string]string
		setup        func(r *rig)
		body         string // default: an event for key1 with id evID1
		receives     int    // default 1
		wantRelease  bool
		wantWait     int32 // visibility set on the head message when kept
		wantCreated  int   // executions that exist because of this delivery
		wantMetrics  map[string]float64
		wantErrors   int // ERROR log lines
		wantLogs     []wantLog
		wantObjects  map[string]string // S3 objects after the delivery (bucket/key → body); nil: skip check
		wantNoLookup bool              // Step Functions never called
	}{
		{
			name:        "new file starts its execution and waits",
			wantWait:    1,
			wantCreated: 1,
			wantMetrics: map[string]float64{metrics.Starts: 1, metrics.Waits: 1, metrics.HeadQueuedSeconds: 90},
			wantLogs: []wantLog{
				{"INFO", "execution started", map[string]any{"executionArn": arn1}},
				{"INFO", "waiting for the file's execution", map[string]any{
					"tenant": "acme", "key": key1, "executionName": evID1, "attempt": 1.0, "nextWaitSeconds": 1.0, "messageId": "m1"}},
			},
		},
		{
			name:        "running execution waits with a growing backoff",
			setup:       func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusRunning) },
			receives:    4,
			wantWait:    8,
			wantMetrics: map[string]float64{metrics.Waits: 1, metrics.Starts: 0},
			wantLogs:    []wantLog{{"INFO", "waiting", map[string]any{"attempt": 4.0, "nextWaitSeconds": 8.0, "status": "RUNNING"}}},
		},
		{
			name:        "backoff stops at the maximum wait",
			setup:       func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusRunning) },
			receives:    40,
			wantWait:    60,
			wantMetrics: map[string]float64{metrics.Waits: 1},
		},
		{
			name:        "pending redrive waits",
			setup:       func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusPendingRedrive) },
			wantWait:    1,
			wantMetrics: map[string]float64{metrics.Waits: 1},
		},
		{
			name:        "succeeded execution releases the message",
			setup:       func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded) },
			receives:    7,
			wantRelease: true,
			wantMetrics: map[string]float64{metrics.Completions: 1, metrics.Waits: 0, metrics.HeadQueuedSeconds: 90},
			wantLogs:    []wantLog{{"INFO", "file done", map[string]any{"executionArn": arn1}}},
		},
		{
			name: "ExecutionAlreadyExists from a succeeded execution releases without a new start",
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				r.sfn.describeErrs = []error{&sfntypes.ExecutionDoesNotExist{}} // a stale first look
			},
			wantRelease: true,
			wantMetrics: map[string]float64{metrics.Completions: 1, metrics.Starts: 0},
			wantLogs:    []wantLog{{"INFO", "already used", map[string]any{"executionArn": arn1}}},
		},
		{
			name: "ExecutionAlreadyExists from a failed execution applies the policy",
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				r.sfn.describeErrs = []error{&sfntypes.ExecutionDoesNotExist{}}
			},
			wantRelease: true,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1, metrics.Starts: 0},
		},
		{
			name: "ExecutionAlreadyExists that cannot be described yet keeps the message",
			setup: func(r *rig) {
				r.sfn.startErrs = []error{&sfntypes.ExecutionAlreadyExists{}}
			},
			wantWait:    1,
			wantMetrics: map[string]float64{metrics.ServiceErrors: 1},
			wantLogs:    []wantLog{{"WARN", "message kept", nil}},
		},
		{
			name:        "failed execution under continue logs ERROR once and releases",
			setup:       func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusFailed) },
			wantRelease: true,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1, metrics.Blocked: 0},
			wantLogs: []wantLog{{"ERROR", "file failed", map[string]any{
				"executionArn": arn1, "status": "FAILED", "executionError": "States.TaskFailed", "policy": "continue", "key": key1}}},
		},
		{
			name:        "timed out execution under continue releases",
			setup:       func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusTimedOut) },
			wantRelease: true,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1},
		},
		{
			name:        "aborted execution under continue releases",
			setup:       func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusAborted) },
			wantRelease: true,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1},
		},
		{
			name:        "failed execution under halt blocks the tenant",
			env:         halt,
			setup:       func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusFailed) },
			receives:    2,
			wantWait:    900,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.Blocked: 1, metrics.FailedFiles: 0, metrics.Waits: 0},
			wantLogs: []wantLog{{"ERROR", "tenant halted", map[string]any{
				"executionArn": arn1, "policy": "halt", "skipMarkerKey": "control/acme/skip/" + evID1, "nextWaitSeconds": 900.0}}},
		},
		{
			name:        "timed out execution under halt blocks the tenant",
			env:         halt,
			setup:       func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusTimedOut) },
			wantWait:    900,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.Blocked: 1},
		},
		{
			name: "skip marker releases a halted file",
			env:  halt,
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				r.s3.objects[skipKey] = "ticket OPS-42:\nsender will resend"
			},
			wantRelease: true,
			wantMetrics: map[string]float64{metrics.Skipped: 1, metrics.Blocked: 0},
			wantLogs: []wantLog{{"WARN", "skipped by an operator", map[string]any{
				"executionArn": arn1, "reason": "ticket OPS-42: sender will resend", "reasonBytes": 33.0,
				"skipMarkerVersionId": "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY"}}},
		},
		{
			name: "skip marker of another file does not release",
			env:  halt,
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				r.s3.objects[testBucket+"/control/acme/skip/"+evID2] = "other file"
				r.s3.objects[testBucket+"/control/other/skip/"+evID1] = "other tenant"
			},
			wantWait:    900,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.Blocked: 1, metrics.Skipped: 0},
		},
		{
			name: "skip marker is ignored under continue",
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				r.s3.objects[skipKey] = "x"
			},
			wantRelease: true,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1, metrics.Skipped: 0},
		},
		{
			name: "skip marker denied (no s3:ListBucket): no marker, the tenant stays blocked",
			env:  halt,
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				r.s3.noListBucket = true
			},
			wantWait:    900,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.Blocked: 1},
			wantLogs: []wantLog{{"ERROR", "tenant halted: redrive the execution or write the skip marker", map[string]any{
				"skipMarkerRead": "403 AccessDenied, read as no marker: S3 answers 403 for a missing key unless the role may s3:ListBucket; " +
					"if a marker was written, check the role's s3:GetObject on it"}}},
		},
		{
			name: "unreadable skip marker keeps the tenant blocked",
			env:  halt,
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				r.s3.getErr = &smithy.GenericAPIError{Code: "InternalError"}
			},
			wantWait:    900,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.Blocked: 1},
			wantLogs:    []wantLog{{"ERROR", "skip marker could not be read", nil}},
		},
		{
			name:        "halted tenant resumes once the redriven execution runs",
			env:         halt,
			setup:       func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusRunning) },
			receives:    30,
			wantWait:    60,
			wantMetrics: map[string]float64{metrics.Waits: 1, metrics.Blocked: 0},
		},
		{
			name:        "halted tenant resumes once the redriven execution succeeded",
			env:         halt,
			setup:       func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded) },
			receives:    31,
			wantRelease: true,
			wantMetrics: map[string]float64{metrics.Completions: 1, metrics.Blocked: 0},
		},
		{
			name:         "malformed body is quarantined and released",
			body:         "id,name\n1,Yamada Taro\n",
			wantRelease:  true,
			wantErrors:   1,
			wantNoLookup: true,
			wantMetrics:  map[string]float64{metrics.Quarantined: 1},
			wantObjects:  map[string]string{testBucket + "/quarantine/acme/m1.json": "id,name\n1,Yamada Taro\n"},
			wantLogs: []wantLog{{"ERROR", "quarantined", map[string]any{
				"messageId": "m1", "quarantineKey": "quarantine/acme/m1.json", "quarantineBucket": testBucket}}},
		},
		{
			name:         "event of another bucket is quarantined",
			body:         strings.Replace(fixture(t, "event-other-bucket.json"), "\n", "", -1),
			wantRelease:  true,
			wantErrors:   1,
			wantNoLookup: true,
			wantMetrics:  map[string]float64{metrics.Quarantined: 1},
			wantObjects:  map[string]string{testBucket + "/quarantine/acme/m1.json": strings.Replace(fixture(t, "event-other-bucket.json"), "\n", "", -1)},
		},
		{
			name:         "event of another tenant prefix is quarantined",
			body:         fixture(t, "event-other-prefix.json"),
			wantRelease:  true,
			wantErrors:   1,
			wantNoLookup: true,
			wantMetrics:  map[string]float64{metrics.Quarantined: 1},
			wantObjects:  map[string]string{testBucket + "/quarantine/acme/m1.json": fixture(t, "event-other-prefix.json")},
		},
		{
			name:         "Object Deleted event is quarantined",
			body:         fixture(t, "event-object-deleted.json"),
			wantRelease:  true,
			wantErrors:   1,
			wantNoLookup: true,
			wantMetrics:  map[string]float64{metrics.Quarantined: 1},
			wantObjects:  map[string]string{testBucket + "/quarantine/acme/m1.json": fixture(t, "event-object-deleted.json")},
		},
		{
			name:         "failed quarantine write keeps the message",
			body:         "{not json",
			setup:        func(r *rig) { r.s3.putErr = &smithy.GenericAPIError{Code: "SlowDown"} },
			wantWait:     1,
			wantErrors:   1,
			wantNoLookup: true,
			wantMetrics:  map[string]float64{metrics.Quarantined: 0, metrics.ServiceErrors: 1},
			wantObjects:  map[string]string{},
			wantLogs:     []wantLog{{"ERROR", "could not be quarantined", map[string]any{"messageId": "m1"}}},
		},
		{
			name:        "DescribeExecution still throttled after the SDK's retries keeps the message",
			setup:       func(r *rig) { r.sfn.describeErrs = []error{throttled()} },
			receives:    2,
			wantWait:    2,
			wantMetrics: map[string]float64{metrics.ServiceErrors: 1, metrics.Starts: 0},
			wantLogs:    []wantLog{{"WARN", "message kept", map[string]any{"nextWaitSeconds": 2.0}}},
		},
		{
			name:        "StartExecution still throttled after the SDK's retries keeps the message",
			setup:       func(r *rig) { r.sfn.startErrs = []error{throttled()} },
			wantWait:    1,
			wantMetrics: map[string]float64{metrics.ServiceErrors: 1, metrics.Starts: 0},
			wantLogs:    []wantLog{{"WARN", "message kept", nil}},
		},
		{
			name:        "lost StartExecution response keeps the message",
			setup:       func(r *rig) { r.sfn.loseStartResponse = true },
			wantWait:    1,
			wantCreated: 1,
			wantMetrics: map[string]float64{metrics.ServiceErrors: 1},
			wantLogs:    []wantLog{{"WARN", "message kept", nil}},
		},
		{
			name:        "missing permission keeps the message and logs ERROR",
			setup:       func(r *rig) { r.sfn.describeErrs = []error{accessDenied()} },
			wantWait:    1,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.ServiceErrors: 1},
		},
		{
			name:        "failed visibility change still keeps the message",
			setup:       func(r *rig) { r.sqs.err = throttled() },
			wantCreated: 1,
			wantMetrics: map[string]float64{metrics.Waits: 1},
			wantLogs:    []wantLog{{"WARN", "could not change the message visibility", nil}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.env)
			if tt.setup != nil {
				tt.setup(r)
			}
			before := len(r.sfn.execs)
			body := tt.body
			if body == "" {
				body = eventBody(t, evID1, key1)
			}
			receives := max(tt.receives, 1)
			resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, receives)}})
			if err != nil {
				t.Fatalf("got error %v, want none (a wait is not an error)", err)
			}

			wantFailures := []string{"m1"}
			if tt.wantRelease {
				wantFailures = []string{}
			}
			if got := r.failures(resp); !slices.Equal(got, wantFailures) {
				t.Errorf("got batch item failures %v, want %v", got, wantFailures)
			}
			var wantChanges []visibilityChange
			if !tt.wantRelease && tt.wantWait > 0 {
				wantChanges = []visibilityChange{{"rh-m1", tt.wantWait}}
			}
			if !slices.Equal(r.sqs.changes, wantChanges) {
				t.Errorf("got visibility changes %v, want %v", r.sqs.changes, wantChanges)
			}
			if got := len(r.sfn.execs) - before; got != tt.wantCreated {
				t.Errorf("got %d executions created, want %d", got, tt.wantCreated)
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
			for _, wl := range tt.wantLogs {
				l := r.findLog(t, wl.level, wl.msg)
				for k, want := range wl.attrs {
					if got := l[k]; got != want {
						t.Errorf("log %q: got %s = %v, want %v", wl.msg, k, got, want)
					}
				}
			}
			if tt.wantObjects != nil {
				for k := range r.s3.objects {
					if strings.HasPrefix(k, testBucket+"/"+pipeline.QuarantinePrefix) {
						if _, ok := tt.wantObjects[k]; !ok {
							t.Errorf("got unexpected object %s", k)
						}
					}
				}
				for k, want := range tt.wantObjects {
					if got, ok := r.s3.objects[k]; !ok || got != want {
						t.Errorf("got object %s = %q (present %v), want %q", k, got, ok, want)
					}
				}
			}
			if tt.wantNoLookup && r.sfn.describes+r.sfn.starts > 0 {
				t.Errorf("got %d describes and %d starts, want none", r.sfn.describes, r.sfn.starts)
			}
			// No log line may carry record data or the free-text cause of a failed execution.
			for _, l := range r.logs(t) {
				b, _ := json.Marshal(l)
				if strings.Contains(string(b), "Yamada") {
					t.Errorf("got a log line with record data: %s", b)
				}
			}
		})
	}
}

// A FIFO batch is processed in order; the first record that must wait holds itself and everything
// after it.
func TestHandleBatch(t *testing.T) {
	tests := []struct {
		name         string
		setup        func(r *rig)
		bodies       func(t *testing.T) []string
		wantFailures []string
		wantChanges  []visibilityChange
		wantCreated  []string
		wantQuar     int
	}{
		{
			name: "second of three waits: second and third reported",
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				r.sfn.set(arn2, sfntypes.ExecutionStatusRunning)
			},
			wantFailures: []string{"m2", "m3"},
			wantChanges:  []visibilityChange{{"rh-m2", 1}, {"rh-m3", 1}},
		},
		{
			name:         "second of three is started: second and third reported, third not started",
			setup:        func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded) },
			wantFailures: []string{"m2", "m3"},
			wantChanges:  []visibilityChange{{"rh-m2", 1}, {"rh-m3", 1}},
			wantCreated:  []string{arn2},
		},
		{
			name:         "first waits: all three reported",
			setup:        func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusRunning) },
			wantFailures: []string{"m1", "m2", "m3"},
			wantChanges:  []visibilityChange{{"rh-m1", 1}, {"rh-m2", 1}, {"rh-m3", 1}},
		},
		{
			name: "all finished: none reported",
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				r.sfn.set(arn2, sfntypes.ExecutionStatusFailed)
				r.sfn.set(testExecPrefix+evID3, sfntypes.ExecutionStatusSucceeded)
			},
			wantFailures: []string{},
		},
		{
			name:  "quarantined first, second waits",
			setup: func(r *rig) { r.sfn.set(arn2, sfntypes.ExecutionStatusRunning) },
			bodies: func(t *testing.T) []string {
				return []string{"garbage", eventBody(t, evID2, "inbox/acme/b.csv"), eventBody(t, evID3, "inbox/acme/c.csv")}
			},
			wantFailures: []string{"m2", "m3"},
			wantChanges:  []visibilityChange{{"rh-m2", 1}, {"rh-m3", 1}},
			wantQuar:     1,
		},
		{
			name: "throttled second: second and third kept",
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				r.sfn.describeErrs = []error{nil, throttled()}
			},
			wantFailures: []string{"m2", "m3"},
			wantChanges:  []visibilityChange{{"rh-m2", 1}, {"rh-m3", 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			tt.setup(r)
			// describeErrs may hold nil to let a call through.
			errs := r.sfn.describeErrs
			r.sfn.describeErrs = nil
			if len(errs) > 0 {
				r.sfn.onDescribe = func(n int, f *fakeSFN) {
					if n <= len(errs) && errs[n-1] != nil {
						f.describeErrs = []error{errs[n-1]}
					}
				}
			}
			bodies := []string{eventBody(t, evID1, "inbox/acme/a.csv"), eventBody(t, evID2, "inbox/acme/b.csv"), eventBody(t, evID3, "inbox/acme/c.csv")}
			if tt.bodies != nil {
				bodies = tt.bodies(t)
			}
			var recs []events.SQSMessage
			for i, b := range bodies {
				recs = append(recs, message("m"+string(rune('1'+i)), b, 1))
			}
			resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: recs})
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got := r.failures(resp); !slices.Equal(got, tt.wantFailures) {
				t.Errorf("got batch item failures %v, want %v", got, tt.wantFailures)
			}
			if !slices.Equal(r.sqs.changes, tt.wantChanges) {
				t.Errorf("got visibility changes %v, want %v", r.sqs.changes, tt.wantChanges)
			}
			if !slices.Equal(r.sfn.created, tt.wantCreated) {
				t.Errorf("got executions created %v, want %v", r.sfn.created, tt.wantCreated)
			}
			if got := r.metricSums(t)[metrics.Quarantined]; got != float64(tt.wantQuar) {
				t.Errorf("got %v quarantined, want %d", got, tt.wantQuar)
			}
		})
	}
}

// The process dies (or the response is lost) between StartExecution and returning. The message is
// redelivered; the controller finds the execution by its name, waits while it runs, releases the
// message once it succeeded, and never starts a second execution.
func TestCrashBetweenStartAndReturn(t *testing.T) {
	tests := []struct {
		name  string
		crash func(r *rig, cancel context.CancelFunc)
	}{
		{"invocation killed after StartExecution", func(r *rig, cancel context.CancelFunc) { r.sfn.afterStart = cancel }},
		{"StartExecution response lost", func(r *rig, _ context.CancelFunc) { r.sfn.loseStartResponse = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			body := eventBody(t, evID1, key1)

			ctx, cancel := context.WithCancel(context.Background())
			tt.crash(r, cancel)
			_, _ = r.h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 1)}}) // the result never reaches SQS
			cancel()
			r.sfn.afterStart, r.sfn.loseStartResponse = nil, false
			r.sqs.changes = nil
			if got := len(r.sfn.created); got != 1 {
				t.Fatalf("got %d executions after the first delivery, want 1", got)
			}

			resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 2)}})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.failures(resp); !slices.Equal(got, []string{"m1"}) {
				t.Errorf("redelivery while RUNNING: got failures %v, want [m1]", got)
			}
			if got, want := r.sqs.changes, []visibilityChange{{"rh-m1", 2}}; !slices.Equal(got, want) {
				t.Errorf("redelivery while RUNNING: got visibility changes %v, want %v", got, want)
			}

			r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
			resp, err = r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 3)}})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.failures(resp); len(got) != 0 {
				t.Errorf("redelivery after SUCCEEDED: got failures %v, want none", got)
			}
			if got := len(r.sfn.created); got != 1 {
				t.Errorf("got %d executions in all, want 1", got)
			}
			if got := r.sfn.starts; got != 1 {
				t.Errorf("got %d StartExecution calls, want 1", got)
			}
		})
	}
}

// Two deliveries of one file race (e.g. a visibility timeout expired during a slow invocation): both
// see "not found" and both call StartExecution. One execution exists afterwards and both wait.
func TestRacingDeliveries(t *testing.T) {
	tests := []struct {
		name         string
		secondTenant string // TENANT of the second controller: a changed setting changes the input
	}{
		{name: "same input: StartExecution is idempotent"},
		{name: "different input: ExecutionAlreadyExists is described", secondTenant: `{"id":"acme","format":"csv","encoding":"cp932","chunkSize":50}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			second := *r.h
			if tt.secondTenant != "" {
				second.cfg = mustConfig(t, map[string]string{pipeline.EnvTenant: tt.secondTenant})
			}
			var gate sync.WaitGroup
			gate.Add(2)
			r.sfn.raceGate = &gate

			body := eventBody(t, evID1, key1)
			var wg sync.WaitGroup
			resps := make([]events.SQSEventResponse, 2)
			for i, h := range []*Handler{r.h, &second} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resps[i], _ = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 1)}})
				}()
			}
			wg.Wait()

			if got := len(r.sfn.created); got != 1 {
				t.Errorf("got %d executions, want 1", got)
			}
			if got := r.sfn.starts; got != 2 {
				t.Errorf("got %d StartExecution calls, want 2 (the race happened)", got)
			}
			for i, resp := range resps {
				if got := r.failures(resp); !slices.Equal(got, []string{"m1"}) {
					t.Errorf("delivery %d: got failures %v, want [m1]", i, got)
				}
			}
			if got := r.countLevel(t, "ERROR"); got != 0 {
				t.Errorf("got %d ERROR lines, want 0", got)
			}
		})
	}
}

// The controller polls briefly in-process, so a short workflow releases its message in the same
// invocation, and it never polls past its budget.
func TestPollInProcess(t *testing.T) {
	tests := []struct {
		name        string
		budget      string
		succeedAt   int // describe call that first answers SUCCEEDED (1 and 2 find nothing: current and other name); 0: never
		wantRelease bool
		wantSleeps  []time.Duration
	}{
		{name: "short workflow finishes within the budget", budget: "10", succeedAt: 4, wantRelease: true, wantSleeps: []time.Duration{time.Second, 2 * time.Second}},
		{name: "long workflow: polling stops at the budget", budget: "10", wantSleeps: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{name: "no budget: no polling", budget: "0", succeedAt: 3, wantSleeps: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, map[string]string{pipeline.EnvPollBudgetSeconds: tt.budget})
			r.sfn.onDescribe = func(n int, f *fakeSFN) {
				if tt.succeedAt > 0 && n >= tt.succeedAt {
					if e, ok := f.execs[arn1]; ok {
						e.status = sfntypes.ExecutionStatusSucceeded
					}
				}
			}
			resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", eventBody(t, evID1, key1), 1)}})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(resp.BatchItemFailures) == 0; got != tt.wantRelease {
				t.Errorf("got released %v, want %v", got, tt.wantRelease)
			}
			if !slices.Equal(r.sleeps, tt.wantSleeps) {
				t.Errorf("got sleeps %v, want %v", r.sleeps, tt.wantSleeps)
			}
			if got := len(r.sfn.created); got != 1 {
				t.Errorf("got %d executions, want 1", got)
			}
		})
	}
}

func TestPollStopsBeforeTheInvocationDeadline(t *testing.T) {
	r := newRig(t, map[string]string{pipeline.EnvPollBudgetSeconds: "60"})
	// 8 s left: polling may use about 3 s (deadlineMargin is 5 s): one 1 s sleep, not a 2 s one.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	resp, err := r.h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{message("m1", eventBody(t, evID1, key1), 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.sleeps, []time.Duration{time.Second}; !slices.Equal(got, want) {
		t.Errorf("got sleeps %v, want %v", got, want)
	}
	if got := r.failures(resp); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("got failures %v, want [m1]", got)
	}
}

func TestHandleRefusesAnUnconfiguredHandler(t *testing.T) {
	h := &Handler{}
	_, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", "{}", 1)}})
	if err == nil {
		t.Fatal("got no error, want one for a handler without configuration")
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		first, limit time.Duration
		attempt      int
		want         time.Duration
	}{
		{time.Second, time.Minute, 1, time.Second},
		{time.Second, time.Minute, 2, 2 * time.Second},
		{time.Second, time.Minute, 6, 32 * time.Second},
		{time.Second, time.Minute, 7, time.Minute},
		{time.Second, time.Minute, 1 << 20, time.Minute},
		{1500 * time.Millisecond, time.Minute, 1, 2 * time.Second},
		{200 * time.Millisecond, time.Minute, 1, time.Second},
		{time.Second, 5 * time.Minute, 0, time.Second},
	}
	for _, tt := range tests {
		if got := backoff(tt.first, tt.limit, tt.attempt); got != tt.want {
			t.Errorf("backoff(%v, %v, %d): got %v, want %v", tt.first, tt.limit, tt.attempt, got, tt.want)
		}
	}
}

func TestTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"throttling", throttled(), true},
		{"access denied", accessDenied(), false},
		{"deadline", context.DeadlineExceeded, true},
		{"not yet visible", errNotYetVisible, true},
		{"plain", errors.New("boom"), false},
	}
	for _, tt := range tests {
		if got := transient(tt.err); got != tt.want {
			t.Errorf("%s: got transient %v, want %v", tt.name, got, tt.want)
		}
	}
}
