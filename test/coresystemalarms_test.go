package test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// coreResources are the resources of a type whose logical id starts with prefix.
func coreResources(tpl map[string]any, typ, prefix string) []map[string]any {
	var out []map[string]any
	for id, r := range byType(tpl, typ) {
		if strings.HasPrefix(id, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// checkAdmissionWaitAlarm: the maximum of AdmissionWaitSeconds {CoreSystem=name} over 5 minutes, at
// or above the threshold in one period, missing data not breaching; actions on the topic if any.
func checkAdmissionWaitAlarm(t *testing.T, tpl map[string]any, prefix, name string, threshold float64, topic string) {
	t.Helper()
	found := coreResources(tpl, "AWS::CloudWatch::Alarm", prefix+"AdmissionWaitAlarm")
	if len(found) != 1 {
		t.Fatalf("got %d AdmissionWait alarms under %s, want 1", len(found), prefix)
	}
	p := props(found[0])
	for k, want := range map[string]string{
		"Namespace":          `"` + pipeline.DefaultMetricsNamespace + `"`,
		"MetricName":         `"AdmissionWaitSeconds"`,
		"Dimensions":         `[{"Name":"CoreSystem","Value":"` + name + `"}]`,
		"Statistic":          `"Maximum"`,
		"Period":             `300`,
		"EvaluationPeriods":  `1`,
		"DatapointsToAlarm":  `1`,
		"Threshold":          asJSON(threshold),
		"ComparisonOperator": `"GreaterThanOrEqualToThreshold"`,
		"TreatMissingData":   `"notBreaching"`,
	} {
		if got := asJSON(p[k]); got != want {
			t.Errorf("%s: got %s, want %s", k, got, want)
		}
	}
	if !strings.Contains(flatten(t, p["AlarmDescription"]), "Dashboard: https://console.aws.amazon.com/cloudwatch/home?region=") {
		t.Errorf("description: got %s, want a link to the core system's dashboard", flatten(t, p["AlarmDescription"]))
	}
	for _, k := range []string{"AlarmActions", "OKActions"} {
		got := asJSON(p[k])
		if topic == "" && p[k] != nil || topic != "" && got != "["+topic+"]" {
			t.Errorf("%s: got %s, want [%s]", k, got, topic)
		}
	}
}

// checkLostLeasesAlarm: the sum of LostLeases {CoreSystem=name} over 5 minutes, at least 1, missing
// data not breaching; actions on the topic if any.
func checkLostLeasesAlarm(t *testing.T, tpl map[string]any, prefix, name, topic string) {
	t.Helper()
	found := coreResources(tpl, "AWS::CloudWatch::Alarm", prefix+"LostLeasesAlarm")
	if len(found) != 1 {
		t.Fatalf("got %d LostLeases alarms under %s, want 1", len(found), prefix)
	}
	p := props(found[0])
	for k, want := range map[string]string{
		"MetricName": `"LostLeases"`, "Dimensions": `[{"Name":"CoreSystem","Value":"` + name + `"}]`, "Statistic": `"Sum"`,
		"Period": `300`, "Threshold": `1`, "ComparisonOperator": `"GreaterThanOrEqualToThreshold"`, "TreatMissingData": `"notBreaching"`,
	} {
		if got := asJSON(p[k]); got != want {
			t.Errorf("%s: got %s, want %s", k, got, want)
		}
	}
	if got := asJSON(p["AlarmActions"]); topic != "" && got != "["+topic+"]" {
		t.Errorf("AlarmActions: got %s, want [%s]", got, topic)
	}
}

// checkBreakerOpenAlarm: the alarm CoreSystemBreakerOpen, the maximum of CoreSystemBreakerOpen
// {CoreSystem=name} over 5 minutes, at least 1, in one period, missing data not breaching (no
// invocation saw it open); actions on the topic if any.
func checkBreakerOpenAlarm(t *testing.T, tpl map[string]any, prefix, name, topic string) {
	t.Helper()
	found := coreResources(tpl, "AWS::CloudWatch::Alarm", prefix+"CoreSystemBreakerOpenAlarm")
	if len(found) != 1 {
		t.Fatalf("got %d CoreSystemBreakerOpen alarms under %s, want 1", len(found), prefix)
	}
	p := props(found[0])
	for k, want := range map[string]string{
		"Namespace": `"` + pipeline.DefaultMetricsNamespace + `"`, "MetricName": `"CoreSystemBreakerOpen"`,
		"Dimensions": `[{"Name":"CoreSystem","Value":"` + name + `"}]`, "Statistic": `"Maximum"`, "Period": `300`,
		"EvaluationPeriods": `1`, "DatapointsToAlarm": `1`, "Threshold": `1`,
		"ComparisonOperator": `"GreaterThanOrEqualToThreshold"`, "TreatMissingData": `"notBreaching"`,
	} {
		if got := asJSON(p[k]); got != want {
			t.Errorf("%s: got %s, want %s", k, got, want)
		}
	}
	if d := flatten(t, p["AlarmDescription"]); !strings.Contains(d, "breaker of core system "+name+" is open") || !strings.Contains(d, "pipectl status") {
		t.Errorf("description: got %s, want what it means and where to look", d)
	}
	for _, k := range []string{"AlarmActions", "OKActions"} {
		got := asJSON(p[k])
		if topic == "" && p[k] != nil || topic != "" && got != "["+topic+"]" {
			t.Errorf("%s: got %s, want [%s]", k, got, topic)
		}
	}
}

// checkWakeFailuresAlarm: the sum of AdmissionWakeFailures {CoreSystem=name} over 5 minutes, at
// least 2 (a repeat), missing data not breaching; actions on the topic if any.
func checkWakeFailuresAlarm(t *testing.T, tpl map[string]any, prefix, name, topic string) {
	t.Helper()
	found := coreResources(tpl, "AWS::CloudWatch::Alarm", prefix+"AdmissionWakeFailuresAlarm")
	if len(found) != 1 {
		t.Fatalf("got %d AdmissionWakeFailures alarms under %s, want 1", len(found), prefix)
	}
	p := props(found[0])
	for k, want := range map[string]string{
		"MetricName": `"AdmissionWakeFailures"`, "Dimensions": `[{"Name":"CoreSystem","Value":"` + name + `"}]`, "Statistic": `"Sum"`,
		"Period": `300`, "Threshold": `2`, "ComparisonOperator": `"GreaterThanOrEqualToThreshold"`, "TreatMissingData": `"notBreaching"`,
	} {
		if got := asJSON(p[k]); got != want {
			t.Errorf("%s: got %s, want %s", k, got, want)
		}
	}
	if got := asJSON(p["AlarmActions"]); topic != "" && got != "["+topic+"]" {
		t.Errorf("AlarmActions: got %s, want [%s]", got, topic)
	}
}

// checkCoreDashboard: the core system's dashboard charts its running files and effective limit,
// its oldest admission wait, its admissions and waits, every metric with the CoreSystem dimension
// the controller writes (metrics.Dimension CoreSystem, internal/controller/admission.go emitCore),
// and the 429 and 503 answers and requests Register writes with it (metrics.InCoreSystem).
func checkCoreDashboard(t *testing.T, tpl map[string]any, prefix, name string) {
	t.Helper()
	found := coreResources(tpl, "AWS::CloudWatch::Dashboard", prefix+"Dashboard")
	if len(found) != 1 {
		t.Fatalf("got %d dashboards under %s, want 1", len(found), prefix)
	}
	if got := flatten(t, props(found[0])["DashboardName"]); !strings.Contains(got, "-CoreSystem-"+name+"-") {
		t.Errorf("name: got %s, want <stack>-CoreSystem-%s-<region>", got, name)
	}
	var body dashboardBody
	flattenJSON(t, props(found[0])["DashboardBody"], &body)
	var got []string
	for _, m := range metricsOf(t, body, name) {
		if m.namespace != pipeline.DefaultMetricsNamespace || m.dims != metrics.DimensionCoreSystem+"="+name || m.period != 300 {
			t.Errorf("widget %q: got %s/%s %s period %v, want %s, CoreSystem=%s, 300", m.widget, m.namespace, m.name, m.dims, m.period,
				pipeline.DefaultMetricsNamespace, name)
		}
		got = append(got, m.widget+": "+m.name+" "+m.stat)
	}
	want := []string{
		"running files and limit: " + metrics.CoreRunningFiles + " Maximum",
		"running files and limit: " + metrics.CoreRunningFileLimit + " Minimum",
		"oldest admission wait (s): " + metrics.CoreAdmissionWaitSeconds + " Maximum",
		"admissions and waits: " + metrics.CoreAdmissions + " Sum",
		"admissions and waits: " + metrics.CoreAdmissionWaits + " Sum",
		"429 and 503 answers and requests (per 5 minutes): " + metrics.CoreSystemThrottles + " Sum",
		"429 and 503 answers and requests (per 5 minutes): " + metrics.CoreSystemRequests + " Sum",
		"breaker (1: open) and its opens and holds (per 5 minutes): " + metrics.CoreSystemBreakerOpen + " Maximum",
		"breaker (1: open) and its opens and holds (per 5 minutes): " + metrics.CoreSystemBreakerOpens + " Sum",
		"breaker (1: open) and its opens and holds (per 5 minutes): " + metrics.CoreSystemBreakerHolds + " Sum",
	}
	if !slices.Equal(got, want) {
		t.Errorf("metrics: got %q, want %q", got, want)
	}
	var alarms int
	for _, w := range body.Widgets {
		alarms += len(w.Properties.Alarms)
	}
	if alarms != 4 {
		t.Errorf("alarm status widget: got %d alarms, want 4 (AdmissionWait, LostLeases, AdmissionWakeFailures, CoreSystemBreakerOpen)", alarms)
	}
}

// App path: each core system of tenants.json gets its alarm (default threshold, 30 minutes) and
// dashboard in the stack of its table.
func TestCoreSystemAlarmAndDashboardFromTenantsFile(t *testing.T) {
	coreApp(t)
	for _, name := range []string{"ledger", "crm"} {
		t.Run(name, func(t *testing.T) {
			checkAdmissionWaitAlarm(t, core.ingest, "CoreSystems"+name, name, 1800, "")
			checkLostLeasesAlarm(t, core.ingest, "CoreSystems"+name, name, "")
			checkBreakerOpenAlarm(t, core.ingest, "CoreSystems"+name, name, "")
			checkWakeFailuresAlarm(t, core.ingest, "CoreSystems"+name, name, "")
			checkCoreDashboard(t, core.ingest, "CoreSystems"+name, name)
		})
	}
	if got := len(coreResources(core.silo, "AWS::CloudWatch::Alarm", "CoreSystems")); got != 0 {
		t.Errorf("tenant stack: got %d core system alarms, want none", got)
	}
}

// Construct path: a CoreSystem with its own threshold and an alarm topic.
func TestCoreSystemAlarmAndDashboard(t *testing.T) {
	app := testApp(t)
	stack := awscdk.NewStack(app, jsii.String("Shared"), nil)
	topic := awssns.NewTopic(stack, jsii.String("Alarms"), nil)
	c := tenantpipeline.NewCoreSystem(stack, "Ledger", &tenantpipeline.CoreSystemProps{
		Name: "ledger", MaxRunningFiles: 8, Adaptive: true, AdmissionWaitAlarm: 10 * time.Minute, AlarmTopic: topic,
	})
	if c.AdmissionWait == nil || c.Dashboard == nil {
		t.Fatal("got no AdmissionWait alarm or Dashboard field, want both")
	}
	tpl := templateJSON(assertions.Template_FromStack(stack, nil))
	var topicRef string
	for id := range byType(tpl, "AWS::SNS::Topic") {
		topicRef = `{"Ref":"` + id + `"}`
	}
	checkAdmissionWaitAlarm(t, tpl, "Ledger", "ledger", 600, topicRef)
	checkLostLeasesAlarm(t, tpl, "Ledger", "ledger", topicRef)
	if c.LostLeases == nil {
		t.Error("got no LostLeases alarm field")
	}
	checkBreakerOpenAlarm(t, tpl, "Ledger", "ledger", topicRef)
	if c.BreakerOpen == nil {
		t.Error("got no BreakerOpen alarm field")
	}
	checkWakeFailuresAlarm(t, tpl, "Ledger", "ledger", topicRef)
	if c.WakeFailures == nil {
		t.Error("got no WakeFailures alarm field")
	}
	checkCoreDashboard(t, tpl, "Ledger", "ledger")
}
