package tenantpipeline

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/internal/tenants"
	"github.com/example/tenantpipeline/spec"
)

// TenantPool is the pooled tier: many tenants share one pool's resources, and each tenant is a
// row of configuration. Its resources do not grow with its tenants:
//   - IntakeGroups EventBridge rules on the pool's key prefix, whose target is the Intake FIFO
//     queue, each in its own message group, chosen by the character after the pool's prefix
//     (intake.go), so each tenant's events keep their order and the groups are routed at once;
//     the Router function reads each group in order, maps each object to its tenant by the
//     tenant's prefix and sends it to Queue with the tenant id as message group, so SQS keeps each
//     tenant's files in order and one tenant's file in flight never blocks another's;
//   - one FIFO queue, one controller with one event source mapping whose
//     ScalingConfig.MaximumConcurrency caps how many tenants run at once;
//   - one Split and one Register function, one file and one segment state machine;
//   - the status-change rule, the rule's dead-letter queue, pool-wide alarms, a dashboard.
//
// Per-tenant settings travel in the controller's code asset (SettingsFile), since a Lambda
// environment holds only 4 KB. Every guarantee of TenantPipeline holds per tenant: files one at a
// time in arrival order, exactly-once by the same idempotency keys, halt/continue, skip, quarantine.
//
// A pool's function roles hold only what is pool-wide; one tenant's data is reachable only with a
// session of TenantRole tagged with that tenant (tenantrole.go, README "Isolation inside a pool").
type TenantPool struct {
	constructs.Construct
	// Pipeline is what both tiers build alike: the pool's FIFO queue, one message group per
	// tenant; one controller whose event source's MaximumConcurrency caps the tenants in flight;
	// one Split, one Register (the bundled one) and the two state machines.
	Pipeline

	// Props are the props after defaults were applied.
	Props PoolProps

	// Rule is IntakeRules[0]: with IntakeGroups 1, the one rule on the whole prefix.
	Rule awsevents.Rule
	// IntakeRules send the "Object Created" events under the pool's prefix to Intake, rule g in
	// message group IntakeMessageGroupOf(g).
	IntakeRules []awsevents.Rule
	// RuleDeadLetterQueue keeps the events that could not be routed: the events the rule could not
	// deliver to Intake, and objects of no tenant.
	RuleDeadLetterQueue awssqs.Queue
	// Intake is the FIFO queue the rules send to, IntakeGroups message groups, so each tenant's
	// events wait in the order EventBridge delivered them.
	Intake awssqs.Queue
	// IntakeAPI, with the per-tenant intake (Intake "tenant"), is what the rule posts each event
	// to: its integration sends the event to Intake in its tenant's message group (intakeapi.go).
	// IntakeAPIRole is the integration's role, IntakeAPIEventRole the rule's. Nil when sharded.
	IntakeAPI          awsapigateway.RestApi
	IntakeAPIRole      awsiam.Role
	IntakeAPIEventRole awsiam.Role
	// Router reads each group of Intake in order and sends its events to Queue in their tenants'
	// message groups, up to 10 in one SendMessageBatch call.
	Router awslambda.Function
	// RouterSource is the router's event source on Intake.
	RouterSource awslambdaeventsources.SqsEventSource
	// TenantRules are the Contributor Insights rules over the controller's log group that the
	// per-tenant alarms read, keyed by tenant (poolinsights.go).
	TenantRules PoolTenantRules
	Alarms      PoolAlarms
	// Dashboard shows the pool's alarms, totals and top tenants; each alarm's description links to it.
	Dashboard awscloudwatch.Dashboard
	// Output describes the pool for pipectl (pipeline.PoolOutput).
	Output awscdk.CfnOutput
	// SettingsFile is the tenants file in the controller's and the router's code
	// (pool-tenants.json), as pipeline.PoolSettings.Encode writes it: an index of the tenants'
	// ids and prefixes, and their rows. poolsettings.Parse reads it.
	SettingsFile []byte
	// AdmissionTable is the pool's admission table: the leases of its running files in its pool
	// gate (at most PoolProps.MaxRunningFiles) and its waiting tenants. Same layout as
	// CoreSystem.Table.
	AdmissionTable awsdynamodb.Table
	// CoreSystems are the distinct core systems the pool's tenants name, by name.
	CoreSystems []*CoreSystem
	// TenantRole is the controller's tenant-scoped role: its grants on one tenant's data (its
	// control/ and quarantine/ keys, its results' summaries and event markers) are conditioned on
	// the session tag tenant=<id> (${aws:PrincipalTag/tenant}). The controller assumes it for one
	// tenant at a time (tenantrole.go).
	TenantRole awsiam.Role
	// SplitTenantRole is Split's tenant-scoped role: one tenant's files, work/ and results/ keys,
	// and no control key, secret or table.
	SplitTenantRole awsiam.Role
	// RegisterTenantRole is Register's tenant-scoped role: SplitTenantRole's data, and the tenant's
	// secret and table, which no other function's session reaches.
	RegisterTenantRole awsiam.Role
	// UploaderRole is the role a platform that authenticates its customers assumes, with the
	// session tag tenant=<id>, to upload that tenant's files under "<Prefix><id>/" and nowhere
	// else (upload.go). Nil without PoolProps.Uploaders.
	UploaderRole awsiam.Role
	// ReconcileRule invokes the controller once a minute on the admission reconciler's schedule:
	// it reconciles the pool gate and the gates of CoreSystems (reconcile.go).
	ReconcileRule awsevents.Rule

	// coreSystems are the app's core systems the tenants name, one per tenant (nil for none).
	coreSystems []*CoreSystem
	app         *appCheck
	bucketOnce  sync.Once
	bucket      []string
}

