package ops_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/corecontrol"
	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/spec"
)

// steerWorld: silo acme and pooled hooli name core system ledger (3 files, maxRequestsInFlight 6,
// with windows), which runs two files and has one tenant waiting.
func steerWorld(windows ...spec.MaintenanceWindow) *opsfake.World {
	w := opsfake.New(coreNow)
	ledger := &pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 3, MaxRequestsInFlight: 6, Maintenance: windows}
	w.CoreSystemOf["acme"], w.CoreSystemOf["hooli"] = ledger, ledger
	acme := opsfake.Tenant("acme", pipeline.OnFailureHalt)
	w.AddTenant("TenantPipeline-Tenants-1", acme)
	pool := opsfake.Pool("default")
	w.AddPool("TenantPipeline-Pool-default", pool, map[string]string{"hooli": pipeline.OnFailureContinue})
	tables := `{"ledger":"ledger-admission"}`
	w.Env[acme.ControllerFunction][pipeline.EnvCoreSystemTables] = tables
	w.Env[pool.ControllerFunction][pipeline.EnvCoreSystemTables] = tables
	core := schema.CoreGate("ledger")
	w.AddLease("ledger-admission", core, 0, "hooli-b", "hooli", coreNow.Add(-time.Minute))
	w.AddLease("ledger-admission", core, 1, "acme-a", "acme", coreNow.Add(-time.Minute))
	return w
}

// audits are the audit items of ledger, by action.
func audits(w *opsfake.World) map[string]map[string]ddbtypes.AttributeValue {
	out := map[string]map[string]ddbtypes.AttributeValue{}
	for _, it := range w.Tables["ledger-admission"] {
		sk := it[schema.AttrSK].(*ddbtypes.AttributeValueMemberS).Value
		if strings.HasPrefix(sk, schema.AuditPrefix) {
			out[it["action"].(*ddbtypes.AttributeValueMemberS).Value] = it
		}
	}
	return out
}

