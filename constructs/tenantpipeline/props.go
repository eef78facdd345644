package tenantpipeline

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/workflows"
)

// Props configures one tenant's pipeline. Zero values mean the documented default.
type Props struct {
	// Tenant names the tenant and its file format. Required: Tenant.ID, and Tenant.RegisterURL
	// unless RegisterFunction is set or the tenant has a DynamoDB sink (Tenant.DynamoDB).
	Tenant Tenant

	// Bucket is the ingest bucket. It must send events to EventBridge (EventBridgeEnabled). The
	// pipeline writes manifests under work/<tenant>/ and quarantined messages under
	// quarantine/<tenant>/, and reads skip markers under control/<tenant>/skip/. Required.
	Bucket awss3.IBucket

	// RegisterFunction replaces the bundled HTTP register adapter. It receives the chunk payload
	// documented in docs/data-path.md and must be idempotent per record.
	// Default: the bundled adapter, POSTing each record to Tenant.RegisterURL. Not allowed with a
	// DynamoDB sink, which the bundled function writes.
	RegisterFunction awslambda.IFunction

	// DynamoDBTable is the table of the tenant's DynamoDB sink (Tenant.DynamoDB), for a table the
	// app already has as a construct. Register is granted dynamodb:PutItem on it and nothing else.
	// Default: the table Tenant.DynamoDB.Table names, or, without a name, a table the construct
	// creates (TenantPipeline.Table). Only with Tenant.DynamoDB, and not with Tenant.DynamoDB.Table.
	DynamoDBTable awsdynamodb.ITable

	// ControllerReservedConcurrency reserves concurrency for the controller: opt in only. It is not
	// needed for order: the FIFO message group already serializes a tenant's files (a group never
	// has two messages in flight, and the event source mapping scales by active message groups).
	// Each reserved unit comes out of the account's concurrency quota, of which 100 must stay
	// unreserved, so reserving fails to deploy on accounts with a low quota (new accounts often
	// have 10 or 50) and caps 1,000 tenants at 900.
	// https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html
	// https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html (FIFO queues, message groups)
	// Default: 0, no reservation. A negative value also means none.
	ControllerReservedConcurrency int

	// Uploaders may assume UploaderRole to upload the tenant's files under its prefix: the
	// platform's own service that authenticates the tenant's customers and vends their upload
	// credentials or presigned URLs (README, "Customers upload"). The role is this tenant's alone,
	// so no session tag is needed. Use role ARNs (awsiam.NewArnPrincipal) or roles of the app,
	// never a whole account. A pool's uploaders are PoolProps.Uploaders.
	// Default: none, and no UploaderRole.
	Uploaders []awsiam.IPrincipal

	// SharedProps are the props a pool's tenants share (PoolProps.Shared): timeouts, memory, wake
	// events, logs, alarms, the event bus, operators and the roles' path.
	SharedProps
}

