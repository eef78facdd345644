package controller

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// emitted returns, per metric name, the values of every EMF line, in order.
func (r *rig) emitted(t *testing.T) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{}
	for _, d := range r.out.Lines(t) {
		a, ok := d["_aws"].(map[string]any)
		if !ok {
			continue
		}
		for _, dir := range a["CloudWatchMetrics"].([]any) {
			for _, m := range dir.(map[string]any)["Metrics"].([]any) {
				name := m.(map[string]any)["Name"].(string)
				out[name] = append(out[name], d[name].(float64))
			}
		}
	}
	return out
}

// The head file's age is split into time queued before its execution started and time running.
// Messages are sent 90 s before testStart; the fake's executions start at testStart.
func TestHeadMetrics(t *testing.T) {
	halt := map[string]string{pipeline.EnvOnFailure: pipeline.OnFailureHalt}
	tests := []struct {
		name    string
		env     map[string]string
		setup   func(r *rig)
		advance time.Duration // clock moved forward before the delivery
		body    string        // default: an event for key1 with id evID1
		want    map[string][]float64
		absent  []string
	}{
		{
			name: "new file: queued 90 s until its start, running 0 s",
			want: map[string][]float64{metrics.HeadQueuedSeconds: {90}, metrics.HeadRunningSeconds: {0}, metrics.Blocked: {0}},
		},
		{
			name:    "long-running file: queued stays 90 s, running grows with the clock",
			setup:   func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusRunning) },
			advance: 5 * time.Hour,
			want:    map[string][]float64{metrics.HeadQueuedSeconds: {90}, metrics.HeadRunningSeconds: {5 * 3600}, metrics.Blocked: {0}},
		},
		{
			name:    "start throttled: queued is now minus sent, nothing is running",
			setup:   func(r *rig) { r.sfn.startErrs = []error{throttled()} },
			advance: 10 * time.Minute,
			want:    map[string][]float64{metrics.HeadQueuedSeconds: {690}, metrics.Blocked: {0}},
			absent:  []string{metrics.HeadRunningSeconds},
		},
		{
			name:    "succeeded file: no running figure",
			setup:   func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded) },
			advance: time.Hour,
			want:    map[string][]float64{metrics.HeadQueuedSeconds: {90}, metrics.Completions: {1}, metrics.Blocked: {0}},
			absent:  []string{metrics.HeadRunningSeconds},
		},
		{
			name:   "halted tenant: Blocked 1, not 0 as well",
			env:    halt,
			setup:  func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusFailed) },
			want:   map[string][]float64{metrics.Blocked: {1}},
			absent: []string{metrics.HeadRunningSeconds},
		},
		{
			name:   "quarantined message: Blocked 0 and queued time",
			body:   "{not json",
			want:   map[string][]float64{metrics.Blocked: {0}, metrics.HeadQueuedSeconds: {90}},
			absent: []string{metrics.HeadRunningSeconds},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.env)
			if tt.setup != nil {
				tt.setup(r)
			}
			r.now = r.now.Add(tt.advance)
			body := tt.body
			if body == "" {
				body = eventBody(t, evID1, key1)
			}
			if _, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 1)}}); err != nil {
				t.Fatal(err)
			}
			got := r.emitted(t)
			for name, want := range tt.want {
				if !equalFloats(got[name], want) {
					t.Errorf("got %s = %v, want %v", name, got[name], want)
				}
			}
			for _, name := range tt.absent {
				if v, ok := got[name]; ok {
					t.Errorf("got %s = %v, want none", name, v)
				}
			}
		})
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRunningSince(t *testing.T) {
	start := time.Date(2024, 5, 1, 9, 0, 0, 0, time.UTC)
	redrive := start.Add(3 * time.Hour)
	tests := []struct {
		name string
		st   sfn.DescribeExecutionOutput
		want time.Time
	}{
		{"started only", sfn.DescribeExecutionOutput{StartDate: aws.Time(start)}, start},
		{"redriven later: the redrive", sfn.DescribeExecutionOutput{StartDate: aws.Time(start), RedriveDate: aws.Time(redrive)}, redrive},
		{"no dates", sfn.DescribeExecutionOutput{}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runningSince(&tt.st); !got.Equal(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// The health line is written when one of its figures changes, and otherwise once per safety net,
// not on every delivery; the delivery's own counts are written every time.
func TestHeadLineWrittenOnChange(t *testing.T) {
	r := newRig(t, map[string]string{pipeline.EnvSafetyNetSeconds: "300"})
	r.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
	m1 := message("m1", eventBody(t, evID1, key1), 1)
	m2 := message("m2", eventBody(t, evID1, key1), 1)
	m2.Attributes["SentTimestamp"] = strconv.FormatInt(testStart.Add(-30*time.Second).UnixMilli(), 10)
	steps := []struct {
		name    string
		advance time.Duration
		change  func()
		rec     events.SQSMessage
		want    bool // a health line written
	}{
		{name: "first delivery", rec: m1, want: true},
		{name: "unchanged, 10 s later", advance: 10 * time.Second, rec: m1},
		{name: "unchanged, 20 s later", advance: 10 * time.Second, rec: m1},
		{name: "unchanged, 4 min later", advance: 200 * time.Second, rec: m1},
		{name: "the execution was redriven: its run started later", advance: 10 * time.Second, rec: m1, want: true,
			change: func() {
				r.sfn.mu.Lock()
				r.sfn.execs[arn1].redriveCount, r.sfn.execs[arn1].redriveDate = 1, aws.Time(r.now)
				r.sfn.mu.Unlock()
			}},
		{name: "unchanged again", advance: 10 * time.Second, rec: m1},
		{name: "another head file (another send time)", advance: 10 * time.Second, rec: m2, want: true},
		{name: "unchanged, 269 s later: short of the refresh", advance: 269 * time.Second, rec: m2},
		{name: "unchanged, a safety net after the last line", advance: 31 * time.Second, rec: m2, want: true},
		{name: "unchanged right after", advance: time.Second, rec: m2},
	}
	lines := 0
	for i, s := range steps {
		r.now = r.now.Add(s.advance)
		if s.change != nil {
			s.change()
		}
		if _, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{s.rec}}); err != nil {
			t.Fatal(err)
		}
		got := r.emitted(t)
		if n := len(got[metrics.Waits]); n != i+1 {
			t.Fatalf("%s: got %d Waits, want %d: a delivery's counts are written every time", s.name, n, i+1)
		}
		n := len(got[metrics.HeadQueuedSeconds])
		if s.want {
			lines++
		}
		if n != lines || len(got[metrics.Blocked]) != lines || len(got[metrics.HeadRunningSeconds]) != lines {
			t.Errorf("%s: got %d, %d, %d lines of HeadQueuedSeconds, Blocked, HeadRunningSeconds, want %d each",
				s.name, n, len(got[metrics.Blocked]), len(got[metrics.HeadRunningSeconds]), lines)
		}
	}
}

// In a pool each tenant has its own health line: one tenant's line does not stand in for
// another's, and each carries its tenant for the pool's Contributor Insights rules.
func TestPoolHeadLinePerTenant(t *testing.T) {
	r := newPoolRig(t, nil)
	r.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
	r.sfn.set(testExecPrefix+evID2, sfntypes.ExecutionStatusRunning)
	for _, m := range []events.SQSMessage{
		poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"),
		poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"),
		poolMessage("m2", eventBody(t, evID2, globexKey), "globex"),
		poolMessage("m2", eventBody(t, evID2, globexKey), "globex"),
	} {
		if _, err := r.p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{m}}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	for _, l := range r.out.Lines(t) {
		if _, ok := l[metrics.Blocked]; ok {
			got[l[metrics.DimensionTenant].(string)]++
		}
	}
	if got["acme"] != 1 || got["globex"] != 1 || len(got) != 2 {
		t.Errorf("got health lines per tenant %v, want one each of acme and globex", got)
	}
}
