package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

const (
	testRequestID = "5b0e6a8e-2f5c-4a0e-9d1e-7c2b9f0a1d3e"
	replayARN     = testExecPrefix + pipeline.ReplayExecutionPrefix + testRequestID
	// requestRecord is the control record of testRequestID, "bucket/key" as fakeS3 keeps it.
	requestRecord = testBucket + "/control/acme/requests/" + testRequestID + ".json"
)

// redriveSFN adds RedriveExecution to the fake, as Step Functions does it: a FAILED, TIMED_OUT or
// ABORTED execution runs again under its own ARN and DescribeExecution reports its redriveDate.
type redriveSFN struct {
	*fakeSFN
	redriveDates  map[string]time.Time
	calls         []sfn.RedriveExecutionInput
	notRedrivable bool
	errs          []error
}

func (f *redriveSFN) RedriveExecution(ctx context.Context, in *sfn.RedriveExecutionInput, _ ...func(*sfn.Options)) (*sfn.RedriveExecutionOutput, error) {
	f.calls = append(f.calls, *in)
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	arn := aws.ToString(in.ExecutionArn)
	if f.notRedrivable {
		return nil, &sfntypes.ExecutionNotRedrivable{Message: aws.String("Execution redrivable period exceeded.")}
	}
	f.fakeSFN.set(arn, sfntypes.ExecutionStatusRunning)
	at := f.fakeSFN.now()
	f.redriveDates[arn] = at
	return &sfn.RedriveExecutionOutput{RedriveDate: aws.Time(at)}, nil
}

func (f *redriveSFN) DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, o ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	out, err := f.fakeSFN.DescribeExecution(ctx, in, o...)
	if err == nil {
		if at, ok := f.redriveDates[aws.ToString(in.ExecutionArn)]; ok {
			out.RedriveDate = aws.Time(at)
			out.RedriveCount = aws.Int32(1)
		}
	}
	return out, err
}

func newControlRig(t *testing.T, env map[string]string) (*rig, *redriveSFN) {
	r := newRig(t, env)
	rs := &redriveSFN{fakeSFN: r.sfn, redriveDates: map[string]time.Time{}}
	r.h.sfn = rs
	return r, rs
}

