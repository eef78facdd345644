package tenantpipeline

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Pool-wide metrics of the router and the pool controller (EMF, dimension Pool): API, as the
// names to build alarms and dashboards of your own on.
const (
	// MetricUnroutedObjects counts objects under the pool's prefix that belong to no tenant.
	MetricUnroutedObjects = metrics.UnroutedObjects
	// MetricUnknownTenantMessages counts pool messages whose group is no tenant of the pool.
	MetricUnknownTenantMessages = metrics.UnknownTenantMessages
	DimensionPool               = metrics.DimensionPool
)

// Per-tenant detection in a pool. A pool has no alarm per tenant: each of the figures below is
// watched by one CloudWatch alarm on a Contributor Insights rule keyed by tenant (poolinsights.go),
// so every tenant of the pool is evaluated, and the rule's report names the tenants over the
// threshold.
const (
	// MetricFailedFiles counts a tenant's files that failed under the continue policy.
	MetricFailedFiles = metrics.FailedFiles
	// MetricSequenceGapsOverdue is 1 on each tick of a sequenced tenant whose missing number has
	// waited its gapTimeout or more.
	MetricSequenceGapsOverdue = metrics.SequenceGapsOverdue
	// DashboardTopTenants is the number of contributors of the pool dashboard's per-tenant widgets.
	DashboardTopTenants = 10
)

// PoolTenantAlarmMetrics are the figures of the pool's per-tenant alarms, in the order of
// PoolAlarms' per-tenant fields and PoolTenantRules.All. Each must be in metrics.PoolTenantMetrics,
// which the controller writes in every pooled tenant's lines, or metrics.PoolSequenceMetrics, which
// it writes in a sequenced tenant's ticks.
var PoolTenantAlarmMetrics = []string{MetricBlocked, MetricFailedFiles, MetricHeadRunningSeconds, MetricHeadQueuedSeconds, MetricSequenceGapsOverdue}

// intakeAgeAlarm is how long an event may wait in a pool's intake queue before IntakeOldestMessage
// fires: the router routes a batch in well under a second.
const intakeAgeAlarm = 15 * time.Minute

