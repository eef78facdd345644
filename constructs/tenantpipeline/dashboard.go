package tenantpipeline

import (
	"fmt"
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Dashboard is one CloudWatch dashboard for the tenants of a stack: per tenant, files completed and
// failed, records registered per minute, the queue, the head file's wait, execution duration,
// blocked, errors, wake-ups and throttles, and the status of every alarm of the tenant. Each of
// those alarms' descriptions links back to the dashboard.
type Dashboard struct {
	awscloudwatch.Dashboard
	// Name is the dashboard's name: <stack name>-<id>-<region>. Dashboards are global to the
	// account, not per region, so the name carries the region.
	// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-cloudwatch-dashboard.html
	Name *string
	// URL opens the dashboard in the CloudWatch console.
	URL *string
}

// dashboardWidth is the dashboard grid's width; a graph takes a quarter of it.
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html
const (
	dashboardWidth = 24
	graphWidth     = 6
	graphHeight    = 6
)

// dashboardID is what a dashboard name may hold (besides the stack name and region, which fit it).
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutDashboard.html
var dashboardID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// dashboardURL is the console link of a dashboard in a region (the console's deep link,
// https://<console>/cloudwatch/home?region=<region>#dashboards:name=<name>).
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Dashboards.html
func dashboardURL(region, name string) string {
	return "https://console.aws.amazon.com/cloudwatch/home?region=" + region + "#dashboards:name=" + name
}

// NewDashboard creates the dashboard of pipelines under scope/id and links each pipeline's alarms
// to it. internal/stacks calls it once per tenant stack.
func NewDashboard(scope constructs.Construct, id string, pipelines ...*TenantPipeline) *Dashboard {
	// The name is checked here: with the region token in it, CDK cannot check it at synth.
	if !dashboardID.MatchString(id) {
		panic(fmt.Errorf("NewDashboard: id %q is invalid: the dashboard's name holds it, so use letters, digits, '-' and '_'", id))
	}
	stack := awscdk.Stack_Of(scope)
	name := *stack.StackName() + "-" + id + "-" + *awscdk.Aws_REGION()
	d := &Dashboard{Name: jsii.String(name), URL: jsii.String(dashboardURL(*awscdk.Aws_REGION(), name))}
	d.Dashboard = awscloudwatch.NewDashboard(scope, jsii.String(id), &awscloudwatch.DashboardProps{
		DashboardName:   d.Name,
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
	})
	for _, t := range pipelines {
		if t.Queue == nil {
			continue // refused for its props: it has nothing to show
		}
		for _, row := range t.dashboardRows() {
			d.Dashboard.AddWidgets(row...)
		}
		for _, a := range t.Alarms.All() {
			cfn := a.Node().DefaultChild().(awscloudwatch.CfnAlarm)
			cfn.SetAlarmDescription(jsii.String(*cfn.AlarmDescription() + " Dashboard: " + *d.URL))
		}
	}
	return d
}

// All lists the alarms in a fixed order.
func (a Alarms) All() []awscloudwatch.Alarm {
	all := []awscloudwatch.Alarm{a.ErrorLogs, a.ControllerErrors, a.OldestMessage, a.ExpiringMessage, a.Stalled, a.Backlog, a.HeadQueued, a.HeadRunning,
		a.Blocked, a.ExecutionsFailed, a.ExecutionsTimedOut, a.ExecutionsAborted, a.RuleFailedInvocations, a.RuleDeadLetters,
		a.SequenceGap}
	out := all[:0]
	for _, x := range all {
		if x != nil {
			out = append(out, x)
		}
	}
	return out
}

// dashboardRows are the tenant's widgets, one slice per dashboard row.
func (t *TenantPipeline) dashboardRows() [][]awscloudwatch.IWidget {
	tenant := t.Props.Tenant.ID
	five, minute := awscdk.Duration_Minutes(jsii.Number(5)), awscdk.Duration_Minutes(jsii.Number(1))
	// The controller's and Register's EMF metrics: namespace, name, dimension Tenant (internal/metrics).
	emf := func(name, statistic, label string, period awscdk.Duration) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(pipeline.DefaultMetricsNamespace), MetricName: jsii.String(name),
			DimensionsMap: &map[string]*string{metrics.DimensionTenant: jsii.String(tenant)},
			Statistic:     jsii.String(statistic), Period: period, Label: jsii.String(label),
		})
	}
	opts := func(statistic, label string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Statistic: jsii.String(statistic), Period: five, Label: jsii.String(label)}
	}
	graph := func(title string, left ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(fmt.Sprintf("%s: %s", tenant, title)), Left: &left,
			Width: jsii.Number(graphWidth), Height: jsii.Number(graphHeight),
		})
	}
	// The log metric filters' count of ERROR lines: the tenant is in the name, no dimension (alarms.go).
	errorLogs := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String(pipeline.DefaultMetricsNamespace), MetricName: jsii.String(MetricErrorLogs + "-" + tenant),
		Statistic: jsii.String("Sum"), Period: five, Label: jsii.String("ERROR log lines"),
	})

	var alarms []interfacesawscloudwatch.IAlarmRef
	for _, a := range t.Alarms.All() {
		alarms = append(alarms, a)
	}
	rows := [][]awscloudwatch.IWidget{
		{awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{
			Markdown: jsii.String(fmt.Sprintf("## Tenant %s\nPolicy %s, files under `%s`. Runbook per alarm: %s; `pipectl status %s`.",
				tenant, t.Props.Tenant.OnFailure, t.Props.Tenant.Prefix, runbookURL, tenant)),
			Width: jsii.Number(dashboardWidth), Height: jsii.Number(2),
		})},
		{
			graph("files completed and failed",
				emf(metrics.Completions, "Sum", "completed", five), emf(metrics.FailedFiles, "Sum", "failed", five)),
			graph("records registered per minute", emf(metrics.RecordsRegistered, "Sum", "records", minute)),
			graph("queue: visible and in flight",
				t.Queue.MetricApproximateNumberOfMessagesVisible(opts("Maximum", "visible")),
				t.Queue.MetricApproximateNumberOfMessagesNotVisible(opts("Maximum", "in flight"))),
			graph("head file queued and running (s)",
				emf(metrics.HeadQueuedSeconds, "Maximum", "queued", five), emf(metrics.HeadRunningSeconds, "Maximum", "running", five)),
		},
		{
			// AWS/States ExecutionTime, dimension StateMachineArn, in milliseconds.
			// https://docs.aws.amazon.com/step-functions/latest/dg/procedure-cw-metrics.html
			graph("file execution duration (ms)",
				t.StateMachine.Metric(jsii.String("ExecutionTime"), opts("p50", "p50")),
				t.StateMachine.Metric(jsii.String("ExecutionTime"), opts("p95", "p95"))),
			graph("blocked (1 = halted on a failed file)", emf(metrics.Blocked, "Maximum", "blocked", five)),
			graph("errors", errorLogs, t.Controller.MetricErrors(opts("Sum", "controller errors"))),
			graph("wake-ups and throttles",
				emf(metrics.WakeUps, "Sum", "wake-ups", five), emf(metrics.Throttles, "Sum", "throttled calls", five)),
		},
	}
	if t.Props.Tenant.Sequence != nil {
		// A sequenced tenant's order: how long a missing number has held it, and its files held
		// ahead of their turn or refused (internal/controller, sequence.go).
		rows = append(rows, []awscloudwatch.IWidget{
			graph("sequence gap (s)", emf(metrics.SequenceGapSeconds, "Maximum", "gap", five)),
			graph("files held and refused", emf(metrics.FilesHeld, "Sum", "held", five), emf(metrics.FilesRefused, "Sum", "refused", five)),
		})
	}
	return append(rows, []awscloudwatch.IWidget{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
		Title:  jsii.String(fmt.Sprintf("%s: alarms", tenant)),
		Alarms: &alarms,
		Width:  jsii.Number(dashboardWidth), Height: jsii.Number(3),
	})})
}
