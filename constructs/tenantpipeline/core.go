package tenantpipeline

import (
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/workflows"
)

// core is what both tiers build alike, in one code path: the FIFO queue that orders a tenant's
// files, the Split and Register functions, the File and Segment state machines, the controller
// with its event source, the grants those need whatever the tier, the status rule that wakes the
// controller, the functions' roles under SharedProps.RolePath, and the alarms on these resources
// (alarms: a tier gives only their words). TenantPipeline (silo) and
// TenantPool (pool) call it in the same three steps (newCore, addWorkflow, addController) and add
// only what is their own around it: the silo its rule and the grants on its one tenant's keys, the
// pool its intake, router, settings file and tenant-scoped role (tenantrole.go).
//
// A grant one tier's controller, Split or Register needs because of what the core builds is made
// here, so the other tier has it too; TestCoreGrantsInBothTiers lists them.
type core struct {
	scope constructs.Construct
	props coreProps

	Queue        awssqs.Queue
	Split        awslambda.Function
	Register     awslambda.IFunction
	Workflow     *workflows.Workflow
	StateMachine awsstepfunctions.StateMachine
	Controller   awslambda.Function
	EventSource  awslambdaeventsources.SqsEventSource
	EventBus     awsevents.IEventBus
	StatusRule   awsevents.Rule
	LogGroups    []awslogs.LogGroup
	// functionLogs are the log groups of the functions (not of the state machines), which the
	// ErrorLogs alarm's filters read.
	functionLogs []awslogs.LogGroup
	// roles are the functions whose roles lie under RolePath.
	roles []awslambda.IFunction
	// key is the customer-managed key that encrypts the bucket's objects, which an upload must use
	// (grantUpload): the bucket's own key, else SharedProps.EncryptionKey (a bucket imported by
	// name); nil for the bucket's default encryption.
	key awskms.IKey
}

// coreProps is what differs between the tiers for the core.
type coreProps struct {
	Shared SharedProps
	Bucket awss3.IBucket
	// ManyGroups: the queue carries a message group per tenant (a pool), so it takes SQS's high
	// throughput mode (highThroughput); a silo's queue has one group and keeps the default mode.
	ManyGroups bool
	// Describe is a function's description, by construct id and package.
	Describe func(id, pkg string) string
	// MetricsPool, when set, makes Split's and Register's metrics the pool's (EnvMetricsPool).
	MetricsPool string
	// Register is the caller's own register function; nil for the bundled one.
	Register awslambda.IFunction
	// WorkflowLogGroupName names the log group both state machines log to (under VendedLogsPrefix).
	WorkflowLogGroupName string
}

// newCore starts the core under scope: its queue.
func newCore(scope constructs.Construct, p coreProps) *core {
	c := &core{scope: scope, props: p}
	s := p.Shared
	if p.Bucket != nil {
		c.key = objectKey(p.Bucket, s.EncryptionKey)
	}
	props := &awssqs.QueueProps{
		Fifo: jsii.Bool(true),
		// EventBridge sends no deduplication id; in a pool, the router sends one (the event's id),
		// and operators' messages (pipectl) may rely on the body's hash.
		ContentBasedDeduplication: jsii.Bool(true),
		VisibilityTimeout:         seconds(s.VisibilityTimeout),
		RetentionPeriod:           seconds(QueueRetention),
		ReceiveMessageWaitTime:    awscdk.Duration_Seconds(jsii.Number(20)),
		// SSE-SQS: EventBridge cannot send to a queue encrypted with the AWS-managed alias/aws/sqs key.
		Encryption: awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL: jsii.Bool(true),
		// Removing a tenant must never delete its queued files (README, Operations).
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
		// No dead-letter queue, on purpose: moving a failing head file aside would let later files
		// overtake it. A file that fails is handled by the tenant's failure policy instead.
	}
	if p.ManyGroups {
		// One message group per tenant: high throughput mode (highThroughput, pool.go).
		props.FifoThroughputLimit, props.DeduplicationScope = highThroughput.limit, highThroughput.scope
	}
	c.Queue = awssqs.NewQueue(scope, jsii.String("Queue"), props)
	return c
}