// SharedProps configure what both tiers build alike (core.go): the queue's visibility, the
// functions, the workflows, the wake-up, logs, alarms, the File Processed event's bus, who may
// steer, and the roles' path. A TenantPipeline takes them embedded in Props, a TenantPool as
// PoolProps.Shared, for every tenant of the pool. Zero values mean the documented default.
type SharedProps struct {
	// DisableWakeEvents turns off the wake-up on the file execution's status change event
	// (docs/controller.md). With wake events (the default) a rule sends the file state machine's
	// "Step Functions Execution Status Change" events to the controller, which makes the waiting
	// file's message visible at once; the controller checks a running execution itself only every
	// SafetyNetInterval, about 12 DescribeExecution calls per running file-hour. Without them it
	// polls in-process for ControllerPollBudget and then with a backoff growing to VisibilityTimeout.
	// Default: false (wake events on).
	DisableWakeEvents bool

	// SafetyNetInterval is, with wake events, the longest wait between two checks of a running
	// file: a lost status event delays the next file by at most this. Step Functions delivers these
	// events on a best-effort basis.
	// https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html
	// Default: 5 minutes. Whole seconds from 1s to 12h, at most VisibilityTimeout.
	SafetyNetInterval time.Duration

	// VisibilityTimeout of the tenant's FIFO queue: the longest wait between two checks of a running
	// file. AWS recommends at least 6× the function timeout for event source mappings; this
	// pipeline keeps the message in flight on purpose and sets its visibility per delivery, so the
	// function timeout only has to stay below it. With wake events it must be at least
	// SafetyNetInterval, so that a message whose visibility change failed comes back within it.
	// Default: SafetyNetInterval + 30 seconds (5m30s) with wake events, 30 seconds without.
	VisibilityTimeout time.Duration

	// ControllerTimeout is the controller function's timeout. Must be shorter than VisibilityTimeout.
	// Default: 20 seconds.
	ControllerTimeout time.Duration

	// SplitTimeout is the split function's timeout. Default: 5 minutes.
	SplitTimeout time.Duration
	// SplitMemoryMB is the split function's memory. Default: 256 MB.
	SplitMemoryMB int
	// RegisterTimeout is the register function's timeout. It must exceed RegisterHTTPTimeout plus
	// the register function's 2 s deadline margin, or no record could ever be sent. With
	// RegisterFunction, set it to at least that function's timeout: the controller waits this long
	// after a stopped file's stopDate before it starts the next file, and the workflow waits this
	// long before it retries an invocation whose outcome Step Functions could not learn.
	// Default: 2 minutes.
	RegisterTimeout time.Duration
	// RegisterHTTPTimeout bounds one POST to the core system by the bundled register adapter
	// (HTTP_TIMEOUT_SECONDS): whole seconds from 1s to 5m. Ignored with RegisterFunction.
	// Default: 10 seconds.
	RegisterHTTPTimeout time.Duration
	// RegisterMemoryMB is the register function's memory. Register mostly waits on the network, and
	// Lambda bills every MB of that wait. Default: DefaultRegisterMemoryMB (128 MB); for a batch
	// tenant whose maxBatchBytes is over 5 MiB, RegisterMemoryFor's larger size.
	RegisterMemoryMB int
	// RegisterDesign is how a segment execution drives Register: workflows.DesignPerInvocation
	// ("per-invocation": one Register task per invocation, each registering consecutive chunks
	// while its time budget lasts and returning a cursor) or workflows.DesignPerChunk
	// ("per-chunk": one Register task per chunk in an inline Map, one state transition per chunk).
	// per-chunk is kept for comparison, and for a RegisterFunction written against the one-chunk
	// contract (docs/data-path.md, "Bringing your own register function").
	// Default: per-invocation; per-chunk when RegisterFunction is set.
	RegisterDesign string
	// RequestShares is how the bundled Register divides a core system's maxRequestsInFlight among
	// its running files (pipeline.EnvRequestShares): pipeline.RequestSharesShared ("shared": by
	// what each can use, recomputed as files start and end; docs/configuration.md, "Core
	// systems") or pipeline.RequestSharesStatic ("static": maxRequestsInFlight / maxRunningFiles
	// each, kept for comparison). Default: shared.
	RequestShares string
	// DefaultSmallFileBytes is the small-file bound of every tenant that sets no Tenant.SmallFileBytes
	// of its own: a file whose S3 event gives it at most this many bytes runs as one SmallFile task of the register function (split, register chunk after
	// chunk and results in one invocation, two state transitions), and one that is not small after
	// all (more than one segment of chunks, or its registration does not end in one invocation)
	// goes on through Split without any record sent twice (docs/data-path.md, "Small files"). -1
	// turns the path off; at most pipeline.MaxSmallFileBytes (4 MiB), since the task reads the file
	// into memory. The path needs the bundled register function and the per-invocation design; it
	// is off with RegisterFunction or per-chunk. Lower it for a core system too slow to take the
	// bound's records in one invocation: such a file is handed on with what it registered kept, at
	// the cost of the SmallFile task's two state transitions and a second split.
	// Default: pipeline.DefaultSmallFileBytes (1 MiB: about 10,000 records of 100 bytes).
	DefaultSmallFileBytes int

	// WorkflowTimeout bounds one file's workflow. It must be well below the queue's 14-day retention,
	// so that a hung workflow can never outlive its message. Default: 24 hours.
	WorkflowTimeout time.Duration

	// HaltedRecheck is how often a halted tenant's head file is checked for a redrive or a skip
	// marker. Default: 5 minutes.
	HaltedRecheck time.Duration

	// LogRetention of every log group the construct creates. Default: one month.
	LogRetention awslogs.RetentionDays

	// Alarms sets the alarm thresholds. Zero fields take their defaults.
	Alarms AlarmThresholds

	// AlarmTopic receives every alarm's state changes. Default: alarms without actions.
	AlarmTopic awssns.ITopic

	// EventBus receives the File Processed event of each end of a file execution (README, "The
	// File Processed event"); the controller may put events there only with the source
	// tenantpipeline. Default: the account's default event bus.
	EventBus awsevents.IEventBus

	// Operators may steer the tenant besides the pipeline itself: the tenant's queue and its
	// rule's dead-letter queue deny sqs:SendMessage to every principal but the tenant's rule
	// (aws:SourceArn), the controller's role and the operators, so only they can put events or
	// control messages (pipectl redrive, replay) into the tenant's queue. The construct gives
	// the same set to BucketWriteDeny in the policy of an ingest bucket created in the app; for
	// an imported bucket, its owner adds BucketWriteDenyJSON's statement (docs/operations.md,
	// "Who may steer a tenant"). Operators are named by ARN (Operators.PrincipalARNs), never by a
	// tag, which a session can claim.
	// Default: no operators; only the pipeline's own roles steer.
	Operators Operators

	// RolePath is the IAM path of the functions' roles (controller, split, the bundled register,
	// a pool's router, intake and tenant roles). Each gets a name of its own, and the bucket's
	// Denies (BucketWriteDeny, BucketReadDeny, BucketUploadDenies) exempt each one's exact ARN, so
	// a role someone else creates under the path is refused like any other. "/" or
	// "/<segments>/", printable ASCII, at most 512 characters. Changing it replaces the roles.
	// Default: /tenantpipeline/.
	RolePath string

	// ExemptRolePath makes the bucket's Denies exempt every role under RolePath, by the path's
	// pattern, instead of naming each role: for an app whose roles do not fit a bucket policy's
	// 20 KB (synth warns, naming the count; 3 roles a silo tenant, 7 a pool). Whoever may
	// then create a role under the path (iam:CreateRole) may write the pipeline's control records
	// and read every tenant's files: keep that to the deployment, with an SCP (docs/operations.md).
	// Every pipeline and pool of the app under one RolePath must set it alike.
	// Default: false, each role by its ARN.
	ExemptRolePath bool

	// EncryptionKey is the customer-managed KMS key of what the construct stores: its queues
	// (SSE-KMS, data keys reused for DataKeyReusePeriod), log groups, state machines' execution
	// data and tables, and, when the ingest bucket is encrypted with no key of its own
	// (Bucket.EncryptionKey), the bucket's objects. Each role gets only the KMS calls its service
	// makes, under the service's encryption context (encryption.go). A key of the construct's own
	// stack gets the statements EventBridge and CloudWatch Logs need (KeyPolicy); for any other,
	// synth warns with them, unless KeyPolicyCovered.
	// Default: nil, the AWS-owned and AWS-managed keys (SSE-SQS, SSE-S3, DynamoDB's).
	EncryptionKey awskms.IKey
	// KeyPolicyCovered says EncryptionKey's policy already has the statements KeyPolicy gives for
	// this construct's rules and log groups (an app that adds AppKeyPolicy's itself): the
	// construct neither changes the key policy nor warns. Default: false.
	KeyPolicyCovered bool
}

