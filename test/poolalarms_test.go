package test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// defaultPoolTemplate synthesizes a tenants file and returns the template of its pool "default".
func defaultPoolTemplate(t *testing.T, tenantsFile, assignmentFile string) map[string]any {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	built, err := stacks.Build(app, stacks.Options{TenantsFile: tenantsFile, AssignmentFile: assignmentFile})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	for _, stack := range built.PoolStacks {
		if strings.HasSuffix(*stack.StackName(), "-Pool-default") {
			return templateJSON(assertions.Template_FromStack(stack, nil))
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
	if err := os.WriteFile(file, []byte(`{"tenants": [`+strings.Join(entries, ",\n")+`]}`), 0o644); err != nil {
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

// poolAlarmCount is the number of a pool's alarms: 14 pool-wide (two of them on the FailedInvocations
// of the default 16 intake rules, at most 10 metrics an alarm) and one per metric of
// PoolTenantAlarmMetrics.
var poolAlarmCount = 14 + len(tenantpipeline.PoolTenantAlarmMetrics)

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

// poolQuery is the one shape of a pool's per-tenant Metrics Insights query: one metric of the
// [Pool, Tenant] dimension set, the pool's tenants only, one time series per tenant, the highest
// values first, LIMIT n.
var poolQuery = regexp.MustCompile(`^SELECT (MAX|SUM)\((\w+)\) FROM SCHEMA\("` + pipeline.DefaultMetricsNamespace +
	`", Pool, Tenant\) WHERE Pool = 'default' GROUP BY Tenant ORDER BY (MAX|SUM)\(\) DESC LIMIT (\d+)$`)

// TestPoolTenantAlarmQueries: the pool's per-tenant alarms are Metrics Insights alarms, one per
// metric of PoolTenantAlarmMetrics, each grouped by Tenant and limited to at most 500 time series
// (CloudWatch marks more PARTIAL_DATA) and 100 (the contributors CloudWatch names in ALARM), ordered
// by the value compared with the threshold. Each queried metric is one the pool's controller emits
// under [Pool, Tenant] (metrics.PoolTenantMetrics; lambdas/controller's
// TestPoolTenantAlarmMetricsEmitted checks the EMF). A few per pool keeps an account far under the
// default quota of 200 Metrics Insights alarms per region.
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-limits.html
func TestPoolTenantAlarmQueries(t *testing.T) {
	file, assignment := poolOf50(t)
	for _, tc := range []struct{ name, file, assignment string }{{"2 tenants", filepath.Join("testdata", "pool.json"), ""}, {"50 tenants", file, assignment}} {
		t.Run(tc.name, func(t *testing.T) {
			tpl := defaultPoolTemplate(t, tc.file, tc.assignment)
			var queried []string
			for id, a := range resourcesOfType(tpl, "AWS::CloudWatch::Alarm") {
				ms, _ := props(a)["Metrics"].([]any)
				if !strings.Contains(asJSON(ms), "SELECT ") {
					continue // a metric or metric math alarm
				}
				if len(ms) != 1 {
					t.Errorf("%s: got %d metrics, want one Metrics Insights query", id, len(ms))
					continue
				}
				m := ms[0].(map[string]any)
				expr, _ := m["Expression"].(string)
				g := poolQuery.FindStringSubmatch(expr)
				if g == nil {
					t.Errorf("%s: got expression %q, want %s", id, expr, poolQuery)
					continue
				}
				if g[1] != g[3] {
					t.Errorf("%s: %q orders by %s(), want the selected %s()", id, expr, g[3], g[1])
				}
				if limit, _ := strconv.Atoi(g[4]); limit < 1 || limit > 100 {
					t.Errorf("%s: LIMIT %d, want 1 to 100 (at most 100 contributors in ALARM, PARTIAL_DATA above 500 time series)", id, limit)
				}
				if m["ReturnData"] != true || m["Period"] != float64(tenantpipeline.DefaultEvaluationMinutes*60) {
					t.Errorf("%s: got ReturnData %v and Period %v, want true and %d", id, m["ReturnData"], m["Period"], tenantpipeline.DefaultEvaluationMinutes*60)
				}
				if !slices.Contains(metrics.PoolTenantMetrics, g[2]) {
					t.Errorf("%s: queries %s, which the controller does not emit under [Pool, Tenant] (metrics.PoolTenantMetrics %v)", id, g[2], metrics.PoolTenantMetrics)
				}
				if d := flatten(t, props(a)["AlarmDescription"]); !strings.Contains(d, "contributors name the tenants") {
					t.Errorf("%s: description %q, want it to say where the tenants in ALARM are named", id, d)
				}
				queried = append(queried, g[2])
			}
			slices.Sort(queried)
			want := slices.Clone(tenantpipeline.PoolTenantAlarmMetrics)
			slices.Sort(want)
			if !slices.Equal(queried, want) {
				t.Errorf("got per-tenant alarms on %v, want one on each of %v", queried, want)
			}
			for _, m := range []string{metrics.Blocked, metrics.FailedFiles, metrics.HeadRunningSeconds, metrics.HeadQueuedSeconds} {
				if !slices.Contains(queried, m) {
					t.Errorf("no per-tenant alarm on %s", m)
				}
			}
			if len(queried) > 10 {
				t.Errorf("got %d Metrics Insights alarms in one pool, want at most 10 (200 per account and region)", len(queried))
			}
		})
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
	var queries []string
	for _, w := range body.Widgets {
		switch w.Type {
		case "alarm":
			got = append(got, w.Properties.Alarms...)
		case "metric":
			for _, line := range w.Properties.Metrics {
				for _, x := range line {
					if o, ok := x.(map[string]any); ok {
						if e, ok := o["expression"].(string); ok {
							queries = append(queries, e)
						}
					}
				}
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) != poolAlarmCount || !slices.Equal(got, want) {
		t.Errorf("alarm status widget: got %v, want the pool's %d alarms %v", got, poolAlarmCount, want)
	}
	var topMetrics []string
	for _, q := range queries {
		g := poolQuery.FindStringSubmatch(q)
		if g == nil {
			t.Errorf("got dashboard query %q, want %s", q, poolQuery)
			continue
		}
		if g[4] != strconv.Itoa(tenantpipeline.DashboardTopTenants) {
			t.Errorf("%q: LIMIT %s, want %d", q, g[4], tenantpipeline.DashboardTopTenants)
		}
		topMetrics = append(topMetrics, g[2])
	}
	slices.Sort(topMetrics)
	wantTop := slices.Clone(tenantpipeline.PoolTenantAlarmMetrics)
	slices.Sort(wantTop)
	if !slices.Equal(topMetrics, wantTop) {
		t.Errorf("got top-tenant widgets on %v, want one on each of %v", topMetrics, wantTop)
	}
}
