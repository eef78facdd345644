package tenantpipeline

import (
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/workflows"
)

// Pipeline is what both tiers build alike, in one code path (newPipeline), and what both expose:
// TenantPipeline (silo) and TenantPool (pool) embed it. It holds the FIFO queue that orders a
// tenant's files, the Split and Register functions, the File and Segment state machines, the
// controller with its event source, and the status rule that wakes the controller. newPipeline
// also makes the grants those need whatever the tier, encrypts what it creates with
// SharedProps.EncryptionKey and puts the functions' roles under SharedProps.RolePath;
// suppressCoreNagFindings and alarms are its cdk-nag suppressions and alarms. A tier then
// adds only what is its own, in its own code: the silo its rule and the grants on its one
// tenant's keys, the pool its intake, router, settings file and tenant-scoped role
// (tenantrole.go).
//
// It is exported because both constructs embed it: its fields are theirs (t.Queue, t.Controller).
// TestCoreGrantsInBothTiers lists the grants both tiers have.
type Pipeline struct {
	// Queue is the FIFO queue: one message group per tenant, so one file of a tenant in flight at
	// a time.
	Queue awssqs.Queue
	// Split streams a file and writes its chunk manifest, and runs the file's results task.
	Split awslambda.Function
	// Register registers the chunks of a segment: the bundled HTTP adapter, or
	// Props.RegisterFunction (silo only).
	Register awslambda.IFunction
	// Workflow holds the File and Segment state machines.
	Workflow *workflows.Workflow
	// StateMachine is Workflow.File, the one the controller starts.
	StateMachine awsstepfunctions.StateMachine
	// Controller holds each tenant's head file message until that file's workflow has finished.
	Controller awslambda.Function
	// EventSource is the controller's SQS event source; its mapping is what pipectl pauses.
	EventSource awslambdaeventsources.SqsEventSource
	// EventBus receives the File Processed events: SharedProps.EventBus or the default bus.
	EventBus awsevents.IEventBus
	// StatusRule sends the ends of the file executions to Controller, which wakes the waiting
	// file's message. Nil with SharedProps.DisableWakeEvents.
	StatusRule awsevents.Rule
	// LogGroups are the functions' and the state machines' log groups.
	LogGroups []awslogs.LogGroup

	// bundled is Register when it is the bundled function (whose role the construct grants); nil
	// for a function of the caller's.
	bundled awslambda.Function
	// functionLogs are the log groups of the functions (not of the state machines), which the
	// ErrorLogs alarm's filters read.
	functionLogs []awslogs.LogGroup
	scope        constructs.Construct
	shared       SharedProps
	describe     func(id, pkg string) string
	// enc applies SharedProps.EncryptionKey; nil without one (AWS-managed encryption).
	enc *encryption
	// objects is the key of the bucket's objects, which reads, writes and uploads must use: the
	// bucket's own key, else SharedProps.EncryptionKey (a bucket imported by name, objectKey);
	// nil for the bucket's default encryption.
	objects *encryption
}

// pipelineProps is what a tier gives newPipeline: plain values, no callbacks.
type pipelineProps struct {
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
	// ControllerCode is the controller's code; nil for the bundled package alone.
	ControllerCode awslambda.Code
	// DeployedFiles are files bundled beside Split's and the bundled Register's executables (a
	// pool's settings file), and DeployedEnv their variables naming the settings they were
	// deployed with (internal/deployed): a request's tenant, core system URLs, secret and sink
	// must be those.
	DeployedFiles map[string][]byte
	DeployedEnv   map[string]string
	// ControllerEnv is the tier's own environment of the controller: where a tenant's settings
	// come from.
	ControllerEnv map[string]string
	// ReservedConcurrency, when positive, reserves the controller's concurrency (silo only).
	ReservedConcurrency int
	// MaximumConcurrency, when positive, caps the event source mapping (pool only).
	MaximumConcurrency int
	// StatusRuleDescription describes the status rule.
	StatusRuleDescription string
}