// PoolProps configures one pool.
type PoolProps struct {
	// Name names the pool: 1-32 lower-case letters, digits and hyphens. Required.
	Name string
	// Prefix is the key prefix every tenant of the pool lies under; tenant <id>'s prefix is always
	// "<Prefix><id>/". Default: "pools/<name>/".
	Prefix string
	// Tenants are the pool's tenants. A tenant's Prefix is "<Prefix><id>/" (left empty, it is set
	// so); any other is refused. At least one.
	Tenants []Tenant
	// Bucket is the ingest bucket, EventBridge notifications on. Required.
	Bucket awss3.IBucket
	// MaximumConcurrency caps the controller's event source mapping: at most this many tenants of
	// the pool have a controller invocation at once, each handing its head file on or checking it.
	// It does not bound the files running at once (MaxRunningFiles does): a running file holds no
	// controller invocation while it waits. 2 to 1,000. Default: 10.
	// https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html#sqs-max-concurrency
	MaximumConcurrency int
	// BacklogAlarmMessages alarms on the queue's visible messages; keep it well below the 120,000
	// messages SQS scans in a FIFO queue for available message groups, past which one tenant's
	// backlog hides every other tenant's files. Default: 10,000.
	BacklogAlarmMessages int
	// SecretPrefix is the name prefix of the pooled tenants' Secrets Manager secrets
	// (Tenant.RegisterAuthSecretARN): tenant <id>'s secret is named "<SecretPrefix><id>", which only
	// a session of TenantRole tagged with <id> may read. At least 3 characters, ending in "/" or
	// "-". Required when a tenant has a secret.
	SecretPrefix string
	// IntakeGroups is how many message groups the intake has, so how many router invocations run
	// at once; a tenant's files always go to the group of the character after Prefix in its
	// prefix (intake.go). 1 to 64. Default: 16 (tenants.DefaultPoolIntakeGroups): each group is
	// one rule on the default event bus (300 rules by default), and 16 groups with 10 messages a
	// batch route a burst of 100,000 files in minutes where one group takes hours
	// (docs/local-run.md, "Pool intake"). Changing it moves tenants to other groups: drain the
	// Intake queue before deploying the change (docs/operations.md, "Changing a pool's
	// intakeGroups"; an app built from the tenants file refuses it until -c regroupIntake=<pool>).
	IntakeGroups int
	// Intake is how the pool's events reach its intake queue (intakeapi.go): tenants.IntakeTenant
	// ("tenant", the default), each tenant its own message group, so that no tenant's burst holds
	// another's events; or tenants.IntakeSharded ("sharded"), IntakeGroups groups by the character
	// after Prefix. A pool that sets IntakeGroups and no Intake is sharded.
	Intake string
	// TablePrefix is the name prefix of the DynamoDB tables pooled tenants name
	// (Tenant.DynamoDB.Table): tenant <id>'s table is "<TablePrefix><id>", which only a session of
	// TenantRole tagged with <id> may write. At least 3 characters, ending in "-". Required when a
	// tenant has a DynamoDB sink; the pool creates no table.
	TablePrefix string
	// MaxRunningFiles bounds the pool's files running at once: a file starts only while fewer run
	// (admission's pool gate, besides each tenant's core system). Each running file holds at most
	// one Split or Register invocation at a time, out of the account's Lambda concurrency, which
	// every function shares (1,000 by default). 1 to 1,000. Default: 200
	// (tenants.DefaultPoolMaxRunningFiles), so that a pool at its defaults needs at most
	// 200 + 10 (the controller's mapping, MaximumConcurrency) + 16 (the router, one invocation per
	// intake message group, IntakeGroups) = 226 concurrent executions, besides the short wake-up
	// invocations of the controller the status rule makes as files end, which the mapping's cap
	// does not bound (README, "pool fields").
	MaxRunningFiles int
	// MaxQueuedFilesPerTenant bounds one tenant's messages in the pool's queue: the router and
	// the controller keep a tenant's later files parked in order under control/<tenant>/parked/
	// and feed them back as its queue drains, so that the queue's backlog stays inside the 120,000
	// messages SQS scans for deliverable groups (README, "A bounded backlog per tenant"). 1 to
	// 1,000. Default: 10 (schema.DefaultMaxQueued).
	MaxQueuedFilesPerTenant int
	// Uploaders may assume UploaderRole with the session tag tenant=<id> to upload that tenant's
	// files: the platform's own service that authenticates customers and vends their upload
	// credentials or presigned URLs (README, "Customers upload"). Use role ARNs
	// (awsiam.NewArnPrincipal) or roles of the app, never a whole account.
	// Default: none, and no UploaderRole.
	Uploaders []awsiam.IPrincipal
	// Keys is where the tenants' objects lie under work/, results/, control/ and quarantine/:
	// KeysPerPool, "<area>/pool.<Name>/<id>/", so that the pool's tenant roles name the pool
	// literally and a session tagged with another pool's tenant's id reaches none of its keys; or
	// KeysPerTenant, "<area>/<id>/", the layout of pools deployed before KeysPerPool existed, whose
	// tenant roles reach any tenant of that id. Changing a deployed pool's layout leaves its
	// tenants' parked files, sequence state and pause markers behind (docs/operations.md,
	// "A pool's key layout"). Default: KeysPerTenant, so that a pool deployed before keeps its
	// keys; set KeysPerPool for a new pool. An app built from the tenants file gives a new pool
	// KeysPerPool.
	Keys string
	// Shared are the props every tenant of the pool shares, as a TenantPipeline's Props embed them:
	// timeouts, memory, wake events, log retention, alarm thresholds and topic, the event bus,
	// operators, role path. Default: SharedProps' defaults; RegisterMemoryMB is the largest any
	// tenant needs (RegisterMemoryFor).
	Shared SharedProps
}

