package localrun

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Rate expressions as EventBridge writes them: a singular unit for 1, the plural otherwise; cron
// is not emulated and says so.
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-rule-schedule.html
func TestParseRate(t *testing.T) {
	tests := []struct {
		expr    string
		want    time.Duration
		wantErr string
	}{
		{expr: pipeline.ReconcileSchedule, want: time.Minute},
		{expr: "rate(5 minutes)", want: 5 * time.Minute},
		{expr: "rate(1 hour)", want: time.Hour},
		{expr: "rate(2 days)", want: 48 * time.Hour},
		{expr: "rate(1 minutes)", wantErr: "singular"},
		{expr: "rate(5 minute)", wantErr: "plural"},
		{expr: "rate(0 minutes)", wantErr: "only rate"},
		{expr: "cron(0 12 * * ? *)", wantErr: "only rate"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := parseRate(tt.expr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v, want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}

// A scheduled rule's function target gets its constant input (or a Scheduled Event), once a
// scaled period, asynchronously; a target that is no function fails the start.
func TestScheduledRules(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f := &emulate.Function{Name: "controller", ARN: "arn:aws:lambda:us-east-1:000000000000:function:controller", Binary: self,
		Env: []string{"LOCALRUN_TEST_RUNTIME=1"}, Timeout: 5 * time.Second, Logs: io.Discard}
	defer f.Close()
	tests := []struct {
		name      string
		target    deploy.RuleTarget
		wantInput string // "" for a Scheduled Event
		wantErr   string
	}{
		{name: "constant input", target: deploy.RuleTarget{Arn: f.ARN, Input: `{"do":"answer","id":"tick"}`}, wantInput: `{"do":"answer","id":"tick"}`},
		{name: "no input: the scheduled event", target: deploy.RuleTarget{Arn: f.ARN}},
		{name: "input not JSON", target: deploy.RuleTarget{Arn: f.ARN, Input: `reconcile`}, wantErr: "not JSON"},
		{name: "a queue target", target: deploy.RuleTarget{Arn: "arn:aws:sqs:us-east-1:000000000000:q"}, wantErr: "no function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Cloud{logs: io.Discard, Lambda: &emulate.LambdaService{}}
			r.Lambda.Add(f)
			err := r.scheduleRule("ReconcileRule", deploy.Rule{Schedule: pipeline.ReconcileSchedule, Targets: []deploy.RuleTarget{tt.target}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(r.schedules) != 1 || r.schedules[0].every != time.Minute {
				t.Fatalf("got %+v, %v, want one schedule of a minute", r.schedules, err)
			}
			got := string(r.schedules[0].input)
			if tt.wantInput != "" && got != tt.wantInput {
				t.Errorf("got input %s, want %s", got, tt.wantInput)
			}
			if tt.wantInput == "" {
				var ev map[string]any
				if json.Unmarshal([]byte(got), &ev) != nil || ev["detail-type"] != "Scheduled Event" || ev["source"] != "aws.events" {
					t.Errorf("got input %s, want a Scheduled Event from aws.events", got)
				}
			}
		})
	}

	// Invoked on the scaled period: 1 minute at 1/600 is every 100 ms.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &Cloud{ctx: ctx, logs: io.Discard, opts: cloudOptions{events: EventBridgeOptions{ScheduleScale: 1.0 / 600}}, Lambda: &emulate.LambdaService{}}
	r.Lambda.Add(f)
	if err := r.scheduleRule("ReconcileRule", deploy.Rule{Schedule: pipeline.ReconcileSchedule,
		Targets: []deploy.RuleTarget{{Arn: f.ARN, Input: `{"do":"answer","id":"tick"}`}}}); err != nil {
		t.Fatal(err)
	}
	before := f.Invocations()
	if err := r.startSchedules(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for f.Invocations()-before < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := f.Invocations() - before; got < 3 {
		t.Fatalf("got %d scheduled invocations, want at least 3", got)
	}
	cancel()
	r.status().async.Wait()
}