// controlBody is a control message; edit changes it before it is encoded (without validation).
func controlBody(t *testing.T, action string, edit func(m *pipeline.ControlMessage)) string {
	t.Helper()
	m := pipeline.ControlMessage{
		Type: pipeline.ControlType, Version: pipeline.ControlVersion, Action: action, Tenant: "acme",
		RequestedBy: "arn:aws:iam::123456789012:user/operator", Reason: "core system fixed",
		RequestedAt: testStart.Add(-2 * time.Minute), RequestID: testRequestID,
	}
	switch action {
	case pipeline.ControlRedrive:
		m.ExecutionName = evID1
	case pipeline.ControlReplay:
		m.Source = &pipeline.ControlSource{Bucket: testBucket, Key: key1, VersionID: "v-6f1c2a3b", ETag: "9b2cf535f27731c974343645a3985328", Size: 1234}
	}
	if edit != nil {
		edit(&m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// recordControl writes body's control record, as pipectl does before it sends a redrive, replay,
// sequence-skip or sequence-set (pipeline.ControlRequestKey), and returns body.
func (f *fakeS3) recordControl(t *testing.T, body string) string {
	t.Helper()
	var m pipeline.ControlMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[testBucket+"/"+pipeline.ControlRequestKey(pipeline.PoolOwner(f.keysPool, m.Tenant), m.RequestID)] = body
	return body
}

func TestControlMessages(t *testing.T) {
	halt := map[string]string{pipeline.EnvOnFailure: pipeline.OnFailureHalt}
	sent := testStart.Add(-90 * time.Second) // message()'s SentTimestamp
	tests := []struct {
		name         string
		env          map[string]string
		setup        func(r *rig, rs *redriveSFN)
		body         func(t *testing.T) string
		wantRelease  bool
		wantWait     int32
		wantRedrives int
		wantStarted  []string // executions created by this delivery
		wantMetrics  map[string]float64
		wantErrors   int
		wantLog      *wantLog
		wantQuar     bool // body stored under quarantine/acme/m1.json
		// noRecord sends the message without its control record; record writes this one instead
		// of the message's own.
		noRecord bool
		record   func(t *testing.T) string
		// wantReason is part of the quarantine's reason.
		wantReason string
	}{
		{
			name:         "redrive of a failed execution redrives it once and holds the group",
			setup:        func(r *rig, rs *redriveSFN) { r.sfn.set(arn1, sfntypes.ExecutionStatusFailed) },
			body:         func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			wantWait:     1,
			wantRedrives: 1,
			wantMetrics:  map[string]float64{metricRedrives: 1, metrics.Waits: 1},
			wantLog: &wantLog{"INFO", "waiting for the redriven execution", map[string]any{
				"executionName": evID1, "requestId": testRequestID, "controlAction": "redrive", "requestedBy": "arn:aws:iam::123456789012:user/operator"}},
		},
		{
			name: "redrive already running from this request waits without a second redrive",
			setup: func(r *rig, rs *redriveSFN) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				rs.redriveDates[arn1] = sent.Add(time.Second)
			},
			body:        func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			wantWait:    1,
			wantMetrics: map[string]float64{metricRedrives: 0, metrics.Waits: 1},
		},
		{
			name: "redrive that failed again under continue releases as a failed file, no second redrive",
			setup: func(r *rig, rs *redriveSFN) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				rs.redriveDates[arn1] = sent.Add(time.Second)
			},
			body:        func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			wantRelease: true,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.FailedFiles: 1},
		},
		{
			name: "redrive that failed again under halt holds the tenant",
			env:  halt,
			setup: func(r *rig, rs *redriveSFN) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				rs.redriveDates[arn1] = sent.Add(time.Second)
			},
			body:        func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			wantWait:    900,
			wantErrors:  1,
			wantMetrics: map[string]float64{metrics.Blocked: 1},
		},
		{
			name: "an execution redriven before the request was sent is redriven again",
			setup: func(r *rig, rs *redriveSFN) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				rs.redriveDates[arn1] = sent.Add(-time.Hour)
			},
			body:         func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			wantWait:     1,
			wantRedrives: 1,
		},
		{
			name:        "redrive of a succeeded execution releases without redriving",
			setup:       func(r *rig, rs *redriveSFN) { r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded) },
			body:        func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			wantRelease: true,
			wantMetrics: map[string]float64{metrics.Completions: 1},
		},
		{
			name: "redrive Step Functions refuses is released with an ERROR",
			setup: func(r *rig, rs *redriveSFN) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				rs.notRedrivable = true
			},
			body:         func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			wantRelease:  true,
			wantRedrives: 1,
			wantErrors:   1,
			wantMetrics:  map[string]float64{metricControlRefused: 1},
			wantLog:      &wantLog{"ERROR", "redrive refused", map[string]any{"executionArn": arn1}},
		},
		{
			name: "throttled redrive keeps the message",
			setup: func(r *rig, rs *redriveSFN) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				rs.errs = []error{throttled()}
			},
			body:         func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			wantWait:     1,
			wantRedrives: 1,
			wantMetrics:  map[string]float64{metrics.ServiceErrors: 1},
		},
		{
			name:        "redrive of an execution the tenant does not have is quarantined",
			body:        func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			wantRelease: true,
			wantErrors:  1,
			wantQuar:    true,
			wantMetrics: map[string]float64{metrics.Quarantined: 1},
		},
		{
			name:        "replay starts a new execution named by the request and holds the group",
			body:        func(t *testing.T) string { return controlBody(t, pipeline.ControlReplay, nil) },
			wantWait:    1,
			wantStarted: []string{replayARN},
			wantMetrics: map[string]float64{metrics.Starts: 1, metrics.Waits: 1},
			wantLog:     &wantLog{"INFO", "waiting for the replay execution", map[string]any{"key": key1}},
		},
		{
			name: "replay whose execution succeeded releases without a new start",
			setup: func(r *rig, rs *redriveSFN) {
				r.sfn.set(replayARN, sfntypes.ExecutionStatusSucceeded)
			},
			body:        func(t *testing.T) string { return controlBody(t, pipeline.ControlReplay, nil) },
			wantRelease: true,
			wantMetrics: map[string]float64{metrics.Completions: 1, metrics.Starts: 0},
		},
		{
			name: "replay of another tenant is quarantined",
			body: func(t *testing.T) string {
				return controlBody(t, pipeline.ControlReplay, func(m *pipeline.ControlMessage) { m.Tenant = "globex" })
			},
			wantRelease: true, wantErrors: 1, wantQuar: true,
		},
		{
			name: "replay of a key outside the tenant prefix is quarantined",
			body: func(t *testing.T) string {
				return controlBody(t, pipeline.ControlReplay, func(m *pipeline.ControlMessage) { m.Source.Key = "inbox/globex/a.csv" })
			},
			wantRelease: true, wantErrors: 1, wantQuar: true,
		},
		{
			name: "replay of another bucket is quarantined",
			body: func(t *testing.T) string {
				return controlBody(t, pipeline.ControlReplay, func(m *pipeline.ControlMessage) { m.Source.Bucket = "other" })
			},
			wantRelease: true, wantErrors: 1, wantQuar: true,
		},
		{
			name:        "redrive without its control record is quarantined and nothing is redriven",
			setup:       func(r *rig, rs *redriveSFN) { r.sfn.set(arn1, sfntypes.ExecutionStatusFailed) },
			body:        func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			noRecord:    true,
			wantRelease: true, wantErrors: 1, wantQuar: true,
			wantReason: "no control record at s3://" + testBucket + "/control/acme/requests/" + testRequestID + ".json",
		},
		{
			name:        "replay without its control record is quarantined and nothing starts",
			body:        func(t *testing.T) string { return controlBody(t, pipeline.ControlReplay, nil) },
			noRecord:    true,
			wantRelease: true, wantErrors: 1, wantQuar: true,
			wantReason: "no control record",
		},
		{
			name:  "redrive whose record names another execution is quarantined",
			setup: func(r *rig, rs *redriveSFN) { r.sfn.set(arn1, sfntypes.ExecutionStatusFailed) },
			body:  func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			record: func(t *testing.T) string {
				return controlBody(t, pipeline.ControlRedrive, func(m *pipeline.ControlMessage) { m.ExecutionName = evID2 })
			},
			wantRelease: true, wantErrors: 1, wantQuar: true,
			wantReason: "the message differs from its control record: executionName",
		},
		{
			name: "replay whose record names another key and reason is quarantined, naming both fields",
			body: func(t *testing.T) string { return controlBody(t, pipeline.ControlReplay, nil) },
			record: func(t *testing.T) string {
				return controlBody(t, pipeline.ControlReplay, func(m *pipeline.ControlMessage) { m.Source.Key = "inbox/acme/other.csv"; m.Reason = "other" })
			},
			wantRelease: true, wantErrors: 1, wantQuar: true,
			wantReason: "the message differs from its control record: reason, source",
		},
		{
			name: "a record the controller may not read (403) counts as absent",
			setup: func(r *rig, rs *redriveSFN) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				r.s3.keyGetErrs[requestRecord] = []error{sourcetest.APIError("GetObject", 403, "AccessDenied")}
			},
			body:        func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			wantRelease: true, wantErrors: 1, wantQuar: true,
			wantReason: "no control record",
		},
		{
			name: "a record S3 cannot read now holds the message, unperformed and not quarantined",
			setup: func(r *rig, rs *redriveSFN) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				r.s3.keyGetErrs[requestRecord] = []error{sourcetest.APIError("GetObject", 500, "InternalError")}
			},
			body:        func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) },
			wantWait:    1,
			wantMetrics: map[string]float64{metricRedrives: 0, metrics.ServiceErrors: 1},
		},
		{
			name: "control message of an unknown version is quarantined",
			body: func(t *testing.T) string {
				return controlBody(t, pipeline.ControlRedrive, func(m *pipeline.ControlMessage) { m.Version = 2 })
			},
			wantRelease: true, wantErrors: 1, wantQuar: true,
			wantLog: &wantLog{"ERROR", "quarantined", map[string]any{"quarantineKey": "quarantine/acme/m1.json"}},
		},
		{
			name: "control message with an unknown field is quarantined",
			body: func(t *testing.T) string {
				b := controlBody(t, pipeline.ControlRedrive, nil)
				return strings.Replace(b, `"tenant"`, `"force":true,"tenant"`, 1)
			},
			wantRelease: true, wantErrors: 1, wantQuar: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, rs := newControlRig(t, tt.env)
			if tt.setup != nil {
				tt.setup(r, rs)
			}
			before := slices.Clone(r.sfn.created)
			body := tt.body(t)
			if tt.record != nil {
				r.s3.recordControl(t, tt.record(t))
			} else if !tt.noRecord {
				r.s3.recordControl(t, body)
			}
			resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 1)}})
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			wantFailures := []string{"m1"}
			if tt.wantRelease {
				wantFailures = []string{}
			}
			if got := r.failures(resp); !slices.Equal(got, wantFailures) {
				t.Errorf("got batch item failures %v, want %v", got, wantFailures)
			}
			var wantChanges []visibilityChange
			if !tt.wantRelease {
				wantChanges = []visibilityChange{{"rh-m1", tt.wantWait}}
			}
			if !slices.Equal(r.sqs.changes, wantChanges) {
				t.Errorf("got visibility changes %v, want %v", r.sqs.changes, wantChanges)
			}
			if len(rs.calls) != tt.wantRedrives {
				t.Errorf("got %d RedriveExecution calls, want %d", len(rs.calls), tt.wantRedrives)
			}
			for _, c := range rs.calls {
				if aws.ToString(c.ExecutionArn) != arn1 || aws.ToString(c.ClientToken) != testRequestID {
					t.Errorf("got RedriveExecution(%s, token %s), want (%s, token %s)", aws.ToString(c.ExecutionArn), aws.ToString(c.ClientToken), arn1, testRequestID)
				}
			}
			if got := r.sfn.created[len(before):]; !slices.Equal(got, tt.wantStarted) && len(got)+len(tt.wantStarted) > 0 {
				t.Errorf("got executions started %v, want %v", got, tt.wantStarted)
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
			if tt.wantReason != "" {
				l := r.findLog(t, "ERROR", "quarantined")
				if got, _ := l["reason"].(string); !strings.Contains(got, tt.wantReason) {
					t.Errorf("got quarantine reason %q, want it to contain %q", got, tt.wantReason)
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
			q, quarantined := r.s3.objects[testBucket+"/quarantine/acme/m1.json"]
			if quarantined != tt.wantQuar || (quarantined && q != body) {
				t.Errorf("got quarantined %v (%d bytes), want %v with the whole body", quarantined, len(q), tt.wantQuar)
			}
		})
	}
}