// internal is the pool as the tenants file would give it, for the one set of pool rules.
func (p PoolProps) file() *tenants.File {
	f := &tenants.File{Pools: map[string]*tenants.PoolConfig{p.Name: {
		Prefix: checkablePrefix(p.Prefix), MaximumConcurrency: p.MaximumConcurrency, BacklogAlarmMessages: p.BacklogAlarmMessages,
		SecretPrefix: p.SecretPrefix, TablePrefix: p.TablePrefix, MaxRunningFiles: p.MaxRunningFiles, IntakeGroups: p.IntakeGroups,
		Intake: p.Intake, MaxQueuedFilesPerTenant: p.MaxQueuedFilesPerTenant, Keys: p.Keys,
	}}}
	// The tenants' core systems are the app's (coreSystemOf): the file's check of them is not
	// the pool's.
	for _, t := range p.Tenants {
		t = checkable(t)
		t.Tier, t.Pool, t.CoreSystem = tenants.TierPool, p.Name, ""
		f.Tenants = append(f.Tenants, t)
	}
	return f
}

func (p PoolProps) withDefaults() PoolProps {
	c := tenants.PoolConfig{Prefix: p.Prefix, MaximumConcurrency: p.MaximumConcurrency, BacklogAlarmMessages: p.BacklogAlarmMessages, IntakeGroups: p.IntakeGroups, Intake: p.Intake}.PoolDefaults(p.Name)
	p.Prefix, p.MaximumConcurrency, p.BacklogAlarmMessages, p.IntakeGroups, p.Intake = c.Prefix, c.MaximumConcurrency, c.BacklogAlarmMessages, c.IntakeGroups, c.Intake
	if p.MaxRunningFiles == 0 {
		p.MaxRunningFiles = tenants.DefaultPoolMaxRunningFiles
	}
	if p.MaxQueuedFilesPerTenant == 0 {
		p.MaxQueuedFilesPerTenant = schema.DefaultMaxQueued
	}
	if p.Keys == "" {
		p.Keys = KeysPerTenant
	}
	ts := make([]Tenant, len(p.Tenants))
	memory := DefaultRegisterMemoryMB
	for i, t := range p.Tenants {
		if t.Prefix == "" && t.ID != "" {
			t.Prefix = p.Prefix + t.ID + "/"
		}
		ts[i] = t.WithDefaults()
		memory = max(memory, RegisterMemoryFor(ts[i]))
	}
	p.Tenants = ts
	// A pool always runs the bundled Register.
	p.Shared = p.Shared.withDefaults(memory, false)
	return p
}

