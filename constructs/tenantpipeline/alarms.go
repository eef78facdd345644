package tenantpipeline

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// Metric names. ErrorLogs-<tenant> comes from the log metric filters; the others are the controller's
// Embedded Metric Format metrics, with dimension Tenant. They are API: the names to build alarms
// and dashboards of your own on.
const (
	MetricErrorLogs          = "ErrorLogs"
	MetricHeadQueuedSeconds  = metrics.HeadQueuedSeconds
	MetricHeadRunningSeconds = metrics.HeadRunningSeconds
	MetricBlocked            = metrics.Blocked
	// MetricSequenceGapSeconds is how long a sequenced tenant has waited for a missing number.
	MetricSequenceGapSeconds = metrics.SequenceGapSeconds
	DimensionTenant          = metrics.DimensionTenant
)

// runbookURL is where every alarm description sends the operator: the operations section of the
// README, which says for each alarm what it means and what to do.
const runbookURL = "README.md#operations"

// AlarmThresholds are the points at which the tenant's alarms fire. Zero fields take their
// defaults; some defaults derive from Props.WorkflowTimeout.
type AlarmThresholds struct {
	// OldestMessageAge alarms when the queue's oldest message is older than this. On a FIFO queue
	// the head file's message stays queued for its whole run, so its age grows for as long as the
	// file runs, up to the workflow timeout; beyond it (plus the margin) the tenant is stuck, or a
	// file waited behind several long ones.
	// Default: WorkflowTimeout + OldestMessageMargin.
	OldestMessageAge time.Duration
	// OldestMessageMargin is added to WorkflowTimeout for the default OldestMessageAge: the time a
	// file may reasonably have waited behind earlier ones. Default: 1 hour.
	OldestMessageMargin time.Duration
	// StalledMinutes alarms when, for this many minutes in a row, messages are visible and no
	// message group has a message in flight: files wait and nothing works on them (the event source
	// mapping is disabled or throttled, or the controller cannot run). Default: 15.
	StalledMinutes int
	// BacklogMessages alarms when this many files wait behind the head file. Default: 100.
	BacklogMessages int
	// HeadQueued alarms when the head file was queued this long before its execution started (the
	// controller's HeadQueuedSeconds metric): files wait too long behind earlier ones. Default: 2 hours.
	HeadQueued time.Duration
	// HeadRunning alarms when the head file's execution has been running this long (the
	// controller's HeadRunningSeconds metric), a warning before the workflow timeout stops it.
	// Default: three quarters of WorkflowTimeout.
	HeadRunning time.Duration
	// BlockedDatapoints of the last BlockedPeriods periods must show a halted tenant for the Blocked
	// alarm to fire (M of N). A halted head file is rechecked every HaltedRecheck, so a period may
	// hold no datapoint; those are treated as missing, not as OK. Defaults: 2 of 3.
	BlockedDatapoints int
	BlockedPeriods    int
	// EvaluationMinutes is the period over which each alarm evaluates. It must be at least
	// HaltedRecheck, so that a halted tenant reports in every period. Default: 5 minutes.
	EvaluationMinutes int
}

// Alarm defaults that do not depend on other props: API, as the values AlarmThresholds' zero
// fields take.
const (
	DefaultOldestMessageMargin = time.Hour
	DefaultStalledMinutes      = 15
	DefaultBacklogMessages     = 100
	DefaultHeadQueued          = 2 * time.Hour
	DefaultBlockedDatapoints   = 2
	DefaultBlockedPeriods      = 3
	DefaultEvaluationMinutes   = 5
)

// RetentionAlarmMargin is how long before the last safe start the ExpiringMessage alarm fires: the
// time an operator has to act (unblock the tenant, or save its oldest files) before a file that
// starts could lose its message under its run, plus CloudWatch's few minutes of metric delay.
// One day: a night and a working day.
const RetentionAlarmMargin = 24 * time.Hour

// expiringMessageAge is the age of the queue's oldest message at which the ExpiringMessage alarm
// fires: QueueRetention − workflowTimeout − RetentionAlarmMargin. SQS deletes a message once it is
// older than the queue's retention, received or not
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-basic-architecture.html),
// and a FIFO head file's message stays queued for its whole run, so a file whose message is older
// than retention − workflowTimeout when it starts could lose it before its run ends. On a FIFO
// queue ApproximateAgeOfOldestMessage is the age of that head message however often it was
// received: SQS moves a message received three or more times to the back only in a standard
// queue ("FIFO queues don't reorder messages",
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html).
// The controller's HeadQueuedSeconds stops growing once the head starts, so it cannot tell.
// WorkflowTimeout is below 7 days (validate), so the age is at least 6 days.
func expiringMessageAge(workflowTimeout time.Duration) time.Duration {
	return QueueRetention - workflowTimeout - RetentionAlarmMargin
}