// newPipeline builds the pipeline under scope, in order: the queue, Split and Register, the
// state machines, the controller with its event source and grants, the status rule; then its
// encryption grants.
func newPipeline(scope constructs.Construct, p pipelineProps) Pipeline {
	s := p.Shared
	c := Pipeline{scope: scope, shared: s, describe: p.Describe, enc: newEncryption(scope, s.EncryptionKey)}
	if p.Bucket != nil {
		c.objects = newEncryption(scope, objectKey(p.Bucket, s.EncryptionKey))
	}
	c.Queue = c.newQueue(p.ManyGroups)
	c.addWorkflow(p)
	c.addController(p)
	c.encryptCore(p.Bucket)
	return c
}

// newQueue creates the FIFO queue, encrypted with the key when there is one (encryption.queue).
func (c *Pipeline) newQueue(manyGroups bool) awssqs.Queue {
	s := c.shared
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
	if manyGroups {
		// One message group per tenant: high throughput mode (highThroughput, pool.go).
		props.FifoThroughputLimit, props.DeduplicationScope = highThroughput.limit, highThroughput.scope
	}
	q := awssqs.NewQueue(c.scope, jsii.String("Queue"), props)
	c.enc.queue(q)
	return q
}

// function creates one of the pipeline's (or the tier's) Go functions with its own log group,
// encrypted with the key, and its role under RolePath, named so that the bucket's Denies exempt it
// by its exact ARN (nameRole).
func (c *Pipeline) function(id, pkg string, code awslambda.Code, timeout time.Duration, memoryMB int, env map[string]string) (awslambda.Function, awslogs.LogGroup) {
	logs := awslogs.NewLogGroup(c.scope, jsii.String(id+"Logs"), &awslogs.LogGroupProps{Retention: c.shared.LogRetention, EncryptionKey: c.enc.keyOrNil()})
	fn := newGoFunction(c.scope, id, pkg, code, timeout, memoryMB, env, logs, c.describe(id, pkg), c.enc.keyOrNil())
	if role, ok := fn.Role().(awsiam.Role); ok {
		nameRole(role, c.shared.RolePath)
	}
	return fn, logs
}

// ownFunction is function for one of the pipeline's own functions: its log group is one of
// LogGroups, and the ErrorLogs alarm reads it.
func (c *Pipeline) ownFunction(id, pkg string, code awslambda.Code, timeout time.Duration, memoryMB int, env map[string]string) awslambda.Function {
	fn, logs := c.function(id, pkg, code, timeout, memoryMB, env)
	c.LogGroups = append(c.LogGroups, logs)
	c.functionLogs = append(c.functionLogs, logs)
	return fn
}

// addWorkflow creates Split, the bundled Register (unless the caller brings its own) and the two
// state machines.
func (c *Pipeline) addWorkflow(p pipelineProps) {
	s := p.Shared
	metricsPool := func(env map[string]string) map[string]string {
		if p.MetricsPool != "" {
			env[pipeline.EnvMetricsPool] = p.MetricsPool
		}
		return env
	}
	deployedEnv := func(env map[string]string) map[string]string {
		for k, v := range p.DeployedEnv {
			env[k] = v
		}
		return env
	}
	c.Split = c.ownFunction("Split", pkgSplit, lambdaCodeWith(pkgSplit, p.DeployedFiles), s.SplitTimeout, s.SplitMemoryMB, metricsPool(deployedEnv(map[string]string{
		pipeline.EnvWorkBucket: *p.Bucket.BucketName(),
	})))
	c.Register = p.Register
	if c.Register == nil {
		env := map[string]string{
			pipeline.EnvHTTPTimeoutSeconds: strconv.Itoa(int(s.RegisterHTTPTimeout.Seconds())),
			pipeline.EnvMetricsNamespace:   pipeline.DefaultMetricsNamespace,
			pipeline.EnvRequestShares:      s.RequestShares,
		}
		if s.smallFiles(false) > 0 {
			// The SmallFile task writes the manifest and the results, as Split does.
			env[pipeline.EnvWorkBucket] = *p.Bucket.BucketName()
		}
		c.bundled = c.ownFunction("Register", pkgRegister, lambdaCodeWith(pkgRegister, p.DeployedFiles), s.RegisterTimeout, s.RegisterMemoryMB, metricsPool(deployedEnv(env)))
		c.Register = c.bundled
	}
	logs := awslogs.NewLogGroup(c.scope, jsii.String("WorkflowLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String(p.WorkflowLogGroupName),
		Retention:     s.LogRetention,
		EncryptionKey: c.enc.keyOrNil(),
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
		Encryption:     c.enc.stateMachineEncryption(),
	})
	c.StateMachine = c.Workflow.File
}

