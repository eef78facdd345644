package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// dashboardMetric is one metric line of a dashboard widget, its dimensions as name=value.
type dashboardMetric struct {
	widget, namespace, name, stat string
	dims                          string
	period                        float64
}

type dashboardBody struct {
	Widgets []struct {
		Type       string
		Properties struct {
			Title    string
			Markdown string
			Metrics  [][]any
			Alarms   []string
		}
	}
}

// sharedDashboard returns the tenant stack's one dashboard: its name and body.
func sharedDashboard(t *testing.T) (string, dashboardBody) {
	t.Helper()
	sharedApp(t)
	var found []map[string]any
	for _, r := range shared.template["Resources"].(map[string]any) {
		if r.(map[string]any)["Type"] == "AWS::CloudWatch::Dashboard" {
			found = append(found, r.(map[string]any))
		}
	}
	if len(found) != 1 {
		t.Fatalf("got %d dashboards in the tenant stack, want 1", len(found))
	}
	var body dashboardBody
	flattenJSON(t, props(found[0])["DashboardBody"], &body)
	return flatten(t, props(found[0])["DashboardName"]), body
}

// metricsOf lists the metric lines of the widgets whose title starts with "<tenant>: ". A line is
// [namespace, name, dim, value, ..., {options}] (dashboard body structure,
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html).
func metricsOf(t *testing.T, body dashboardBody, tenant string) []dashboardMetric {
	t.Helper()
	var out []dashboardMetric
	for _, w := range body.Widgets {
		title, ok := strings.CutPrefix(w.Properties.Title, tenant+": ")
		if w.Type != "metric" || !ok {
			continue
		}
		for _, line := range w.Properties.Metrics {
			// Without a period of its own a metric is charted at 300 s, the dashboard's default.
			m := dashboardMetric{widget: title, period: 300}
			var strs []string
			for _, x := range line {
				switch v := x.(type) {
				case string:
					if v == "." || v == "..." {
						t.Fatalf("widget %q: got the shorthand %q, want every metric spelled out", title, v)
					}
					strs = append(strs, v)
				case map[string]any:
					m.stat, _ = v["stat"].(string)
					if p, ok := v["period"].(float64); ok {
						m.period = p
					}
				}
			}
			if len(strs) < 2 || len(strs)%2 != 0 {
				t.Fatalf("widget %q: got metric line %v, want namespace, name and dimension pairs", title, line)
			}
			m.namespace, m.name = strs[0], strs[1]
			var dims []string
			for i := 2; i < len(strs); i += 2 {
				dims = append(dims, strs[i]+"="+strs[i+1])
			}
			sort.Strings(dims)
			m.dims = strings.Join(dims, ",")
			out = append(out, m)
		}
	}
	return out
}