// DefaultHeadRunning is the HeadRunning threshold for a workflow timeout: three quarters of it.
func DefaultHeadRunning(workflowTimeout time.Duration) time.Duration {
	return workflowTimeout / 4 * 3
}

func (a AlarmThresholds) withDefaults(workflowTimeout time.Duration) AlarmThresholds {
	setD := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	setI := func(d *int, v int) {
		if *d == 0 {
			*d = v
		}
	}
	setD(&a.OldestMessageMargin, DefaultOldestMessageMargin)
	setD(&a.OldestMessageAge, workflowTimeout+a.OldestMessageMargin)
	setI(&a.StalledMinutes, DefaultStalledMinutes)
	setI(&a.BacklogMessages, DefaultBacklogMessages)
	setD(&a.HeadQueued, DefaultHeadQueued)
	setD(&a.HeadRunning, DefaultHeadRunning(workflowTimeout))
	setI(&a.BlockedDatapoints, DefaultBlockedDatapoints)
	setI(&a.BlockedPeriods, DefaultBlockedPeriods)
	setI(&a.EvaluationMinutes, DefaultEvaluationMinutes)
	return a
}

// validate reports bad thresholds through bad. CloudWatch limits an alarm's evaluation range
// (periods × period) to one day.
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html
func (a AlarmThresholds) validate(haltedRecheck time.Duration, bad func(string, ...any)) {
	if a.OldestMessageAge < time.Minute {
		bad("alarm oldest message age %v is invalid: use at least 1m", a.OldestMessageAge)
	}
	if a.OldestMessageMargin < 0 {
		bad("alarm oldest message margin %v is invalid: use 0 or more", a.OldestMessageMargin)
	}
	if a.StalledMinutes < 1 || a.StalledMinutes > 1440 {
		bad("alarm stalled minutes %d is invalid: use 1 to 1440", a.StalledMinutes)
	}
	if a.BacklogMessages < 1 {
		bad("alarm backlog %d is invalid: use at least 1 message", a.BacklogMessages)
	}
	if a.HeadQueued < time.Minute {
		bad("alarm head queued %v is invalid: use at least 1m", a.HeadQueued)
	}
	if a.HeadRunning < time.Minute {
		bad("alarm head running %v is invalid: use at least 1m", a.HeadRunning)
	}
	if a.EvaluationMinutes < 1 || a.EvaluationMinutes > 1440 {
		bad("alarm evaluation period %d minutes is invalid: use 1 to 1440", a.EvaluationMinutes)
		return
	}
	if period := time.Duration(a.EvaluationMinutes) * time.Minute; period < haltedRecheck {
		bad("alarm evaluation period %v is shorter than the halted recheck %v: a halted tenant reports Blocked once per recheck, "+
			"so use a period of at least %v or a shorter HaltedRecheck", period, haltedRecheck, haltedRecheck.Round(time.Minute))
	}
	if a.BlockedPeriods < 1 || a.BlockedPeriods*a.EvaluationMinutes > 1440 {
		bad("alarm blocked periods %d is invalid: use 1 or more, at most one day of %d-minute periods", a.BlockedPeriods, a.EvaluationMinutes)
	}
	if a.BlockedDatapoints < 1 || a.BlockedDatapoints > a.BlockedPeriods {
		bad("alarm blocked datapoints %d is invalid: use 1 to BlockedPeriods (%d)", a.BlockedDatapoints, a.BlockedPeriods)
	}
}

// headAlarmPeriods is how many periods the head-time alarms (HeadQueued, HeadRunning and the
// pool's TenantHeadQueued, TenantHeadRunning) evaluate, one breaching datapoint among them being
// enough. The controller writes a tenant's unchanged health line once per safety net
// (internal/controller/headmetrics.go), and a running head file is delivered once per safety net
// with wake events, so with a safety net as long as the period, or longer, a period can hold no
// line while the head file still runs long; missing data is not breaching (no line: no running
// head file), so one period alone would return to OK in between. The range covers the safety net
// and one period more, capped at CloudWatch's one day of periods × period
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html).
func headAlarmPeriods(safetyNet time.Duration, evaluationMinutes int) int {
	period := time.Duration(evaluationMinutes) * time.Minute
	n := int((safetyNet+period-1)/period) + 1
	return max(1, min(n, 24*60/evaluationMinutes))
}

