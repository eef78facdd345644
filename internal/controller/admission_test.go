package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/corecontrol"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
)

// fakeAdmission is a one-gate admission with limit leases and a FIFO wait queue that hands each
// freed slot to the first waiter still alive, as internal/admission decides (that package is tested
// against DynamoDB's own semantics); here only the controller's use of it counts. It honours the
// hold a waiter is armed for as admission.Store.Arm does: the entry stays alive for two holds and a
// minute on the fake's clock, and a handover after that skips it (its message is taken for gone).
// A controller that armed a shorter hold than it holds the message for loses the wake-up.
type fakeAdmission struct {
	mu       sync.Mutex
	limit    int
	leases   map[string]bool
	reserved map[string]bool // slots handed to a waiter, not claimed yet
	waiting  []string        // executions, in line
	armed    map[string]admission.Wake
	holds    map[string]time.Duration // the hold each waiter was last armed for
	alive    map[string]time.Time     // until when an armed waiter's entry is alive
	now      time.Time                // the fake's clock; advance moves it
	paused   map[string]bool
	requests []admission.Request
	released []string
	renewed  []string
	lost     map[string]bool // executions whose lease Renew regains
	err      error           // answered by every call, when set
	// reconciled are the gates ReconcileDue was asked for (reconcile_test.go).
	reconciled []admission.Gate
}

func newFakeAdmission(limit int) *fakeAdmission {
	return &fakeAdmission{limit: limit, leases: map[string]bool{}, reserved: map[string]bool{}, armed: map[string]admission.Wake{},
		holds: map[string]time.Duration{}, alive: map[string]time.Time{}, now: time.Date(2024, 5, 1, 9, 0, 0, 0, time.UTC),
		paused: map[string]bool{}, lost: map[string]bool{}}
}

// advance moves the fake's clock on by d.
func (f *fakeAdmission) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fakeAdmission) isWaiting(exec string) bool { return slices.Contains(f.waiting, exec) }

func (f *fakeAdmission) Admit(_ context.Context, r admission.Request) (admission.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r)
	if f.err != nil {
		return admission.Decision{}, f.err
	}
	switch {
	case f.paused[r.Execution]:
		return admission.Decision{Paused: true}, nil
	case f.leases[r.Execution]:
		return admission.Decision{Admitted: true, Held: true, Running: len(f.leases), Limit: f.limit}, nil
	case f.reserved[r.Execution]:
		delete(f.reserved, r.Execution)
		f.leases[r.Execution] = true
		return admission.Decision{Admitted: true, Claimed: true, Waited: true, Running: len(f.leases), Limit: f.limit}, nil
	case !r.Fresh && !f.isWaiting(r.Execution):
		return admission.Decision{Unknown: true}, nil
	case !f.isWaiting(r.Execution) && len(f.waiting) == 0 && len(f.leases)+len(f.reserved) < f.limit:
		f.leases[r.Execution] = true
		return admission.Decision{Admitted: true, Running: len(f.leases), Limit: f.limit}, nil
	}
	if !f.isWaiting(r.Execution) {
		f.waiting = append(f.waiting, r.Execution)
	}
	delete(f.alive, r.Execution) // a delivery renews the entry; Arm sets its life anew
	ahead := slices.Index(f.waiting, r.Execution)
	return admission.Decision{Gate: r.Gates[0].Key, Running: len(f.leases), Limit: f.limit, Ahead: ahead, Counted: ahead,
		Entry: admission.EntryRef{Gate: r.Gates[0], SK: r.Execution, Tenant: r.Tenant, Execution: r.Execution}}, nil
}

func (f *fakeAdmission) Arm(_ context.Context, e admission.EntryRef, w admission.Wake, hold time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false, f.err
	}
	if !f.isWaiting(e.Execution) {
		return false, nil
	}
	f.armed[e.Execution] = w
	f.holds[e.Execution] = hold
	f.alive[e.Execution] = f.now.Add(2*hold + time.Minute)
	return true, nil
}