// function creates one of the core's (or the tier's) Go functions with its own log group.
func (c *core) function(id, pkg string, code awslambda.Code, timeout time.Duration, memoryMB int, env map[string]string) awslambda.Function {
	logs := awslogs.NewLogGroup(c.scope, jsii.String(id+"Logs"), &awslogs.LogGroupProps{Retention: c.props.Shared.LogRetention})
	c.LogGroups = append(c.LogGroups, logs)
	c.functionLogs = append(c.functionLogs, logs)
	fn := newGoFunction(c.scope, id, pkg, code, timeout, memoryMB, env, logs, c.props.Describe(id, pkg))
	c.roles = append(c.roles, fn)
	return fn
}

// addWorkflow creates Split, the bundled Register (unless the caller brings its own) and the two
// state machines.
func (c *core) addWorkflow() {
	p, s := c.props, c.props.Shared
	metricsPool := func(env map[string]string) map[string]string {
		if p.MetricsPool != "" {
			env[pipeline.EnvMetricsPool] = p.MetricsPool
		}
		return env
	}
	c.Split = c.function("Split", pkgSplit, lambdaCode(pkgSplit), s.SplitTimeout, s.SplitMemoryMB, metricsPool(map[string]string{
		pipeline.EnvWorkBucket: *p.Bucket.BucketName(),
	}))
	c.Register = p.Register
	if c.Register == nil {
		env := map[string]string{
			pipeline.EnvHTTPTimeoutSeconds: strconv.Itoa(int(s.RegisterHTTPTimeout.Seconds())),
			pipeline.EnvMetricsNamespace:   pipeline.DefaultMetricsNamespace,
		}
		if s.smallFiles(false) > 0 {
			// The SmallFile task writes the manifest and the results, as Split does.
			env[pipeline.EnvWorkBucket] = *p.Bucket.BucketName()
		}
		c.Register = c.function("Register", pkgRegister, lambdaCode(pkgRegister), s.RegisterTimeout, s.RegisterMemoryMB, metricsPool(env))
	}
	logs := awslogs.NewLogGroup(c.scope, jsii.String("WorkflowLogs"), &awslogs.LogGroupProps{
		LogGroupName: jsii.String(p.WorkflowLogGroupName),
		Retention:    s.LogRetention,
	})
	c.LogGroups = append(c.LogGroups, logs)
	c.Workflow = workflows.New(c.scope, "Workflow", &workflows.Props{
		Split:           c.Split,
		Register:        c.Register,
		Timeout:         s.WorkflowTimeout,
		SplitTimeout:    s.SplitTimeout,
		RegisterTimeout: s.RegisterTimeout,
		Logs:            logs,
		Design:          s.RegisterDesign,
		// The bundled Register resumes inside a chunk; a RegisterFunction of your own keeps the
		// chunk cursor (docs/data-path.md, "Bringing your own register function").
		RecordCursor:   p.Register == nil,
		SmallFileBound: int64(s.smallFiles(p.Register != nil)),
	})
	c.StateMachine = c.Workflow.File
}

// controllerTier is what a tier gives the controller besides the core's.
type controllerTier struct {
	// Code is the controller's code; nil for the bundled package alone.
	Code awslambda.Code
	// Env is the tier's own environment: where a tenant's settings come from.
	Env map[string]string
	// ReservedConcurrency, when positive, reserves the controller's concurrency (silo only).
	ReservedConcurrency int
	// MaximumConcurrency, when positive, caps the event source mapping (pool only).
	MaximumConcurrency int
	// GrantEventObjects grants the File Processed event's objects of the tier's tenants
	// (summary.json, the event markers), when the function's own role holds them (silo).
	GrantEventObjects func(controller awslambda.Function)
	// GrantAdmission grants the leases of the tier's admission gates, taken before StartExecution.
	GrantAdmission func(controller awslambda.Function)
	// GrantTenantData grants what the controller reads and writes of one tenant's keys: its
	// quarantine, control markers and wake-up state, on the function's role (silo) or through the
	// tenant-scoped role (pool).
	GrantTenantData func(controller awslambda.Function)
	// StatusRuleDescription describes the status rule.
	StatusRuleDescription string
}