// validate reports every problem at once: the pool's own fields, each tenant's (the spec's rules
// and the pool's), and the shared props' (messages name the pool).
func (p PoolProps) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("pool %q: "+format, append([]any{p.Name}, args...)...))
	}
	if p.Bucket == nil {
		bad("Bucket is required: pass the ingest bucket (EventBridge notifications on)")
	}
	if len(p.Tenants) == 0 {
		bad("Tenants is empty: a pool needs at least one tenant")
	}
	for i, u := range p.Uploaders {
		if u == nil {
			bad("Uploaders[%d] is nil: name a principal (awsiam.NewArnPrincipal(<role ARN>)), or remove it", i)
		}
	}
	for i, t := range p.Tenants {
		if t.RegisterURL == "" && t.DynamoDB == nil {
			errs = append(errs, fmt.Errorf("%s (tenant %q): required unless the tenant has a DynamoDB sink", poolTenant(i)+".RegisterURL", t.ID))
		}
		for _, f := range []struct {
			path string
			set  bool
		}{{"stack", t.Stack != ""}, {"tier", t.Tier != ""}, {"pool", t.Pool != ""}, {"uploaders", len(t.Uploaders) > 0}} {
			if f.set {
				errs = append(errs, errors.New(spec.Problemf(f.path, "is set, but only the tenants file's app places tenants: leave it out "+
					"(a pool's tenants are in the pool; give uploaders as PoolProps.Uploaders)").Render(spec.GoNames(poolTenant(i)), t.ID)))
			}
		}
	}
	// The spec's rules of each tenant and the tenants file's pool rules, with messages naming the
	// props (PoolProps.Prefix, PoolProps.Tenants[3].Prefix). Without tenants the file's rule would
	// repeat "Tenants is empty".
	if len(p.Tenants) > 0 {
		errs = append(errs, p.file().ValidateNamed(propsNaming))
	}
	if p.IntakeGroups >= 1 && p.IntakeGroups <= tenants.MaxPoolIntakeGroups {
		bucket := ""
		if p.Bucket != nil && !*awscdk.Token_IsUnresolved(p.Bucket.BucketName()) {
			bucket = *p.Bucket.BucketName()
		}
		if n, g := intakePatternChars(p.Prefix, p.IntakeGroups, bucket); n > MaxEventPatternChars {
			bad("IntakeGroups %d: the event pattern of intake group %d would be %d characters, over EventBridge's %d: use more intake groups or a shorter Prefix",
				p.IntakeGroups, g, n, MaxEventPatternChars)
		}
	}
	// The shared props' messages name the pool and the prop as PoolProps holds it.
	p.Shared.validate(func(field string) string { return "Shared." + field }, false, func(format string, args ...any) {
		bad("Shared: "+format, args...)
	})
	return errors.Join(errs...)
}

// propsNaming names, in the tenants file's pool rules, what a construct user sets: PoolProps'
// fields, and its tenants' fields as PoolProps.Tenants[i].<Field>.
var propsNaming = tenants.Naming{
	Pool:     func(pool string) string { return fmt.Sprintf("pool %q", pool) },
	PoolKey:  poolProp,
	PoolPath: poolProp,
	Tenant:   func(i int) spec.Names { return spec.GoNames(poolTenant(i)) },
}

// poolTenant is the Go expression of the pool's tenant i.
func poolTenant(i int) string { return fmt.Sprintf("PoolProps.Tenants[%d]", i) }

// poolProp is the PoolProps field of a pool's JSON field: secretPrefix is PoolProps.SecretPrefix.
func poolProp(_, field string) string { return "PoolProps." + strings.ToUpper(field[:1]) + field[1:] }

// NewPool creates the pool under scope/id. Its props are checked first, as New checks a
// TenantPipeline's: with invalid props it stays an empty scope and synth fails with CDK's
// validation error, before anything is created or bundled.
func NewPool(scope constructs.Construct, id string, props *PoolProps) *TenantPool {
	if props == nil {
		props = &PoolProps{}
	}
	p := props.withDefaults()
	errs := []error{p.validate(), checkUploaders(scope, "PoolProps.Uploaders", p.Uploaders)}
	cs := make([]*CoreSystem, len(p.Tenants))
	for i, tn := range p.Tenants {
		c, err := coreSystemOf(scope, tn, poolTenant(i))
		cs[i], errs = c, append(errs, err)
	}
	errs = append(errs, wakeTagsFit("PoolProps.Tenants", cs))
	t := &TenantPool{Construct: constructs.NewConstruct(scope, jsii.String(id)), Props: p, coreSystems: cs}
	if refused(t.Construct, errors.Join(errs...)) {
		return t
	}
	t.build()
	exemptPath(t.Construct, p.Shared.RolePath, p.Shared.ExemptRolePath)
	addBucketDenies(t.Construct, fmt.Sprintf("pool %q", p.Name), p.Bucket, t.objects.keyOrNil(), p.Shared.RolePath, p.Shared.Operators)
	t.app = register(t.Construct, t)
	t.Node().AddValidation(&poolValidation{t})
	return t
}