// free frees execution's slot: it goes to the first waiter whose entry is still alive, whose wake is
// returned; the waiters before it, past their armed life, are dropped.
func (f *fakeAdmission) free(execution string) []admission.Wake {
	if !f.leases[execution] && !f.reserved[execution] {
		return nil
	}
	delete(f.leases, execution)
	delete(f.reserved, execution)
	for len(f.waiting) > 0 {
		if until, armed := f.alive[f.waiting[0]]; armed && f.now.After(until) {
			f.waiting = f.waiting[1:]
			continue
		}
		break
	}
	if len(f.waiting) == 0 {
		return nil
	}
	next := f.waiting[0]
	f.waiting = f.waiting[1:]
	f.reserved[next] = true
	w := f.armed[next]
	w.Execution = next
	return []admission.Wake{w}
}

func (f *fakeAdmission) Release(_ context.Context, _ []admission.Gate, _ string, execution string) (int, []admission.Wake, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, nil, f.err
	}
	f.released = append(f.released, execution)
	if !f.leases[execution] {
		return 0, nil, nil
	}
	return 1, f.free(execution), nil
}

func (f *fakeAdmission) Renew(_ context.Context, _ []admission.Gate, _ string, execution string) (admission.RenewResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewed = append(f.renewed, execution)
	if f.err != nil {
		return admission.RenewResult{}, f.err
	}
	if f.lost[execution] {
		delete(f.lost, execution)
		f.leases[execution] = true
		return admission.RenewResult{Held: true, Regained: 1, Overflow: 1}, nil
	}
	return admission.RenewResult{Held: f.leases[execution]}, nil
}

func (f *fakeAdmission) Pause(_ context.Context, _ []admission.Gate, _ string, execution string) ([]admission.Wake, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	wakes := f.free(execution)
	f.paused[execution] = true
	return wakes, nil
}