// DefaultRegisterMemoryMB is the bundled Register function's memory, Lambda's smallest size.
// Measured (TestRegisterPeakMemory in internal/register, a fresh process registering whole
// invocations of 1,000-record chunks): peak RSS 24 MiB in record mode with 1 KB records, 52 MiB in
// batch mode at the default 5 MiB maxBatchBytes. Register holds one chunk at a time, so the peak
// does not grow with the chunks an invocation registers.
const DefaultRegisterMemoryMB = 128

// RegisterMemoryFor is the default Register memory for a tenant: DefaultRegisterMemoryMB, or for a
// batch tenant the measured 24 MiB base plus about 6 bytes per byte of maxBatchBytes (the chunk
// read, its records, their JSON and the request body), with a third of headroom, in steps of
// 64 MB: 192 MB at 16 MiB, 576 MB at the 64 MiB maximum.
func RegisterMemoryFor(t Tenant) int {
	if t.RegisterMode != pipeline.RegisterModeBatch || t.DynamoDB != nil {
		return DefaultRegisterMemoryMB
	}
	batch := t.MaxBatchBytes
	if batch == 0 {
		batch = pipeline.DefaultMaxBatchBytes
	}
	need := (24 + 6*batch>>20) * 4 / 3
	return max(DefaultRegisterMemoryMB, (need+63)/64*64)
}

