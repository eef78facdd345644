package tenantpipeline

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Metric names. ErrorLogs-<tenant> comes from the log metric filters; the others are the controller's
// Embedded Metric Format metrics, with dimension Tenant.
const (
	MetricErrorLogs       = "ErrorLogs"
	MetricHeadWaitSeconds = metrics.HeadWaitSeconds
	MetricBlocked         = metrics.Blocked
	DimensionTenant       = metrics.DimensionTenant
)

// Alarms are the tenant's alarms. Each has a description that says what to do.
type Alarms struct {
	// ErrorLogs: any function of the tenant logged at level ERROR.
	ErrorLogs awscloudwatch.Alarm
	// ControllerErrors: the controller failed an invocation. Waiting is not an error, so this
	// counts real faults only.
	ControllerErrors awscloudwatch.Alarm
	// OldestMessage: a file has not been picked up for too long.
	OldestMessage awscloudwatch.Alarm
	// Backlog: too many files queued behind the head file.
	Backlog awscloudwatch.Alarm
	// HeadWait: the head file has waited too long (it may have been received many times, which
	// ApproximateAgeOfOldestMessage leaves out).
	HeadWait awscloudwatch.Alarm
	// Blocked: a halted tenant waits for an operator to redrive or skip its head file.
	Blocked awscloudwatch.Alarm
	// ExecutionsFailed, ExecutionsTimedOut, ExecutionsAborted: a file's workflow did not succeed.
	ExecutionsFailed   awscloudwatch.Alarm
	ExecutionsTimedOut awscloudwatch.Alarm
	ExecutionsAborted  awscloudwatch.Alarm
}

func (t *TenantPipeline) newAlarms() Alarms {
	p := t.Props
	tenant := p.Tenant.ID
	period := awscdk.Duration_Minutes(jsii.Number(p.Alarms.EvaluationMinutes))
	dims := &map[string]*string{DimensionTenant: jsii.String(tenant)}

	// One metric per tenant, fed by a filter on each of the tenant's function log groups; JSON
	// logs carry an upper-case "level" (log/slog's JSON handler). A metric filter can only take
	// dimension values from log fields, so the tenant is in the metric name instead.
	errorLogsName := MetricErrorLogs + "-" + tenant
	errorLogs := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String(pipeline.DefaultMetricsNamespace), MetricName: jsii.String(errorLogsName),
		Statistic: jsii.String("Sum"), Period: period,
	})
	for i, lg := range t.functionLogs {
		awslogs.NewMetricFilter(t.Construct, jsii.String(fmt.Sprintf("ErrorLogsFilter%d", i)), &awslogs.MetricFilterProps{
			LogGroup:        lg,
			FilterPattern:   awslogs.FilterPattern_StringValue(jsii.String("$.level"), jsii.String("="), jsii.String("ERROR")),
			MetricNamespace: jsii.String(pipeline.DefaultMetricsNamespace),
			MetricName:      jsii.String(errorLogsName),
			MetricValue:     jsii.String("1"),
		})
	}

	emf := func(name, statistic string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(pipeline.DefaultMetricsNamespace), MetricName: jsii.String(name),
			DimensionsMap: dims, Statistic: jsii.String(statistic), Period: period,
		})
	}
	opts := func(name string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String(name)}
	}
	sm := t.StateMachine
	return Alarms{
		ErrorLogs: t.alarm("ErrorLogsAlarm", errorLogs, 1,
			"A function of tenant %s logged at ERROR. Read the tenant's function logs: a failed file, a quarantined message or a fault."),
		ControllerErrors: t.alarm("ControllerErrorsAlarm", t.Controller.MetricErrors(opts("Sum")), 1,
			"The controller of tenant %s failed an invocation (waits are not errors). Its message stays queued; read the controller logs."),
		OldestMessage: t.alarm("OldestMessageAlarm", t.Queue.MetricApproximateAgeOfOldestMessage(opts("Maximum")), p.Alarms.OldestMessageAge.Seconds(),
			"A file of tenant %s has not been picked up in time. Check the controller's event source mapping and its logs."),
		Backlog: t.alarm("BacklogAlarm", t.Queue.MetricApproximateNumberOfMessagesVisible(opts("Maximum")), float64(p.Alarms.BacklogMessages),
			"Files of tenant %s are piling up behind the head file. Check whether the tenant is halted or its workflows are slow."),
		HeadWait: t.alarm("HeadWaitAlarm", emf(MetricHeadWaitSeconds, "Maximum"), p.Alarms.HeadWait.Seconds(),
			"The head file of tenant %s has waited too long. Its workflow is slow or stuck, or the tenant is halted."),
		Blocked: t.alarm("BlockedAlarm", emf(MetricBlocked, "Maximum"), 1,
			"Tenant %s is halted on a failed file. Redrive the failed execution, or skip the file (README, Operations)."),
		ExecutionsFailed: t.alarm("ExecutionsFailedAlarm", sm.MetricFailed(opts("Sum")), 1,
			"A file workflow of tenant %s failed. Read the execution's error; redrive it once the cause is fixed."),
		ExecutionsTimedOut: t.alarm("ExecutionsTimedOutAlarm", sm.MetricTimedOut(opts("Sum")), 1,
			"A file workflow of tenant %s timed out. Check the core system and the register function."),
		ExecutionsAborted: t.alarm("ExecutionsAbortedAlarm", sm.MetricAborted(opts("Sum")), 1,
			"A file workflow of tenant %s was aborted. Someone stopped it; check CloudTrail."),
	}
}

func (t *TenantPipeline) alarm(id string, metric awscloudwatch.IMetric, threshold float64, description string) awscloudwatch.Alarm {
	a := awscloudwatch.NewAlarm(t.Construct, jsii.String(id), &awscloudwatch.AlarmProps{
		Metric:             metric,
		Threshold:          jsii.Number(threshold),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		AlarmDescription:   jsii.String(fmt.Sprintf(description, t.Props.Tenant.ID)),
	})
	if t.Props.AlarmTopic != nil {
		action := awscloudwatchactions.NewSnsAction(t.Props.AlarmTopic)
		a.AddAlarmAction(action)
		a.AddOkAction(action)
	}
	return a
}
