package controller

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// arnOV1 is the object-version execution of the default test event (evID1, key1), computed
// independently: "ov-" + sha256 of the length-prefixed fields bucket, key, "version\x00"+version
// id, sequencer.
const arnOV1 = testExecPrefix + "ov-2a42e3507395d1519268cfd643d149321258ed2e9fe2eea8f207312a55dffe54"

// A tenant's idempotencyKey changed while a file was queued: the redelivered message must find the
// execution started under the old naming, whatever its status, and never start a second one.
func TestIdempotencyKeyChangeAdoptsTheRunningExecution(t *testing.T) {
	objectVersion := map[string]string{pipeline.EnvIdempotencyKey: pipeline.IdempotencyObjectVersion}
	objectVersionHalt := map[string]string{pipeline.EnvIdempotencyKey: pipeline.IdempotencyObjectVersion, pipeline.EnvOnFailure: pipeline.OnFailureHalt}
	eventID := map[string]string{pipeline.EnvIdempotencyKey: pipeline.IdempotencyEventID}
	tests := []struct {
		name          string
		env           map[string]string
		existing      map[string]sfntypes.ExecutionStatus
		describeErrs  []error
		wantRelease   bool
		wantDescribed []string // DescribeExecution ARNs, in order
		wantStarts    int
		wantCreated   []string
		wantMetrics   map[string]float64
		wantAdopted   string // executionName logged as adopted; "" for none
	}{
		{
			name:          "event-id to object-version: RUNNING under the event id waits, no second start",
			env:           objectVersion,
			existing:      map[string]sfntypes.ExecutionStatus{arn1: sfntypes.ExecutionStatusRunning},
			wantDescribed: []string{arnOV1, arn1},
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.Starts: 0},
			wantAdopted:   evID1,
		},
		{
			name:          "event-id to object-version: SUCCEEDED under the event id releases",
			env:           objectVersion,
			existing:      map[string]sfntypes.ExecutionStatus{arn1: sfntypes.ExecutionStatusSucceeded},
			wantRelease:   true,
			wantDescribed: []string{arnOV1, arn1},
			wantMetrics:   map[string]float64{metrics.Completions: 1, metrics.Starts: 0},
			wantAdopted:   evID1,
		},
		{
			name:          "event-id to object-version: FAILED under the event id halts on that execution",
			env:           objectVersionHalt,
			existing:      map[string]sfntypes.ExecutionStatus{arn1: sfntypes.ExecutionStatusFailed},
			wantDescribed: []string{arnOV1, arn1},
			wantMetrics:   map[string]float64{metrics.Blocked: 1, metrics.Starts: 0},
			wantAdopted:   evID1,
		},
		{
			name:          "object-version to event-id: RUNNING under the object version waits",
			env:           eventID,
			existing:      map[string]sfntypes.ExecutionStatus{arnOV1: sfntypes.ExecutionStatusRunning},
			wantDescribed: []string{arn1, arnOV1},
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.Starts: 0},
			wantAdopted:   "ov-2a42e3507395d1519268cfd643d149321258ed2e9fe2eea8f207312a55dffe54",
		},
		{
			name:          "no execution under either name: started under the current name",
			env:           objectVersion,
			wantDescribed: []string{arnOV1, arn1},
			wantStarts:    1,
			wantCreated:   []string{arnOV1},
			wantMetrics:   map[string]float64{metrics.Starts: 1},
		},
		{
			name:          "execution under the current name: no extra lookup",
			env:           eventID,
			existing:      map[string]sfntypes.ExecutionStatus{arn1: sfntypes.ExecutionStatusRunning, arnOV1: sfntypes.ExecutionStatusSucceeded},
			wantDescribed: []string{arn1},
			wantMetrics:   map[string]float64{metrics.Waits: 1},
		},
		{
			name:          "lookup under the other name throttled: message kept, nothing started",
			env:           eventID,
			describeErrs:  []error{&sfntypes.ExecutionDoesNotExist{}, throttled()},
			wantDescribed: []string{arn1, arnOV1},
			wantMetrics:   map[string]float64{metrics.ServiceErrors: 1, metrics.Starts: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.env)
			for arn, st := range tt.existing {
				r.sfn.set(arn, st)
			}
			r.sfn.describeErrs = tt.describeErrs
			var described []string
			spy := &describeSpy{stepFunctions: r.sfn, arns: &described}
			r.h.sfn = spy
			resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", eventBody(t, evID1, key1), 1)}})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(resp.BatchItemFailures) == 0; got != tt.wantRelease {
				t.Errorf("got released %v, want %v", got, tt.wantRelease)
			}
			if !slices.Equal(described, tt.wantDescribed) {
				t.Errorf("got DescribeExecution of\n%v\nwant\n%v", described, tt.wantDescribed)
			}
			if r.sfn.starts != tt.wantStarts {
				t.Errorf("got %d StartExecution calls, want %d", r.sfn.starts, tt.wantStarts)
			}
			if !slices.Equal(r.sfn.created, tt.wantCreated) {
				t.Errorf("got executions created %v, want %v", r.sfn.created, tt.wantCreated)
			}
			sums := r.metricSums(t)
			for name, want := range tt.wantMetrics {
				if got := sums[name]; got != want {
					t.Errorf("got metric %s = %v, want %v", name, got, want)
				}
			}
			if tt.wantAdopted != "" {
				l := r.findLog(t, "INFO", "found under the previous idempotency key")
				if l["executionName"] != tt.wantAdopted {
					t.Errorf("got adopted executionName %v, want %s", l["executionName"], tt.wantAdopted)
				}
			}
			if tt.env[pipeline.EnvOnFailure] == pipeline.OnFailureHalt {
				// The skip marker an operator writes names the adopted execution.
				l := r.findLog(t, "ERROR", "tenant halted")
				if got, want := l["skipMarkerKey"], "control/acme/skip/"+tt.wantAdopted; got != want {
					t.Errorf("got skipMarkerKey %v, want %s", got, want)
				}
			}
		})
	}
}

// describeSpy records the ARN of every DescribeExecution call.
type describeSpy struct {
	stepFunctions
	arns *[]string
}

func (s *describeSpy) DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, o ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	*s.arns = append(*s.arns, aws.ToString(in.ExecutionArn))
	return s.stepFunctions.DescribeExecution(ctx, in, o...)
}