// Defaults.
const (
	DefaultVisibilityTimeout   = 30 * time.Second
	DefaultControllerTimeout   = 20 * time.Second
	DefaultSplitTimeout        = 5 * time.Minute
	DefaultRegisterTimeout     = 2 * time.Minute
	DefaultRegisterHTTPTimeout = 10 * time.Second
	DefaultMemoryMB            = 256
	DefaultWorkflowTimeout     = 24 * time.Hour
	DefaultHaltedRecheck       = 5 * time.Minute
	DefaultSafetyNetInterval   = 5 * time.Minute
	// safetyNetVisibilityMargin is added to the safety net for the default visibility timeout with
	// wake events: the controller sets each wait to at most the safety net, so the queue's own
	// timeout only ends a delivery whose visibility change never happened.
	safetyNetVisibilityMargin = 30 * time.Second

	// QueueRetention is the maximum SQS retention: no DLQ, so a waiting file must outlast any outage.
	QueueRetention = 14 * 24 * time.Hour
	// maxVisibility is SQS's maximum visibility timeout.
	// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-visibility-timeout.html
	maxVisibility = 12 * time.Hour
	// maxLambdaTimeout is Lambda's maximum function timeout.
	maxLambdaTimeout = 15 * time.Minute
	// maxRegisterHTTPTimeout is the largest HTTP_TIMEOUT_SECONDS the register function accepts.
	maxRegisterHTTPTimeout = 5 * time.Minute

	// registerDeadlineMargin duplicates internal/register.DefaultDeadlineMargin: Register starts a
	// POST only while one HTTP timeout plus this margin remains before its deadline.
	registerDeadlineMargin = 2 * time.Second
	// ControllerPollBudget is how long the controller polls a running execution in-process before
	// it hands the message back (POLL_BUDGET_SECONDS, which the construct sets).
	ControllerPollBudget = 10 * time.Second
	// controllerDeadlineMargin duplicates internal/controller's deadlineMargin: in-process polling
	// stops this long before the invocation's deadline.
	controllerDeadlineMargin = 5 * time.Second
)

// withDefaults returns p with every zero field at its documented default.
func (p Props) withDefaults() Props {
	p.Tenant = p.Tenant.WithDefaults()
	p.SharedProps = p.SharedProps.withDefaults(RegisterMemoryFor(p.Tenant), p.RegisterFunction != nil)
	return p
}