// PoolAlarms are a pool's alarms: a fixed set, whatever its tenant count. Exported as the type
// of TenantPool.Alarms.
type PoolAlarms struct {
	// ErrorLogs: a function of the pool logged at ERROR.
	ErrorLogs awscloudwatch.Alarm
	// ControllerErrors, RouterErrors: an invocation failed.
	ControllerErrors awscloudwatch.Alarm
	RouterErrors     awscloudwatch.Alarm
	// OldestMessage: the pool's oldest queued file is older than any healthy tenant's can be.
	OldestMessage awscloudwatch.Alarm
	// ExpiringMessage: the pool's oldest queued file nears the queue's retention (expiringMessageAge).
	ExpiringMessage awscloudwatch.Alarm
	// Stalled: files are queued and no tenant has one in flight.
	Stalled awscloudwatch.Alarm
	// Backlog: the queue's visible messages near the FIFO scan window (PoolProps.BacklogAlarmMessages).
	Backlog awscloudwatch.Alarm
	// ExecutionsFailed, ExecutionsTimedOut, ExecutionsAborted: a file's workflow did not succeed.
	ExecutionsFailed   awscloudwatch.Alarm
	ExecutionsTimedOut awscloudwatch.Alarm
	ExecutionsAborted  awscloudwatch.Alarm
	// IntakeOldestMessage: an event has waited in the intake longer than intakeAgeAlarm: the router
	// is failing or throttled, or one tenant's burst is still being parked, and the pool's new files
	// are not queued. SQS publishes the age of a queue's oldest message, none per message group; a
	// FIFO queue never reorders a group, so it is the oldest of any group's (any tenant's, with the
	// per-tenant intake).
	IntakeOldestMessage awscloudwatch.Alarm
	// RuleFailedInvocations: EventBridge could not deliver an event to the intake, through intake
	// rules 0 to 9: an alarm reads at most 10 metrics
	// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html,
	// Metrics). MoreRuleFailedInvocations: the same for each further 10 intake rules.
	RuleFailedInvocations     awscloudwatch.Alarm
	MoreRuleFailedInvocations []awscloudwatch.Alarm
	// IntakeAPIErrors, with the per-tenant intake: the intake API answered EventBridge with a 5xx,
	// because SQS refused or throttled its SendMessage. EventBridge retries for up to 24 hours
	// before RuleFailedInvocations counts it, so this is the first sign of a refusing integration.
	// Nil with the sharded intake.
	IntakeAPIErrors awscloudwatch.Alarm
	// RuleDeadLetters: events wait in the dead-letter queue (undeliverable, router failures,
	// objects of no tenant).
	RuleDeadLetters awscloudwatch.Alarm
	// UnroutedObjects: an object under the pool's prefix belongs to no tenant.
	UnroutedObjects awscloudwatch.Alarm
	// LostLeases: a running file of the pool had lost its running-file lease and took it again,
	// perhaps beyond the pool's maxRunningFiles.
	LostLeases awscloudwatch.Alarm
	// WakeFailures: slots of the pool's gate handed to waiting files whose messages could not be
	// made visible, more than once in five minutes (AdmissionWakeFailures).
	WakeFailures awscloudwatch.Alarm

	// Per-tenant alarms, each on its Contributor Insights rule (TenantPool.TenantRules): the
	// alarm fires when any one tenant reaches the threshold, and the rule's report names them.
	// TenantBlocked: a halted tenant waits for an operator (Blocked, as a silo's Blocked alarm).
	TenantBlocked awscloudwatch.Alarm
	// TenantFailedFiles: a tenant's file failed under the continue policy; the tenant moved on.
	TenantFailedFiles awscloudwatch.Alarm
	// TenantHeadRunning: a tenant's head file has been running long, close to the workflow timeout.
	TenantHeadRunning awscloudwatch.Alarm
	// TenantHeadQueued: a tenant's head file waited too long before its execution started.
	TenantHeadQueued awscloudwatch.Alarm
	// TenantSequenceGap: a sequenced tenant's missing number has waited its sequence's gapTimeout
	// or more (SequenceGapsOverdue, as a silo's SequenceGap alarm). A pool's tenants may gain a
	// sequence at any time, so the pool always has it.
	TenantSequenceGap awscloudwatch.Alarm
}

// All lists the alarms.
func (a PoolAlarms) All() []awscloudwatch.Alarm {
	all := append([]awscloudwatch.Alarm{a.ErrorLogs, a.ControllerErrors, a.RouterErrors, a.OldestMessage, a.ExpiringMessage, a.Stalled, a.Backlog,
		a.ExecutionsFailed, a.ExecutionsTimedOut, a.ExecutionsAborted, a.IntakeOldestMessage, a.RuleFailedInvocations, a.RuleDeadLetters, a.UnroutedObjects,
		a.TenantBlocked, a.TenantFailedFiles, a.TenantHeadRunning, a.TenantHeadQueued, a.TenantSequenceGap, a.LostLeases, a.WakeFailures}, a.MoreRuleFailedInvocations...)
	if a.IntakeAPIErrors != nil {
		all = append(all, a.IntakeAPIErrors)
	}
	return all
}