// highThroughput is SQS's high throughput mode for FIFO queues, for the pool's two queues, each of
// which carries many message groups. Without it a FIFO queue takes 300 calls a second per API action
// (SendMessage, ReceiveMessage, DeleteMessage), 3,000 messages with batches of 10, for all its groups
// together; with it the quota is per message group (a group is stored in one partition, and each
// partition takes 300 calls a second per action) up to a per-region figure, 70,000 calls a second in
// us-east-1, us-west-2 and eu-west-1
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html,
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/partitions-and-data-distribution.html).
// Both settings are required: changing either turns the mode off
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/enable-high-throughput-fifo.html).
// SQS prices FIFO requests the same in either mode (https://aws.amazon.com/sqs/pricing/).
//
// Deduplication per message group is all the pipeline relies on: every message it sends with a
// given deduplication id goes to one group. The router and pipectl send each event, under its id,
// to its tenant's group (a key has one tenant), a control message under its own new request id to
// its tenant's group, and an intake rule's event, deduplicated by its body's hash, to the one group
// of the one rule whose key filter matches it (intake.go).
//
// A silo tenant's queue has one message group, the tenant's, so both modes give it the same 300
// calls a second (3,000 messages batched): it keeps the default mode.
var highThroughput = struct {
	limit awssqs.FifoThroughputLimit
	scope awssqs.DeduplicationScope
}{awssqs.FifoThroughputLimit_PER_MESSAGE_GROUP_ID, awssqs.DeduplicationScope_MESSAGE_GROUP}

type poolValidation struct{ t *TenantPool }

// Validate implements constructs.IValidation.
func (v *poolValidation) Validate() *[]*string { return answer(v.t, v.t.problems()) }

// problems lists every problem of the pool: its own props, its bucket, then what it shares with the app's
// other pipelines and pools (a prefix, a name, a tenant id).
func (t *TenantPool) problems() []string {
	out := append(t.bucketProblems(), keyedRuleNameProblems(t.Construct, t.Props.Shared.EncryptionKey != nil)...)
	return append(out, t.app.conflictsOf(*t.Node().Path())...)
}

func (t *TenantPool) build() {
	p := t.Props
	s := p.Shared
	// Validation has refused what Encode refuses (ids, prefixes), so this cannot fail.
	settings, err := poolsettings.Encode(t.settings())
	if err != nil {
		panic(fmt.Errorf("pool %s: settings file: %w", p.Name, err))
	}
	t.SettingsFile = settings
	// The controller's and the router's code carries the tenants file.
	code := lambdaCodeWith(pkgController, map[string][]byte{pipeline.PoolSettingsFile: settings})
	// The admission table also holds each tenant's backlog (internal/backlog): the router and the
	// controller both keep it.
	t.AdmissionTable = newAdmissionTable(t.Construct, "AdmissionTable", s.EncryptionKey)
	poolEnv := map[string]string{
		pipeline.EnvPool:                    p.Name,
		pipeline.EnvPoolSettings:            pipeline.PoolSettingsFile,
		pipeline.EnvPoolPrefix:              p.Prefix,
		pipeline.EnvBucket:                  *p.Bucket.BucketName(),
		pipeline.EnvMetricsNamespace:        pipeline.DefaultMetricsNamespace,
		pipeline.EnvPoolAdmissionTable:      *t.AdmissionTable.TableName(),
		pipeline.EnvMaxQueuedFilesPerTenant: strconv.Itoa(p.MaxQueuedFilesPerTenant),
	}
	if t.keysPool() != "" {
		poolEnv[pipeline.EnvKeysPool] = t.keysPool()
	}
	env := with(poolEnv, nil)
	t.addAdmissionEnv(env)

	// Split's, Register's and the controller's grants on tenant data are the tenant role's
	// (tenantrole.go).
	t.Pipeline = newPipeline(t.Construct, pipelineProps{
		Shared:     s,
		Bucket:     p.Bucket,
		ManyGroups: true,
		Describe: func(id, pkg string) string {
			return fmt.Sprintf("Pool %s: %s (%s)", p.Name, pkg, strings.ToLower(id))
		},
		// Split's and Register's metrics are then the pool's, the tenant a property of each line.
		MetricsPool:           p.Name,
		WorkflowLogGroupName:  VendedLogsPrefix + *awscdk.Stack_Of(t.Construct).StackName() + "/pool-" + p.Name,
		ControllerCode:        code,
		ControllerEnv:         env,
		DeployedFiles:         map[string][]byte{pipeline.PoolSettingsFile: settings},
		DeployedEnv:           t.deployedEnv(),
		MaximumConcurrency:    p.MaximumConcurrency,
		StatusRuleDescription: fmt.Sprintf("Ends of pool %s's file executions to its controller (wake-up)", p.Name),
	})

	t.addIntake(code, poolEnv)
	t.ReconcileRule = newReconcileRule(t.Construct, fmt.Sprintf("Admission reconciler of pool %s and its core systems", p.Name), t.Controller)
	for _, c := range t.CoreSystems {
		c.coveredByPool()
	}

	t.grantAdmission()
	t.newTenantRole()
	// Each tenant's bounded backlog: parked files and the counters (grantBacklog).
	t.grantBacklog()
	t.denyForeignSends()
	t.encrypt()
	t.newUploaderRole()
	t.TenantRules = t.newTenantRules(t.Controller.LogGroup())
	t.Alarms = t.newAlarms()
	t.dependOnRules()
	t.Dashboard = t.newDashboard()
	t.addOutput()
	t.suppressNagFindings()
}