// withDefaults returns s with every zero field at its documented default: registerMemoryMB is the
// tier's Register memory, and ownRegister says the caller brings its own register function
// (Props.RegisterFunction), which takes the per-chunk design.
func (s SharedProps) withDefaults(registerMemoryMB int, ownRegister bool) SharedProps {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defInt := func(d *int, v int) {
		if *d == 0 {
			*d = v
		}
	}
	def(&s.SafetyNetInterval, DefaultSafetyNetInterval)
	if s.WakeEvents() {
		def(&s.VisibilityTimeout, s.SafetyNetInterval+safetyNetVisibilityMargin)
	}
	def(&s.VisibilityTimeout, DefaultVisibilityTimeout)
	def(&s.ControllerTimeout, DefaultControllerTimeout)
	def(&s.SplitTimeout, DefaultSplitTimeout)
	defInt(&s.SplitMemoryMB, DefaultMemoryMB)
	def(&s.RegisterTimeout, DefaultRegisterTimeout)
	def(&s.RegisterHTTPTimeout, DefaultRegisterHTTPTimeout)
	defInt(&s.RegisterMemoryMB, registerMemoryMB)
	if s.RegisterDesign == "" {
		s.RegisterDesign = workflows.DesignPerInvocation
		if ownRegister {
			s.RegisterDesign = workflows.DesignPerChunk
		}
	}
	if s.RequestShares == "" {
		s.RequestShares = pipeline.RequestSharesShared
	}
	defInt(&s.DefaultSmallFileBytes, pipeline.DefaultSmallFileBytes)
	def(&s.WorkflowTimeout, DefaultWorkflowTimeout)
	def(&s.HaltedRecheck, DefaultHaltedRecheck)
	if s.LogRetention == "" {
		s.LogRetention = awslogs.RetentionDays_ONE_MONTH
	}
	s.Alarms = s.Alarms.withDefaults(s.WorkflowTimeout)
	if s.RolePath == "" {
		s.RolePath = DefaultRolePath
	}
	return s
}

// smallFiles is the small-file bound the file state machine routes by, 0 when the path is off:
// turned off (-1), or a register function of the caller's own (ownRegister) or the per-chunk
// design, which have no SmallFile task.
func (s SharedProps) smallFiles(ownRegister bool) int {
	if ownRegister || s.RegisterDesign != workflows.DesignPerInvocation || s.DefaultSmallFileBytes <= 0 {
		return 0
	}
	return s.DefaultSmallFileBytes
}

// WakeEvents reports whether the controller wakes on the file execution's status change event.
func (s SharedProps) WakeEvents() bool { return !s.DisableWakeEvents }

// PollBudget is the controller's in-process polling (POLL_BUDGET_SECONDS): none with wake events,
// whose wait is the safety net, ControllerPollBudget without.
func (s SharedProps) PollBudget() time.Duration {
	if s.WakeEvents() {
		return 0
	}
	return ControllerPollBudget
}

// validate reports every problem at once, each naming the field, the value and the fix. It runs
// on defaulted props, before anything is created.
func (p Props) validate() error {
	errs := tenantErrors(p.Tenant, "Tenant")
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("tenant %q: "+format, append([]any{p.Tenant.ID}, args...)...))
	}

	if p.Bucket == nil {
		bad("Bucket is required: pass the ingest bucket (EventBridge notifications on)")
	}
	if p.RegisterFunction == nil && p.Tenant.RegisterURL == "" && p.Tenant.DynamoDB == nil {
		bad("registerUrl is required unless Props.RegisterFunction replaces the bundled HTTP adapter, or the tenant has a dynamodb sink")
	}
	p.validateSink(bad)
	for i, u := range p.Uploaders {
		if u == nil {
			bad("Uploaders[%d] is nil: name a principal (awsiam.NewArnPrincipal(<role ARN>)), or remove it", i)
		}
	}
	if p.ControllerReservedConcurrency > 1000 {
		bad("controller reserved concurrency %d is invalid: use 1 to 1000, or 0 for none", p.ControllerReservedConcurrency)
	}
	// Props' own fields: a message names them as the caller wrote them.
	p.SharedProps.validate(func(field string) string { return field }, p.RegisterFunction != nil, bad)
	return errors.Join(errs...)
}

