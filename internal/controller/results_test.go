package controller

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// fakeResults records the results requests the controller sends; write, when set, stands for the
// results task's work (summary.json), and functionError answers as a failed function does.
type fakeResults struct {
	mu            sync.Mutex
	requests      []pipeline.ResultsRequest
	functions     []string
	write         func(req pipeline.ResultsRequest)
	functionError string
}

func (f *fakeResults) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var req pipeline.ResultsRequest
	if err := json.Unmarshal(in.Payload, &req); err != nil {
		return nil, err
	}
	f.requests = append(f.requests, req)
	f.functions = append(f.functions, aws.ToString(in.FunctionName))
	if f.functionError != "" {
		return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(`{"errorType":"RetryableError","errorMessage":"` + f.functionError + `"}`)}, nil
	}
	if f.write != nil {
		f.write(req)
	}
	return &lambda.InvokeOutput{StatusCode: 200, Payload: []byte("{}")}, nil
}

const testResultsFunction = "arn:aws:lambda:eu-west-1:123456789012:function:acme-split"

// split is the Split result the failed executions' histories hold.
var split = pipeline.SplitResult{Source: pipeline.Source{Bucket: testBucket, Key: "inbox/acme/b.csv", VersionID: "v2"},
	Manifest: pipeline.Location{Bucket: testBucket, Key: "work/acme/" + evID1 + "/manifest"}, Records: 10, Chunks: 1,
	Header: []string{"id", "name"}, Segments: pipeline.Segments(1)}

var splitOut, _ = json.Marshal(split)

func historyEvent(typ sfntypes.HistoryEventType) sfntypes.HistoryEvent {
	return sfntypes.HistoryEvent{Type: typ}
}