// addIntake creates what routes the pool's events to its tenants: the intake queue, the router
// with its event source, the dead-letter queue and the intake rules. code is the router's code
// (the controller's, with the tenants file), poolEnv what it shares with the controller's
// environment.
func (t *TenantPool) addIntake(code awslambda.Code, poolEnv map[string]string) {
	t.RuleDeadLetterQueue = awssqs.NewQueue(t.Construct, jsii.String("RuleDeadLetterQueue"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: seconds(QueueRetention),
		RemovalPolicy:   awscdk.RemovalPolicy_RETAIN,
	})
	// The router. The rules send the pool's events to the intake, a FIFO queue with one message
	// group per rule, as a silo's rule sends to the tenant's queue (same retry policy, same
	// dead-letter queue), so each tenant's events wait in the order EventBridge delivered them;
	// the router reads each group in order and puts each event in its tenant's message group of
	// Queue. An asynchronous Lambda target would not keep that order: Lambda does not order
	// asynchronous invocations.
	// https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html
	t.Intake = awssqs.NewQueue(t.Construct, jsii.String("Intake"), &awssqs.QueueProps{
		Fifo:                      jsii.Bool(true),
		ContentBasedDeduplication: jsii.Bool(true), // EventBridge sends no deduplication id
		// One message group per intake rule: high throughput mode (highThroughput).
		FifoThroughputLimit: highThroughput.limit,
		DeduplicationScope:  highThroughput.scope,
		// Lambda's advice for a mapping: at least six times the function's timeout.
		// https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html
		VisibilityTimeout:      seconds(6 * routerTimeout),
		RetentionPeriod:        seconds(QueueRetention),
		ReceiveMessageWaitTime: awscdk.Duration_Seconds(jsii.Number(20)),
		Encryption:             awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:             jsii.Bool(true),
		RemovalPolicy:          awscdk.RemovalPolicy_RETAIN,
		// No dead-letter queue: an event the router cannot store stays, in order, until it can;
		// an event of no tenant is never a failure (it goes to RuleDeadLetterQueue).
	})
	t.enc.queue(t.RuleDeadLetterQueue, t.Intake)
	routerEnv := with(poolEnv, map[string]string{
		pipeline.EnvQueueURL:           *t.Queue.QueueUrl(),
		pipeline.EnvFunctionRole:       pipeline.FunctionRoleRouter,
		pipeline.EnvDeadLetterQueueURL: *t.RuleDeadLetterQueue.QueueUrl(),
	})
	var routerLogs awslogs.LogGroup
	t.Router, routerLogs = t.function("Router", pkgController, code, routerTimeout, 128, routerEnv)
	// The router's log group first, as when the router was built before the pipeline: the
	// ErrorLogs alarm's filters are numbered in this order (ErrorLogsFilter<i>).
	t.LogGroups = append([]awslogs.LogGroup{routerLogs}, t.LogGroups...)
	t.functionLogs = append([]awslogs.LogGroup{routerLogs}, t.functionLogs...)
	t.RouterSource = awslambdaeventsources.NewSqsEventSource(t.Intake, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(t.routerConcurrency()),
	})
	t.Router.AddEventSource(t.RouterSource)
	t.Queue.GrantSendMessages(t.Router)
	t.RuleDeadLetterQueue.GrantSendMessages(t.Router)
	// The queues' key, which their L2 grants do not carry (encryption.queue).
	t.enc.grantQueues(t.Router, false, t.Intake)
	t.enc.grantQueues(t.Router, true, t.Queue, t.RuleDeadLetterQueue)
	t.newIntakeRules()
}

