//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/ops"
)

// pipectl against the served stack for a halted pooled tenant: health names it under the pool's
// TenantBlocked alarm (CloudWatch GetInsightRuleReport, answered from the emulated Contributor
// Insights rules), and status shows the commands that release it, the ones the runner prints.
func TestScenarioOpsHealthAndHaltedStatus(t *testing.T) {
	t.Parallel()
	r := startScenario(t, withTierJSON(scenarioTenants, "pool"), Config{EnvFor: map[string][]string{controllerPkg: {"HALT_WAIT_SECONDS=1"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"halt", "1-bad.csv", badCSV()}, {"ov", "1.csv", csvOf(5)}})
	rep := waitFor(t, ctx, r, "halt halted and ov registered", func(rep *report.Report) bool {
		return rep.Tenants["halt"].Halted != nil && len(r.Sink.Registered("ov")) == 5
	})
	h := rep.Tenants["halt"].Halted

	// The Blocked line comes with each recheck of the halted head: wait until health names it.
	var health ops.PoolHealth
	for {
		out := pipectl(t, r, "health", "default", "--json", "--stack-prefix", opsPrefix)
		if err := json.Unmarshal([]byte(out), &health); err != nil {
			t.Fatalf("health --json: %v\n%s", err, out)
		}
		if blocked := alarmTenants(health, "TenantBlocked"); len(blocked) > 0 {
			if !slices.Equal(blocked, []string{"halt"}) {
				t.Errorf("health: got TenantBlocked tenants %v, want [halt]", blocked)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("health: got no tenant under TenantBlocked in %+v, want halt", health)
		case <-time.After(300 * time.Millisecond):
		}
	}
	if len(health.Alarms) != len(ops.PoolTenantAlarms) {
		t.Errorf("health: got %d alarms, want %d", len(health.Alarms), len(ops.PoolTenantAlarms))
	}
	if table := pipectl(t, r, "health", "default", "--stack-prefix", opsPrefix); !strings.Contains(table, "TenantBlocked") || !strings.Contains(table, "halt") {
		t.Errorf("health: got %q, want a TenantBlocked row for halt", table)
	}

	want := "halt is halted at " + h.ExecutionName + ":\n" + ops.ReleaseText("  ", h.Commands("halt"))
	if out := pipectl(t, r, "status", "halt", "--stack-prefix", opsPrefix); !strings.Contains(out, want) {
		t.Errorf("status: got\n%s\nwant it to contain\n%s", out, want)
	}
	var progress strings.Builder
	report.WriteHalt(&progress, "halt", h)
	if !strings.Contains(progress.String(), ops.ReleaseText("  ", h.Commands("halt"))) {
		t.Errorf("the runner's halt: got %q, want the same commands as status", progress.String())
	}
}

// alarmTenants are the tenants health lists under an alarm.
func alarmTenants(h ops.PoolHealth, alarm string) []string {
	var ids []string
	for _, a := range h.Alarms {
		if a.Alarm == alarm {
			for _, tv := range a.Tenants {
				ids = append(ids, tv.Tenant)
			}
		}
	}
	return ids
}
