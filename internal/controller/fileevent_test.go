package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// fakeBus records the entries PutEvents accepted; errs are returned, in order, before that.
type fakeBus struct {
	mu      sync.Mutex
	entries []map[string]string // source, detailType, bus, detail
	errs    []error
	// beforePut runs, outside the lock, before each call is answered (e.g. another announcer
	// coming in while this call is in flight).
	beforePut func()
}

func (f *fakeBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	if f.beforePut != nil {
		f.beforePut()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	for _, e := range in.Entries {
		f.entries = append(f.entries, map[string]string{"source": aws.ToString(e.Source), "detailType": aws.ToString(e.DetailType),
			"bus": aws.ToString(e.EventBusName), "detail": aws.ToString(e.Detail)})
	}
	return &eventbridge.PutEventsOutput{}, nil
}

func (f *fakeBus) details(t *testing.T) []results.Event {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []results.Event
	for _, e := range f.entries {
		var ev results.Event
		if err := json.Unmarshal([]byte(e["detail"]), &ev); err != nil {
			t.Fatalf("detail %s: %v", e["detail"], err)
		}
		out = append(out, ev)
	}
	return out
}

const testBus = "arn:aws:events:eu-west-1:123456789012:event-bus/files"

// eventRig is a wake rig whose controller puts File Processed events on bus.
func eventRig(t *testing.T, env map[string]string) (*wakeRig, *fakeBus) {
	t.Helper()
	all := map[string]string{pipeline.EnvEventBusName: testBus}
	for k, v := range env {
		all[k] = v
	}
	w := newWakeRig(t, all)
	bus := &fakeBus{}
	w.h.events = bus
	return w, bus
}

const summaryObject = testBucket + "/results/acme/" + evID1 + "/summary.json"

// The event's detail, byte for byte: counts from summary.json when it tells this end.
func TestFileEventShape(t *testing.T) {
	tests := []struct {
		name    string
		summary string // summary.json's body; "" none
		want    string
	}{
		{
			name: "counts from summary.json",
			summary: `{"version":1,"tenant":"acme","tier":"silo","execution":"` + evID1 + `","status":"SUCCEEDED",` +
				`"source":{"bucket":"ingest","key":"inbox/acme/a.csv","version":"v1"},"records":10,"registered":8,"rejected":2,"unprocessed":0}`,
			want: `{"eventId":"` + evID1 + `/0","tenant":"acme","tier":"silo","source":{"bucket":"ingest","key":"inbox/acme/a.csv","version":"v1"},` +
				`"status":"SUCCEEDED","records":10,"registered":8,"rejected":2,"unprocessed":0,"summary":"s3://ingest/results/acme/` + evID1 + `/summary.json",` +
				`"execution":"` + evID1 + `","executionArn":"` + testExecPrefix + evID1 + `","countsFrom":"summary"}`,
		},
		{
			name: "a summary of another end is not read",
			summary: `{"version":1,"execution":"` + evID1 + `","status":"FAILED","records":10,"registered":3,` +
				`"source":{"bucket":"ingest","key":"inbox/acme/a.csv"}}`,
			want: `{"eventId":"` + evID1 + `/0","tenant":"acme","tier":"silo","source":{"bucket":"","key":""},` +
				`"status":"SUCCEEDED","records":0,"registered":0,"rejected":0,"unprocessed":0,"summary":"s3://ingest/results/acme/` + evID1 + `/summary.json",` +
				`"execution":"` + evID1 + `","executionArn":"` + testExecPrefix + evID1 + `","countsFrom":"none"}`,
		},
		{
			name: "no summary: counts unknown",
			want: `{"eventId":"` + evID1 + `/0","tenant":"acme","tier":"silo","source":{"bucket":"","key":""},` +
				`"status":"SUCCEEDED","records":0,"registered":0,"rejected":0,"unprocessed":0,"summary":"s3://ingest/results/acme/` + evID1 + `/summary.json",` +
				`"execution":"` + evID1 + `","executionArn":"` + testExecPrefix + evID1 + `","countsFrom":"none"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, bus := eventRig(t, nil)
			if tt.summary != "" {
				w.s3.objects[summaryObject] = tt.summary
			}
			w.wake(t, evID1, "SUCCEEDED")
			if len(bus.entries) != 1 {
				t.Fatalf("got %d events, want 1", len(bus.entries))
			}
			e := bus.entries[0]
			if e["source"] != "tenantpipeline" || e["detailType"] != "File Processed" || e["bus"] != testBus {
				t.Errorf("got source %q, detail-type %q, bus %q, want tenantpipeline, File Processed, %s", e["source"], e["detailType"], e["bus"], testBus)
			}
			if e["detail"] != tt.want {
				t.Errorf("got detail\n%s\nwant\n%s", e["detail"], tt.want)
			}
		})
	}
}

// The source comes from the execution's input, the failure's name from the event, the counts from
// the execution's output when there is no summary.
func TestFileEventFromExecution(t *testing.T) {
	w, bus := eventRig(t, nil)
	in, _ := json.Marshal(pipeline.WorkflowInput{Tenant: w.h.cfg.Tenant, Source: pipeline.Source{Bucket: testBucket, Key: "inbox/acme/b.csv", VersionID: "v2"}})
	err := w.h.announce(context.Background(), w.h.log, fileEnd{Name: evID1, ARN: testExecPrefix + evID1, Status: "FAILED", RedriveCount: 2,
		Input: string(in), Output: `{"records":5,"registered":2,"rejected":1,"unprocessed":2}`, Error: "RecordRejected"})
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	got := bus.details(t)
	want := results.Event{EventID: evID1 + "/2", Tenant: "acme", Tier: "silo", Status: "FAILED",
		Source: results.Source{Bucket: testBucket, Key: "inbox/acme/b.csv", Version: "v2"}, Records: 5, Registered: 2, Rejected: 1, Unprocessed: 2,
		Summary: "s3://ingest/results/acme/" + evID1 + "/summary.json", Execution: evID1, ExecutionARN: testExecPrefix + evID1,
		Failure: &results.Failure{Type: "RecordRejected"}, CountsFrom: results.CountsFromExecution}
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	g, _ := json.Marshal(got[0])
	wb, _ := json.Marshal(want)
	if string(g) != string(wb) {
		t.Errorf("got %s, want %s", g, wb)
	}
}

// One event per end of a run: a retried or duplicated status event, and later deliveries, find
// the marker; a redrive's end is its own.
func TestFileEventOnce(t *testing.T) {
	w, bus := eventRig(t, nil)
	w.putState(t, evID1, "rh-1")
	w.q.receive("rh-1")
	// A failed end is described for its cause and dates.
	w.sfn.set(testExecPrefix+evID1, sfntypes.ExecutionStatusFailed)
	w.wake(t, evID1, "FAILED")
	w.wake(t, evID1, "FAILED") // a duplicate, or EventBridge's retry of a failed invocation
	if got := len(bus.entries); got != 1 {
		t.Fatalf("got %d events after a duplicated status event, want 1", got)
	}
	marker := testBucket + "/" + results.EventMarkerKey(pipeline.SiloOwner("acme"), evID1, 0)
	if _, ok := w.s3.objects[marker]; !ok {
		t.Errorf("got no marker %s", marker)
	}
	// The delivery that finds the execution failed announces nothing more.
	w.deliver(t, 2)
	if got := len(bus.entries); got != 1 {
		t.Fatalf("got %d events after the delivery, want 1", got)
	}
	// A redrive ends again: its own event.
	redriven := strings.Replace(string(statusPayload(t, evID1, "SUCCEEDED")), `"redriveCount": 0`, `"redriveCount": 1`, 1)
	if _, err := w.h.Invoke(context.Background(), json.RawMessage(redriven)); err != nil {
		t.Fatal(err)
	}
	got := bus.details(t)
	if len(got) != 2 {
		t.Fatalf("got %d events after the redrive, want 2", len(got))
	}
	if got[0].EventID != evID1+"/0" || got[1].EventID != evID1+"/1" || got[0].Status != "FAILED" || got[1].Status != "SUCCEEDED" {
		t.Errorf("got events %s %s, %s %s; want %s/0 FAILED, %s/1 SUCCEEDED", got[0].EventID, got[0].Status, got[1].EventID, got[1].Status, evID1, evID1)
	}
	w.checkMetrics(t, map[string]float64{metrics.FileEvents: 2, metrics.FileEventErrors: 0})
}

// A refused PutEvents on the status event leaves no record, so the woken delivery describes the
// execution and puts the event before it releases the file; while it is refused, the file is held.
func TestFileEventRetriedByDelivery(t *testing.T) {
	w, bus := eventRig(t, map[string]string{pipeline.EnvControlPrefixProtected: "true"})
	bus.errs = []error{errors.New("throttled"), errors.New("throttled")}
	w.putState(t, evID1, "rh-1")
	w.q.receive("rh-1")
	w.sfn.set(testExecPrefix+evID1, sfntypes.ExecutionStatusSucceeded)
	w.wake(t, evID1, "SUCCEEDED")
	if _, ok := w.s3.objects[wakeDoneObject]; ok {
		t.Errorf("got wake-done.json after a refused event, want none: the delivery must describe and announce")
	}
	if w.deliver(t, 2) {
		t.Fatalf("got the file released while its event is refused, want held")
	}
	if !w.deliver(t, 3) {
		t.Fatalf("got the file held, want released once its event is out")
	}
	if got := bus.details(t); len(got) != 1 || got[0].EventID != evID1+"/0" {
		t.Errorf("got events %+v, want one %s/0", got, evID1)
	}
	w.checkMetrics(t, map[string]float64{metrics.FileEvents: 1, metrics.FileEventErrors: 2})
}

// Without wake-up events the delivery that finds the end announces it, once.
func TestFileEventWithoutWakeEvents(t *testing.T) {
	r := newRig(t, map[string]string{pipeline.EnvEventBusName: "default"})
	bus := &fakeBus{}
	r.h.events = bus
	r.sfn.set(testExecPrefix+evID1, sfntypes.ExecutionStatusSucceeded)
	for i := 1; i <= 2; i++ {
		msg := message("m1", eventBody(t, evID1, key1), i)
		if _, err := r.h.Handle(context.Background(), eventsSQS(msg)); err != nil {
			t.Fatal(err)
		}
	}
	if got := bus.details(t); len(got) != 1 || got[0].EventID != evID1+"/0" || bus.entries[0]["bus"] != "default" {
		t.Errorf("got events %+v, want one %s/0 on the default bus", bus.entries, evID1)
	}
}

func eventsSQS(msgs ...events.SQSMessage) events.SQSEvent { return events.SQSEvent{Records: msgs} }

// A pooled tenant's end is announced by the pool's controller as that tenant's, tier pool, on the
// pool's bus, once.
func TestPoolFileEvent(t *testing.T) {
	env := map[string]string{pipeline.EnvEventBusName: testBus}
	for k, v := range wakeEnv {
		env[k] = v
	}
	r := newPoolRig(t, env)
	bus := &fakeBus{}
	r.p.events = bus
	ctx := context.Background()
	if _, err := r.p.Handle(ctx, eventsSQS(poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"))); err != nil {
		t.Fatal(err)
	}
	r.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
	in, _ := json.Marshal(string(mustJSON(t, r.sfn.input(t, arn1))))
	payload := strings.Replace(string(statusPayload(t, evID1, "SUCCEEDED")), `"input": "{}"`, `"input": `+string(in), 1)
	for range 2 {
		if _, err := r.p.Invoke(ctx, json.RawMessage(payload)); err != nil {
			t.Fatal(err)
		}
	}
	got := bus.details(t)
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	if got[0].Tenant != "acme" || got[0].Tier != "pool" || got[0].Source.Key != acmeKey || got[0].EventID != evID1+"/0" {
		t.Errorf("got tenant %q tier %q key %q id %q, want acme, pool, %q, %s/0", got[0].Tenant, got[0].Tier, got[0].Source.Key, got[0].EventID, acmeKey, evID1)
	}
}

// runPayload is the status event of the execution name ending with status, of the run redrive (0
// for the first run); redrive -1 leaves the redrive count out of the event.
func runPayload(t *testing.T, name, status string, redrive int) json.RawMessage {
	t.Helper()
	s := string(statusPayload(t, name, status))
	if redrive < 0 {
		return json.RawMessage(strings.Replace(s, `"redriveCount": 0,`, "", 1))
	}
	return json.RawMessage(strings.Replace(s, `"redriveCount": 0`, fmt.Sprintf(`"redriveCount": %d`, redrive), 1))
}

// A status event that arrives after a redrive (status events are best effort and may come late)
// announces only the end DescribeExecution confirms as its own run; the redriven run's end is
// announced once, when it ends.
func TestFileEventLateStatusEvent(t *testing.T) {
	arn := testExecPrefix + evID1
	redriven := func(w *wakeRig, status sfntypes.ExecutionStatus) {
		w.sfn.set(arn, status)
		w.sfn.mu.Lock()
		w.sfn.execs[arn].redriveCount = 1
		w.sfn.mu.Unlock()
	}
	invoke := func(t *testing.T, w *wakeRig, payload json.RawMessage) {
		t.Helper()
		if _, err := w.h.Invoke(context.Background(), payload); err != nil {
			t.Fatalf("got error %v, want none", err)
		}
	}
	ids := func(evs []results.Event) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, ev.EventID+" "+ev.Status)
		}
		return out
	}

	t.Run("run 0's FAILED event while the redriven run runs: nothing, then run 1's end once", func(t *testing.T) {
		w, bus := eventRig(t, nil)
		redriven(w, sfntypes.ExecutionStatusRunning)
		invoke(t, w, runPayload(t, evID1, "FAILED", 0))
		if got := bus.details(t); len(got) != 0 {
			t.Fatalf("got events %v after the late event, want none", ids(got))
		}
		if _, ok := w.s3.objects[testBucket+"/"+results.EventMarkerKey(pipeline.SiloOwner("acme"), evID1, 1)]; ok {
			t.Fatalf("got run 1's marker while run 1 runs, want none")
		}
		redriven(w, sfntypes.ExecutionStatusSucceeded)
		invoke(t, w, runPayload(t, evID1, "SUCCEEDED", 1))
		w.deliver(t, 2)
		if got, want := ids(bus.details(t)), []string{evID1 + "/1 SUCCEEDED"}; !slices.Equal(got, want) {
			t.Errorf("got events %v, want %v", got, want)
		}
	})

	// The late event is handled while the delivery's PutEvents is in flight: both have read no
	// marker of run 1. Run 1 may end as run 0 did: the redrive count tells them apart.
	for _, end := range []sfntypes.ExecutionStatus{sfntypes.ExecutionStatusSucceeded, sfntypes.ExecutionStatusFailed} {
		t.Run("run 0's FAILED event while a delivery announces run 1's "+string(end)+": run 1's end once", func(t *testing.T) {
			w, bus := eventRig(t, nil)
			redriven(w, end)
			late := true
			bus.beforePut = func() {
				if late {
					late = false
					invoke(t, w, runPayload(t, evID1, "FAILED", 0))
				}
			}
			w.deliver(t, 2)
			if late {
				t.Fatalf("got no PutEvents from the delivery, want one: the late event was not handled")
			}
			invoke(t, w, runPayload(t, evID1, string(end), 1))
			if got, want := ids(bus.details(t)), []string{evID1 + "/1 " + string(end)}; !slices.Equal(got, want) {
				t.Errorf("got events %v, want %v", got, want)
			}
			w.findLog(t, "INFO", "status event of an earlier run")
		})
	}

	// An event of the run DescribeExecution tells is announced, as before.
	for _, tt := range []struct {
		name    string
		status  sfntypes.ExecutionStatus
		redrive int // the execution's redrive count
		event   int // the event's; -1 absent
		want    string
	}{
		{name: "first run FAILED", status: sfntypes.ExecutionStatusFailed, event: 0, want: evID1 + "/0 FAILED"},
		{name: "redriven run TIMED_OUT", status: sfntypes.ExecutionStatusTimedOut, redrive: 1, event: 1, want: evID1 + "/1 TIMED_OUT"},
		{name: "event without its redrive count", status: sfntypes.ExecutionStatusAborted, redrive: 2, event: -1, want: evID1 + "/2 ABORTED"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, bus := eventRig(t, nil)
			w.sfn.set(arn, tt.status)
			w.sfn.execs[arn].redriveCount = int32(tt.redrive)
			invoke(t, w, runPayload(t, evID1, string(tt.status), tt.event))
			if got, want := ids(bus.details(t)), []string{tt.want}; !slices.Equal(got, want) {
				t.Errorf("got events %v, want %v", got, want)
			}
		})
	}
}

// A SUCCEEDED event that DescribeExecution contradicts is not recorded as the end: a record of
// SUCCEEDED releases a file on its own, and nothing was announced.
func TestFileEventContradictedSuccess(t *testing.T) {
	w, bus := eventRig(t, nil)
	w.putState(t, evID1, "rh-1")
	w.q.receive("rh-1")
	w.sfn.set(testExecPrefix+evID1, sfntypes.ExecutionStatusRunning)
	if _, err := w.h.Invoke(context.Background(), runPayload(t, evID1, "SUCCEEDED", -1)); err != nil {
		t.Fatal(err)
	}
	if got := bus.details(t); len(got) != 0 {
		t.Errorf("got %d events, want none", len(got))
	}
	if _, ok := w.s3.objects[wakeDoneObject]; ok {
		t.Errorf("got wake-done.json for a contradicted SUCCEEDED, want none")
	}
}
