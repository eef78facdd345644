package ops_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/breaker"
	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/internal/shares"
)

var coreNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// coreWorld: silo acme and pooled hooli name core system ledger (adaptive, 3 files), pooled wayne
// names none; pool default has a gate of 5 files. The controllers' environments name the tables.
func coreWorld() *opsfake.World {
	w := opsfake.New(coreNow)
	ledger := &pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 3, Adaptive: true}
	w.CoreSystemOf["acme"], w.CoreSystemOf["hooli"] = ledger, ledger
	acme := opsfake.Tenant("acme", pipeline.OnFailureHalt)
	w.AddTenant("TenantPipeline-Tenants-1", acme)
	pool := opsfake.Pool("default")
	w.AddPool("TenantPipeline-Pool-default", pool, map[string]string{"hooli": pipeline.OnFailureContinue, "wayne": pipeline.OnFailureContinue})
	tables := `{"ledger":"ledger-admission"}`
	w.Env[acme.ControllerFunction][pipeline.EnvCoreSystemTables] = tables
	w.Env[acme.ControllerFunction][pipeline.EnvMaxWaitSeconds] = "300"
	for k, v := range map[string]string{pipeline.EnvCoreSystemTables: tables, pipeline.EnvPoolAdmissionTable: "pool-admission",
		pipeline.EnvPoolMaxRunningFiles: "5", pipeline.EnvMaxWaitSeconds: "300"} {
		w.Env[pool.ControllerFunction][k] = v
	}
	core := schema.CoreGate("ledger")
	// Leases: two live, one nobody renewed for longer than the lease TTL (2×5 min + 2 min).
	w.AddLease("ledger-admission", core, 0, "hooli-b", "hooli", coreNow.Add(-time.Minute))
	w.AddLease("ledger-admission", core, 1, "acme-a", "acme", coreNow.Add(-11*time.Minute))
	w.AddLease("ledger-admission", core, 2, "acme-old", "acme", coreNow.Add(-13*time.Minute))
	w.SetAdaptiveLimit("ledger-admission", core, 2)
	// Request shares: two live grants, and one of an invocation whose deadline passed long ago.
	w.SetShares("ledger-admission", "ledger",
		shares.Entry{Execution: "acme-a", Demand: 8, Weight: 1, Grant: 1, Until: coreNow.Add(time.Minute)},
		shares.Entry{Execution: "hooli-b", Demand: 1, Weight: 1, Grant: 1, Until: coreNow.Add(time.Minute)},
		shares.Entry{Execution: "acme-dead", Demand: 8, Weight: 1, Grant: 5, Until: coreNow.Add(-time.Hour)})
	// Waiting: one tenant for 90 s, and one entry whose tenant stopped asking.
	w.AddWaiter("ledger-admission", core, "wayne", 1, coreNow.Add(-90*time.Second), coreNow.Add(-time.Second))
	w.AddWaiter("ledger-admission", core, "gone", 1, coreNow.Add(-time.Hour), coreNow.Add(-20*time.Minute))
	w.AddLease("pool-admission", schema.PoolGate("default"), 0, "hooli-b", "hooli", coreNow)
	w.AddWaiter("pool-admission", schema.PoolGate("default"), "wayne", 1, coreNow.Add(-time.Second), coreNow)
	return w
}

func coreOps(w *opsfake.World) *ops.Ops {
	o := ops.New(w.Clients(), "TenantPipeline")
	o.Now, o.HTTP = func() time.Time { return coreNow }, w.HTTPClient()
	return o
}

// status reports each core system the tenants name once, with its live leases, effective limit,
// live waiting tenants and their oldest wait, and the tenants naming it; a pool its gate.
func TestStatusCoreSystems(t *testing.T) {
	rep, err := coreOps(coreWorld()).Status(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []ops.CoreSystemStatus{{
		Name: "ledger", MaxRunningFiles: 3, Limit: 2, Adaptive: true, RunningFiles: 2, Running: []string{"acme-a", "hooli-b"},
		WaitingTenants: 1, OldestAdmissionWaitSeconds: 90, Tenants: []string{"acme", "hooli"}, Breaker: "closed",
		// Capacity: maxRequestsInFlight 3 (maxRunningFiles) × adaptive limit 2 / 3 = 2; the dead
		// invocation's grant is not counted.
		RequestsInFlight: 2, MaxRequestsInFlight: 2,
	}}
	if !reflect.DeepEqual(rep.CoreSystems, want) {
		t.Errorf("core systems: got %+v, want %+v", rep.CoreSystems, want)
	}
	if len(rep.Pools) != 1 {
		t.Fatalf("got %d pools, want 1", len(rep.Pools))
	}
	p := rep.Pools[0]
	if p.MaxRunningFiles == nil || *p.MaxRunningFiles != 5 || p.RunningFiles == nil || *p.RunningFiles != 1 || p.WaitingTenants == nil || *p.WaitingTenants != 1 {
		t.Errorf("pool gate: got max %v, running %v, waiting %v, want 5, 1, 1", p.MaxRunningFiles, p.RunningFiles, p.WaitingTenants)
	}
	b, _ := json.Marshal(rep.CoreSystems[0])
	for _, field := range []string{`"name":`, `"maxRunningFiles":`, `"limit":`, `"adaptive":`, `"runningFiles":`, `"running":`,
		`"waitingTenants":`, `"oldestAdmissionWaitSeconds":`, `"tenants":`, `"breaker":"closed"`, `"openedAt":null`, `"reason":""`,
		`"requestsInFlight":2`, `"maxRequestsInFlight":2`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("JSON %s: got no field %s", b, field)
		}
	}
}

