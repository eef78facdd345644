package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// fakeAdmission is a one-gate admission with limit leases, as internal/admission decides (that
// package is tested against DynamoDB's own semantics); here only the controller's use of it counts.
type fakeAdmission struct {
	mu       sync.Mutex
	limit    int
	leases   map[string]bool
	waiting  map[string]bool
	requests []admission.Request
	released []string
	renewed  []string
	err      error // answered by every call, when set
}

func newFakeAdmission(limit int) *fakeAdmission {
	return &fakeAdmission{limit: limit, leases: map[string]bool{}, waiting: map[string]bool{}}
}

func (f *fakeAdmission) Admit(_ context.Context, r admission.Request) (admission.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r)
	if f.err != nil {
		return admission.Decision{}, f.err
	}
	switch {
	case f.leases[r.Execution]:
		return admission.Decision{Admitted: true, Held: true, Running: len(f.leases), Limit: f.limit}, nil
	case !r.Fresh && !f.waiting[r.Execution]:
		return admission.Decision{Unknown: true}, nil
	case len(f.leases) < f.limit:
		f.leases[r.Execution] = true
		waited := f.waiting[r.Execution]
		delete(f.waiting, r.Execution)
		return admission.Decision{Admitted: true, Waited: waited, Running: len(f.leases), Limit: f.limit}, nil
	}
	f.waiting[r.Execution] = true
	return admission.Decision{Gate: r.Gates[0].Key, Running: len(f.leases), Limit: f.limit, Ahead: 0, Counted: 10 * f.limit, Waited: true}, nil
}

func (f *fakeAdmission) Release(_ context.Context, _ []admission.Gate, execution string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	f.released = append(f.released, execution)
	if f.leases[execution] {
		delete(f.leases, execution)
		return 1, nil
	}
	return 0, nil
}

func (f *fakeAdmission) Renew(_ context.Context, _ []admission.Gate, execution string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewed = append(f.renewed, execution)
	return f.leases[execution], f.err
}

// admissionEnv gives acme a core system with a table, as the construct's environment does.
var admissionEnv = map[string]string{
	pipeline.EnvTenant: `{"id":"acme","format":"csv","encoding":"utf-8","chunkSize":100,"maxFieldBytes":65536,` +
		`"coreSystem":{"name":"ledger","maxRunningFiles":1}}`,
	pipeline.EnvCoreSystemTables: `{"ledger":"ledger-admission"}`,
}

func newAdmissionRig(t *testing.T, env map[string]string, limit int) (*wakeRig, *fakeAdmission) {
	t.Helper()
	all := maps.Clone(admissionEnv)
	maps.Copy(all, env)
	w := newWakeRig(t, all)
	a := newFakeAdmission(limit)
	w.h.admission = a
	return w, a
}

func TestAdmissionGates(t *testing.T) {
	cfg := mustConfig(t, admissionEnv)
	got := cfg.gates()
	want := []admission.Gate{{Table: "ledger-admission", Key: "core#ledger", Limit: 1}}
	if len(got) != 1 || got[0] != want[0] {
		t.Fatalf("got gates %+v, want %+v", got, want)
	}
	cfg.Pool, cfg.PoolAdmissionTable, cfg.PoolMaxRunningFiles = "default", "pool-admission", 50
	got = cfg.gates()
	if len(got) != 2 || got[1] != (admission.Gate{Table: "pool-admission", Key: "pool#default", Limit: 50}) {
		t.Fatalf("pooled: got gates %+v, want the core system's, then the pool's", got)
	}
	if none := mustConfig(t, nil).gates(); len(none) != 0 {
		t.Fatalf("a silo tenant without a core system: got gates %+v, want none", none)
	}
}

// A file that may not start waits with its message in flight: no execution, no describe, no
// wake-up state, no Lambda error; it asks again soon, and starts with no DescribeExecution once a
// slot is free. Its status event releases the slot.
func TestAdmissionWaitThenStartWithoutDescribe(t *testing.T) {
	for _, wake := range []bool{true, false} {
		name := "wake events"
		env := map[string]string{}
		if !wake {
			name = "no wake events"
			env = map[string]string{pipeline.EnvWakeEvents: "false"}
		}
		t.Run(name, func(t *testing.T) {
			w, a := newAdmissionRig(t, env, 1)
			a.leases["another-file"] = true
			for receive := 1; receive <= 3; receive++ {
				if w.deliver(t, receive) {
					t.Fatalf("delivery %d: got released, want held while no slot is free", receive)
				}
			}
			if w.sfn.starts != 0 || w.sfn.describes != 0 {
				t.Fatalf("while waiting: got %d starts and %d describes, want none", w.sfn.starts, w.sfn.describes)
			}
			if _, armed := w.s3.objects[wakeStateObject]; armed {
				t.Fatal("while waiting: got the wake-up state written, want no S3 write")
			}
			if last := w.q.changes[len(w.q.changes)-1]; last.Seconds != 1 {
				t.Errorf("got the waiting message back in %d s, want 1 s (next in line)", last.Seconds)
			}
			if n := w.countLevel(t, "ERROR"); n != 0 {
				t.Fatalf("got %d ERROR lines while waiting, want none", n)
			}
			if sums := w.metricSums(t); sums[metrics.AdmissionWaits] != 3 {
				t.Errorf("got %v AdmissionWaits, want 3", sums[metrics.AdmissionWaits])
			}
			delete(a.leases, "another-file")
			if w.deliver(t, 4) {
				t.Fatal("admitted delivery: got released, want held while its execution runs")
			}
			if w.sfn.starts != 1 || w.sfn.describes != 0 {
				t.Fatalf("after admission: got %d starts and %d describes, want 1 start and no describe", w.sfn.starts, w.sfn.describes)
			}
			names := startedNames(w.sfn)
			if len(names) != 1 || !a.leases[names[0]] {
				t.Fatalf("got execution %v and leases %v, want the started execution to hold the lease", names, a.leases)
			}
			if wake {
				w.sfn.set(testExecPrefix+names[0], sfntypes.ExecutionStatusSucceeded)
				w.wake(t, names[0], "SUCCEEDED")
				if a.leases[names[0]] {
					t.Fatal("status event: got the lease kept, want it released")
				}
			}
		})
	}
}