func (t *TenantPool) newAlarms() PoolAlarms {
	p := t.Props
	a := p.Shared.Alarms
	period := awscdk.Duration_Minutes(jsii.Number(a.EvaluationMinutes))
	opts := func(statistic string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String(statistic)}
	}
	errorLogsName := MetricErrorLogs + "-pool-" + p.Name
	errorLogFilters(t.Construct, t.functionLogs, errorLogsName)
	metric := func(namespace, name, statistic string, dims map[string]*string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(namespace), MetricName: jsii.String(name), DimensionsMap: &dims,
			Statistic: jsii.String(statistic), Period: period,
		})
	}
	pool := map[string]*string{DimensionPool: jsii.String(p.Name)}
	// FailedInvocations of up to 10 intake rules, summed.
	failedInvocations := func(rules []awsevents.Rule) awscloudwatch.IMetric {
		if len(rules) == 1 {
			return metric("AWS/Events", "FailedInvocations", "Sum", map[string]*string{"RuleName": rules[0].RuleName()})
		}
		using := map[string]awscloudwatch.IMetric{}
		var ids []string
		for i, r := range rules {
			id := fmt.Sprintf("rule%d", i)
			using[id], ids = metric("AWS/Events", "FailedInvocations", "Sum", map[string]*string{"RuleName": r.RuleName()}), append(ids, id)
		}
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(strings.Join(ids, " + ")), UsingMetrics: &using, Period: period,
			Label: jsii.String("FailedInvocations of the intake rules"),
		})
	}
	const failedDescription = "EventBridge could not deliver a file event of pool %[1]s to its intake queue after its retries; the event went to the dead-letter queue."
	var moreFailed []awscloudwatch.Alarm
	if len(t.IntakeRules) > 10 {
		scope := constructs.NewConstruct(t.Construct, jsii.String("MoreRuleFailedInvocationsAlarms"))
		for k := 10; k < len(t.IntakeRules); k += 10 {
			s := alarmSpec{id: strconv.Itoa(k / 10), metric: failedInvocations(t.IntakeRules[k:min(k+10, len(t.IntakeRules))]), threshold: 1, description: failedDescription}
			moreFailed = append(moreFailed, newAlarm(scope, s, fmt.Sprintf(s.description, p.Name)+" Dashboard: "+dashboardURL(*awscdk.Aws_REGION(), t.dashboardName())+" Runbook: "+runbookURL, p.Shared.AlarmTopic))
		}
	}
	// The top tenant's value of each rule: it reaches the threshold when any tenant does.
	perTenant := func(rule awscloudwatch.CfnInsightRule) awscloudwatch.IMetric { return tenantRuleMetric(rule, period) }
	contributors := func(rule awscloudwatch.CfnInsightRule) string {
		return fmt.Sprintf(" The tenants are the top contributors of Contributor Insights rule %s: pipectl health %s, the dashboard, "+
			"or aws cloudwatch get-insight-rule-report --rule-name %s --max-contributor-count 100.", *rule.RuleName(), p.Name, *rule.RuleName())
	}
	rules := t.TenantRules
	headPeriods := headAlarmPeriods(p.Shared.controllerSafetyNet(), a.EvaluationMinutes)
	core := t.alarms(a, coreAlarmWords{
		ControllerErrors: "The controller of pool %[1]s failed an invocation (waits are not errors). The file's message stays queued and is retried. Read the controller's logs.",
		OldestMessage: fmt.Sprintf("The oldest file in pool %%[1]s has been queued longer than the workflow timeout plus a margin (%v): a tenant is stuck, or halted. "+
			"Find it with pipectl status.", a.OldestMessageAge),
		ExpiringWhose: "The oldest file in pool %[1]s",
		Stalled: fmt.Sprintf("Files of pool %%[1]s are queued but no tenant has had one in flight for %d minutes. "+
			"Check that the controller's event source mapping is enabled, and the controller's throttles and logs.", a.StalledMinutes),
		ExecutionsFailed:   "A file workflow of pool %[1]s failed. The controller's ERROR log names the tenant and the execution; redrive it once the cause is fixed.",
		ExecutionsTimedOut: "A file workflow of pool %[1]s reached the workflow timeout. Check the tenant's core system, then redrive it.",
		ExecutionsAborted:  "A file workflow of pool %[1]s was stopped by someone. Check CloudTrail for who stopped it, and redrive it if the file must be processed.",
	})
	var apiErrors awscloudwatch.Alarm
	if t.IntakeAPI != nil {
		apiErrors = t.alarm(alarmSpec{id: "IntakeApiErrorsAlarm", metric: t.IntakeAPI.DeploymentStage().MetricServerError(opts("Sum")), threshold: 1,
			description: "The intake API of pool %[1]s answered EventBridge with a server error: SQS refused or throttled the SendMessage of a file event. " +
				"EventBridge retries it for up to 24 hours, then keeps it in the dead-letter queue; nothing is lost, but the pool's new files wait. " +
				"If it repeats, check the intake API role's sqs:SendMessage (and the key's kms:GenerateDataKey) and the intake queue's policy."})
	}
	return PoolAlarms{
		IntakeAPIErrors: apiErrors,
		ErrorLogs: t.alarm(alarmSpec{id: "ErrorLogsAlarm", metric: metric(pipeline.DefaultMetricsNamespace, errorLogsName, "Sum", nil), threshold: 1,
			description: "A function of pool %[1]s logged at ERROR: a failed file, a quarantined message, an object of no tenant or a fault. Every line names its tenant; read the pool's function logs."}),
		ControllerErrors: t.alarm(core.ControllerErrors),
		RouterErrors: t.alarm(alarmSpec{id: "RouterErrorsAlarm", metric: t.Router.MetricErrors(opts("Sum")), threshold: 1,
			description: "The router of pool %[1]s failed an invocation: its intake batch stays queued, in order, and is retried. Read the router's logs."}),
		OldestMessage:   t.alarm(core.OldestMessage),
		ExpiringMessage: t.alarm(core.ExpiringMessage),
		Stalled:         t.alarm(core.Stalled),
		Backlog: t.alarm(alarmSpec{id: "BacklogAlarm", metric: t.Queue.MetricApproximateNumberOfMessagesVisible(opts("Maximum")), threshold: float64(p.BacklogAlarmMessages),
			description: fmt.Sprintf("Pool %%[1]s has %d or more files waiting. SQS looks for available tenants only among the first 120,000 messages of a FIFO queue: "+
				"past that, one tenant's backlog stalls every other tenant of the pool. Find the tenant with the backlog and give it its own pool or a silo.", p.BacklogAlarmMessages)}),
		ExecutionsFailed:   t.alarm(core.ExecutionsFailed),
		ExecutionsTimedOut: t.alarm(core.ExecutionsTimedOut),
		ExecutionsAborted:  t.alarm(core.ExecutionsAborted),
		IntakeOldestMessage: t.alarm(alarmSpec{id: "IntakeOldestMessageAlarm", metric: t.Intake.MetricApproximateAgeOfOldestMessage(opts("Maximum")), threshold: intakeAgeAlarm.Seconds(),
			description: fmt.Sprintf("A file event of pool %%[1]s has waited more than %v in the pool's intake queue (the oldest of any tenant's message group): "+
				"the router is failing or throttled, or one tenant's burst is still being parked, so the pool's new files are not queued yet "+
				"(nothing is lost: they stay in the intake, in order). Read the router's logs and FilesRouted.", intakeAgeAlarm)}),
		RuleFailedInvocations: t.alarm(alarmSpec{id: "RuleFailedInvocationsAlarm",
			metric: failedInvocations(t.IntakeRules[:min(10, len(t.IntakeRules))]), threshold: 1, description: failedDescription}),
		MoreRuleFailedInvocations: moreFailed,
		RuleDeadLetters: t.alarm(alarmSpec{id: "RuleDeadLettersAlarm", metric: t.RuleDeadLetterQueue.MetricApproximateNumberOfMessagesVisible(opts("Maximum")), threshold: 1,
			description: "File events of pool %[1]s wait in its dead-letter queue: those files were never queued (an event EventBridge could not deliver, or an object of no tenant). " +
				"Fix the cause, then re-send them with pipectl replay --from-dlq."}),
		TenantBlocked: t.alarm(alarmSpec{id: "TenantBlockedAlarm", metric: perTenant(rules.Blocked), threshold: 1,
			periods: a.BlockedPeriods, datapoints: a.BlockedDatapoints, missing: awscloudwatch.TreatMissingData_MISSING,
			description: "A tenant of pool %[1]s is halted on a failed file and processes nothing else; the pool's other tenants go on. " +
				"Redrive its failed execution once the cause is fixed (pipectl redrive), or write the file's skip marker (pipectl skip)." + contributors(rules.Blocked)}),
		TenantFailedFiles: t.alarm(alarmSpec{id: "TenantFailedFilesAlarm", metric: perTenant(rules.FailedFiles), threshold: 1,
			description: "A file of a tenant of pool %[1]s failed under the continue policy and the tenant moved on. " +
				"The controller's ERROR log names the file and its execution; redrive it once the cause is fixed." + contributors(rules.FailedFiles)}),
		// The rule counts the lines above the threshold: one is a breach.
		TenantHeadRunning: t.alarm(alarmSpec{id: "TenantHeadRunningAlarm", metric: perTenant(rules.HeadRunning), threshold: 1, periods: headPeriods,
			description: fmt.Sprintf("The head file of a tenant of pool %%[1]s has been running more than %v; at the workflow timeout (%v) it fails. "+
				"Open its execution (pipectl status names it) and check the tenant's core system.", a.HeadRunning, p.Shared.WorkflowTimeout) + contributors(rules.HeadRunning)}),
		TenantHeadQueued: t.alarm(alarmSpec{id: "TenantHeadQueuedAlarm", metric: perTenant(rules.HeadQueued), threshold: 1, periods: headPeriods,
			description: fmt.Sprintf("The head file of a tenant of pool %%[1]s waited more than %v before its execution started: its files wait long behind "+
				"earlier ones, or the pool's concurrency is taken by other tenants. Check the tenant's backlog and the pool's MaximumConcurrency.", a.HeadQueued) + contributors(rules.HeadQueued)}),
		TenantSequenceGap: t.alarm(alarmSpec{id: "TenantSequenceGapAlarm", metric: perTenant(rules.SequenceGap), threshold: 1,
			description: "A sequenced tenant of pool %[1]s has waited its sequence's gapTimeout or more for a missing number. With onGap hold its later files are held " +
				"until the missing file arrives: upload it, or skip its number with pipectl sequence skip TENANT NUMBER --reason TEXT. With onGap skip the tenant " +
				"skips the number and goes on; the file, if it comes, is refused as late." + contributors(rules.SequenceGap)}),
		LostLeases: t.alarm(alarmSpec{id: "LostLeasesAlarm", metric: metric(pipeline.DefaultMetricsNamespace, metrics.LostLeases, "Sum", pool), threshold: 1,
			description: "A running file of pool %[1]s had lost its running-file slot (not renewed within the lease's time to live, and taken by another file, " +
				"or freed) and took it again, beyond the pool's maxRunningFiles until files end. Check the controller's throttles and errors."}),
		WakeFailures: t.alarm(alarmSpec{id: "AdmissionWakeFailuresAlarm", metric: metric(pipeline.DefaultMetricsNamespace, metrics.AdmissionWakeFailures, "Sum", pool),
			threshold: wakeFailuresAlarm,
			description: "Running-file slots of pool %[1]s were handed to waiting files whose messages could not be made visible, more than once in five minutes: " +
				"each such file waits for its safety net and its slot for the reconciler. Check the controller's SQS errors and throttles (ChangeMessageVisibility)."}),
		UnroutedObjects: t.alarm(alarmSpec{id: "UnroutedObjectsAlarm", metric: metric(pipeline.DefaultMetricsNamespace, MetricUnroutedObjects, "Sum", pool), threshold: 1,
			description: "An object arrived under pool %[1]s's prefix but under no tenant's prefix; the router kept its event in the dead-letter queue. " +
				"Add the tenant (or fix the sender's key), then re-send it with pipectl replay --from-dlq."}),
	}
}