// controllerSafetyNet is the controller's SAFETY_NET_SECONDS: SafetyNetInterval with wake events,
// else the controller's default, which it keeps when the variable is unset.
func (s SharedProps) controllerSafetyNet() time.Duration {
	if s.WakeEvents() {
		return s.SafetyNetInterval
	}
	return DefaultSafetyNetInterval
}

// Alarms are the tenant's alarms. Each description says what it means and what to do, and links
// runbookURL.
type Alarms struct {
	// ErrorLogs: any function of the tenant logged at level ERROR.
	ErrorLogs awscloudwatch.Alarm
	// ControllerErrors: the controller failed an invocation. Waiting is not an error, so this
	// counts real faults only.
	ControllerErrors awscloudwatch.Alarm
	// OldestMessage: the oldest queued file is older than any healthy tenant's can be.
	OldestMessage awscloudwatch.Alarm
	// ExpiringMessage: the oldest queued file nears the queue's retention: started now, it could
	// lose its message before its run ends (expiringMessageAge).
	ExpiringMessage awscloudwatch.Alarm
	// Stalled: files are queued and nothing works on them.
	Stalled awscloudwatch.Alarm
	// Backlog: too many files queued behind the head file.
	Backlog awscloudwatch.Alarm
	// HeadQueued: the head file waited too long before its execution started.
	HeadQueued awscloudwatch.Alarm
	// HeadRunning: the head file's execution has been running long, close to the workflow timeout.
	HeadRunning awscloudwatch.Alarm
	// Blocked: a halted tenant waits for an operator to redrive or skip its head file.
	Blocked awscloudwatch.Alarm
	// ExecutionsFailed, ExecutionsTimedOut, ExecutionsAborted: a file's workflow did not succeed.
	ExecutionsFailed   awscloudwatch.Alarm
	ExecutionsTimedOut awscloudwatch.Alarm
	ExecutionsAborted  awscloudwatch.Alarm
	// RuleFailedInvocations: EventBridge could not deliver a file's event to the tenant's queue.
	RuleFailedInvocations awscloudwatch.Alarm
	// RuleDeadLetters: events that could not be delivered are waiting in the rule's dead-letter queue.
	RuleDeadLetters awscloudwatch.Alarm
	// SequenceGap: a missing number of the tenant's sequence has held its later files for the
	// sequence's gapTimeout or longer (SequenceGapSeconds). Nil unless the tenant declares a
	// sequence of kind number: names have no gaps.
	SequenceGap awscloudwatch.Alarm
}