// addController creates the controller, its event source, the grants the core's resources need,
// and, with wake events, the status rule; then puts the core's roles under RolePath.
func (c *core) addController(t controllerTier) {
	p, s := c.props, c.props.Shared
	c.EventBus = fileEventBus(c.scope, s.EventBus)
	env := map[string]string{
		pipeline.EnvStateMachineARN: *c.StateMachine.StateMachineArn(),
		pipeline.EnvQueueURL:        *c.Queue.QueueUrl(),
		pipeline.EnvBucket:          *p.Bucket.BucketName(),
		pipeline.EnvMaxWaitSeconds:  strconv.Itoa(int(s.VisibilityTimeout.Seconds())),
		pipeline.EnvHaltWaitSeconds: strconv.Itoa(int(s.HaltedRecheck.Seconds())),
		// A stopped file is released only after its stopDate plus the register timeout.
		pipeline.EnvRegisterTimeoutSeconds: strconv.Itoa(int(s.RegisterTimeout.Seconds())),
		pipeline.EnvSegmentStateMachineARN: *c.Workflow.Segment.StateMachineArn(),
		pipeline.EnvMetricsNamespace:       pipeline.DefaultMetricsNamespace,
		// POLL_BUDGET_SECONDS is set, not defaulted, so that validate's ControllerTimeout rule
		// holds what the function runs.
		pipeline.EnvPollBudgetSeconds: strconv.Itoa(int(s.PollBudget().Seconds())),
		pipeline.EnvEventBusName:      *c.EventBus.EventBusArn(),
		pipeline.EnvResultsFunction:   *c.Split.FunctionArn(),
	}
	if s.WakeEvents() {
		env[pipeline.EnvWakeEvents] = "true"
		env[pipeline.EnvSafetyNetSeconds] = strconv.Itoa(int(s.SafetyNetInterval.Seconds()))
		env[pipeline.EnvControlPrefixProtected] = controlPrefixProtected(p.Bucket, s.RolePath, s.Operators)
	}
	for k, v := range t.Env {
		env[k] = v
	}
	code := t.Code
	if code == nil {
		code = lambdaCode(pkgController)
	}
	c.Controller = c.function("Controller", pkgController, code, s.ControllerTimeout, 128, env)
	fn := c.Controller
	grantFileEvents(fn, c.EventBus)
	grantFailedResults(fn, c.Split)
	if t.GrantEventObjects != nil {
		t.GrantEventObjects(fn)
	}
	if t.ReservedConcurrency > 0 {
		fn.Node().DefaultChild().(awslambda.CfnFunction).SetReservedConcurrentExecutions(jsii.Number(t.ReservedConcurrency))
	}
	sourceProps := &awslambdaeventsources.SqsEventSourceProps{
		BatchSize: jsii.Number(1),
		// Waiting is reported per message, not thrown: the function's Errors metric counts faults only.
		ReportBatchItemFailures: jsii.Bool(true),
	}
	if t.MaximumConcurrency > 0 {
		// Lambda scales a FIFO mapping to the active message groups, here the tenants with files;
		// this caps it. https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html
		sourceProps.MaxConcurrency = jsii.Number(t.MaximumConcurrency)
	}
	c.EventSource = awslambdaeventsources.NewSqsEventSource(c.Queue, sourceProps)
	fn.AddEventSource(c.EventSource)
	c.StateMachine.GrantStartExecution(fn)
	if t.GrantAdmission != nil {
		t.GrantAdmission(fn)
	}
	// A stopped (TIMED_OUT, ABORTED) file is released only once none of its invocations can still
	// run: the controller finds the file's running segment child in the file execution's history,
	// stops it and waits for it (docs/controller.md).
	// A redrive control message (pipectl redrive) is performed by the controller when it reaches
	// the head of the tenant's message group, so that it never runs beside another file.
	c.StateMachine.GrantExecution(fn, jsii.String("states:DescribeExecution"), jsii.String("states:GetExecutionHistory"),
		jsii.String("states:RedriveExecution"))
	c.Workflow.Segment.GrantExecution(fn, jsii.String("states:DescribeExecution"), jsii.String("states:StopExecution"))
	if t.GrantTenantData != nil {
		t.GrantTenantData(fn)
	}
	if s.WakeEvents() {
		// The ends of the file executions wake the controller, whose wake-up handler makes the
		// waiting file's message visible at once (docs/controller.md).
		c.StatusRule = newStatusRule(c.scope, t.StatusRuleDescription, c.StateMachine, fn)
	}
}