// validate checks the shared props, through bad, naming each field by field(name): the caller's
// own name for it (VisibilityTimeout in Props, Shared.VisibilityTimeout in PoolProps).
// ownRegister says Register is the caller's own function, which RegisterHTTPTimeout does not bound.
func (s SharedProps) validate(field func(string) string, ownRegister bool, bad func(format string, args ...any)) {
	if s.VisibilityTimeout < time.Second || s.VisibilityTimeout > maxVisibility || s.VisibilityTimeout%time.Second != 0 {
		bad("visibility timeout %v is invalid: use whole seconds from 1s to 12h", s.VisibilityTimeout)
	}
	// https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html: the mapping is
	// rejected when the queue's visibility timeout is below the function timeout.
	if s.ControllerTimeout >= s.VisibilityTimeout {
		bad("controller timeout %v must be shorter than the queue visibility timeout %v, or the event source mapping is rejected: "+
			"raise %s above %v, or lower %s below %v", s.ControllerTimeout, s.VisibilityTimeout,
			field("VisibilityTimeout"), s.ControllerTimeout, field("ControllerTimeout"), s.VisibilityTimeout)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"controller", s.ControllerTimeout}, {"split", s.SplitTimeout}, {"register", s.RegisterTimeout}} {
		if f.d < time.Second || f.d > maxLambdaTimeout || f.d%time.Second != 0 {
			bad("%s timeout %v is invalid: use whole seconds from 1s to 15m", f.name, f.d)
		}
	}
	for _, f := range []struct {
		name string
		mb   int
	}{{"split", s.SplitMemoryMB}, {"register", s.RegisterMemoryMB}} {
		if f.mb < 128 || f.mb > 10240 {
			bad("%s memory %d MB is invalid: use 128 to 10240 MB", f.name, f.mb)
		}
	}
	if !slices.Contains(workflows.Designs, s.RegisterDesign) {
		bad("register design %q is invalid: use %q or %q", s.RegisterDesign, workflows.DesignPerInvocation, workflows.DesignPerChunk)
	}
	if !slices.Contains(pipeline.RequestShares, s.RequestShares) {
		bad("request shares %q is invalid: set %s to %q or %q", s.RequestShares, field("RequestShares"), pipeline.RequestSharesShared, pipeline.RequestSharesStatic)
	}
	if s.DefaultSmallFileBytes != -1 && (s.DefaultSmallFileBytes < 1 || s.DefaultSmallFileBytes > pipeline.MaxSmallFileBytes) {
		bad("small-file bound %d bytes is invalid: set %s to 1 up to %d (4 MiB), or -1 to turn the small-file path off", s.DefaultSmallFileBytes, field("DefaultSmallFileBytes"), pipeline.MaxSmallFileBytes)
	}
	if s.WorkflowTimeout < time.Minute || s.WorkflowTimeout >= QueueRetention/2 {
		bad("workflow timeout %v is invalid: use 1m up to 7 days, well below the queue's 14-day retention, so a hung workflow cannot outlive its message", s.WorkflowTimeout)
	}
	if s.HaltedRecheck < time.Second || s.HaltedRecheck > maxVisibility {
		bad("halted recheck %v is invalid: use 1s to 12h", s.HaltedRecheck)
	}
	if s.WakeEvents() {
		s.validateSafetyNet(field, bad)
	}
	s.validateAcrossFields(field, ownRegister, bad)
	s.Alarms.validate(s.HaltedRecheck, bad)
	s.Operators.validate(bad)
	if !validRolePath(s.RolePath) {
		bad("role path %q is not an IAM path: set %s to \"/\" or \"/<segments>/\" of printable ASCII, at most 512 characters (default %s)", s.RolePath, field("RolePath"), DefaultRolePath)
	}
}