// A replay registers the object version it names, under an execution name no file event can
// produce, so its records get new Idempotency-Keys. The version's lastModified in the body ranks
// nothing: a tenant without the DynamoDB sink gets no order at all.
func TestReplayInput(t *testing.T) {
	r, _ := newControlRig(t, nil)
	body := controlBody(t, pipeline.ControlReplay, func(m *pipeline.ControlMessage) {
		m.Source.LastModified = "2024-04-01T07:00:00Z"
	})
	r.s3.recordControl(t, body)
	if _, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 1)}}); err != nil {
		t.Fatal(err)
	}
	in := r.sfn.input(t, replayARN)
	want := pipeline.Source{Bucket: testBucket, Key: key1, VersionID: "v-6f1c2a3b", ETag: "9b2cf535f27731c974343645a3985328", Size: 1234}
	if in.Source != want {
		t.Errorf("got source %+v, want %+v", in.Source, want)
	}
	if in.Tenant.ID != "acme" || in.EventID != testRequestID {
		t.Errorf("got tenant %q, event id %q, want acme, %s", in.Tenant.ID, in.EventID, testRequestID)
	}
	if _, ok := r.s3.objects[orderObject]; ok {
		t.Errorf("got an order counter, want none")
	}
}

// A DynamoDB tenant's replay ranks as its original file: the order comes from the original
// execution's input (never from the message), clamped to the tenant's counter; without an original
// to read, the replay is unordered (it only fills keys no item holds).
func TestReplayOrder(t *testing.T) {
	const origName = "0c1f2a3b-4d5e-6f70-8192-a3b4c5d6e7f8"
	origARN := testExecPrefix + origName
	original := func(src pipeline.Source) func(r *rig) {
		return func(r *rig) {
			b, _ := json.Marshal(pipeline.WorkflowInput{Source: src})
			r.sfn.execs[origARN] = &fakeExec{status: sfntypes.ExecutionStatusSucceeded, input: string(b), stopDate: aws.Time(stoppedLongAgo)}
		}
	}
	version := pipeline.Source{Bucket: testBucket, Key: key1, VersionID: "v-6f1c2a3b", ETag: "9b2cf535f27731c974343645a3985328"}
	with := func(edit func(s *pipeline.Source)) pipeline.Source { s := version; edit(&s); return s }
	counter := func(order int64) func(r *rig) {
		return func(r *rig) { r.s3.objects[orderObject] = counterBody(order) }
	}
	tests := []struct {
		name     string
		setup    []func(r *rig)
		edit     func(m *pipeline.ControlMessage)
		want     pipeline.Source // the ranking fields of the replay's source
		wantWarn string
		wantHeld bool
	}{
		{
			name:  "the original's order",
			setup: []func(r *rig){counter(testStartMicros + 100), original(with(func(s *pipeline.Source) { s.Order = testStartMicros + 40 }))},
			want:  pipeline.Source{Order: testStartMicros + 40},
		},
		{
			name:     "an original order above the counter is clamped to it",
			setup:    []func(r *rig){counter(testStartMicros + 100), original(with(func(s *pipeline.Source) { s.Order = pipeline.MaxOrder }))},
			want:     pipeline.Source{Order: testStartMicros + 100},
			wantWarn: "clamped",
		},
		{
			name:     "without a counter, clamped to the clock",
			setup:    []func(r *rig){original(with(func(s *pipeline.Source) { s.Order = testStartMicros + 5_000_000 }))},
			want:     pipeline.Source{Order: testStartMicros},
			wantWarn: "clamped",
		},
		{
			name:  "the event's key was form-encoded",
			setup: []func(r *rig){counter(testStartMicros), original(with(func(s *pipeline.Source) { s.Key = "inbox/acme/2024-05-01+orders.csv"; s.Order = 9 }))},
			want:  pipeline.Source{Order: 9},
		},
		{
			name: "an original from before orders: its event time and sequencer",
			setup: []func(r *rig){original(with(func(s *pipeline.Source) {
				s.EventTime, s.Sequencer = "2024-04-01T07:00:00Z", "0062E99A88DC407460"
			}))},
			want: pipeline.Source{EventTime: "2024-04-01T07:00:00Z", Sequencer: "0062E99A88DC407460"},
		},
		{
			name:     "no original named: unordered",
			edit:     func(m *pipeline.ControlMessage) { m.Source.OriginalExecution = "" },
			want:     pipeline.Source{Unordered: true},
			wantWarn: "names no original execution",
		},
		{
			name:     "the original is gone: unordered",
			want:     pipeline.Source{Unordered: true},
			wantWarn: "keeps a closed execution for 90 days",
		},
		{
			name:     "the original registered another version: unordered",
			setup:    []func(r *rig){original(with(func(s *pipeline.Source) { s.VersionID = "v-other"; s.Order = 9 }))},
			want:     pipeline.Source{Unordered: true},
			wantWarn: "another object version",
		},
		{
			name:     "an unordered original: unordered",
			setup:    []func(r *rig){original(with(func(s *pipeline.Source) { s.Unordered = true }))},
			want:     pipeline.Source{Unordered: true},
			wantWarn: "unordered replay itself",
		},
		{
			name:  "a far-future lastModified in the message ranks nothing",
			setup: []func(r *rig){counter(testStartMicros), original(with(func(s *pipeline.Source) { s.Order = 7 }))},
			edit:  func(m *pipeline.ControlMessage) { m.Source.LastModified = "9999-12-31T23:59:59Z" },
			want:  pipeline.Source{Order: 7},
		},
		{
			name:     "the original cannot be described: held",
			setup:    []func(r *rig){func(r *rig) { r.sfn.describeErrs = []error{&sfntypes.ExecutionDoesNotExist{}, accessDenied()} }},
			wantHeld: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newControlRig(t, ddbEnv())
			for _, s := range tt.setup {
				s(r)
			}
			before := r.s3.objects[orderObject]
			body := controlBody(t, pipeline.ControlReplay, func(m *pipeline.ControlMessage) {
				m.Source.OriginalExecution = origName
				if tt.edit != nil {
					tt.edit(m)
				}
			})
			r.s3.recordControl(t, body)
			released := r.deliver(t, "m1", body, 1)
			if tt.wantHeld {
				if released || slices.Contains(r.sfn.created, replayARN) {
					t.Errorf("got released %v, executions %v, want the message held and nothing started", released, r.sfn.created)
				}
				return
			}
			src := r.sfn.input(t, replayARN).Source
			got := pipeline.Source{Order: src.Order, Unordered: src.Unordered, EventTime: src.EventTime, Sequencer: src.Sequencer}
			if got != tt.want {
				t.Errorf("got ranking %+v, want %+v", got, tt.want)
			}
			if _, err := pipeline.SeqOf(src, 1); err != nil {
				t.Errorf("got a replay source the sink cannot rank: %v", err)
			}
			if r.s3.objects[orderObject] != before {
				t.Errorf("got the counter changed by a replay (%q → %q), want it unchanged", before, r.s3.objects[orderObject])
			}
			if tt.wantWarn != "" {
				found := false
				for _, l := range r.logs(t) {
					text := fmt.Sprint(l["msg"], " ", l["why"])
					found = found || (l["level"] == "WARN" && strings.Contains(text, tt.wantWarn))
				}
				if !found {
					t.Errorf("got no WARN containing %q; logs:\n%v", tt.wantWarn, r.logs(t))
				}
			}
		})
	}
}