// alarmSpec is one alarm: its metric and how it evaluates. Zero values: one period, one datapoint,
// missing data not breaching, threshold compared with >=.
type alarmSpec struct {
	id          string
	metric      awscloudwatch.IMetric
	threshold   float64
	periods     int
	datapoints  int
	missing     awscloudwatch.TreatMissingData
	description string // what it means and what to do; %[1]s is the tenant id
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
	errorLogFilters(t.Construct, t.functionLogs, errorLogsName)

	emf := func(name, statistic string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(pipeline.DefaultMetricsNamespace), MetricName: jsii.String(name),
			DimensionsMap: dims, Statistic: jsii.String(statistic), Period: period,
		})
	}
	opts := func(statistic string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String(statistic)}
	}

	// EventBridge reports FailedInvocations per rule (dimension RuleName) for events it could not
	// deliver to a target even after its retries.
	// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-monitoring.html
	failedInvocations := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String("AWS/Events"), MetricName: jsii.String("FailedInvocations"),
		DimensionsMap: &map[string]*string{"RuleName": t.Rule.RuleName()},
		Statistic:     jsii.String("Sum"), Period: period,
	})

	a := p.Alarms
	headPeriods := headAlarmPeriods(p.controllerSafetyNet(), a.EvaluationMinutes)
	core := t.alarms(a, coreAlarmWords{
		ControllerErrors: "The controller of tenant %[1]s failed an invocation (waits are not errors). The file's message stays queued and is retried. Read the controller's logs.",
		OldestMessage: fmt.Sprintf("The oldest file of tenant %%[1]s has been queued longer than the workflow timeout plus a margin (%v): the tenant is stuck, or its files "+
			"queue behind several long ones. Check the Stalled, Blocked and HeadRunning alarms, the controller's logs and the head file's execution.", a.OldestMessageAge),
		ExpiringWhose: "The oldest file of tenant %[1]s",
		Stalled: fmt.Sprintf("Files of tenant %%[1]s are queued but none has been in flight for %d minutes: nothing is working on them. "+
			"Check that the controller's event source mapping is enabled, and the controller's throttles and logs.", a.StalledMinutes),
		ExecutionsFailed:   "A file workflow of tenant %[1]s failed. Read the execution's error; redrive it once the cause is fixed.",
		ExecutionsTimedOut: "A file workflow of tenant %[1]s reached the workflow timeout. Check the core system and the register function, then redrive it.",
		ExecutionsAborted:  "A file workflow of tenant %[1]s was stopped by someone. Check CloudTrail for who stopped it, and redrive it if the file must be processed.",
	})
	alarms := Alarms{
		ErrorLogs: t.alarm(alarmSpec{id: "ErrorLogsAlarm", metric: errorLogs, threshold: 1,
			description: "A function of tenant %[1]s logged at ERROR: a failed file, a quarantined message or a fault. Read the tenant's function logs for the ERROR line."}),
		ControllerErrors: t.alarm(core.ControllerErrors),
		OldestMessage:    t.alarm(core.OldestMessage),
		ExpiringMessage:  t.alarm(core.ExpiringMessage),
		Stalled:          t.alarm(core.Stalled),
		Backlog: t.alarm(alarmSpec{id: "BacklogAlarm", metric: t.Queue.MetricApproximateNumberOfMessagesVisible(opts("Maximum")), threshold: float64(a.BacklogMessages),
			description: "Files of tenant %[1]s are piling up behind the head file. Check whether the tenant is halted or its workflows are slow."}),
		HeadQueued: t.alarm(alarmSpec{id: "HeadQueuedAlarm", metric: emf(MetricHeadQueuedSeconds, "Maximum"), threshold: a.HeadQueued.Seconds(), periods: headPeriods,
			description: fmt.Sprintf("The head file of tenant %%[1]s waited more than %v in the queue before its execution started: files wait long behind earlier ones. "+
				"Check the tenant's backlog and how long its files run.", a.HeadQueued)}),
		HeadRunning: t.alarm(alarmSpec{id: "HeadRunningAlarm", metric: emf(MetricHeadRunningSeconds, "Maximum"), threshold: a.HeadRunning.Seconds(), periods: headPeriods,
			description: fmt.Sprintf("The head file of tenant %%[1]s has been running more than %v; at the workflow timeout (%v) it fails. "+
				"Open its execution (the controller logs its name) and check the core system and the register function.", a.HeadRunning, p.WorkflowTimeout)}),
		Blocked: t.alarm(alarmSpec{id: "BlockedAlarm", metric: emf(MetricBlocked, "Maximum"), threshold: 1,
			periods: a.BlockedPeriods, datapoints: a.BlockedDatapoints, missing: awscloudwatch.TreatMissingData_MISSING,
			description: "Tenant %[1]s is halted on a failed file and processes nothing else. Redrive the failed execution once the cause is fixed, or write the file's skip marker."}),
		ExecutionsFailed:   t.alarm(core.ExecutionsFailed),
		ExecutionsTimedOut: t.alarm(core.ExecutionsTimedOut),
		ExecutionsAborted:  t.alarm(core.ExecutionsAborted),
		RuleFailedInvocations: t.alarm(alarmSpec{id: "RuleFailedInvocationsAlarm", metric: failedInvocations, threshold: 1,
			description: "EventBridge could not deliver a file event of tenant %[1]s to its queue after its retries; the event went to the rule's dead-letter queue. " +
				"Check the queue's policy and encryption, then re-send the dead-lettered events in order."}),
		RuleDeadLetters: t.alarm(alarmSpec{id: "RuleDeadLettersAlarm", metric: t.RuleDeadLetterQueue.MetricApproximateNumberOfMessagesVisible(opts("Maximum")), threshold: 1,
			description: "File events of tenant %[1]s wait in the rule's dead-letter queue: those files were never queued. Fix the cause, then re-send the events in order of their time field."}),
	}
	if s, ok := sequenceGapSpec(p.Tenant, emf(MetricSequenceGapSeconds, "Maximum")); ok {
		alarms.SequenceGap = t.alarm(s)
	}
	return alarms
}

