package test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/insights"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// defaultPoolTemplate synthesizes a tenants file (once per test binary, builtApp) and returns the
// template of its pool "default".
func defaultPoolTemplate(t *testing.T, tenantsFile, assignmentFile string) map[string]any {
	t.Helper()
	_, built := builtApp(t, stacks.Options{TenantsFile: tenantsFile, AssignmentFile: assignmentFile})
	for _, stack := range built.PoolStacks {
		if strings.HasSuffix(*stack.StackName(), "-Pool-default") {
			return stackTemplate(t, stack)
		}
	}
	t.Fatalf("no pool default among %d pool stacks", len(built.PoolStacks))
	return nil
}

// poolOf50 writes a tenants file of 50 pooled tenants, with its assignment file, to a temporary
// directory.
func poolOf50(t *testing.T) (string, string) {
	t.Helper()
	var entries []string
	for i := range 50 {
		entries = append(entries, fmt.Sprintf(`{"id": "tenant-%02d", "tier": "pool", "registerUrl": "https://core.example.com/%02d/records"}`, i, i))
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "tenants.json")
	if err := os.WriteFile(file, []byte(`{"pools": {"default": {"intake": "sharded"}}, "tenants": [`+strings.Join(entries, ",\n")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, filepath.Join(dir, "tenants.stacks.json")
}

func resourcesOfType(tpl map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tpl["Resources"].(map[string]any) {
		if r.(map[string]any)["Type"] == typ {
			out[id] = r.(map[string]any)
		}
	}
	return out
}

// poolAlarmCount is the number of a pool's alarms: 17 pool-wide (two of them on the FailedInvocations
// of the default 16 intake rules, at most 10 metrics an alarm; one on LostLeases, one on
// AdmissionWakeFailures) and one per
// metric of PoolTenantAlarmMetrics.
var poolAlarmCount = 17 + len(tenantpipeline.PoolTenantAlarmMetrics)

// A running file that lost its lease and took it again is seen: the pool's LostLeases alarm, on
// the pool's own metric (dimension Pool alone), fires on one.
func TestPoolLostLeasesAlarm(t *testing.T) {
	tpl := defaultPoolTemplate(t, filepath.Join("testdata", "pool.json"), "")
	var found []map[string]any
	for id, a := range resourcesOfType(tpl, "AWS::CloudWatch::Alarm") {
		if strings.Contains(id, "LostLeasesAlarm") {
			found = append(found, props(a))
		}
	}
	if len(found) != 1 {
		t.Fatalf("got %d LostLeases alarms, want 1", len(found))
	}
	for k, want := range map[string]string{
		"MetricName": `"LostLeases"`, "Statistic": `"Sum"`, "Threshold": `1`, "TreatMissingData": `"notBreaching"`,
		"Dimensions": `[{"Name":"Pool","Value":"default"}]`, "ComparisonOperator": `"GreaterThanOrEqualToThreshold"`,
	} {
		if got := asJSON(found[0][k]); got != want {
			t.Errorf("%s: got %s, want %s", k, got, want)
		}
	}
}

// A slot handed to a waiting file whose message could not be woken is counted as a wake failure;
// the pool's alarm, on the pool's own metric, fires when it repeats within five minutes.
func TestPoolAdmissionWakeFailuresAlarm(t *testing.T) {
	tpl := defaultPoolTemplate(t, filepath.Join("testdata", "pool.json"), "")
	var found []map[string]any
	for id, a := range resourcesOfType(tpl, "AWS::CloudWatch::Alarm") {
		if strings.Contains(id, "AdmissionWakeFailuresAlarm") {
			found = append(found, props(a))
		}
	}
	if len(found) != 1 {
		t.Fatalf("got %d AdmissionWakeFailures alarms, want 1", len(found))
	}
	for k, want := range map[string]string{
		"MetricName": `"AdmissionWakeFailures"`, "Statistic": `"Sum"`, "Threshold": `2`, "TreatMissingData": `"notBreaching"`,
		"Dimensions": `[{"Name":"Pool","Value":"default"}]`, "ComparisonOperator": `"GreaterThanOrEqualToThreshold"`,
	} {
		if got := asJSON(found[0][k]); got != want {
			t.Errorf("%s: got %s, want %s", k, got, want)
		}
	}
}

// TestPoolAlarmCountIsFixed: a pool has the same alarms with 2 tenants as with 50; none is a
// tenant's own.
func TestPoolAlarmCountIsFixed(t *testing.T) {
	two := defaultPoolTemplate(t, filepath.Join("testdata", "pool.json"), "")
	file, assignment := poolOf50(t)
	fifty := defaultPoolTemplate(t, file, assignment)
	n2, n50 := len(resourcesOfType(two, "AWS::CloudWatch::Alarm")), len(resourcesOfType(fifty, "AWS::CloudWatch::Alarm"))
	if n2 != poolAlarmCount || n50 != poolAlarmCount {
		t.Errorf("got %d alarms with 2 pooled tenants and %d with 50, want %d both times", n2, n50, poolAlarmCount)
	}
	for id, a := range resourcesOfType(fifty, "AWS::CloudWatch::Alarm") {
		if d := flatten(t, props(a)["AlarmDescription"]); regexp.MustCompile(`tenant-\d\d`).MatchString(d) {
			t.Errorf("%s names a tenant of the pool, want pool-wide alarms only: %s", id, d)
		}
	}
}

// poolRules are the pool's Contributor Insights rules by logical id: name and decoded body (the
// controller's log group as "<Ref:id>").
func poolRules(t *testing.T, tpl map[string]any) map[string]struct {
	name string
	body insights.Rule
} {
	t.Helper()
	out := map[string]struct {
		name string
		body insights.Rule
	}{}
	for id, r := range resourcesOfType(tpl, "AWS::CloudWatch::InsightRule") {
		p := props(r)
		body, err := insights.Parse(flatten(t, p["RuleBody"]))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if p["RuleState"] != "ENABLED" {
			t.Errorf("%s: got RuleState %v, want ENABLED", id, p["RuleState"])
		}
		out[id] = struct {
			name string
			body insights.Rule
		}{flatten(t, p["RuleName"]), body}
	}
	return out
}

// TestPoolTenantRulesAndAlarms: each per-tenant alarm of a pool reads one Contributor Insights
// rule over the pool controller's log group, keyed by $.Tenant, through
// INSIGHT_RULE_METRIC(rule, 'MaxContributorValue') at today's thresholds: Blocked, FailedFiles and
// SequenceGapsOverdue summed per tenant (at least 1), the head file's running and queued seconds
// counted above the alarm's threshold (at least one line). The pool's tenants have no sequence:
// the SequenceGap alarm is there all the same, since a tenant may gain one at any time. The rule count is fixed, whatever the tenant count: the
// account holds 100 rules per region by default.
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch_limits.html
func TestPoolTenantRulesAndAlarms(t *testing.T) {
	file, assignment := poolOf50(t)
	type want struct {
		aggregate, valueOf string
		above              float64 // the GreaterThan filter on the figure; 0: IsPresent
		periods            float64
		missing            string
	}
	wants := map[string]want{
		metrics.Blocked:     {insights.Sum, "$.Blocked", 0, float64(tenantpipeline.DefaultBlockedPeriods), "missing"},
		metrics.FailedFiles: {insights.Sum, "$.FailedFiles", 0, 1, "notBreaching"},
		// A safety net and one period more (an unchanged health line is written once per safety net).
		metrics.HeadRunningSeconds: {insights.Count, "", tenantpipeline.DefaultHeadRunning(tenantpipeline.DefaultWorkflowTimeout).Seconds(), 2, "notBreaching"},
		metrics.HeadQueuedSeconds:  {insights.Count, "", tenantpipeline.DefaultHeadQueued.Seconds(), 2, "notBreaching"},
		// 1 on each tick of a gap past its gapTimeout: summed, one tick is a breach.
		metrics.SequenceGapsOverdue: {insights.Sum, "$.SequenceGapsOverdue", 0, 1, "notBreaching"},
	}
	for _, tc := range []struct{ name, file, assignment string }{{"2 tenants", filepath.Join("testdata", "pool.json"), ""}, {"50 tenants", file, assignment}} {
		t.Run(tc.name, func(t *testing.T) {
			tpl := defaultPoolTemplate(t, tc.file, tc.assignment)
			controllerLogs := ""
			for id, fn := range resourcesOfType(tpl, "AWS::Lambda::Function") {
				if strings.Contains(id, "Controller") {
					lc := props(fn)["LoggingConfig"].(map[string]any)
					controllerLogs = flatten(t, lc["LogGroup"])
				}
			}
			rules := poolRules(t, tpl)
			if len(rules) != len(tenantpipeline.PoolTenantAlarmMetrics) {
				t.Fatalf("got %d rules, want one per per-tenant alarm metric %v", len(rules), tenantpipeline.PoolTenantAlarmMetrics)
			}
			byName := map[string]string{} // rule name -> figure
			for id, r := range rules {
				c := r.body.Contribution
				figure := ""
				for m := range wants {
					if strings.HasSuffix(r.name, "-Tenant"+m) {
						figure = m
					}
				}
				w, ok := wants[figure]
				if !ok {
					t.Errorf("%s: rule %s reads no per-tenant figure", id, r.name)
					continue
				}
				byName[r.name] = figure
				if !slices.Equal(r.body.LogGroupNames, []string{strings.Replace(controllerLogs, "<GetAtt:", "<Ref:", 1)}) && !slices.Equal(r.body.LogGroupNames, []string{controllerLogs}) {
					t.Errorf("%s: got log groups %v, want the controller's %s", id, r.body.LogGroupNames, controllerLogs)
				}
				if !slices.Equal(c.Keys, []string{"$.Tenant"}) || r.body.AggregateOn != w.aggregate || c.ValueOf != w.valueOf || r.body.LogFormat != "JSON" {
					t.Errorf("%s: got keys %v, %s of %q (%s), want [$.Tenant], %s of %q (JSON)", id, c.Keys, r.body.AggregateOn, c.ValueOf, r.body.LogFormat, w.aggregate, w.valueOf)
				}
				var tenantPresent, figureFilter bool
				for _, f := range c.Filters {
					switch {
					case f.Match == "$.Tenant" && f.IsPresent != nil && *f.IsPresent:
						tenantPresent = true
					case f.Match == "$."+figure && w.above == 0 && f.IsPresent != nil && *f.IsPresent,
						f.Match == "$."+figure && w.above > 0 && f.GreaterThan != nil && *f.GreaterThan == w.above:
						figureFilter = true
					}
				}
				if !tenantPresent || !figureFilter || len(c.Filters) != 2 {
					t.Errorf("%s: got filters %s, want Tenant present and %s above %v (0: present)", id, asJSON(c.Filters), figure, w.above)
				}
				if n := len(r.name); n > 128 {
					t.Errorf("%s: got a %d-character rule name, want at most 128", id, n)
				}
			}
			var alarmed []string
			for id, a := range resourcesOfType(tpl, "AWS::CloudWatch::Alarm") {
				ms, _ := props(a)["Metrics"].([]any)
				if !strings.Contains(asJSON(ms), "INSIGHT_RULE_METRIC") {
					continue
				}
				if len(ms) != 1 {
					t.Errorf("%s: got %d metrics, want one INSIGHT_RULE_METRIC expression", id, len(ms))
					continue
				}
				m := ms[0].(map[string]any)
				expr := flatten(t, m["Expression"])
				g := regexp.MustCompile(`^INSIGHT_RULE_METRIC\("([^"]+)", "MaxContributorValue"\)$`).FindStringSubmatch(expr)
				if g == nil || byName[g[1]] == "" {
					t.Errorf("%s: got expression %q, want INSIGHT_RULE_METRIC of one of the pool's rules, MaxContributorValue", id, expr)
					continue
				}
				figure := byName[g[1]]
				w := wants[figure]
				p := props(a)
				if p["Threshold"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || p["EvaluationPeriods"] != w.periods || p["TreatMissingData"] != w.missing {
					t.Errorf("%s: got threshold %v %v, %v periods, missing %v; want >= 1, %v periods, missing %s", id, p["ComparisonOperator"], p["Threshold"], p["EvaluationPeriods"], p["TreatMissingData"], w.periods, w.missing)
				}
				if m["ReturnData"] != true || m["Period"] != float64(tenantpipeline.DefaultEvaluationMinutes*60) {
					t.Errorf("%s: got ReturnData %v and Period %v, want true and %d", id, m["ReturnData"], m["Period"], tenantpipeline.DefaultEvaluationMinutes*60)
				}
				if d := flatten(t, p["AlarmDescription"]); !strings.Contains(d, "get-insight-rule-report --rule-name "+g[1]) || !strings.Contains(d, "pipectl health default") {
					t.Errorf("%s: description %q, want it to say where the tenants are named", id, d)
				}
				deps := asJSON(a["DependsOn"])
				for rid, r := range rules {
					if r.name == g[1] && !strings.Contains(deps, rid) {
						t.Errorf("%s: depends on %s, want its rule %s", id, deps, rid)
					}
				}
				if !slices.Contains(metrics.PoolTenantMetrics, figure) && !slices.Contains(metrics.PoolSequenceMetrics, figure) {
					t.Errorf("%s: reads %s, which the controller does not write in a pooled tenant's lines (metrics.PoolTenantMetrics %v, PoolSequenceMetrics %v)",
						id, figure, metrics.PoolTenantMetrics, metrics.PoolSequenceMetrics)
				}
				alarmed = append(alarmed, figure)
			}
			slices.Sort(alarmed)
			wantAlarmed := slices.Clone(tenantpipeline.PoolTenantAlarmMetrics)
			slices.Sort(wantAlarmed)
			if !slices.Equal(alarmed, wantAlarmed) {
				t.Errorf("got per-tenant alarms on %v, want one on each of %v", alarmed, wantAlarmed)
			}
		})
	}
}

// TestPoolNoTenantDimension: nothing in a pool's stack reads a metric with a Tenant dimension
// (alarms, dashboard), and the pool's Register learns its pool (METRICS_POOL), so that its lines
// are the pool's metrics too.
func TestPoolNoTenantDimension(t *testing.T) {
	tpl := defaultPoolTemplate(t, filepath.Join("testdata", "pool.json"), "")
	for id, a := range resourcesOfType(tpl, "AWS::CloudWatch::Alarm") {
		if j := asJSON(props(a)); strings.Contains(j, `"Name":"Tenant"`) || strings.Contains(j, "SCHEMA(") {
			t.Errorf("%s: reads a Tenant dimension or a Metrics Insights query: %s", id, j)
		}
	}
	for id, d := range resourcesOfType(tpl, "AWS::CloudWatch::Dashboard") {
		if b := flatten(t, props(d)["DashboardBody"]); strings.Contains(b, `"Tenant"`) || strings.Contains(b, "SCHEMA(") {
			t.Errorf("%s: reads a Tenant dimension or a Metrics Insights query: %s", id, b)
		}
	}
	var registers int
	for id, fn := range resourcesOfType(tpl, "AWS::Lambda::Function") {
		vars, _ := props(fn)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if strings.Contains(id, "Split") {
			// Split's function also runs the results task, whose ResultsFailed metric is the pool's.
			if vars[pipeline.EnvMetricsPool] != "default" {
				t.Errorf("%s: got %s %v, want the pool's name", id, pipeline.EnvMetricsPool, vars[pipeline.EnvMetricsPool])
			}
			continue
		}
		if !strings.Contains(id, "Register") {
			if vars[pipeline.EnvMetricsPool] != nil {
				t.Errorf("%s: got %s %v, want it on Register and Split only", id, pipeline.EnvMetricsPool, vars[pipeline.EnvMetricsPool])
			}
			continue
		}
		registers++
		if vars[pipeline.EnvMetricsPool] != "default" || vars[pipeline.EnvPool] != nil {
			t.Errorf("%s: got %s %v and %s %v, want default and unset", id, pipeline.EnvMetricsPool, vars[pipeline.EnvMetricsPool], pipeline.EnvPool, vars[pipeline.EnvPool])
		}
	}
	if registers != 1 {
		t.Errorf("got %d Register functions, want 1", registers)
	}
}

// TestPoolDashboardAndAlarmsLinkEachOther: the pool's dashboard shows the status of every alarm of
// the pool, its top tenants by wait, failures, halts and run time (Metrics Insights queries with a
// LIMIT), and every alarm's description carries the dashboard's console link.
func TestPoolDashboardAndAlarmsLinkEachOther(t *testing.T) {
	tpl := defaultPoolTemplate(t, filepath.Join("testdata", "pool.json"), "")
	dashboards := resourcesOfType(tpl, "AWS::CloudWatch::Dashboard")
	if len(dashboards) != 1 {
		t.Fatalf("got %d dashboards, want 1", len(dashboards))
	}
	var d map[string]any
	for _, x := range dashboards {
		d = x
	}
	name := flatten(t, props(d)["DashboardName"])
	url := "https://console.aws.amazon.com/cloudwatch/home?region=<Ref:AWS::Region>#dashboards:name=" + name
	var body dashboardBody
	flattenJSON(t, props(d)["DashboardBody"], &body)

	var want, got []string
	for id, a := range resourcesOfType(tpl, "AWS::CloudWatch::Alarm") {
		want = append(want, "<GetAtt:"+id+".Arn>")
		desc := flatten(t, props(a)["AlarmDescription"])
		if !strings.Contains(desc, " Dashboard: "+url+" ") {
			t.Errorf("%s: description %q, want the dashboard link %s", id, desc, url)
		}
		if n := len(strings.ReplaceAll(desc, "<Ref:AWS::Region>", "ap-southeast-4")); n > 1024 {
			t.Errorf("%s: got a %d-character description, want at most 1024", id, n)
		}
	}
	for _, w := range body.Widgets {
		if w.Type == "alarm" {
			got = append(got, w.Properties.Alarms...)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) != poolAlarmCount || !slices.Equal(got, want) {
		t.Errorf("alarm status widget: got %v, want the pool's %d alarms %v", got, poolAlarmCount, want)
	}
	// The top-tenant widgets: one per rule, its top contributors.
	var insightsBody struct {
		Widgets []struct {
			Properties struct {
				InsightRule *struct {
					RuleName            string
					MaxContributorCount int
					OrderBy             string
				}
			}
		}
	}
	flattenJSON(t, props(d)["DashboardBody"], &insightsBody)
	var shown, rules []string
	for _, w := range insightsBody.Widgets {
		if r := w.Properties.InsightRule; r != nil {
			if r.MaxContributorCount != tenantpipeline.DashboardTopTenants || r.OrderBy != "Sum" {
				t.Errorf("%s: got %d contributors by %s, want %d by Sum", r.RuleName, r.MaxContributorCount, r.OrderBy, tenantpipeline.DashboardTopTenants)
			}
			shown = append(shown, r.RuleName)
		}
	}
	for _, r := range poolRules(t, tpl) {
		rules = append(rules, r.name)
	}
	slices.Sort(shown)
	slices.Sort(rules)
	if len(rules) == 0 || !slices.Equal(shown, rules) {
		t.Errorf("got top-tenant widgets of rules %v, want one of each of %v", shown, rules)
	}
}