// validateAcrossFields checks the limits one field sets on another. Each message names both
// fields, the rule and a value that satisfies it.
func (s SharedProps) validateAcrossFields(field func(string) string, ownRegister bool, bad func(format string, args ...any)) {
	if !ownRegister {
		h := s.RegisterHTTPTimeout
		if h < time.Second || h > maxRegisterHTTPTimeout || h%time.Second != 0 {
			bad("register HTTP timeout %v is invalid: use whole seconds from 1s to 5m", h)
		} else if floor := h + registerDeadlineMargin; s.RegisterTimeout <= floor {
			// Register starts a POST only while HTTP timeout + margin remains before its deadline
			// (internal/register), so a shorter function timeout registers nothing, ever.
			bad("register timeout %v must be longer than the register HTTP timeout %v plus the register deadline margin %v, "+
				"or no record is ever sent: raise %s above %v (e.g. %v) or lower %s below %v",
				s.RegisterTimeout, h, registerDeadlineMargin, field("RegisterTimeout"), floor, floor+time.Second, field("RegisterHTTPTimeout"), s.RegisterTimeout-registerDeadlineMargin)
		}
	}
	if need := s.PollBudget() + controllerDeadlineMargin; s.PollBudget() > 0 && s.ControllerTimeout < need {
		bad("controller timeout %v cannot hold the controller's in-process poll budget %v plus its deadline margin %v: "+
			"raise %s to at least %v (and %s above it)",
			s.ControllerTimeout, ControllerPollBudget, controllerDeadlineMargin, field("ControllerTimeout"), need, field("VisibilityTimeout"))
	}
	// SQS counts the 12-hour visibility cap from the message's receipt; the controller sets the next
	// wait up to ControllerTimeout after it, and a request past the cap is rejected.
	// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html
	for _, f := range []struct {
		name, field string
		wait        time.Duration
	}{{"halted recheck", field("HaltedRecheck"), s.HaltedRecheck}, {"visibility timeout", field("VisibilityTimeout"), s.VisibilityTimeout}} {
		if f.wait <= maxVisibility && f.wait+s.ControllerTimeout > maxVisibility {
			bad("%s %v plus the controller timeout %v exceeds SQS's 12h visibility cap, counted from the message's receipt, "+
				"so ChangeMessageVisibility would be rejected: use a %s of at most %v, or a shorter %s",
				f.name, f.wait, s.ControllerTimeout, f.field, maxVisibility-s.ControllerTimeout, field("ControllerTimeout"))
		}
	}
}

// validateSafetyNet checks the safety net against the queue: the controller waits at most the
// safety net (MAX_WAIT_SECONDS is the visibility timeout, SAFETY_NET_SECONDS may not exceed it),
// so a visibility timeout below it would make the controller refuse to start.
func (s SharedProps) validateSafetyNet(field func(string) string, bad func(format string, args ...any)) {
	net := s.SafetyNetInterval
	if net < time.Second || net > maxVisibility || net%time.Second != 0 {
		bad("safety net interval %v is invalid: use whole seconds from 1s to 12h (default 5m)", net)
		return
	}
	if s.VisibilityTimeout < net {
		bad("visibility timeout %v is shorter than the safety net interval %v: the controller waits up to the safety net for a running file, "+
			"so raise %s to at least %v (leave it unset for %v), or shorten %s to at most %v",
			s.VisibilityTimeout, net, field("VisibilityTimeout"), net, net+safetyNetVisibilityMargin, field("SafetyNetInterval"), s.VisibilityTimeout)
	}
}

// validateSink checks the props that choose the tenant's sink. Tenant.Validate checks the tenant's
// own sink fields (registerUrl with dynamodb, the key fields).
func (p Props) validateSink(bad func(format string, args ...any)) {
	d := p.Tenant.DynamoDB
	if d == nil {
		if p.DynamoDBTable != nil {
			bad("Props.DynamoDBTable is set, but the tenant has no dynamodb sink: add dynamodb {key: [...]} to the tenant, or remove DynamoDBTable")
		}
		return
	}
	if p.RegisterFunction != nil {
		bad("Props.RegisterFunction is set with a dynamodb sink: the bundled register function writes the table; remove RegisterFunction or the tenant's dynamodb")
	}
	if p.DynamoDBTable != nil && d.Table != "" {
		bad("Props.DynamoDBTable is set and dynamodb.table names %q: give the table once, by one or the other", d.Table)
	}
}