// A control message that must wait holds every later message of the batch, like a file.
func TestControlMessageHoldsTheGroup(t *testing.T) {
	r, _ := newControlRig(t, nil)
	r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
	resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		message("m1", r.s3.recordControl(t, controlBody(t, pipeline.ControlRedrive, nil)), 1),
		message("m2", eventBody(t, evID2, "inbox/acme/next.csv"), 1),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.failures(resp), []string{"m1", "m2"}; !slices.Equal(got, want) {
		t.Errorf("got batch item failures %v, want %v", got, want)
	}
	if _, ok := r.sfn.execs[arn2]; ok {
		t.Errorf("got an execution for the file behind the redrive, want none")
	}
}

// A redrive or replay may only name an execution of its own tenant. Execution names do not carry
// the tenant, and a pool's tenants share one state machine, so acme's control message could name
// globex's execution there: the execution's input tells, and a message naming another tenant's
// execution (or, in a pool, one whose input names no tenant) is quarantined, never performed.
func TestControlRefusesAnotherTenantsExecution(t *testing.T) {
	inputOf := func(tenant string) string {
		b, _ := json.Marshal(pipeline.WorkflowInput{Tenant: pipeline.Tenant{Tenant: spec.Tenant{ID: tenant}},
			Source: pipeline.Source{Bucket: testBucket, Key: "inbox/" + tenant + "/a.csv", VersionID: "v1"}})
		return string(b)
	}
	const origName = "0c1f2a3b-4d5e-6f70-8192-a3b4c5d6e7f8"
	replayNaming := func(t *testing.T) string {
		return controlBody(t, pipeline.ControlReplay, func(m *pipeline.ControlMessage) { m.Source.OriginalExecution = origName })
	}
	redrive := func(t *testing.T) string { return controlBody(t, pipeline.ControlRedrive, nil) }
	tests := []struct {
		name      string
		exec      string // the named execution
		input     string // its input
		body      func(t *testing.T) string
		wantQuar  bool
		wantCalls int // RedriveExecution or StartExecution calls
	}{
		{"redrive of globex's execution", arn1, inputOf("globex"), redrive, true, 0},
		{"redrive of acme's own execution", arn1, inputOf("acme"), redrive, false, 1},
		{"replay naming globex's execution as its original", testExecPrefix + origName, inputOf("globex"), replayNaming, true, 0},
		{"replay naming acme's own execution as its original", testExecPrefix + origName, inputOf("acme"), replayNaming, false, 1},
	}
	type outcome struct {
		quarantined bool
		calls       int
		errorLine   map[string]any
	}
	tiers := map[string]func(t *testing.T, exec, input, body string) outcome{
		"silo": func(t *testing.T, exec, input, body string) outcome {
			r, rs := newControlRig(t, nil)
			r.sfn.execs[exec] = &fakeExec{status: sfntypes.ExecutionStatusFailed, input: input, errName: "States.TaskFailed", stopDate: aws.Time(stoppedLongAgo)}
			if _, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", r.s3.recordControl(t, body), 1)}}); err != nil {
				t.Fatal(err)
			}
			_, q := r.s3.objects[testBucket+"/quarantine/acme/m1.json"]
			o := outcome{quarantined: q, calls: len(rs.calls) + len(r.sfn.created)}
			for _, l := range r.logs(t) {
				if l["level"] == "ERROR" {
					o.errorLine = l
				}
			}
			return o
		},
		"pool": func(t *testing.T, exec, input, body string) outcome {
			r := newPoolRig(t, nil)
			rs := &redriveSFN{fakeSFN: r.sfn, redriveDates: map[string]time.Time{}}
			r.p.sfn = rs
			r.sfn.execs[exec] = &fakeExec{status: sfntypes.ExecutionStatusFailed, input: input, errName: "States.TaskFailed", stopDate: aws.Time(stoppedLongAgo)}
			if _, err := r.p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{poolMessage("m1", r.s3.recordControl(t, body), "acme")}}); err != nil {
				t.Fatal(err)
			}
			_, q := r.s3.objects[testBucket+"/"+pipeline.QuarantineDir(pipeline.PoolOwner(testPool, "acme"))+"m1.json"]
			o := outcome{quarantined: q, calls: len(rs.calls) + len(r.sfn.created)}
			for _, l := range r.logs(t) {
				if l["level"] == "ERROR" {
					o.errorLine = l
				}
			}
			return o
		},
	}
	for tier, run := range tiers {
		for _, tt := range tests {
			t.Run(tier+"/"+tt.name, func(t *testing.T) {
				got := run(t, tt.exec, tt.input, tt.body(t))
				if got.quarantined != tt.wantQuar || got.calls != tt.wantCalls {
					t.Errorf("got quarantined %v and %d redrives or starts, want %v and %d", got.quarantined, got.calls, tt.wantQuar, tt.wantCalls)
				}
				if tt.wantQuar && (got.errorLine == nil || !strings.Contains(fmt.Sprint(got.errorLine["reason"]), `is tenant "globex"'s, not "acme"'s`)) {
					t.Errorf("got ERROR line %v, want one whose reason names globex's execution", got.errorLine)
				}
			})
		}
	}

	// In a pool, an execution whose input names no tenant cannot be shown to be acme's.
	t.Run("pool/redrive of an execution without a tenant in its input", func(t *testing.T) {
		r := newPoolRig(t, nil)
		rs := &redriveSFN{fakeSFN: r.sfn, redriveDates: map[string]time.Time{}}
		r.p.sfn = rs
		r.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
		if _, err := r.p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{poolMessage("m1", redrive(t), "acme")}}); err != nil {
			t.Fatal(err)
		}
		if _, q := r.s3.objects[testBucket+"/"+pipeline.QuarantineDir(pipeline.PoolOwner(testPool, "acme"))+"m1.json"]; !q || len(rs.calls) != 0 {
			t.Errorf("got quarantined %v and %d redrives, want quarantined and none", q, len(rs.calls))
		}
	})
}