// settings is the pool's tenants file.
func (t *TenantPool) settings() *pipeline.PoolSettings {
	p := t.Props
	s := &pipeline.PoolSettings{Version: pipeline.PoolSettingsVersion, Pool: p.Name, Prefix: p.Prefix, Tenants: make([]pipeline.PoolTenant, 0, len(p.Tenants))}
	for i, tn := range p.Tenants {
		s.Tenants = append(s.Tenants, pipeline.PoolTenant{
			Settings: settings(tn, t.coreSystems[i]), Prefix: tn.Prefix, OnFailure: tn.OnFailure, IdempotencyKey: tn.IdempotencyKey,
		})
	}
	return s
}

func (t *TenantPool) allowS3(fn awslambda.IFunction, actions []string, pattern string) {
	grantObjects(fn, t.Props.Bucket, actions, pattern)
}

func (t *TenantPool) allowList(fn awslambda.IFunction, prefix string) {
	grantList(fn, t.Props.Bucket, prefix)
}

// newIntakeRules creates one rule per intake group (intake.go), each with the silo rule's retry
// policy and dead-letter queue. Group 0's rule keeps the id "Rule", so a pool with one group keeps
// the rule it had; the others are IntakeRules/<g>.
func (t *TenantPool) newIntakeRules() {
	p := t.Props
	groups := p.IntakeGroups
	var api awsevents.IRuleTarget
	if t.perTenantIntake() {
		groups, api = 1, t.newIntakeAPI()
	}
	filters := intakeKeyFilters(p.Prefix, groups)
	var more constructs.Construct
	if len(filters) > 1 {
		more = constructs.NewConstruct(t.Construct, jsii.String("IntakeRules"))
	}
	for g, filter := range filters {
		scope, id := t.Construct, "Rule"
		description := fmt.Sprintf("Files of pool %s to its intake queue", p.Name)
		if len(filters) > 1 {
			description = fmt.Sprintf("Files of pool %s to intake group %d of %d (by the character after the pool's prefix)", p.Name, g, len(filters))
		}
		if g > 0 {
			scope, id = more, strconv.Itoa(g)
		}
		pattern := intakePattern(p.Bucket.BucketName(), filter)
		rule := awsevents.NewRule(scope, jsii.String(id), &awsevents.RuleProps{
			RuleName:    keyedRuleName(scope, id, p.Shared.EncryptionKey != nil),
			Description: jsii.String(description),
			EventPattern: &awsevents.EventPattern{
				Source:     jsii.Strings("aws.s3"),
				DetailType: jsii.Strings("Object Created"),
				Detail:     ptr(pattern["detail"].(map[string]any)),
			},
		})
		if api != nil {
			rule.AddTarget(api)
			t.narrowIntakeEventRole()
		} else {
			rule.AddTarget(awseventstargets.NewSqsQueue(t.Intake, &awseventstargets.SqsQueueProps{
				MessageGroupId:  jsii.String(IntakeMessageGroupOf(g)),
				DeadLetterQueue: t.RuleDeadLetterQueue,
				MaxEventAge:     seconds(RuleMaxEventAge),
				RetryAttempts:   jsii.Number(RuleRetryAttempts),
			}))
		}
		t.IntakeRules = append(t.IntakeRules, rule)
	}
	t.Rule = t.IntakeRules[0]
}

func (t *TenantPool) intakeRuleARNs() []string {
	var arns []string
	for _, r := range t.IntakeRules {
		arns = append(arns, *r.RuleArn())
	}
	return arns
}

// queueSenders are who may send to a queue: the roles, and the rules by aws:SourceArn.
type queueSenders struct {
	queue  awssqs.Queue
	source []string
	roles  []string
}

// denyForeignSends: only the router, the controller and the operators send to the pool's queue and
// the intake, besides the intake rules (the intake API's role with the per-tenant intake); only
// the intake rules, the router and the operators to the dead-letter queue.
func (t *TenantPool) denyForeignSends() {
	roles := []string{*t.Controller.Role().RoleArn(), *t.Router.Role().RoleArn()}
	intake := queueSenders{t.Intake, t.intakeRuleARNs(), roles}
	if t.perTenantIntake() {
		intake = queueSenders{t.Intake, nil, append([]string{*t.IntakeAPIRole.RoleArn()}, roles...)}
	}
	for _, q := range []queueSenders{{t.Queue, nil, roles}, intake, {t.RuleDeadLetterQueue, t.intakeRuleARNs(), roles[1:]}} {
		q.queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("OnlyTheRouterThePipelineAndOperatorsSend"),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewStarPrincipal()},
			Actions:    jsii.Strings("sqs:SendMessage"),
			Resources:  jsii.Strings(*q.queue.QueueArn()),
			Conditions: ptr(exemptConditions(q.roles, t.Props.Shared.Operators, q.source...)),
		}))
	}
}