// addController creates the controller, its event source, the grants the pipeline's resources
// need, and, with wake events, the status rule.
func (c *Pipeline) addController(p pipelineProps) {
	s := p.Shared
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
	if c.bundled != nil {
		// Split and the bundled Register take the core system's URLs and the secret from their
		// deployed settings (DeployedEnv), so executions' input, which Step Functions puts in its
		// status events and history, leaves them out. A register function of your own reads them
		// from its payload.
		env[pipeline.EnvInputWithoutURLs] = "true"
	}
	if s.WakeEvents() {
		env[pipeline.EnvWakeEvents] = "true"
		env[pipeline.EnvSafetyNetSeconds] = strconv.Itoa(int(s.SafetyNetInterval.Seconds()))
		env[pipeline.EnvControlPrefixProtected] = controlPrefixProtected(p.Bucket, s.RolePath, s.Operators)
	}
	for k, v := range p.ControllerEnv {
		env[k] = v
	}
	code := p.ControllerCode
	if code == nil {
		code = lambdaCode(pkgController)
	}
	c.Controller = c.ownFunction("Controller", pkgController, code, s.ControllerTimeout, 128, env)
	fn := c.Controller
	if p.ReservedConcurrency > 0 {
		fn.Node().DefaultChild().(awslambda.CfnFunction).SetReservedConcurrentExecutions(jsii.Number(p.ReservedConcurrency))
	}
	grantFileEvents(fn, c.EventBus)
	grantFailedResults(fn, c.Split)
	sourceProps := &awslambdaeventsources.SqsEventSourceProps{
		BatchSize: jsii.Number(1),
		// Waiting is reported per message, not thrown: the function's Errors metric counts faults only.
		ReportBatchItemFailures: jsii.Bool(true),
	}
	if p.MaximumConcurrency > 0 {
		// Lambda scales a FIFO mapping to the active message groups, here the tenants with files;
		// this caps it. https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html
		sourceProps.MaxConcurrency = jsii.Number(p.MaximumConcurrency)
	}
	c.EventSource = awslambdaeventsources.NewSqsEventSource(c.Queue, sourceProps)
	fn.AddEventSource(c.EventSource)
	c.StateMachine.GrantStartExecution(fn)
	// A stopped (TIMED_OUT, ABORTED) file is released only once none of its invocations can still
	// run: the controller finds the file's running segment child in the file execution's history,
	// stops it and waits for it (docs/controller.md).
	// A redrive control message (pipectl redrive) is performed by the controller when it reaches
	// the head of the tenant's message group, so that it never runs beside another file.
	c.StateMachine.GrantExecution(fn, jsii.String("states:DescribeExecution"), jsii.String("states:GetExecutionHistory"),
		jsii.String("states:RedriveExecution"))
	c.Workflow.Segment.GrantExecution(fn, jsii.String("states:DescribeExecution"), jsii.String("states:StopExecution"))
	if s.WakeEvents() {
		// The ends of the file executions wake the controller, whose wake-up handler makes the
		// waiting file's message visible at once (docs/controller.md).
		c.StatusRule = newStatusRule(c.scope, p.StatusRuleDescription, c.StateMachine, fn)
	}
}

// encryptCore grants the KMS calls the pipeline's roles make on what it created (its queue, state
// machines and the bucket's objects the controller reads and writes), and lets the services that
// call KMS in their own name use the key (keyPolicy). Without a key, each call does nothing.
func (c *Pipeline) encryptCore(bucket awss3.IBucket) {
	c.objects.grantBucket(bucket, c.Controller)
	c.enc.grantQueues(c.Controller, false, c.Queue)
	c.enc.stateMachineRole(c.Workflow.File, c.Workflow.Segment)
	c.enc.stateMachineRole(c.Workflow.Segment)
	c.enc.grantStateMachines(c.Controller, c.Workflow.File, c.Workflow.Segment)
	c.enc.keyPolicy(c.shared.KeyPolicyCovered)
}