func (t *TenantPool) alarm(s alarmSpec) awscloudwatch.Alarm {
	description := fmt.Sprintf(s.description, t.Props.Name) + " Dashboard: " + dashboardURL(*awscdk.Aws_REGION(), t.dashboardName()) + " Runbook: " + runbookURL
	return newAlarm(t.Construct, s, description, t.Props.Shared.AlarmTopic)
}

func (t *TenantPool) dashboardName() string {
	return *awscdk.Stack_Of(t.Construct).StackName() + "-" + *awscdk.Aws_REGION()
}

// newDashboard shows the status of the pool's alarms, the pool's totals, and its top tenants by
// wait, failures, halts and run time (the per-tenant alarms' Contributor Insights rules,
// DashboardTopTenants contributors each). Each alarm's description links to it.
func (t *TenantPool) newDashboard() awscloudwatch.Dashboard {
	opts := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("Maximum")}
	sum := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("Sum")}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &metrics, Width: jsii.Number(graphWidth), Height: jsii.Number(graphHeight),
		})
	}
	top := func(title string, rule awscloudwatch.CfnInsightRule) awscloudwatch.IWidget {
		return &insightRuleWidget{title: fmt.Sprintf("Top %d tenants: %s", DashboardTopTenants, title), rule: *rule.RuleName(), top: DashboardTopTenants}
	}
	rules := t.TenantRules
	var alarms []interfacesawscloudwatch.IAlarmRef
	for _, a := range t.Alarms.All() {
		alarms = append(alarms, a)
	}
	return awscloudwatch.NewDashboard(t.Construct, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(t.dashboardName()),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
				Title: jsii.String("Pool " + t.Props.Name + " alarms"), Alarms: &alarms, Width: jsii.Number(dashboardWidth),
			})},
			{
				graph("Files queued and in flight", t.Queue.MetricApproximateNumberOfMessagesVisible(opts), t.Queue.MetricApproximateNumberOfMessagesNotVisible(opts)),
				graph("Tenants with a file in flight", t.Queue.Metric(jsii.String("ApproximateNumberOfGroupsWithInflightMessages"), opts)),
				graph("Oldest file's age (s)", t.Queue.MetricApproximateAgeOfOldestMessage(opts)),
				graph("Files succeeded and failed", t.StateMachine.MetricSucceeded(sum), t.StateMachine.MetricFailed(sum)),
			},
			{
				graph("Controller and router errors", t.Controller.MetricErrors(sum), t.Router.MetricErrors(sum)),
				graph("Controller concurrency", t.Controller.Metric(jsii.String("ConcurrentExecutions"), opts)),
				graph("Dead-lettered events and intake backlog", t.RuleDeadLetterQueue.MetricApproximateNumberOfMessagesVisible(opts),
					t.Intake.MetricApproximateNumberOfMessagesVisible(opts)),
				graph("Controller throttles", t.Controller.MetricThrottles(sum)),
			},
			{awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{
				Markdown: jsii.String(fmt.Sprintf("## Tenants of pool %s\nThe top %d contributors of each Contributor Insights rule, by tenant: "+
					"lines of a halted head, failed files, lines whose head file ran or waited past the alarm's threshold, "+
					"and ticks of a sequence gap past its gapTimeout. "+
					"The Tenant* alarms fire when any tenant does; the rules name them. Runbook: %s; `pipectl status TENANT`.",
					t.Props.Name, DashboardTopTenants, runbookURL)),
				Width: jsii.Number(dashboardWidth), Height: jsii.Number(2),
			})},
			{
				top("lines of a head file queued past the alarm", rules.HeadQueued),
				top("files failed", rules.FailedFiles),
				top("deliveries of a halted head file", rules.Blocked),
				top("lines of a head file running past the alarm", rules.HeadRunning),
			},
			{top("ticks of a sequence gap past its gapTimeout", rules.SequenceGap)},
		},
	})
}