// A failed, timed-out or aborted end has the results task write its results before the event,
// which then counts from them; an end already described by its summary, or a success (the state
// machine wrote its results), asks for none; a results task that fails never holds the end.
func TestFailedFileResults(t *testing.T) {
	start, stop := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 10, 3, 0, 0, time.UTC)
	source := pipeline.Source{Bucket: testBucket, Key: "inbox/acme/b.csv", VersionID: "v2", EventTime: "2026-12-01T09:59:00Z"}
	summaryOf := func(status string, redrive int) string {
		b, _ := json.Marshal(results.Summary{Execution: evID1, Status: status, RedriveCount: redrive, Records: 10, Registered: 4, Unprocessed: 6,
			Source: results.Source{Bucket: testBucket, Key: "inbox/acme/b.csv", Version: "v2"}})
		return string(b)
	}
	tests := []struct {
		name       string
		status     string
		redrive    int
		inTenant   string // the input's tenant id; "" the controller's
		noBus      bool
		summary    string // summary.json before the end; "" none
		fnError    string
		history    string // "": Split exited with splitOut; "no split": it never did; "gone": unreadable
		wantInvoke bool
		wantCounts string // the event's countsFrom; "" no event
		wantErrors float64
	}{
		{name: "failed: results first, then the event from them", status: "FAILED", wantInvoke: true, wantCounts: results.CountsFromSummary},
		{name: "timed out", status: "TIMED_OUT", wantInvoke: true, wantCounts: results.CountsFromSummary},
		{name: "aborted after a redrive", status: "ABORTED", redrive: 1, wantInvoke: true, wantCounts: results.CountsFromSummary},
		{name: "the summary of an earlier run is not this end's", status: "FAILED", redrive: 1, summary: summaryOf("FAILED", 0),
			wantInvoke: true, wantCounts: results.CountsFromSummary},
		{name: "already written: no second invocation", status: "FAILED", summary: summaryOf("FAILED", 0), wantCounts: results.CountsFromSummary},
		{name: "succeeded: the state machine wrote them", status: "SUCCEEDED", wantCounts: results.CountsFromNone},
		{name: "no event bus: results still written", status: "FAILED", noBus: true, wantInvoke: true},
		{name: "an input naming another tenant is not trusted", status: "FAILED", inTenant: "globex", wantInvoke: true, wantCounts: results.CountsFromSummary},
		{name: "the results task fails: the end is announced anyway", status: "FAILED", fnError: "S3 is down", wantInvoke: true,
			wantCounts: results.CountsFromNone, wantErrors: 1},
		{name: "failed in Split: no split result in the request", status: "FAILED", history: "no split", wantInvoke: true,
			wantCounts: results.CountsFromSummary},
		{name: "the history cannot be read: no results rather than wrong ones", status: "FAILED", history: "gone",
			wantCounts: results.CountsFromNone, wantErrors: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{pipeline.EnvResultsFunction: testResultsFunction}
			w, bus := eventRig(t, env)
			if tt.noBus {
				w.h.cfg.EventBus = ""
			}
			fn := &fakeResults{functionError: tt.fnError, write: func(req pipeline.ResultsRequest) {
				w.s3.objects[summaryObject] = summaryOf(req.Status, req.RedriveCount)
			}}
			w.h.results = fn
			if tt.summary != "" {
				w.s3.objects[summaryObject] = tt.summary
			}
			arn := testExecPrefix + evID1
			switch tt.history {
			case "":
				w.sfn.set(arn, sfntypes.ExecutionStatusFailed)
				// Split retried once, then exited with its result at $.split.
				w.sfn.setHistory(arn, historyEvent(sfntypes.HistoryEventTypeExecutionStarted), historyEvent(sfntypes.HistoryEventTypeTaskStateEntered),
					historyEvent(sfntypes.HistoryEventTypeTaskFailed), historyEvent(sfntypes.HistoryEventTypeTaskSucceeded),
					sfntypes.HistoryEvent{Type: sfntypes.HistoryEventTypeTaskStateExited, StateExitedEventDetails: &sfntypes.StateExitedEventDetails{
						Name: aws.String("Split"), Output: aws.String(`{"tenant":{"id":"acme"},"split":` + string(splitOut) + `}`)}},
					sfntypes.HistoryEvent{Type: sfntypes.HistoryEventTypeMapStateEntered, StateEnteredEventDetails: &sfntypes.StateEnteredEventDetails{Name: aws.String("Segments")}})
			case "no split":
				w.sfn.set(arn, sfntypes.ExecutionStatusFailed)
				w.sfn.setHistory(arn, historyEvent(sfntypes.HistoryEventTypeExecutionStarted), historyEvent(sfntypes.HistoryEventTypeTaskStateEntered),
					historyEvent(sfntypes.HistoryEventTypeTaskFailed), historyEvent(sfntypes.HistoryEventTypeExecutionFailed))
			}
			tenant := w.h.cfg.Tenant
			if tt.inTenant != "" {
				tenant.ID = tt.inTenant
			}
			in, _ := json.Marshal(pipeline.WorkflowInput{Tenant: tenant, Source: source, Admitted: "2026-12-01T09:59:30Z"})
			end := fileEnd{Name: evID1, ARN: testExecPrefix + evID1, Status: tt.status, RedriveCount: tt.redrive, Input: string(in),
				Start: &start, Stop: &stop}
			if tt.status != "SUCCEEDED" {
				end.Error, end.Cause = "PermanentError", `{"errorType":"PermanentError","errorMessage":"record 5: 400"}`
			}
			if err := w.h.announce(context.Background(), w.h.log, end); err != nil {
				t.Fatalf("got error %v, want none", err)
			}

			if got := len(fn.requests); got != map[bool]int{true: 1}[tt.wantInvoke] {
				t.Fatalf("got %d results invocations, want %v", got, tt.wantInvoke)
			}
			if tt.wantInvoke {
				want := pipeline.ResultsRequest{Kind: pipeline.TaskResults, Status: tt.status, ExecutionName: evID1, ExecutionARN: testExecPrefix + evID1,
					RedriveCount: tt.redrive, StartTime: "2026-12-01T10:00:00Z", StopTime: "2026-12-01T10:03:00Z",
					State: pipeline.ResultsState{Tenant: w.h.cfg.Tenant, Source: source, Admitted: "2026-12-01T09:59:30Z",
						Error: &pipeline.TaskError{Error: end.Error, Cause: end.Cause}}}
				if tt.history == "" {
					want.State.Split = &split
				}
				if !reflect.DeepEqual(fn.requests[0], want) {
					t.Errorf("got request %+v, want %+v", fn.requests[0], want)
				}
				if fn.functions[0] != testResultsFunction {
					t.Errorf("got function %q, want %q", fn.functions[0], testResultsFunction)
				}
			}
			got := bus.details(t)
			if tt.wantCounts == "" {
				if len(got) != 0 {
					t.Errorf("got %d events without a bus, want none", len(got))
				}
				return
			}
			if len(got) != 1 || got[0].CountsFrom != tt.wantCounts || got[0].Status != tt.status {
				t.Fatalf("got events %+v, want one %s counting from %s", got, tt.status, tt.wantCounts)
			}
			if tt.wantCounts == results.CountsFromSummary && (got[0].Records != 10 || got[0].Registered != 4 || got[0].Unprocessed != 6) {
				t.Errorf("got counts %d/%d/%d, want the summary's 10 records, 4 registered, 6 unprocessed", got[0].Records, got[0].Registered, got[0].Unprocessed)
			}
			w.checkMetrics(t, map[string]float64{metrics.ResultsErrors: tt.wantErrors, metrics.FileEvents: 1})
		})
	}
}
