package tenantpipeline

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// A core system's monitoring reads the metrics the controllers emit on each look at its gate
// (internal/metrics, dimension CoreSystem): running files, the effective limit, the waiting file's
// admission wait, and whether the look admitted the file or held it; and those Register emits
// on each invocation: the core system's 429 and 503 answers, the POSTs sent to it, and its
// breaker's state, opens and holds.

// alarmPeriod is the core system alarm's period, and the shortest AdmissionWaitAlarm.
const alarmPeriod = 5 * time.Minute

// wakeFailuresAlarm is how many failed wake-ups in one alarmPeriod fire the AdmissionWakeFailures
// alarms: one is a throttled call the safety net and the reconciler make good; a repeat is a fault.
const wakeFailuresAlarm = 2

// newMonitoring creates the core system's AdmissionWait, LostLeases, AdmissionWakeFailures and
// CoreSystemBreakerOpen alarms and its dashboard.
func (c *CoreSystem) newMonitoring() {
	p := c.Props
	wait := p.AdmissionWaitAlarm
	if wait == 0 {
		wait = DefaultAdmissionWaitAlarm
	}
	name := *awscdk.Stack_Of(c.Construct).StackName() + "-CoreSystem-" + p.Name + "-" + *awscdk.Aws_REGION()
	c.DashboardName = jsii.String(name)
	c.AdmissionWait = newAlarm(c.Construct, alarmSpec{
		id: "AdmissionWaitAlarm",
		// No label: a labelled metric would render as a metric-math query.
		metric: c.metric(metrics.CoreAdmissionWaitSeconds, "Maximum", ""),
		// A file waits only while every slot is taken; no data means no file asked admission.
		threshold: wait.Seconds(), missing: awscloudwatch.TreatMissingData_NOT_BREACHING,
	}, fmt.Sprintf("A file of core system %s has waited more than %v for admission: its %d running-file slots (fewer when adaptive) stay taken. "+
		"Check the core system's health and its running files (pipectl status, coreSystems), and maxRunningFiles. Dashboard: %s Runbook: %s",
		p.Name, wait, p.MaxRunningFiles, dashboardURL(*awscdk.Aws_REGION(), name), runbookURL), p.AlarmTopic)

	c.LostLeases = newAlarm(c.Construct, alarmSpec{
		id:        "LostLeasesAlarm",
		metric:    c.metric(metrics.LostLeases, "Sum", ""),
		threshold: 1, missing: awscloudwatch.TreatMissingData_NOT_BREACHING,
	}, fmt.Sprintf("A running file of core system %s had lost its running-file slot (not renewed within the lease's time to live, and taken by another "+
		"file, or freed) and took it again, beyond maxRunningFiles until files end: more than %d files may have written to it at once. "+
		"Check the controllers' throttles and errors, and that SAFETY_NET_SECONDS and MAX_WAIT_SECONDS were not raised under running files. Runbook: %s",
		p.Name, p.MaxRunningFiles, runbookURL), p.AlarmTopic)

	c.WakeFailures = newAlarm(c.Construct, alarmSpec{
		id:        "AdmissionWakeFailuresAlarm",
		metric:    c.metric(metrics.AdmissionWakeFailures, "Sum", ""),
		threshold: wakeFailuresAlarm, missing: awscloudwatch.TreatMissingData_NOT_BREACHING,
	}, fmt.Sprintf("Running-file slots of core system %s were handed to waiting files whose messages could not be made visible, "+
		"%d times or more in five minutes: each such file waits for its safety net and its slot for the reconciler. "+
		"Check the controllers' SQS errors and throttles (ChangeMessageVisibility) in their ERROR and WARN logs. Runbook: %s",
		p.Name, wakeFailuresAlarm, runbookURL), p.AlarmTopic)

	c.BreakerOpen = newAlarm(c.Construct, alarmSpec{
		id: "CoreSystemBreakerOpenAlarm",
		// Each held invocation writes 1, the one whose answer closes the breaker 0.
		metric:    c.metric(metrics.CoreSystemBreakerOpen, "Maximum", ""),
		threshold: 1, missing: awscloudwatch.TreatMissingData_NOT_BREACHING,
	}, fmt.Sprintf("The breaker of core system %s is open: it failed its health (5xx other than 503, timeouts, refused or reset connections) "+
		"too often, so its running files hold at their cursor and none of its files is admitted; a probe request goes every few seconds and "+
		"the first success closes it. Nothing fails and nothing needs redriving: check the core system's health, and pipectl status "+
		"(coreSystems[].breaker, openedAt, reason). Dashboard: %s Runbook: %s",
		p.Name, dashboardURL(*awscdk.Aws_REGION(), name), runbookURL), p.AlarmTopic)

	graph := func(title string, annotations []*awscloudwatch.HorizontalAnnotation, left ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(fmt.Sprintf("%s: %s", p.Name, title)), Left: &left, LeftAnnotations: &annotations,
			Width: jsii.Number(graphWidth), Height: jsii.Number(graphHeight),
		})
	}
	limit := fmt.Sprintf("maxRunningFiles %d", p.MaxRunningFiles)
	if p.Adaptive {
		limit += ", adaptive: the effective limit falls on 429 and 503 answers"
	}
	alarms := []interfacesawscloudwatch.IAlarmRef{c.AdmissionWait, c.LostLeases, c.WakeFailures, c.BreakerOpen}
	c.Dashboard = awscloudwatch.NewDashboard(c.Construct, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName:   c.DashboardName,
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{
				Markdown: jsii.String(fmt.Sprintf("## Core system %s\n%s. Runbook: %s; `pipectl status` lists its running files and waiting tenants.",
					p.Name, limit, runbookURL)),
				Width: jsii.Number(dashboardWidth), Height: jsii.Number(2),
			})},
			{
				graph("running files and limit",
					[]*awscloudwatch.HorizontalAnnotation{{Value: jsii.Number(float64(p.MaxRunningFiles)), Label: jsii.String("maxRunningFiles")}},
					c.metric(metrics.CoreRunningFiles, "Maximum", "running files"),
					c.metric(metrics.CoreRunningFileLimit, "Minimum", "effective limit")),
				graph("oldest admission wait (s)",
					[]*awscloudwatch.HorizontalAnnotation{{Value: jsii.Number(wait.Seconds()), Label: jsii.String("alarm")}},
					c.metric(metrics.CoreAdmissionWaitSeconds, "Maximum", "oldest wait")),
				graph("admissions and waits", nil,
					c.metric(metrics.CoreAdmissions, "Sum", "files admitted"),
					c.metric(metrics.CoreAdmissionWaits, "Sum", "deliveries held")),
				// Two sums, not their ratio by metric math: a ratio has no datapoint while no POST
				// is sent, and the sums show the load that the share is of.
				graph("429 and 503 answers and requests (per 5 minutes)", nil,
					c.metric(metrics.CoreSystemThrottles, "Sum", "429 and 503 answers"),
					c.metric(metrics.CoreSystemRequests, "Sum", "requests sent")),
				graph("breaker (1: open) and its opens and holds (per 5 minutes)", nil,
					c.metric(metrics.CoreSystemBreakerOpen, "Maximum", "open"),
					c.metric(metrics.CoreSystemBreakerOpens, "Sum", "opens"),
					c.metric(metrics.CoreSystemBreakerHolds, "Sum", "invocations held")),
				awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
					Title:  jsii.String(fmt.Sprintf("%s: alarms", p.Name)),
					Alarms: &alarms, Width: jsii.Number(graphWidth), Height: jsii.Number(graphHeight),
				}),
			},
		},
	})
}

// metric is one of the core system's metrics over alarmPeriod; label "" for none.
func (c *CoreSystem) metric(name, statistic, label string) awscloudwatch.IMetric {
	props := &awscloudwatch.MetricProps{
		Namespace: jsii.String(pipeline.DefaultMetricsNamespace), MetricName: jsii.String(name),
		DimensionsMap: &map[string]*string{metrics.DimensionCoreSystem: jsii.String(c.Props.Name)},
		Statistic:     jsii.String(statistic), Period: awscdk.Duration_Minutes(jsii.Number(alarmPeriod.Minutes())),
	}
	if label != "" {
		props.Label = jsii.String(label)
	}
	return awscloudwatch.NewMetric(props)
}