// suppressNagFindings records why each cdk-nag AwsSolutions finding of the pool's own resources
// and grants is intended, after the pipeline's (suppressCoreNagFindings).
func (t *TenantPool) suppressNagFindings() {
	t.suppressCoreNagFindings("each tenant's")
	suppress(t.RuleDeadLetterQueue, "AwsSolutions-SQS3",
		"This queue is itself the dead-letter queue of the pool's rule target and router; its messages are alarmed on and re-sent by an operator.")
	suppress(t.Intake, "AwsSolutions-SQS3",
		"No dead-letter queue on purpose: an event the router cannot store yet stays, in order, until it can (alarmed by IntakeOldestMessage); "+
			"an event of no tenant is never a failure, it goes to the pool's dead-letter queue.")
	suppress(t.Router, "AwsSolutions-IAM4",
		"AWSLambdaBasicExecutionRole only lets the function write its own logs; it is the AWS-maintained minimum for Lambda logging.", basicExecutionRole)
	for _, fn := range []awslambda.IFunction{t.Router, t.Controller, t.Split, t.Register} {
		suppress(fn, "AwsSolutions-IAM5",
			"A pool's function roles hold only what is pool-wide at a constant policy size: executions of the pool's own state machines "+
				"and the core systems' tables; one tenant's data is granted to the pool's tenant role by its session tag.",
			&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::.+\*.*$/`)})
	}
}