// sequenceGapSpec is the SequenceGap alarm of a tenant whose sequence is of kind number: the
// controller's SequenceGapSeconds (emitted on each tick of the gap, about once a minute) reaches the
// sequence's gapTimeout. ok is false for a tenant without a sequence, or with one of kind name,
// which has no gaps.
func sequenceGapSpec(tenant Tenant, gap awscloudwatch.IMetric) (s alarmSpec, ok bool) {
	if tenant.Sequence == nil {
		return alarmSpec{}, false
	}
	rule, err := tenant.Sequence.Compile()
	if err != nil || rule.Kind != spec.SequenceNumber {
		return alarmSpec{}, false // a bad sequence was refused before anything was created
	}
	then := "Its later files are held until the missing file arrives: upload it, or skip its number with " +
		"pipectl sequence skip %[1]s NUMBER --reason TEXT."
	if rule.OnGap == spec.OnGapSkip {
		then = "The tenant skips the missing number now (onGap skip) and goes on; the file, if it comes, is refused as late. " +
			"Ask its sender why it is missing."
	}
	return alarmSpec{id: "SequenceGapAlarm", metric: gap, threshold: rule.GapTimeout.Seconds(),
		description: fmt.Sprintf("Tenant %%[1]s has waited %v (its sequence's gapTimeout) or more for a missing number of its sequence. ", rule.GapTimeout) + then}, true
}

// expiringSpec is the ExpiringMessage alarm of queue q, in both tiers; whose names the file.
func expiringSpec(q awssqs.IQueue, opts *awscloudwatch.MetricOptions, workflowTimeout time.Duration, whose string) alarmSpec {
	age := expiringMessageAge(workflowTimeout)
	return alarmSpec{id: "ExpiringMessageAlarm", metric: q.MetricApproximateAgeOfOldestMessage(opts), threshold: age.Seconds(),
		description: fmt.Sprintf("%s has been queued %v: SQS deletes a message %v after it was sent (the queue's retention), so if it starts now and runs "+
			"up to the workflow timeout (%v) its message could be deleted under the running file; %v is left to act. Find it with pipectl status, unblock "+
			"its tenant (redrive, skip or resume), or pause the tenant and replay the file later from S3 (pipectl replay).",
			whose, age, QueueRetention, workflowTimeout, RetentionAlarmMargin)}
}

func (t *TenantPipeline) alarm(s alarmSpec) awscloudwatch.Alarm {
	return newAlarm(t.Construct, s, fmt.Sprintf(s.description, t.Props.Tenant.ID)+" Runbook: "+runbookURL, t.Props.AlarmTopic)
}

// newAlarm creates the alarm s describes (>= threshold; one period and datapoint, missing data
// not breaching, unless s says otherwise), sending its state changes to topic when there is one.
func newAlarm(scope constructs.Construct, s alarmSpec, description string, topic awssns.ITopic) awscloudwatch.Alarm {
	periods, datapoints := max(s.periods, 1), max(s.datapoints, 1)
	missing := s.missing
	if missing == "" {
		missing = awscloudwatch.TreatMissingData_NOT_BREACHING
	}
	a := awscloudwatch.NewAlarm(scope, jsii.String(s.id), &awscloudwatch.AlarmProps{
		Metric:             s.metric,
		Threshold:          jsii.Number(s.threshold),
		EvaluationPeriods:  jsii.Number(periods),
		DatapointsToAlarm:  jsii.Number(datapoints),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   missing,
		AlarmDescription:   jsii.String(description),
	})
	if topic != nil {
		action := awscloudwatchactions.NewSnsAction(topic)
		a.AddAlarmAction(action)
		a.AddOkAction(action)
	}
	return a
}

// errorLogFilters count the ERROR lines of each log group into one metric (errorLogsName).
func errorLogFilters(scope constructs.Construct, logs []awslogs.LogGroup, errorLogsName string) {
	for i, lg := range logs {
		awslogs.NewMetricFilter(scope, jsii.String(fmt.Sprintf("ErrorLogsFilter%d", i)), &awslogs.MetricFilterProps{
			LogGroup:        lg,
			FilterPattern:   awslogs.FilterPattern_StringValue(jsii.String("$.level"), jsii.String("="), jsii.String("ERROR")),
			MetricNamespace: jsii.String(pipeline.DefaultMetricsNamespace),
			MetricName:      jsii.String(errorLogsName),
			MetricValue:     jsii.String("1"),
		})
	}
}

// stalledExpression is 1 for a minute in which messages were visible the whole minute while no
// message group had a message in flight at any time in it. The controller keeps a working file's
// message in flight while its workflow runs, so a working queue always has a group in flight.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html (IF, AND)
func stalledExpression(q awssqs.IQueue) awscloudwatch.MathExpression {
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	perMinute := func(statistic string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String(statistic)}
	}
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String("IF(visible > 0 AND inflight == 0, 1, 0)"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{
			"visible":  q.MetricApproximateNumberOfMessagesVisible(perMinute("Minimum")),
			"inflight": q.Metric(jsii.String("ApproximateNumberOfGroupsWithInflightMessages"), perMinute("Maximum")),
		},
		Label:  jsii.String("Stalled"),
		Period: minute,
	})
}