// A later delivery admission has never seen (Unknown) goes the usual way: its execution is looked
// up first, and admission is asked (Fresh) just before StartExecution.
func TestAdmissionUnknownLooksUpFirst(t *testing.T) {
	w, a := newAdmissionRig(t, nil, 1)
	if w.deliver(t, 2) {
		t.Fatal("got released, want held while the started execution runs")
	}
	if w.sfn.describes < 1 || w.sfn.starts != 1 {
		t.Fatalf("got %d describes and %d starts, want the lookup before the start", w.sfn.describes, w.sfn.starts)
	}
	if len(a.requests) != 2 || a.requests[0].Fresh || !a.requests[1].Fresh {
		t.Fatalf("got admission requests %+v, want one not fresh, then one fresh before the start", a.requests)
	}
	if a.requests[1].Weight != pipeline.DefaultWeight || a.requests[1].Tenant != "acme" {
		t.Fatalf("got request %+v, want tenant acme with the default weight", a.requests[1])
	}
}

// Every ended file frees its slot before its message goes, also a failed file a halted tenant
// keeps; a running file's later delivery renews its leases.
func TestAdmissionReleasedWhenTheFileEnds(t *testing.T) {
	tests := []struct {
		name     string
		policy   string
		status   sfntypes.ExecutionStatus
		released bool // the message
	}{
		{"succeeded", pipeline.OnFailureContinue, sfntypes.ExecutionStatusSucceeded, true},
		{"failed, continue", pipeline.OnFailureContinue, sfntypes.ExecutionStatusFailed, true},
		{"failed, halt", pipeline.OnFailureHalt, sfntypes.ExecutionStatusFailed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, a := newAdmissionRig(t, map[string]string{pipeline.EnvOnFailure: tt.policy, pipeline.EnvWakeEvents: "false"}, 2)
			if w.deliver(t, 1) {
				t.Fatal("first delivery released")
			}
			name := startedNames(w.sfn)[0]
			if w.deliver(t, 2) {
				t.Fatal("second delivery released while running")
			}
			if len(a.renewed) != 1 || a.renewed[0] != name {
				t.Fatalf("got renewals %v, want one of %s", a.renewed, name)
			}
			w.sfn.set(testExecPrefix+name, tt.status)
			if got := w.deliver(t, 3); got != tt.released {
				t.Fatalf("got released %v, want %v", got, tt.released)
			}
			if a.leases[name] {
				t.Fatalf("got the lease of the ended file kept, want it released")
			}
		})
	}
}

// A slot that cannot be released keeps the message: the tenant moves on only once its file's slot
// is free, so nothing leaks. Admission that cannot be asked holds the file, never starts it.
func TestAdmissionErrorsHoldTheFile(t *testing.T) {
	w, a := newAdmissionRig(t, map[string]string{pipeline.EnvWakeEvents: "false"}, 1)
	a.err = errors.New("dynamodb: service unavailable")
	if w.deliver(t, 1) {
		t.Fatal("got released, want held")
	}
	if w.sfn.starts != 0 {
		t.Fatalf("got %d starts with admission unavailable, want none", w.sfn.starts)
	}
	a.err = nil
	w.deliver(t, 2)
	name := startedNames(w.sfn)[0]
	w.sfn.set(testExecPrefix+name, sfntypes.ExecutionStatusSucceeded)
	a.err = errors.New("dynamodb: service unavailable")
	if w.deliver(t, 3) {
		t.Fatal("got released with the slot not released, want the message kept")
	}
	a.err = nil
	if !w.deliver(t, 4) {
		t.Fatal("got held once the slot could be released, want released")
	}
	if a.leases[name] {
		t.Fatal("lease kept")
	}
}