// placeRoles puts the roles of the core's functions, and of more of the tier's, under RolePath, the
// path BucketWriteDeny exempts. A function the caller brings keeps its own role.
func (c *core) placeRoles(more ...awslambda.IFunction) {
	for _, fn := range append(c.roles, more...) {
		role, ok := fn.Role().(awsiam.Role)
		if !ok {
			continue
		}
		role.Node().DefaultChild().(awsiam.CfnRole).SetPath(jsii.String(c.props.Shared.RolePath))
	}
}

// coreAlarms are the alarms on the core's resources, which both tiers have: the same metric,
// threshold and evaluation in each, only the words differ (what it means for one tenant, or for a
// pool's tenants). A tier creates each with its own description and action (alarm).
type coreAlarms struct {
	ControllerErrors, OldestMessage, ExpiringMessage, Stalled alarmSpec
	ExecutionsFailed, ExecutionsTimedOut, ExecutionsAborted   alarmSpec
}

// coreAlarmWords are a tier's descriptions of the core's alarms; %[1]s is the tenant id or the
// pool's name. ExpiringWhose names the file ("The oldest file of tenant %[1]s").
type coreAlarmWords struct {
	ControllerErrors, OldestMessage, ExpiringWhose, Stalled string
	ExecutionsFailed, ExecutionsTimedOut, ExecutionsAborted string
}

// alarms specifies the core's alarms with the thresholds a (defaulted) and the tier's words.
func (c *core) alarms(a AlarmThresholds, w coreAlarmWords) coreAlarms {
	period := awscdk.Duration_Minutes(jsii.Number(a.EvaluationMinutes))
	opts := func(statistic string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String(statistic)}
	}
	sm := c.StateMachine
	return coreAlarms{
		ControllerErrors: alarmSpec{id: "ControllerErrorsAlarm", metric: c.Controller.MetricErrors(opts("Sum")), threshold: 1, description: w.ControllerErrors},
		OldestMessage: alarmSpec{id: "OldestMessageAlarm", metric: c.Queue.MetricApproximateAgeOfOldestMessage(opts("Maximum")),
			threshold: a.OldestMessageAge.Seconds(), description: w.OldestMessage},
		ExpiringMessage: expiringSpec(c.Queue, opts("Maximum"), c.props.Shared.WorkflowTimeout, w.ExpiringWhose),
		Stalled: alarmSpec{id: "StalledAlarm", metric: stalledExpression(c.Queue), threshold: 1, periods: a.StalledMinutes, datapoints: a.StalledMinutes,
			description: w.Stalled},
		ExecutionsFailed:   alarmSpec{id: "ExecutionsFailedAlarm", metric: sm.MetricFailed(opts("Sum")), threshold: 1, description: w.ExecutionsFailed},
		ExecutionsTimedOut: alarmSpec{id: "ExecutionsTimedOutAlarm", metric: sm.MetricTimedOut(opts("Sum")), threshold: 1, description: w.ExecutionsTimedOut},
		ExecutionsAborted:  alarmSpec{id: "ExecutionsAbortedAlarm", metric: sm.MetricAborted(opts("Sum")), threshold: 1, description: w.ExecutionsAborted},
	}
}