// TestDashboardWidgets: one dashboard per tenant stack, with each tenant's widgets
// charting exactly these metrics. The dimensions are the ones the emitters write: the pipeline's
// EMF metrics carry Tenant (checked against real EMF output below), the log metric filter's
// ErrorLogs-<tenant> none; AWS/SQS metrics carry QueueName
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html),
// AWS/States execution metrics StateMachineArn
// (https://docs.aws.amazon.com/step-functions/latest/dg/procedure-cw-metrics.html), AWS/Lambda
// FunctionName (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html).
func TestDashboardWidgets(t *testing.T) {
	name, body := sharedDashboard(t)
	if want := "TenantPipeline-Tenants-1-Dashboard-<Ref:AWS::Region>"; name != want {
		t.Errorf("dashboard name: got %q, want %q", name, want)
	}
	tpl := shared.template
	for _, tenant := range sampleTenants {
		t.Run(tenant, func(t *testing.T) {
			q, _ := fifoQueue(t, tpl, tenant)
			queue := "QueueName=<GetAtt:" + q + ".QueueName>"
			sm := "StateMachineArn=<Ref:" + logicalIDOf(t, tpl, "AWS::StepFunctions::StateMachine", tenant, "WorkflowFile") + ">"
			fn := "FunctionName=<Ref:" + controllerID(t, tpl, tenant) + ">"
			ten := "Tenant=" + tenant
			want := []dashboardMetric{
				{"files completed and failed", "TenantPipeline", "Completions", "Sum", ten, 300},
				{"files completed and failed", "TenantPipeline", "FailedFiles", "Sum", ten, 300},
				{"records registered per minute", "TenantPipeline", "RecordsRegistered", "Sum", ten, 60},
				{"queue: visible and in flight", "AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", queue, 300},
				{"queue: visible and in flight", "AWS/SQS", "ApproximateNumberOfMessagesNotVisible", "Maximum", queue, 300},
				{"head file queued and running (s)", "TenantPipeline", "HeadQueuedSeconds", "Maximum", ten, 300},
				{"head file queued and running (s)", "TenantPipeline", "HeadRunningSeconds", "Maximum", ten, 300},
				{"file execution duration (ms)", "AWS/States", "ExecutionTime", "p50", sm, 300},
				{"file execution duration (ms)", "AWS/States", "ExecutionTime", "p95", sm, 300},
				{"blocked (1 = halted on a failed file)", "TenantPipeline", "Blocked", "Maximum", ten, 300},
				{"errors", "TenantPipeline", "ErrorLogs-" + tenant, "Sum", "", 300},
				{"errors", "AWS/Lambda", "Errors", "Sum", fn, 300},
				{"wake-ups and throttles", "TenantPipeline", "WakeUps", "Sum", ten, 300},
				{"wake-ups and throttles", "TenantPipeline", "Throttles", "Sum", ten, 300},
			}
			got := metricsOf(t, body, tenant)
			if !slices.Equal(got, want) {
				t.Errorf("metrics:\ngot  %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestDashboardMetricsAreEmitted: every TenantPipeline metric the dashboard charts is
// written by the code: a Tenant-dimension metric is named through package metrics by a Lambda's
// own (non-test) source and the EMF line of that name carries exactly the Tenant dimension; an
// ErrorLogs-<tenant> metric is the output of a metric filter on each of the tenant's function log
// groups.
func TestDashboardMetricsAreEmitted(t *testing.T) {
	_, body := sharedDashboard(t)
	var src bytes.Buffer
	for _, dir := range []string{"controller", "register"} {
		files, _ := filepath.Glob(filepath.Join("..", "lambdas", dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
	}
	// The identifiers of package metrics, by the metric name they hold.
	idents := map[string]string{
		metrics.Completions: "Completions", metrics.FailedFiles: "FailedFiles", metrics.RecordsRegistered: "RecordsRegistered",
		metrics.HeadQueuedSeconds: "HeadQueuedSeconds", metrics.HeadRunningSeconds: "HeadRunningSeconds", metrics.Blocked: "Blocked",
		metrics.WakeUps: "WakeUps", metrics.Throttles: "Throttles",
	}
	for _, tenant := range sampleTenants {
		for _, m := range metricsOf(t, body, tenant) {
			if m.namespace != pipeline.DefaultMetricsNamespace {
				continue
			}
			if m.name == "ErrorLogs-"+tenant {
				checkErrorLogsFilters(t, tenant)
				continue
			}
			ident, ok := idents[m.name]
			if !ok {
				t.Errorf("%s: dashboard metric %s is not a metric of package metrics", tenant, m.name)
				continue
			}
			if !bytes.Contains(src.Bytes(), []byte("metrics."+ident)) {
				t.Errorf("%s: no Lambda emits metrics.%s", tenant, ident)
			}
			var line bytes.Buffer
			if err := metrics.New(&line, pipeline.DefaultMetricsNamespace, tenant).Emit(metrics.Count(m.name, 1)); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				AWS struct {
					CloudWatchMetrics []struct{ Dimensions [][]string }
				} `json:"_aws"`
				Tenant string
			}
			if err := json.Unmarshal(line.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if d := doc.AWS.CloudWatchMetrics[0].Dimensions; len(d) != 1 || strings.Join(d[0], ",") != "Tenant" || doc.Tenant != tenant || m.dims != "Tenant="+tenant {
				t.Errorf("%s %s: EMF dimensions %v (Tenant %q), dashboard %q; want [[Tenant]] = %s on both", tenant, m.name, d, doc.Tenant, m.dims, tenant)
			}
		}
	}
}

func checkErrorLogsFilters(t *testing.T, tenant string) {
	t.Helper()
	filters := tenantResources(t, shared.template, "AWS::Logs::MetricFilter", tenant)
	fns := len(tenantResources(t, shared.template, "AWS::Lambda::Function", tenant))
	if len(filters) != fns {
		t.Errorf("%s: got %d ERROR metric filters, want one per function (%d)", tenant, len(filters), fns)
	}
	for id, f := range filters {
		mt := get(t, props(f), "MetricTransformations", 0).(map[string]any)
		if mt["MetricName"] != "ErrorLogs-"+tenant || mt["MetricNamespace"] != pipeline.DefaultMetricsNamespace || mt["Dimensions"] != nil {
			t.Errorf("%s: filter %s writes %v, want ErrorLogs-%s in %s without dimensions", tenant, id, mt, tenant, pipeline.DefaultMetricsNamespace)
		}
	}
}

// TestDashboardAndAlarmsLinkEachOther: the dashboard shows the status of every alarm of
// each tenant, and every alarm's description ends with the dashboard's console link and stays
// within CloudWatch's 1,024 characters with the longest region name.
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html
func TestDashboardAndAlarmsLinkEachOther(t *testing.T) {
	name, body := sharedDashboard(t)
	url := "https://console.aws.amazon.com/cloudwatch/home?region=<Ref:AWS::Region>#dashboards:name=" + name
	for _, tenant := range sampleTenants {
		t.Run(tenant, func(t *testing.T) {
			alarms := tenantResources(t, shared.template, "AWS::CloudWatch::Alarm", tenant)
			var want []string
			for id, a := range alarms {
				want = append(want, "<GetAtt:"+id+".Arn>")
				d := flatten(t, props(a)["AlarmDescription"])
				if !strings.HasSuffix(d, " Dashboard: "+url) {
					t.Errorf("%s: description %q, want it to end with the dashboard link %s", id, d, url)
				}
				if n := len(strings.ReplaceAll(d, "<Ref:AWS::Region>", "ap-southeast-4")); n > 1024 {
					t.Errorf("%s: got a %d-character description, want at most 1024", id, n)
				}
			}
			var got []string
			for _, w := range body.Widgets {
				if w.Type == "alarm" && w.Properties.Title == tenant+": alarms" {
					got = append(got, w.Properties.Alarms...)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if len(want) != 14 || !slices.Equal(got, want) {
				t.Errorf("alarm status widget: got %v, want the tenant's 14 alarms %v", got, want)
			}
		})
	}
}

// TestDashboardIDIsChecked: the id goes into the dashboard's name, which CloudWatch limits to
// letters, digits, '-' and '_'; CDK cannot check a name that holds the region token, so the
// constructor does.
func TestDashboardIDIsChecked(t *testing.T) {
	app := testApp(t)
	stack := awscdk.NewStack(app, jsii.String("Dash"), nil)
	var msg string
	func() {
		defer func() { msg = fmt.Sprint(recover()) }()
		tenantpipeline.NewDashboard(stack, "my dashboard")
	}()
	if want := `NewDashboard: id "my dashboard" is invalid`; !strings.Contains(msg, want) {
		t.Errorf("got panic %q, want it to contain %q", msg, want)
	}
}
