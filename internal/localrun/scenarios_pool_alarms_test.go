//go:build e2e || figures

package localrun

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/insights"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/metrics"
)

// A pool's per-tenant alarms, emulated: a halted pooled tenant is the one contributor above zero
// of the pool's Blocked rule, and a continue tenant's failed file the one of its FailedFiles rule,
// so INSIGHT_RULE_METRIC(rule, 'MaxContributorValue') reaches the alarms' threshold of 1 and the
// report names the tenant. The other tenants that had deliveries are contributors too, at zero:
// every tenant is evaluated.
func TestScenarioPoolTenantAlarms(t *testing.T) {
	t.Parallel()
	r := startScenario(t, withTierJSON(scenarioTenants, "pool"), Config{EnvFor: map[string][]string{controllerPkg: {"HALT_WAIT_SECONDS=1"}}})
	ruleOf := func(metric string) string {
		t.Helper()
		for _, n := range r.InsightRules() {
			if strings.HasSuffix(n, "-Tenant"+metric) {
				return n
			}
		}
		t.Fatalf("got rules %v, want one of %s", r.InsightRules(), metric)
		return ""
	}
	blocked, failed := ruleOf(metrics.Blocked), ruleOf(metrics.FailedFiles)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"halt", "1-bad.csv", badCSV()}, {"cont", "1-bad.csv", badCSV()}, {"ov", "1.csv", csvOf(5)}})
	waitFor(t, ctx, r, "halt halted and ov registered", func(rep *report.Report) bool {
		return rep.Tenants["halt"].Halted != nil && len(r.Sink.Registered("ov")) == 5
	})
	// above is the contributors over zero; all, every contributor.
	report := func(rule string) (above, all []string, top float64) {
		cs, err := r.InsightRuleReport(rule)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			all = append(all, c.Keys[0])
			if c.Value > 0 {
				above = append(above, c.Keys[0])
			}
		}
		top, _ = insights.MaxContributorValue(cs)
		return above, all, top
	}
	// The halted head is delivered again every HALT_WAIT_SECONDS, each delivery with Blocked 1; the
	// continue tenant's failed file is counted once its controller sees the failure.
	for _, tc := range []struct{ rule, tenant string }{{blocked, "halt"}, {failed, "cont"}} {
		for {
			above, all, top := report(tc.rule)
			if len(above) > 0 {
				if !slices.Equal(above, []string{tc.tenant}) || top < 1 || !slices.Contains(all, "ov") && tc.rule == blocked {
					t.Errorf("%s: got tenants over zero %v of %v, top value %v; want %s alone at 1 or more (and ov among Blocked's at zero)", tc.rule, above, all, top, tc.tenant)
				}
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: got no tenant over zero among %v, want %s", tc.rule, all, tc.tenant)
			case <-time.After(300 * time.Millisecond):
			}
		}
	}
}