func (t *TenantPool) addOutput() {
	p := t.Props
	o := pipeline.PoolOutput{
		Version:                pipeline.PoolOutputVersion,
		Pool:                   p.Name,
		Bucket:                 *p.Bucket.BucketName(),
		Prefix:                 p.Prefix,
		Tenants:                len(p.Tenants),
		QueueURL:               *t.Queue.QueueUrl(),
		QueueARN:               *t.Queue.QueueArn(),
		StateMachineARN:        *t.StateMachine.StateMachineArn(),
		SegmentStateMachineARN: *t.Workflow.Segment.StateMachineArn(),
		ControllerFunction:     *t.Controller.FunctionName(),
		RouterFunction:         *t.Router.FunctionName(),
		EventSourceMappingUUID: *t.EventSource.EventSourceMappingId(),
		DLQURL:                 *t.RuleDeadLetterQueue.QueueUrl(),
		Keys:                   p.Keys,
	}
	if t.UploaderRole != nil {
		o.UploaderRoleARN = *t.UploaderRole.RoleArn()
	}
	t.Output = awscdk.NewCfnOutput(t.Construct, jsii.String("Output"), &awscdk.CfnOutputProps{
		Description: jsii.String("Pool " + p.Name + " for pipectl (JSON, version 1)"),
		Value:       toJSON(t.Construct, o),
	})
	t.Output.OverrideLogicalId(jsii.String(pipeline.PoolOutputKey(p.Name)))
}

// Layouts of a pool's keys (PoolProps.Keys).
const (
	KeysPerPool   = pipeline.KeysPerPool
	KeysPerTenant = pipeline.KeysPerTenant
)

// keysPool is the pool its tenants' keys carry (pipeline.Owner): its name under KeysPerPool, else
// "".
func (t *TenantPool) keysPool() string {
	if t.Props.Keys == KeysPerPool {
		return t.Props.Name
	}
	return ""
}

// deployedEnv are Split's and Register's variables of the pool's deployed settings, and of the
// pool their keys carry.
func (t *TenantPool) deployedEnv() map[string]string {
	env := map[string]string{pipeline.EnvPoolSettings: pipeline.PoolSettingsFile}
	if t.keysPool() != "" {
		env[pipeline.EnvKeysPool] = t.keysPool()
	}
	return env
}

// with returns a copy of base with more set.
func with(base, more map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// routerTimeout bounds one router invocation: a batch of up to 10 messages, sent in at most 10
// SendMessageBatch calls.
const routerTimeout = 30 * time.Second

// grantBacklog lets the router and the controller keep each tenant's bounded backlog
// (internal/backlog): its parked files under control/<tenant>/parked/ and its items in the
// admission table. The router parks (PutObject) and unparks (GetObject, DeleteObject) files, and
// keeps only the backlog's items: dynamodb:LeadingKeys holds the partition key of every item a
// request touches, here "queue#<tenant>" and the index's shards "backlog#<nn>" (and "backlog", the
// index before it was sharded)
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html).
// The controller unparks files as its tenants' messages are deleted, sending them to the queue,
// and parks as the router does a sequenced tenant's held file it sends back to a full backlog
// (internal/controller, Pool's fileSender); its lease grant already covers the table
// (grantAdmission).
func (t *TenantPool) grantBacklog() {
	parked := pipeline.ControlDir(pipeline.PoolOwner(t.keysPool(), "*")) + "parked/*"
	t.allowS3(t.Router, []string{"s3:PutObject", "s3:GetObject", "s3:DeleteObject"}, parked)
	t.Router.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query"),
		Resources: jsii.Strings(*t.AdmissionTable.TableArn()),
		Conditions: &map[string]any{"ForAllValues:StringLike": map[string]any{
			"dynamodb:LeadingKeys": []string{schema.BacklogKey("*"), schema.IndexKeyPattern, schema.LegacyIndexKey},
		}},
	}))
	t.allowS3(t.Controller, []string{"s3:PutObject", "s3:GetObject", "s3:DeleteObject"}, parked)
	t.Queue.GrantSendMessages(t.Controller)
	t.enc.grantQueues(t.Controller, true, t.Queue)
}