// Only the reported tenants' core systems are read; a tenant on none, or a pool without a gate,
// reports none, as an empty array and nulls.
func TestStatusCoreSystemsOfTheReportedTenants(t *testing.T) {
	w := coreWorld()
	delete(w.Env[opsfake.Pool("default").ControllerFunction], pipeline.EnvPoolAdmissionTable)
	for _, tc := range []struct {
		ids         []string
		wantTenants []string
	}{
		{[]string{"acme"}, []string{"acme"}},
		{[]string{"wayne"}, nil},
	} {
		t.Run(strings.Join(tc.ids, ","), func(t *testing.T) {
			rep, err := coreOps(w).Status(context.Background(), tc.ids)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range rep.CoreSystems {
				got = append(got, c.Tenants...)
			}
			if rep.CoreSystems == nil || !reflect.DeepEqual(got, tc.wantTenants) {
				t.Errorf("got core systems %+v, want ledger's tenants %v (an empty array for none)", rep.CoreSystems, tc.wantTenants)
			}
			for _, p := range rep.Pools {
				if p.MaxRunningFiles != nil || p.RunningFiles != nil || p.WaitingTenants != nil {
					t.Errorf("pool without a gate: got %v %v %v, want nulls", p.MaxRunningFiles, p.RunningFiles, p.WaitingTenants)
				}
			}
		})
	}
}

// A core system whose table the controller does not name, or an unreadable table, is an error,
// not an empty section.
func TestStatusCoreSystemErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mangle func(w *opsfake.World)
		want   string
	}{
		{"no table", func(w *opsfake.World) { delete(w.Env["acme-controller"], pipeline.EnvCoreSystemTables) },
			"tenant acme: core system ledger has no admission table in its controller's CORE_SYSTEM_TABLES"},
		{"unreadable table", func(w *opsfake.World) { w.Err["Query"] = errAccess },
			"core system ledger: admission table ledger-admission, gate core#ledger: read the running files: access denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := coreWorld()
			tc.mangle(w)
			_, err := coreOps(w).Status(context.Background(), []string{"acme"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

type accessError struct{}

func (accessError) Error() string { return "access denied" }

var errAccess = accessError{}

// status shows each core system's breaker: its state (an open one past its probe time is
// half-open), since when and why while not closed; an open breaker admits nothing, so the
// effective limit is 0, and one file while half-open.
func TestStatusCoreSystemBreaker(t *testing.T) {
	opened := coreNow.Add(-3 * time.Minute)
	reason := "the core system did not answer: connection refused"
	at := opened.UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name      string
		status    breaker.Status
		nextProbe time.Time
		want      string
		wantLimit int
		wantAt    *string
		wantWhy   string
	}{
		{"open", breaker.Open, coreNow.Add(time.Second), "open", 0, &at, reason},
		{"open past its probe time: half-open", breaker.Open, coreNow.Add(-time.Second), "half-open", 1, &at, reason},
		{"closed after opening", breaker.Closed, time.Time{}, "closed", 2, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := coreWorld()
			w.SetBreaker("ledger-admission", schema.CoreGate("ledger"), tc.status, opened, tc.nextProbe, reason, 2)
			rep, err := coreOps(w).Status(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			c := rep.CoreSystems[0]
			if c.Breaker != tc.want || c.Reason != tc.wantWhy || c.Limit != tc.wantLimit || c.BreakerOpens != 2 ||
				(c.OpenedAt == nil) != (tc.wantAt == nil) || c.OpenedAt != nil && *c.OpenedAt != *tc.wantAt {
				t.Errorf("got breaker %q opened %v reason %q limit %d opens %d, want %q %v %q %d 2", c.Breaker, c.OpenedAt, c.Reason, c.Limit, c.BreakerOpens,
					tc.want, tc.wantAt, tc.wantWhy, tc.wantLimit)
			}
		})
	}
}
