package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/testfake"
)

// ReconcileDue hands each free slot of the fake's gate to the next waiter, as the reconciler
// does after a lost wake-up, and records the gate.
func (f *fakeAdmission) ReconcileDue(_ context.Context, g admission.Gate) ([]admission.Wake, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reconciled = append(f.reconciled, g)
	if f.err != nil {
		return nil, f.err
	}
	var wakes []admission.Wake
	for len(f.leases)+len(f.reserved) < f.limit && len(f.waiting) > 0 {
		next := f.waiting[0]
		f.waiting = f.waiting[1:]
		f.reserved[next] = true
		w := f.armed[next]
		w.Execution, w.Gate = next, g.Key
		wakes = append(wakes, w)
	}
	return wakes, nil
}

// A silo controller invoked by the reconciler's schedule reconciles its core system's gate and wakes
// the file the reconcile hands a slot to, counting the wake as a release does.
func TestScheduledReconcileSilo(t *testing.T) {
	tests := []struct {
		name        string
		running     bool  // another file holds the one slot
		wakeErr     error // ChangeMessageVisibility's answer
		wantChanges []visibilityChange
		want        map[string]float64
	}{
		{name: "lost wake-up: the free slot goes to the waiter", wantChanges: []visibilityChange{{"rh-w", 0}},
			want: map[string]float64{metrics.AdmissionHandovers: 1, metrics.AdmissionWakeFailures: 0}},
		{name: "slot taken: nobody woken", running: true,
			want: map[string]float64{metrics.AdmissionHandovers: 0, metrics.AdmissionWakeFailures: 0}},
		{name: "wake fails: counted as failed", wakeErr: errors.New("sqs: throttled"),
			want: map[string]float64{metrics.AdmissionHandovers: 0, metrics.AdmissionWakeFailures: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, a := newAdmissionRig(t, nil, 1)
			if tt.running {
				a.leases["running"] = true
			}
			a.waiting = []string{"waiting"}
			a.armed["waiting"] = admission.Wake{QueueURL: testQueueURL, ReceiptHandle: "rh-w", MessageID: "m9", Tenant: "acme"}
			w.q.receive("rh-w")
			w.q.err = tt.wakeErr
			if _, err := w.h.Invoke(context.Background(), []byte(pipeline.ReconcileInput)); err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if want := []admission.Gate{{Table: "ledger-admission", Key: "core#ledger", Limit: 1}}; !slices.Equal(gateNames(a.reconciled), gateNames(want)) {
				t.Errorf("got gates reconciled %+v, want %+v", a.reconciled, want)
			}
			if tt.wakeErr == nil && !slices.Equal(w.q.changes, tt.wantChanges) {
				t.Errorf("got visibility changes %v, want %v", w.q.changes, tt.wantChanges)
			}
			w.checkMetrics(t, tt.want)
		})
	}
}

// The scheduled input is told apart from every other shape, and only the exact input reconciles.
func TestScheduledReconcileShape(t *testing.T) {
	tests := []struct {
		name      string
		payload   string
		admission bool
		wantErr   string
	}{
		{name: "the rule's input", payload: pipeline.ReconcileInput, admission: true},
		{name: "the rule's input, spaced", payload: "{ \"reconcile\" : true }\n", admission: true},
		{name: "false", payload: `{"reconcile":false}`, admission: true, wantErr: "scheduled input"},
		{name: "with SQS records", payload: `{"reconcile":true,"Records":[]}`, admission: true, wantErr: "scheduled input"},
		{name: "with an event's source", payload: `{"reconcile":true,"source":"aws.states","detail-type":"x"}`, admission: true, wantErr: "scheduled input"},
		{name: "a tenant without admission", payload: pipeline.ReconcileInput, wantErr: "no admission gate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w *wakeRig
			a := newFakeAdmission(1)
			if tt.admission {
				w, a = newAdmissionRig(t, nil, 1)
			} else {
				w = newWakeRig(t, nil)
			}
			_, err := w.h.Invoke(context.Background(), []byte(tt.payload))
			if tt.wantErr == "" {
				if err != nil || len(a.reconciled) != 1 {
					t.Fatalf("got error %v and %d reconciles, want none and 1", err, len(a.reconciled))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
			if len(a.reconciled) != 0 {
				t.Errorf("got %d reconciles, want none", len(a.reconciled))
			}
			w.findLog(t, "ERROR", "")
		})
	}
}

// A pool controller's schedule reconciles its pool gate and the gate of each core system its
// tenants name, configured as the tenants' rows say, and wakes what they hand over.
func TestScheduledReconcilePool(t *testing.T) {
	root := t.TempDir()
	testfake.WritePoolSettings(t, root, pipeline.PoolSettingsFile, `{"pool": "shared-1", "prefix": "inbox/", "tenants": [
		{"settings": {"id": "acme", "format": "csv", "encoding": "utf-8", "chunkSize": 100, "maxFieldBytes": 65536,
			"coreSystem": {"name": "ledger", "maxRunningFiles": 3, "adaptive": true}}, "prefix": "inbox/acme/"},
		{"settings": {"id": "globex", "format": "csv", "encoding": "utf-8", "chunkSize": 100, "maxFieldBytes": 65536,
			"coreSystem": {"name": "erp", "maxRunningFiles": 2}}, "prefix": "inbox/globex/"},
		{"settings": {"id": "initech", "format": "csv", "encoding": "utf-8", "chunkSize": 100, "maxFieldBytes": 65536}, "prefix": "inbox/initech/"}]}`)
	env := map[string]string{"LAMBDA_TASK_ROOT": root,
		pipeline.EnvCoreSystemTables: `{"ledger":"ledger-admission","erp":"erp-admission"}`}
	r := newPoolRig(t, env)
	a := newFakeAdmission(1)
	a.waiting = []string{"waiting"}
	a.armed["waiting"] = admission.Wake{QueueURL: testQueueURL, ReceiptHandle: "rh-w", MessageID: "m9", Tenant: "acme"}
	r.p.admission = a
	for range 2 { // the second finds the core systems' gates kept
		if _, err := r.p.Invoke(context.Background(), []byte(pipeline.ReconcileInput)); err != nil {
			t.Fatalf("got error %v, want none", err)
		}
	}
	pool := admission.Gate{Table: testPoolAdmissionTable, Key: "pool#" + testPool, Limit: 200}
	erp := admission.Gate{Table: "erp-admission", Key: "core#erp", Limit: 2}
	ledger := admission.Gate{Table: "ledger-admission", Key: "core#ledger", Limit: 3, Adaptive: true}
	got := slices.Sorted(slices.Values(gateNames(a.reconciled)))
	want := slices.Sorted(slices.Values(gateNames([]admission.Gate{pool, erp, ledger, pool, erp, ledger})))
	if !slices.Equal(got, want) {
		t.Errorf("got gates reconciled %+v, want %+v", got, want)
	}
	if !slices.Equal(r.sqs.changes, []visibilityChange{{"rh-w", 0}}) {
		t.Errorf("got visibility changes %v, want [{rh-w 0}]", r.sqs.changes)
	}
	if got := r.metricSum(t, metrics.DimensionPool, testPool, metrics.AdmissionHandovers); got != 1 {
		t.Errorf("got %v handovers on the pool, want 1", got)
	}
}

// gateNames are the gates as the reconcile sees them: table, key, limit and adaptive.
func gateNames(gs []admission.Gate) []string {
	var out []string
	for _, g := range gs {
		out = append(out, fmt.Sprintf("%s %s %d %v", g.Table, g.Key, g.Limit, g.Adaptive))
	}
	return out
}