// A pooled tenant's files pass its core system and then its pool.
func TestPoolTenantAdmission(t *testing.T) {
	r := newPoolRig(t, nil)
	a := newFakeAdmission(1)
	a.leases["someone-else"] = true
	r.p.admission = a
	r.p.cfg.Shared.PoolAdmissionTable, r.p.cfg.Shared.PoolMaxRunningFiles = "pool-admission", 10
	resp, err := r.p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{poolMessage("m1", eventBody(t, evID1, acmeKey), "acme")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("got %d failures, want the waiting file held", len(resp.BatchItemFailures))
	}
	if len(a.requests) != 1 {
		t.Fatalf("got %d admission requests, want 1", len(a.requests))
	}
	gates := a.requests[0].Gates
	if len(gates) != 1 || gates[0].Key != admission.PoolGate(testPool) || gates[0].Limit != 10 {
		t.Fatalf("got gates %+v, want the pool's", gates)
	}
	if r.sfn.starts != 0 {
		t.Fatalf("got %d starts, want none while the pool is full", r.sfn.starts)
	}
	found := false
	for _, l := range r.logs(t) {
		found = found || (l["msg"] == "waiting for admission" && l["tenant"] == "acme")
	}
	if !found {
		t.Fatalf("no admission wait logged for acme: %v", r.logs(t))
	}
}

// startedNames are the names of the executions the fake created, in order.
func startedNames(f *fakeSFN) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, arn := range f.created {
		names = append(names, strings.TrimPrefix(arn, testExecPrefix))
	}
	return names
}

// Each look at the core system's gate is counted by core system, as an admission or a wait, with
// the gate's running files and limit; a file already holding its slots is not counted again.
func TestEmitCoreCountsAdmissionsAndWaits(t *testing.T) {
	look := []admission.Look{{Gate: "core#ledger", Running: 2, Limit: 3}}
	for _, tc := range []struct {
		name string
		dec  admission.Decision
		want map[string]float64 // metric → value; nil: no line
	}{
		{"admitted", admission.Decision{Admitted: true, Looks: look, WaitedFor: 4 * time.Second},
			map[string]float64{"Admissions": 1, "AdmissionWaitSeconds": 4, "RunningFiles": 2, "RunningFileLimit": 3}},
		{"waits", admission.Decision{Gate: "core#ledger", Looks: look, WaitedFor: time.Second},
			map[string]float64{"AdmissionWaits": 1, "AdmissionWaitSeconds": 1, "RunningFiles": 2, "RunningFileLimit": 3}},
		{"held", admission.Decision{Admitted: true, Held: true, Looks: look}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			cfg := mustConfig(t, admissionEnv)
			h := &Handler{cfg: cfg, coreMetrics: func(name string) *metrics.Emitter {
				return metrics.NewDimension(&buf, "TenantPipeline", metrics.DimensionCoreSystem, name)
			}}
			h.emitCore(context.Background(), &delivery{log: slog.New(slog.DiscardHandler)}, tc.dec)
			if tc.want == nil {
				if buf.Len() != 0 {
					t.Fatalf("got %s, want no metrics", buf.String())
				}
				return
			}
			var doc map[string]any
			if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatalf("got %q: %v", buf.String(), err)
			}
			if doc["CoreSystem"] != "ledger" {
				t.Errorf("CoreSystem: got %v, want ledger", doc["CoreSystem"])
			}
			for _, other := range []string{"Admissions", "AdmissionWaits"} {
				if _, want := tc.want[other]; !want && doc[other] != nil {
					t.Errorf("%s: got %v, want none", other, doc[other])
				}
			}
			for name, want := range tc.want {
				if got, _ := doc[name].(float64); got != want {
					t.Errorf("%s: got %v, want %v", name, doc[name], want)
				}
			}
		})
	}
}

func TestAdmissionPace(t *testing.T) {
	tests := []struct {
		ahead, limit, attempt int
		want                  time.Duration
		counted               int // how far admission counted; 0: ten rounds of the limit
	}{
		{0, 6, 9, time.Second, 0},
		{5, 6, 9, time.Second, 0},
		{6, 6, 9, 2 * time.Second, 0},
		{17, 6, 1, 3 * time.Second, 0},
		{59, 6, 1, 10 * time.Second, 0},
		{60, 6, 1, time.Second, 0},        // past the counted ranks: the backoff by deliveries
		{60, 6, 4, 8 * time.Second, 0},    // doubling
		{60, 6, 20, maxAdmissionWait, 0},  // capped
		{0, 0, 1, time.Second, 10},        // a limit the adaptive store set to nothing reads as 1
		{30, 2, 1, 16 * time.Second, 120}, // an adaptive limit below the declared one: counted by the declared
		{19, 1000, 1, time.Second, 0},     // a large gate: rounds of maxFastPollers
		{40, 1000, 1, 3 * time.Second, 0},
		{499, 1000, 1, 25 * time.Second, 0},
	}
	for _, tt := range tests {
		counted := min(10*tt.limit, 500)
		if tt.counted != 0 {
			counted = tt.counted
		}
		got := admissionPace(time.Second, admission.Decision{Ahead: tt.ahead, Counted: counted, Limit: tt.limit}, tt.attempt)
		if got != tt.want {
			t.Errorf("ahead %d of limit %d, attempt %d: got %s, want %s", tt.ahead, tt.limit, tt.attempt, got, tt.want)
		}
	}
}