// suppressCoreNagFindings records why each cdk-nag AwsSolutions finding on the pipeline's own
// resources is intended; whose names the tenants ("the tenant's", "each tenant's"). A tier calls
// it last, with its own: cdk-nag suppresses on the children a resource has when the suppression
// is added, and the tiers' grants add statements to the pipeline's roles.
func (c *Pipeline) suppressCoreNagFindings(whose string) {
	suppress(c.Queue, "AwsSolutions-SQS3",
		"No dead-letter queue on purpose: moving a failing head file aside would let the tenant's later files overtake it. "+
			"Failed files are handled by "+whose+" failure policy (continue or halt), alarmed, and the queue keeps messages 14 days.")
	fns := []awslambda.Function{c.Controller, c.Split}
	if c.bundled != nil {
		fns = append(fns, c.bundled)
	}
	for _, fn := range fns {
		suppress(fn, "AwsSolutions-IAM4",
			"AWSLambdaBasicExecutionRole only lets the function write its own logs; it is the AWS-maintained minimum for Lambda logging.",
			basicExecutionRole)
	}
	for _, sm := range []any{c.Workflow.File, c.Workflow.Segment} {
		suppress(sm, "AwsSolutions-SF1",
			"Logs at ERROR without execution data on purpose: records are customer data and must not reach logs (docs/data-path.md). "+
				"Execution history keeps every state transition for 90 days.")
		suppress(sm, "AwsSolutions-IAM5",
			"Generated by CDK for the task integrations: Lambda invoke on the function and its versions (arn:*), X-Ray and CloudWatch Logs delivery "+
				"(these APIs take no resource), and describe/stop on the construct's own segment executions for startExecution.sync.",
			"Resource::*",
			&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<[A-Za-z0-9]+(Split|Register)[A-F0-9]{8}\.Arn>:\*$/`)},
			&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:.+WorkflowSegment[A-F0-9]{8}.+\*$/`)})
	}
}

// coreAlarms are the alarms on the pipeline's resources, which both tiers have: the same metric,
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

// alarms specifies the pipeline's alarms with the thresholds a (defaulted) and the tier's words.
func (c *Pipeline) alarms(a AlarmThresholds, w coreAlarmWords) coreAlarms {
	period := awscdk.Duration_Minutes(jsii.Number(a.EvaluationMinutes))
	opts := func(statistic string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String(statistic)}
	}
	sm := c.StateMachine
	return coreAlarms{
		ControllerErrors: alarmSpec{id: "ControllerErrorsAlarm", metric: c.Controller.MetricErrors(opts("Sum")), threshold: 1, description: w.ControllerErrors},
		OldestMessage: alarmSpec{id: "OldestMessageAlarm", metric: c.Queue.MetricApproximateAgeOfOldestMessage(opts("Maximum")),
			threshold: a.OldestMessageAge.Seconds(), description: w.OldestMessage},
		ExpiringMessage: expiringSpec(c.Queue, opts("Maximum"), c.shared.WorkflowTimeout, w.ExpiringWhose),
		Stalled: alarmSpec{id: "StalledAlarm", metric: stalledExpression(c.Queue), threshold: 1, periods: a.StalledMinutes, datapoints: a.StalledMinutes,
			description: w.Stalled},
		ExecutionsFailed:   alarmSpec{id: "ExecutionsFailedAlarm", metric: sm.MetricFailed(opts("Sum")), threshold: 1, description: w.ExecutionsFailed},
		ExecutionsTimedOut: alarmSpec{id: "ExecutionsTimedOutAlarm", metric: sm.MetricTimedOut(opts("Sum")), threshold: 1, description: w.ExecutionsTimedOut},
		ExecutionsAborted:  alarmSpec{id: "ExecutionsAbortedAlarm", metric: sm.MetricAborted(opts("Sum")), threshold: 1, description: w.ExecutionsAborted},
	}
}