func (f *fakeAdmission) Resume(_ context.Context, _ []admission.Gate, _ string, execution string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.paused, execution)
	return f.err
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
	// The core system's breaker closes its gate unless disabled.
	want := []admission.Gate{{Table: "ledger-admission", Key: "core#ledger", Limit: 1, Breaker: true,
		Core: &corecontrol.Settings{Name: "ledger", MaxRunningFiles: 1, MaxRequestsInFlight: 1}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got gates %+v, want %+v", got, want)
	}
	disabled := maps.Clone(admissionEnv)
	disabled[pipeline.EnvTenant] = strings.Replace(disabled[pipeline.EnvTenant], `"maxRunningFiles":1}`, `"maxRunningFiles":1,"breaker":{"disabled":true}}`, 1)
	if got := mustConfig(t, disabled).gates(); len(got) != 1 || got[0].Breaker {
		t.Fatalf("breaker disabled: got gates %+v, want the core gate without the breaker", got)
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
// wake-up state, no Lambda error. It is held for the safety net, its receipt handle in its waiting
// entry; the release of another file hands it the slot and wakes its message at once, and it
// starts with no DescribeExecution. Its status event releases the slot.
func TestAdmissionWaitThenStartWithoutDescribe(t *testing.T) {
	for _, wake := range []bool{true, false} {
		name := "wake events"
		env := map[string]string{}
		hold := int32(defaultSafetyNet.Seconds())
		if !wake {
			name = "no wake events"
			env = map[string]string{pipeline.EnvWakeEvents: "false"}
			hold = 0 // MAX_WAIT, read below
		}
		t.Run(name, func(t *testing.T) {
			w, a := newAdmissionRig(t, env, 1)
			if hold == 0 {
				hold = int32(w.h.cfg.MaxWait.Seconds())
			}
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
			if last := w.q.changes[len(w.q.changes)-1]; last.Seconds != hold || last.Receipt != "rh-3" {
				t.Errorf("got the waiting message held %+v, want rh-3 for %d s (the safety net)", last, hold)
			}
			if got := a.armed[a.waiting[0]]; got.ReceiptHandle != "rh-3" || got.QueueURL != testQueueURL {
				t.Errorf("got the waiting entry armed with %+v, want the current receipt rh-3 on the tenant's queue", got)
			}
			if n := w.countLevel(t, "ERROR"); n != 0 {
				t.Fatalf("got %d ERROR lines while waiting, want none", n)
			}
			if sums := w.metricSums(t); sums[metrics.AdmissionWaits] != 3 {
				t.Errorf("got %v AdmissionWaits, want 3", sums[metrics.AdmissionWaits])
			}
			// The waiting entry is armed for the hold its message was given, and the fake keeps it
			// alive for that long: another file ends just before the message would come back by
			// itself, and its release hands the slot over and wakes this file's message.
			if got, want := a.holds[a.waiting[0]], time.Duration(hold)*time.Second; got != want {
				t.Errorf("got the waiting entry armed for %s, want the message's hold %s", got, want)
			}
			a.advance(time.Duration(hold)*time.Second - time.Second)
			w.h.cfg.Tenant.ID = "other"
			if err := w.h.releaseLeases(context.Background(), w.h.log, "another-file"); err != nil {
				t.Fatal(err)
			}
			w.h.cfg.Tenant.ID = "acme"
			if last := w.q.changes[len(w.q.changes)-1]; last.Seconds != 0 || last.Receipt != "rh-3" {
				t.Fatalf("release: got the last visibility change %+v, want rh-3 made visible at once", last)
			}
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

// A slot handed over between the admission's answer and the arming of the entry is claimed by the
// same delivery: nothing waits for a wake-up that was sent to an old receipt.
func TestAdmissionHandedOverWhileArming(t *testing.T) {
	w, a := newAdmissionRig(t, nil, 1)
	a.leases["another-file"] = true
	w.deliver(t, 1)
	// The handover takes the entry before this delivery arms it: the fake frees the slot as the
	// delivery holds the message, before Arm.
	w.q.afterChange = func(visibilityChange) {
		w.q.afterChange = nil
		a.mu.Lock()
		a.free("another-file")
		a.mu.Unlock()
	}
	if w.deliver(t, 2) {
		t.Fatal("got released, want held while the execution runs")
	}
	if w.sfn.starts != 1 {
		t.Fatalf("got %d starts, want the handed-over slot claimed and the file started", w.sfn.starts)
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
	if len(gates) != 1 || gates[0].Key != schema.PoolGate(testPool) || gates[0].Limit != 10 {
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

// countingStore counts the calls made with a pooled tenant's credentials.
type countingStore struct {
	objectStore
	mu    sync.Mutex
	calls int
}

func (c *countingStore) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.objectStore.GetObject(ctx, in, o...)
}

func (c *countingStore) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.objectStore.PutObject(ctx, in, o...)
}

func newPoolAdmissionRig(t *testing.T, limit int) (*poolRig, *fakeAdmission, *countingStore) {
	t.Helper()
	r := newPoolRig(t, map[string]string{pipeline.EnvWakeEvents: "true", pipeline.EnvSafetyNetSeconds: "45"})
	a := newFakeAdmission(limit)
	r.p.admission = a
	r.p.cfg.Shared.PoolAdmissionTable, r.p.cfg.Shared.PoolMaxRunningFiles = "pool-admission", limit
	cs := &countingStore{objectStore: r.s3}
	sessions := 0
	r.p.tenantObjects = func(string) (objectStore, error) { sessions++; return cs, nil }
	return r, a, cs
}

func deliverPool(t *testing.T, r *poolRig, receive int) bool {
	t.Helper()
	m := message("m1", eventBody(t, evID1, acmeKey), receive)
	m.Attributes["MessageGroupId"] = "acme"
	m.ReceiptHandle = fmt.Sprintf("rh-%d", receive)
	resp, err := r.p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{m}})
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.BatchItemFailures) == 0
}

// A waiting pooled file makes no call with its tenant's credentials: no read of the pause marker,
// no session (AssumeRole), however often it comes back; the pause is read once it is admitted.
func TestPoolWaitingFileMakesNoTenantCall(t *testing.T) {
	r, a, cs := newPoolAdmissionRig(t, 1)
	a.leases["someone-else"] = true
	for receive := 1; receive <= 4; receive++ {
		if deliverPool(t, r, receive) {
			t.Fatalf("delivery %d released while waiting", receive)
		}
	}
	if cs.calls != 0 {
		t.Fatalf("got %d calls with the tenant's credentials while waiting, want none", cs.calls)
	}
	a.mu.Lock()
	a.free("someone-else")
	a.mu.Unlock()
	deliverPool(t, r, 5)
	if r.sfn.starts != 1 || cs.calls == 0 {
		t.Fatalf("after the handover: got %d starts and %d tenant calls, want the pause read and the file started", r.sfn.starts, cs.calls)
	}
}

// A pooled tenant found paused just before its start gives its slot to the next waiter at once
// and starts nothing; its later deliveries take no slot while the pause lasts; after resume it
// asks as a new file. A paused tenant's running file keeps renewing its slot.
func TestPoolPausedTenantGivesItsSlotBack(t *testing.T) {
	r, a, _ := newPoolAdmissionRig(t, 1)
	rec, _ := pipeline.EncodePauseRecord(pipeline.PauseRecord{Version: 1, Tenant: "acme", RequestedBy: "ops", RequestedAt: testStart})
	marker := testBucket + "/" + pipeline.PauseMarkerKey(pipeline.PoolOwner(testPool, "acme"))
	r.s3.objects[marker] = string(rec)
	// acme waits (reading nothing), with globex behind it; a release hands acme the slot.
	a.leases["someone-else"] = true
	if deliverPool(t, r, 1) {
		t.Fatal("waiting file released")
	}
	a.waiting = append(a.waiting, "globex-file")
	a.armed["globex-file"] = admission.Wake{QueueURL: testQueueURL, ReceiptHandle: "rh-globex"}
	a.free("someone-else")
	if deliverPool(t, r, 2) {
		t.Fatal("paused tenant's file released")
	}
	if r.sfn.starts != 0 || len(a.leases) != 0 || !a.reserved["globex-file"] {
		t.Fatalf("got %d starts, leases %v, reserved %v, want nothing started and the slot handed to globex", r.sfn.starts, a.leases, a.reserved)
	}
	if i := slices.IndexFunc(r.sqs.changes, func(c visibilityChange) bool { return c.Receipt == "rh-globex" && c.Seconds == 0 }); i < 0 {
		t.Fatalf("got visibility changes %v, want globex's message woken", r.sqs.changes)
	}
	n := len(a.requests)
	if deliverPool(t, r, 3) || len(a.leases) != 0 || len(a.requests) != n+1 {
		t.Fatalf("second delivery while paused: leases %v, requests %d, want one ask that took nothing", a.leases, len(a.requests)-n)
	}
	delete(r.s3.objects, marker)
	a.mu.Lock()
	a.free("globex-file")
	a.mu.Unlock()
	if deliverPool(t, r, 4) || r.sfn.starts != 1 {
		t.Fatalf("after resume: got %d starts, want the file started", r.sfn.starts)
	}
	// Paused again while the file runs: its delivery still renews its slot.
	r.s3.objects[marker] = string(rec)
	before := len(a.renewed)
	deliverPool(t, r, 5)
	if len(a.renewed) != before+1 {
		t.Fatalf("got %d renewals of the paused tenant's running file, want 1", len(a.renewed)-before)
	}
}

// A running file whose lease went takes it again, and says so with LostLeases.
func TestLostLeaseCounted(t *testing.T) {
	w, a := newAdmissionRig(t, map[string]string{pipeline.EnvWakeEvents: "false"}, 1)
	w.deliver(t, 1)
	name := startedNames(w.sfn)[0]
	delete(a.leases, name)
	a.lost[name] = true
	w.deliver(t, 2)
	if sums := w.metricSums(t); sums[metrics.LostLeases] != 1 {
		t.Fatalf("got %v LostLeases, want 1", sums[metrics.LostLeases])
	}
	w.deliver(t, 3)
	if sums := w.metricSums(t); sums[metrics.LostLeases] != 1 {
		t.Fatalf("got %v LostLeases after a clean renewal, want still 1", sums[metrics.LostLeases])
	}
}

// A lease lives long enough for the renewals a running file's deliveries make: twice the longest
// hold of a running file, whatever the configuration.
func TestLeaseTTLCoversRenewals(t *testing.T) {
	for _, env := range []map[string]string{
		nil,
		{pipeline.EnvWakeEvents: "false"},
		{pipeline.EnvWakeEvents: "true", pipeline.EnvSafetyNetSeconds: "45"},
		{pipeline.EnvMaxWaitSeconds: "900"},
	} {
		cfg := mustConfig(t, env)
		longest := max(cfg.SafetyNet, cfg.MaxWait) // runningWait: the safety net armed, else the backoff up to MaxWait
		if ttl := cfg.leaseTTL(); ttl < 2*longest+time.Minute {
			t.Errorf("env %v: lease TTL %s, want at least twice the longest renewal interval %s plus a minute", env, ttl, longest)
		}
		if wt := cfg.waiterTTL(); wt < 2*cfg.admissionHold() {
			t.Errorf("env %v: waiter TTL %s, want at least twice the waiting hold %s", env, wt, cfg.admissionHold())
		}
	}
}

// A file that ended but may still have a Register invocation running keeps its running-file slots
// until nothing of it can write to the core system: a TIMED_OUT file just stopped, under either
// policy; a late or failed status event frees nothing (its delivery decides). A file that failed
// outside its segment frees them at once, also while its halted tenant waits.
func TestSlotsKeptWhileAnEndedFileMayWrite(t *testing.T) {
	tests := []struct {
		name     string
		policy   string
		status   sfntypes.ExecutionStatus
		errName  string
		stopped  time.Time
		wantKept bool
	}{
		{"timed out just now, continue", pipeline.OnFailureContinue, sfntypes.ExecutionStatusTimedOut, "States.Timeout", testStart, true},
		{"timed out just now, halt", pipeline.OnFailureHalt, sfntypes.ExecutionStatusTimedOut, "States.Timeout", testStart, true},
		{"timed out long ago, halt: kept until the operator decides", pipeline.OnFailureHalt, sfntypes.ExecutionStatusTimedOut, "States.Timeout", stoppedLongAgo, true},
		{"segment failed just now, halt", pipeline.OnFailureHalt, sfntypes.ExecutionStatusFailed, "States.TaskFailed", testStart, true},
		{"segment failed long ago, halt", pipeline.OnFailureHalt, sfntypes.ExecutionStatusFailed, "States.TaskFailed", stoppedLongAgo, false},
		{"split failed just now, halt", pipeline.OnFailureHalt, sfntypes.ExecutionStatusFailed, "ValidationError", testStart, false},
		// The SmallFile task and the Register loop of a file of one segment run in the file execution.
		{"own Register attempt of unknown outcome just now, halt", pipeline.OnFailureHalt, sfntypes.ExecutionStatusFailed, "Lambda.ClientExecutionTimeoutException", testStart, true},
		{"own Register attempt of unknown outcome long ago, halt", pipeline.OnFailureHalt, sfntypes.ExecutionStatusFailed, "Lambda.SdkClientException", stoppedLongAgo, false},
		{"own Register returned an error just now, halt", pipeline.OnFailureHalt, sfntypes.ExecutionStatusFailed, "PermanentError", testStart, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, a := newAdmissionRig(t, map[string]string{pipeline.EnvOnFailure: tt.policy}, 2)
			w.deliver(t, 1)
			name := startedNames(w.sfn)[0]
			w.sfn.set(testExecPrefix+name, tt.status)
			w.sfn.mu.Lock()
			e := w.sfn.execs[testExecPrefix+name]
			e.errName, e.stopDate = tt.errName, aws.Time(tt.stopped)
			w.sfn.mu.Unlock()
			// The status event of a failed end frees nothing by itself.
			w.wake(t, name, string(tt.status))
			if !a.leases[name] {
				t.Fatalf("the %s status event freed the slots", tt.status)
			}
			w.deliver(t, 2)
			if kept := a.leases[name]; kept != tt.wantKept {
				t.Fatalf("after the delivery: slots kept %v, want %v", kept, tt.wantKept)
			}
			// A halted file's kept slots are renewed on each recheck, so the reconciler keeps them.
			if renewed := slices.Contains(a.renewed, name); tt.policy == pipeline.OnFailureHalt && renewed != tt.wantKept {
				t.Fatalf("halted: renewed %v, want %v", renewed, tt.wantKept)
			}
		})
	}
}

// The pause is read twice around the hold (paused.go): when the second read fails, the tenant
// stays paused; nothing starts, and the slot it was admitted to goes back.
func TestPauseSecondReadFailingHolds(t *testing.T) {
	r, a, _ := newPoolAdmissionRig(t, 1)
	rec, _ := pipeline.EncodePauseRecord(pipeline.PauseRecord{Version: 1, Tenant: "acme", RequestedBy: "ops", RequestedAt: testStart})
	marker := testBucket + "/" + pipeline.PauseMarkerKey(pipeline.PoolOwner(testPool, "acme"))
	r.s3.objects[marker] = string(rec)
	r.s3.keyGetErrs = map[string][]error{marker: {nil, errors.New("s3: slow down")}}
	if deliverPool(t, r, 1) {
		t.Fatal("released")
	}
	if r.sfn.starts != 0 || len(a.leases) != 0 || !a.paused[a.requests[0].Execution] {
		t.Fatalf("got %d starts, leases %v, paused %v, want nothing started and the slot given back", r.sfn.starts, a.leases, a.paused)
	}
}

// A file waiting while a maintenance window of its core system is open is held, and its entry
// armed, no longer than until the window ends: the first file back then finds the gate open.
func TestAdmissionWaitEndsWithTheWindow(t *testing.T) {
	start := testStart // the rigs' clock: the window opened just now
	for _, tc := range []struct {
		name     string
		duration string
		wantMax  int32 // the most the hold may be, in seconds
	}{
		{"window ends within the safety net", "2m", 121},
		{"window longer than the safety net", "30m", int32(defaultSafetyNet.Seconds())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{pipeline.EnvTenant: fmt.Sprintf(`{"id":"acme","format":"csv","encoding":"utf-8","chunkSize":100,"maxFieldBytes":65536,`+
				`"coreSystem":{"name":"ledger","maxRunningFiles":1,"maintenance":[{"cron":"%d %d * * *","duration":%q}]}}`, start.Minute(), start.Hour(), tc.duration)}
			w, a := newAdmissionRig(t, env, 1)
			a.leases["another-file"] = true
			if w.deliver(t, 1) {
				t.Fatal("got released, want held")
			}
			last := w.q.changes[len(w.q.changes)-1]
			if last.Seconds <= 0 || last.Seconds > tc.wantMax {
				t.Errorf("got the waiting message held %d s, want 1 to %d s", last.Seconds, tc.wantMax)
			}
			if got := a.holds[a.waiting[0]]; got != time.Duration(last.Seconds)*time.Second {
				t.Errorf("got the entry armed for %s, want the message's hold %d s", got, last.Seconds)
			}
		})
	}
}