func sAttr(it map[string]ddbtypes.AttributeValue, name string) string {
	v, _ := it[name].(*ddbtypes.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

// pause, limit, resume and clear each change ledger's control item, are audited (who, when, why)
// and show in core status and in status.
func TestCoreSteering(t *testing.T) {
	ctx := context.Background()
	w := steerWorld()
	o := coreOps(w)
	alice := w.CallerARN
	type want struct {
		paused      bool
		limit       int
		why         string
		override    int // 0: none in status
		auditAction string
	}
	for _, tc := range []struct {
		name string
		do   func() (ops.CoreActionResult, error)
		want want
	}{
		{"pause", func() (ops.CoreActionResult, error) { return o.CorePause(ctx, "ledger", "ERP deploy") },
			want{paused: true, limit: 0, why: corecontrol.WhyPaused, auditAction: "pause"}},
		{"override while paused", func() (ops.CoreActionResult, error) {
			return o.CoreLimit(ctx, "ledger", 5, coreNow.Add(2*time.Hour), "catch up")
		}, want{paused: true, limit: 0, why: corecontrol.WhyPaused, override: 5, auditAction: "limit"}},
		{"resume", func() (ops.CoreActionResult, error) { return o.CoreResume(ctx, "ledger", "ERP back") },
			want{limit: 5, why: corecontrol.WhyOverride, override: 5, auditAction: "resume"}},
		{"clear", func() (ops.CoreActionResult, error) { return o.CoreLimitClear(ctx, "ledger", "done") },
			want{limit: 3, why: corecontrol.WhyConfigured, auditAction: "limit-clear"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.do()
			if err != nil {
				t.Fatal(err)
			}
			if !res.Changed || res.RequestedBy != alice || res.AuditSK == "" {
				t.Errorf("got %+v, want a change by %s with its audit item", res, alice)
			}
			a, ok := audits(w)[tc.want.auditAction]
			if !ok || sAttr(a, "by") != alice || sAttr(a, "at") == "" {
				t.Errorf("audit item of %s: got %v, want who and when", tc.want.auditAction, a)
			}
			cs, err := o.CoreStatus(ctx, "ledger")
			if err != nil || len(cs) != 1 {
				t.Fatalf("core status: %v, %v", cs, err)
			}
			c := cs[0]
			if c.Paused != tc.want.paused || c.Limit != tc.want.limit || c.LimitReason != tc.want.why {
				t.Errorf("core status: got paused %v, limit %d (%s), want %v, %d (%s)", c.Paused, c.Limit, c.LimitReason, tc.want.paused, tc.want.limit, tc.want.why)
			}
			if tc.want.paused && (c.Pause == nil || c.Pause.By != alice || c.Pause.Reason != "ERP deploy") {
				t.Errorf("core status: got pause %+v, want by %s for ERP deploy", c.Pause, alice)
			}
			rep, err := coreOps(w).Status(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			row := rep.CoreSystems[0]
			gotOverride := 0
			if row.Override != nil {
				gotOverride = row.Override.Limit
			}
			if row.Paused != tc.want.paused || gotOverride != tc.want.override || row.Limit != tc.want.limit {
				t.Errorf("status: got paused %v, override %d, limit %d, want %v, %d, %d", row.Paused, gotOverride, row.Limit, tc.want.paused, tc.want.override, tc.want.limit)
			}
		})
	}
}

func TestCoreActionRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		do   func(o *ops.Ops) error
		want string
	}{
		{"above maxRequestsInFlight", func(o *ops.Ops) error {
			_, err := o.CoreLimit(ctx, "ledger", 7, coreNow.Add(time.Hour), "r")
			return err
		}, "the limit must be from 1 to 6, the core system's maxRequestsInFlight"},
		{"zero", func(o *ops.Ops) error {
			_, err := o.CoreLimit(ctx, "ledger", 0, coreNow.Add(time.Hour), "r")
			return err
		},
			"from 1 to 6"},
		{"until passed", func(o *ops.Ops) error { _, err := o.CoreLimit(ctx, "ledger", 2, coreNow, "r"); return err },
			"is not in the future"},
		{"limit without reason", func(o *ops.Ops) error {
			_, err := o.CoreLimit(ctx, "ledger", 2, coreNow.Add(time.Hour), " ")
			return err
		},
			"needs --reason"},
		{"pause without reason", func(o *ops.Ops) error { _, err := o.CorePause(ctx, "ledger", ""); return err },
			"needs --reason"},
		{"unknown core system", func(o *ops.Ops) error { _, err := o.CorePause(ctx, "erp", "r"); return err },
			`core system "erp" not found; core systems: ledger`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := steerWorld()
			err := tc.do(coreOps(w))
			var r *ops.RefusedError
			if err == nil || !errors.As(err, &r) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a refusal containing %q", err, tc.want)
			}
			if n := len(audits(w)); n != 0 {
				t.Errorf("got %d audit items, want none for a refusal", n)
			}
		})
	}
}

// An expired override is shown as such by core status and not at all by status, and no longer
// sets the limit; a maintenance window open now sets it to 0 and says until when.
func TestCoreStatusExpiryAndMaintenance(t *testing.T) {
	ctx := context.Background()
	w := steerWorld()
	o := coreOps(w)
	if _, err := o.CoreLimit(ctx, "ledger", 5, coreNow.Add(time.Minute), "short"); err != nil {
		t.Fatal(err)
	}
	later := coreOps(w)
	later.Now = func() time.Time { return coreNow.Add(2 * time.Minute) }
	cs, err := later.CoreStatus(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if c := cs[0]; c.Override == nil || !c.Override.Expired || c.Limit != 3 || c.LimitReason != corecontrol.WhyConfigured {
		t.Errorf("core status after the override's end: got override %+v, limit %d (%s), want it expired and limit 3 (configured)", c.Override, c.Limit, c.LimitReason)
	}
	rep, err := later.Status(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.CoreSystems[0].Override != nil {
		t.Errorf("status: got override %+v, want none once expired", rep.CoreSystems[0].Override)
	}

	// 12:00 UTC is inside a window that starts at 11:30 for an hour.
	cs, err = coreOps(steerWorld(spec.MaintenanceWindow{Cron: "30 11 * * *", Duration: "1h"})).CoreStatus(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	m := cs[0].Maintenance
	if !m.Open || m.End == nil || !m.End.Equal(coreNow.Add(30*time.Minute)) || cs[0].Limit != 0 || cs[0].LimitReason != corecontrol.WhyMaintenance {
		t.Errorf("in a window: got %+v, limit %d (%s), want open until 12:30 and limit 0 (maintenance)", m, cs[0].Limit, cs[0].LimitReason)
	}
}
