// Package stacks builds the app's stacks from the tenants file and CDK context: one stack with
// the ingest bucket (unless an existing bucket is named), and tenant stacks of at most
// TenantsPerStack tenants each, so that no stack nears CloudFormation's 500-resource limit.
//
// A tenant stays in the stack it was first given (assignment.go), so editing the tenants file
// never moves a tenant's queue to another stack.
package stacks

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/tenants"
	"github.com/example/tenantpipeline/spec"
	"github.com/example/tenantpipeline/workflows"
)

// Context keys the app reads (cdk.json, or `cdk synth -c key=value`).
const (
	CtxTenantsFile     = "tenantsFile"
	CtxBucketName      = "bucketName"
	CtxTenantsPerStack = "tenantsPerStack"
	CtxAlarmTopicArn   = "alarmTopicArn"
	CtxStackPrefix     = "stackPrefix"
	CtxRegisterURL     = "registerUrl"
	// CtxStrictAssignment "true" makes synth fail instead of creating or changing the assignment
	// file; "false" lets it write the file even under CI=true. Default: strict when CI=true.
	CtxStrictAssignment = "strictAssignment"
	// CtxOperatorTag is refused: operators are named by ARN (CtxOperatorArns), since a session
	// can claim any tag.
	CtxOperatorTag    = "operatorTag"
	CtxOperatorArns   = "operatorArns"
	CtxRegisterDesign = "registerDesign"
	// CtxRequestShares is how every bundled Register divides a core system's requests in flight
	// among its running files (tenantpipeline.SharedProps RequestShares): "shared" (the default)
	// or "static".
	CtxRequestShares = "requestShares"
	// CtxSmallFileBytes is every tenant's small-file bound (tenantpipeline.SharedProps
	// DefaultSmallFileBytes): bytes from 1 to 4 MiB, or -1 for none. Default: 1 MiB.
	CtxSmallFileBytes = "smallFileBytes"
	// CtxDefaultTier is the tier of tenants that set none: "silo" (the default) or "pool".
	CtxDefaultTier = "defaultTier"
	// CtxMoveTenants confirms, comma-separated, the tenants that move between tiers or pools, or
	// whose pooled prefix changes; "pool:<name>" confirms a change of the pool's prefix.
	CtxMoveTenants = "moveTenants"
	// CtxRemoveTenants confirms, comma-separated, the pooled tenants removed from the tenants file.
	CtxRemoveTenants = "removeTenants"
	// CtxRegroupIntake confirms, comma-separated, the pools whose intakeGroups changes.
	CtxRegroupIntake = "regroupIntake"
	// CtxResultsExpirationDays is how many days the ingest bucket keeps each file's results
	// (results/). Default: pipeline.DefaultResultsExpirationDays.
	CtxResultsExpirationDays = "resultsExpirationDays"
	// CtxExemptRolePath "true" makes the bucket's Denies exempt every role under the app's role
	// path instead of each role by its ARN (tenantpipeline.SharedProps.ExemptRolePath).
	// Default: false.
	CtxExemptRolePath = "exemptRolePath"
)

// Options are the app-wide settings.
type Options struct {
	// TenantsFile is the tenants configuration. Default: tenants.json.
	TenantsFile string
	// BucketName names an existing ingest bucket, which must have EventBridge notifications on.
	// Default: the app creates the bucket in its own stack.
	BucketName string
	// TenantsPerStack is how many tenants a new tenant's stack may hold: a new tenant goes to the
	// lowest-numbered stack with room (assignment.go); changing it moves nobody. A tenant is at most
	// 45 resources (README), so the default keeps a stack at 451 of CloudFormation's 500.
	// Default: 10.
	TenantsPerStack int
	// AlarmTopicArn receives every alarm. Default: alarms without actions.
	AlarmTopicArn string
	// StackPrefix starts every stack name. Default: TenantPipeline.
	StackPrefix string
	// RegisterURL is the core system's endpoint for every tenant that sets no registerUrl.
	// Default: each tenant must set its own.
	RegisterURL string
	// RegisterDesign is how every tenant's segment drives Register (tenantpipeline.Props
	// RegisterDesign): workflows.DesignPerInvocation, or workflows.DesignPerChunk, the design
	// before per-invocation cursors, kept so that both can be synthesized side by side.
	// Default: per-invocation.
	RegisterDesign string
	// RequestShares is how every bundled Register divides a core system's requests in flight
	// (tenantpipeline.SharedProps RequestShares): pipeline.RequestSharesShared or
	// pipeline.RequestSharesStatic, the even split kept for comparison. Default: shared.
	RequestShares string
	// DefaultSmallFileBytes is the small-file bound of every tenant that sets none of its own
	// (tenantpipeline.SharedProps.DefaultSmallFileBytes); 0: its default.
	DefaultSmallFileBytes int
	// AssignmentFile keeps each tenant's stack across synths; synth creates and updates it.
	// Default: the tenants file's name with ".json" replaced by ".stacks.json".
	AssignmentFile string
	// StrictAssignment makes Build fail, naming the file to commit, where it would create or
	// change the assignment file. Default: false (OptionsFromContext sets it under CI=true).
	StrictAssignment bool
	// Operators may steer every tenant besides the pipeline itself: send to the tenants' queues
	// and write the ingest bucket's control/, work/ and quarantine/ prefixes
	// (tenantpipeline.Operators). Context: operatorArns, role or user ARNs (ArnLike patterns),
	// comma-separated. Default: none; only the pipeline's own roles steer.
	Operators tenantpipeline.Operators
	// DefaultTier is the tier of tenants that set no "tier": tenants.TierSilo or tenants.TierPool.
	// Default: silo.
	DefaultTier string
	// MoveTenants confirms the tenants that change tier or pool since the assignment file was
	// written; synth refuses any other such move. Drain a tenant before moving it.
	MoveTenants []string
	// RemoveTenants confirms the pooled tenants removed from the tenants file since the
	// assignment file was written; synth refuses any other such removal. Drain a tenant before
	// removing it.
	RemoveTenants []string
	// RegroupIntake confirms the pools whose intakeGroups changed since the assignment file was
	// written; synth refuses any other such change. Drain a pool's intake before regrouping it.
	RegroupIntake []string
	// ResultsExpirationDays is how long the bucket the app creates keeps each file's results
	// under results/ (a bucket it imports keeps its owner's rules). Default: 30 days
	// (pipeline.DefaultResultsExpirationDays).
	ResultsExpirationDays int
	// ExemptRolePath makes the bucket's Denies exempt the role path, not each role's ARN
	// (tenantpipeline.SharedProps.ExemptRolePath). Context: exemptRolePath. Default: false.
	ExemptRolePath bool
}

// RolePath is the IAM path of the app's function roles, one per stack prefix, so that two copies
// of the app in one account cannot write each other's control objects.
func (o Options) RolePath() string { return tenantpipeline.DefaultRolePath + o.StackPrefix + "/" }

// MaxTenantsPerStack keeps the largest allowed group under 500 resources: 11 tenants of at most
// 45 resources each (44, and a DynamoDB table the construct creates), plus the stack's dashboard,
// are 496. A numbered sequence's SequenceGap alarm is one more per tenant that has one: past 500,
// CDK's own count of the stack's resources fails synth (docs/quotas-and-cost.md).
const MaxTenantsPerStack = 11

// OptionsFromContext reads Options from the app's context, with defaults.
func OptionsFromContext(app constructs.Construct) (Options, error) {
	get := func(key string) string {
		if v := app.Node().TryGetContext(jsii.String(key)); v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	o := Options{
		TenantsFile:    get(CtxTenantsFile),
		BucketName:     get(CtxBucketName),
		AlarmTopicArn:  get(CtxAlarmTopicArn),
		StackPrefix:    get(CtxStackPrefix),
		RegisterURL:    get(CtxRegisterURL),
		RegisterDesign: get(CtxRegisterDesign),
		RequestShares:  get(CtxRequestShares),
	}
	if o.RegisterURL == "" {
		o.RegisterURL = os.Getenv(tenants.EnvRegisterURL)
	}
	// CI systems set CI=true (GitHub Actions, GitLab CI, CircleCI, Travis CI, Buildkite): a synth
	// there feeds a deploy, so it must use the committed assignment.
	o.StrictAssignment = os.Getenv("CI") == "true"
	switch v := get(CtxStrictAssignment); v {
	case "":
	case "true", "false":
		o.StrictAssignment = v == "true"
	default:
		return o, fmt.Errorf("context %s: %q is not true or false", CtxStrictAssignment, v)
	}
	if v := get(CtxOperatorTag); v != "" {
		// aws:PrincipalTag holds a session's own tags, which whoever may call sts:TagSession sets
		// (https://docs.aws.amazon.com/IAM/latest/UserGuide/id_session-tags.html).
		return o, fmt.Errorf("context %s %q is no longer read: a session can claim any tag, so operators are named by ARN: "+
			"remove %s and set -c %s=<role ARNs, comma-separated>, e.g. arn:aws:iam::123456789012:role/ops/* (docs/operations.md, \"Who may steer a tenant\")",
			CtxOperatorTag, v, CtxOperatorTag, CtxOperatorArns)
	}
	if v := get(CtxOperatorArns); v != "" {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				o.Operators.PrincipalARNs = append(o.Operators.PrincipalARNs, a)
			}
		}
	}
	switch v := get(CtxDefaultTier); v {
	case "", tenants.TierSilo, tenants.TierPool:
		o.DefaultTier = v
	default:
		return o, fmt.Errorf("context %s: %q is not a tier: use %q (the default) or %q", CtxDefaultTier, v, tenants.TierSilo, tenants.TierPool)
	}
	for _, id := range strings.Split(get(CtxMoveTenants), ",") {
		if id = strings.TrimSpace(id); id != "" {
			o.MoveTenants = append(o.MoveTenants, id)
		}
	}
	for _, id := range strings.Split(get(CtxRemoveTenants), ",") {
		if id = strings.TrimSpace(id); id != "" {
			o.RemoveTenants = append(o.RemoveTenants, id)
		}
	}
	for _, name := range strings.Split(get(CtxRegroupIntake), ",") {
		if name = strings.TrimSpace(name); name != "" {
			o.RegroupIntake = append(o.RegroupIntake, name)
		}
	}
	switch v := get(CtxExemptRolePath); v {
	case "", "false":
	case "true":
		o.ExemptRolePath = true
	default:
		return o, fmt.Errorf("context %s: %q is not true or false", CtxExemptRolePath, v)
	}
	if v := get(CtxResultsExpirationDays); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return o, fmt.Errorf("context %s: %q is not a whole number of days of at least 1", CtxResultsExpirationDays, v)
		}
		o.ResultsExpirationDays = n
	}
	if v := get(CtxSmallFileBytes); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n != -1 && (n < 1 || n > pipeline.MaxSmallFileBytes) {
			return o, fmt.Errorf("context %s: %q is not a number of bytes from 1 to %d (4 MiB), or -1 to turn the small-file path off", CtxSmallFileBytes, v, pipeline.MaxSmallFileBytes)
		}
		o.DefaultSmallFileBytes = n
	}
	if v := get(CtxTenantsPerStack); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return o, fmt.Errorf("context %s: %q is not a whole number", CtxTenantsPerStack, v)
		}
		o.TenantsPerStack = n
	}
	if d := o.RegisterDesign; d != "" && !slices.Contains(workflows.Designs, d) {
		return o, fmt.Errorf("context %s: %q is not a register design: use %q (the default) or %q (one Register task per chunk, kept for comparison)",
			CtxRegisterDesign, d, workflows.DesignPerInvocation, workflows.DesignPerChunk)
	}
	if v := o.RequestShares; v != "" && !slices.Contains(pipeline.RequestShares, v) {
		return o, fmt.Errorf("context %s: %q is not a way to share a core system's requests: use %q (the default: by what each running file can use) or %q (maxRequestsInFlight / maxRunningFiles each, kept for comparison)",
			CtxRequestShares, v, pipeline.RequestSharesShared, pipeline.RequestSharesStatic)
	}
	return o.withDefaults(), nil
}

func (o Options) withDefaults() Options {
	if o.TenantsFile == "" {
		o.TenantsFile = "tenants.json"
	}
	if o.TenantsPerStack == 0 {
		o.TenantsPerStack = 10
	}
	if o.StackPrefix == "" {
		o.StackPrefix = "TenantPipeline"
	}
	if o.AssignmentFile == "" {
		o.AssignmentFile = strings.TrimSuffix(o.TenantsFile, ".json") + ".stacks.json"
	}
	return o
}

// App is what Build made.
type App struct {
	// Ingest holds the bucket; nil when an existing bucket was named.
	Ingest awscdk.Stack
	// Bucket is the ingest bucket as seen from the Ingest stack (nil for an existing bucket).
	Bucket awss3.Bucket
	// TenantStacks hold the pipelines, TenantsPerStack at most each, in the order of their names
	// (numbered stacks first, by number).
	TenantStacks []awscdk.Stack
	// StackOf maps each tenant id to the name of its stack.
	StackOf map[string]string
	// Dashboards are the tenant stacks' dashboards, one per stack, in TenantStacks' order.
	Dashboards []*tenantpipeline.Dashboard
	// Pipelines are keyed by tenant id.
	Pipelines map[string]*tenantpipeline.TenantPipeline
	// PoolStacks hold one pool each, "<stackPrefix>-Pool-<name>", by name.
	PoolStacks []awscdk.Stack
	// Pools are keyed by pool name; PoolOf maps each pooled tenant id to its pool.
	Pools  map[string]*tenantpipeline.TenantPool
	PoolOf map[string]string
	// CoreSystems are the tenants file's core systems by name, each with its admission table, in
	// CoreSystemStack: the Ingest stack, or "<stackPrefix>-CoreSystems" when an existing bucket is
	// named (nil without core systems).
	CoreSystems     map[string]*tenantpipeline.CoreSystem
	CoreSystemStack awscdk.Stack
	// Key is the customer-managed key the app created (the tenants file's encryption "key":
	// "create"), nil otherwise (encryption.go).
	Key awskms.Key
}

// Build loads the tenants file and builds every stack into app. Invalid input returns an error
// that lists every problem; it never panics.
func Build(app awscdk.App, o Options) (_ *App, err error) {
	o = o.withDefaults()
	if o.TenantsPerStack < 1 || o.TenantsPerStack > MaxTenantsPerStack {
		return nil, fmt.Errorf("context %s: %d is out of range: use 1 to %d, so that no stack exceeds CloudFormation's 500 resources",
			CtxTenantsPerStack, o.TenantsPerStack, MaxTenantsPerStack)
	}
	file, err := tenants.Load(o.TenantsFile, tenants.Options{RegisterURL: o.RegisterURL, DefaultTier: o.DefaultTier})
	if err != nil {
		return nil, err
	}
	old, err := readAssignment(o.AssignmentFile)
	if err != nil {
		return nil, err
	}
	assigned, assignedPools := old.Stacks, old.Pools
	if err := errors.Join(tierMoves(file.Tenants, assigned, assignedPools, o), poolEdits(file, old, o)); err != nil {
		return nil, fmt.Errorf("tenants file %s: %w", o.TenantsFile, err)
	}
	if err := admissionTablesOutsideTablePrefixes(file, o); err != nil {
		return nil, fmt.Errorf("tenants file %s: %w", o.TenantsFile, err)
	}
	var silo []spec.Tenant
	poolOf := map[string]string{}
	for _, t := range file.Tenants {
		if t.Pooled() {
			poolOf[t.ID] = t.Pool
		} else {
			silo = append(silo, t)
		}
	}
	siloAssigned := map[string]string{}
	for id, s := range assigned {
		if _, pooled := poolOf[id]; !pooled {
			siloAssigned[id] = s
		}
	}
	stackOf, err := assign(silo, siloAssigned, o.TenantsPerStack)
	if err != nil {
		return nil, fmt.Errorf("tenants file %s: %w", o.TenantsFile, err)
	}
	doc := assignmentDoc{Stacks: stackOf, Pools: poolOf}.withPrefixes(file).withKeys(file, old)
	if err := saveAssignmentDoc(o.AssignmentFile, o.TenantsFile, old, doc, o.StrictAssignment); err != nil {
		return nil, err
	}
	// A CDK error raised through jsii while building (a bad alarm topic ARN, say) is a panic; the
	// app turns it into an error. Invalid props fail later, at synth's validation.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()

	out := &App{Pipelines: map[string]*tenantpipeline.TenantPipeline{}, StackOf: map[string]string{},
		Pools: map[string]*tenantpipeline.TenantPool{}, PoolOf: poolOf}
	bucketFor := func(scope constructs.Construct) awss3.IBucket {
		return awss3.Bucket_FromBucketName(scope, jsii.String("IngestBucket"), jsii.String(o.BucketName))
	}
	if o.BucketName == "" {
		out.Ingest = awscdk.NewStack(app, jsii.String(o.StackPrefix+"-Ingest"), &awscdk.StackProps{
			Description: jsii.String("Ordered per-tenant file pipeline: the ingest bucket"),
		})
	}
	key := newAppKey(app, out.Ingest, file, o)
	if key != nil {
		out.Key = key.Key
	}
	if o.BucketName == "" {
		out.Bucket = newIngestBucket(out.Ingest, "Bucket", o.ResultsExpirationDays, key.in(out.Ingest))
		out.Bucket.AddToResourcePolicy(tenantpipeline.BucketWriteDeny(out.Bucket, o.RolePath(), o.Operators))
		suppressIngestNagFindings(out.Ingest, out.Bucket)
		bucketFor = func(constructs.Construct) awss3.IBucket { return out.Bucket }
	}
	out.CoreSystems, out.CoreSystemStack = coreSystems(app, out.Ingest, file, o, key)

	var firstBucket awss3.IBucket // the bucket as the first tenant stack sees it
	// newStack creates a tenant or pool stack with the bucket and alarm topic as it sees them.
	newStack := func(name, what string) (awscdk.Stack, awss3.IBucket, awssns.ITopic) {
		stack := awscdk.NewStack(app, jsii.String(name), &awscdk.StackProps{
			Description: jsii.String("Ordered per-tenant file pipeline: " + what),
		})
		bucket := bucketFor(stack)
		if firstBucket == nil {
			firstBucket = bucket
		}
		var topic awssns.ITopic
		if o.AlarmTopicArn != "" {
			topic = awssns.Topic_FromTopicArn(stack, jsii.String("AlarmTopic"), jsii.String(o.AlarmTopicArn))
		}
		return stack, bucket, topic
	}
	for _, name := range stackNames(stackOf) {
		var group []spec.Tenant
		for _, t := range file.Tenants {
			if stackOf[t.ID] == name {
				group = append(group, t)
			}
		}
		stackName := o.StackPrefix + "-Tenants-" + name
		stack, bucket, topic := newStack(stackName, fmt.Sprintf("tenants %s … %s", group[0].ID, group[len(group)-1].ID))
		out.TenantStacks = append(out.TenantStacks, stack)
		var pipelines []*tenantpipeline.TenantPipeline
		for _, t := range group {
			out.StackOf[t.ID] = stackName
			out.Pipelines[t.ID] = tenantpipeline.New(stack, "Tenant-"+t.ID, &tenantpipeline.Props{
				Tenant:      t.Placement(),
				Bucket:      bucket,
				Uploaders:   arnPrincipals(t.Uploaders),
				SharedProps: o.shared(topic, key.in(stack)),
			})
			pipelines = append(pipelines, out.Pipelines[t.ID])
		}
		out.Dashboards = append(out.Dashboards, tenantpipeline.NewDashboard(stack, "Dashboard", pipelines...))
	}
	for _, name := range file.PoolNames() {
		stackName := o.StackPrefix + "-Pool-" + name
		var members []tenantpipeline.Tenant
		for _, t := range file.Tenants {
			if t.Pooled() && t.Pool == name {
				members = append(members, t.Placement())
				out.StackOf[t.ID] = stackName
			}
		}
		stack, bucket, topic := newStack(stackName, fmt.Sprintf("pool %s (%d tenants)", name, len(members)))
		out.PoolStacks = append(out.PoolStacks, stack)
		c := file.Pool(name)
		props := &tenantpipeline.PoolProps{
			Name: name, Prefix: c.Prefix, Tenants: members, Bucket: bucket,
			MaximumConcurrency: c.MaximumConcurrency, BacklogAlarmMessages: c.BacklogAlarmMessages,
			SecretPrefix: c.SecretPrefix, TablePrefix: c.TablePrefix, MaxRunningFiles: c.MaxRunningFiles, IntakeGroups: c.IntakeGroups, Intake: c.Intake,
			MaxQueuedFilesPerTenant: c.MaxQueuedFilesPerTenant, Keys: doc.PoolKeys[name],
			Uploaders: arnPrincipals(c.Uploaders),
			Shared:    o.shared(topic, key.in(stack)),
		}
		out.Pools[name] = tenantpipeline.NewPool(stack, "Pool", props)
	}
	rules := 0
	pooled := map[string]bool{} // core systems a pool's reconciler schedule covers
	for _, p := range out.Pools {
		rules += len(p.IntakeRules) // the S3 rules, one per intake group
		if p.StatusRule != nil {
			rules++
		}
		if p.ReconcileRule != nil {
			rules++ // the reconciler's schedule
		}
		for _, c := range p.CoreSystems {
			pooled[c.Props.Name] = true
		}
	}
	siloScheduled := map[string]bool{} // one silo tenant's schedule per core system no pool covers
	for _, p := range out.Pipelines {
		rules++ // the S3 rule
		if p.StatusRule != nil {
			rules++ // the wake-up rule on the file executions' status changes
		}
		if cs := p.Props.Tenant.CoreSystem; cs != "" && !pooled[cs] {
			siloScheduled[cs] = true
		}
	}
	rules += len(siloScheduled)
	first := append(append([]awscdk.Stack{}, out.TenantStacks...), out.PoolStacks...)[0]
	WarnRuleQuota(first, rules)
	if o.BucketName != "" {
		ImportedBucketPolicy(first, firstBucket, key.in(first), o)
	}
	if e := file.Encryption; e != nil && e.KeyARN != "" {
		ImportedKeyPolicy(first, e.KeyARN, o.StackPrefix)
	}
	dropNagMetadata(app)
	return out, nil
}

// arnPrincipals are the principals of the ARNs, nil for none.
func arnPrincipals(arns []string) []awsiam.IPrincipal {
	var out []awsiam.IPrincipal
	for _, a := range arns {
		out = append(out, awsiam.NewArnPrincipal(jsii.String(a)))
	}
	return out
}

// shared are the props both tiers take from the options, and the app's key (nil: none), whose
// policy the app keeps (KeyPolicyCovered).
func (o Options) shared(topic awssns.ITopic, key awskms.IKey) tenantpipeline.SharedProps {
	return tenantpipeline.SharedProps{AlarmTopic: topic, Operators: o.Operators, RolePath: o.RolePath(), RegisterDesign: o.RegisterDesign,
		RequestShares: o.RequestShares, DefaultSmallFileBytes: o.DefaultSmallFileBytes, EncryptionKey: key, KeyPolicyCovered: key != nil,
		ExemptRolePath: o.ExemptRolePath}
}

// coreSystems creates one CoreSystem per entry of the file's "coreSystems", in the shared stack
// every tenant stack already depends on (ingest), so that silo tenants and pools of any stack share
// one admission table per core system. With an existing bucket there is no ingest stack, and the
// core systems get a stack of their own.
func coreSystems(app awscdk.App, ingest awscdk.Stack, file *tenants.File, o Options, key *appKey) (map[string]*tenantpipeline.CoreSystem, awscdk.Stack) {
	if len(file.CoreSystems) == 0 {
		return nil, nil
	}
	stack := ingest
	if stack == nil {
		stack = awscdk.NewStack(app, jsii.String(o.StackPrefix+"-CoreSystems"), &awscdk.StackProps{
			Description: jsii.String("Ordered per-tenant file pipeline: the core systems' admission tables"),
		})
	}
	scope := constructs.NewConstruct(stack, jsii.String("CoreSystems"))
	var topic awssns.ITopic
	if o.AlarmTopicArn != "" {
		topic = awssns.Topic_FromTopicArn(scope, jsii.String("AlarmTopic"), jsii.String(o.AlarmTopicArn))
	}
	out := map[string]*tenantpipeline.CoreSystem{}
	for _, name := range slices.Sorted(maps.Keys(file.CoreSystems)) {
		c := file.CoreSystemSettings(name)
		out[name] = tenantpipeline.NewCoreSystem(scope, name, &tenantpipeline.CoreSystemProps{
			Name: name, MaxRunningFiles: c.MaxRunningFiles, MaxRecordsPerSecond: c.MaxRecordsPerSecond, Adaptive: c.Adaptive,
			MaxRequestsInFlight: c.MaxRequestsInFlight, AlarmTopic: topic, EncryptionKey: key.in(scope),
			Breaker: c.Breaker, Maintenance: c.Maintenance, IdempotencyRetention: c.Spec().Retention(), LookupURL: c.LookupURL, CompleteURL: c.CompleteURL,
		})
	}
	return out, stack
}

// ImportedBucketPolicyOutput is the output that carries the statement an existing ingest bucket's
// policy must get.
const ImportedBucketPolicyOutput = "IngestBucketPolicyStatement"

// ImportedBucketReadDenyOutput is the output that carries the read Deny an existing ingest bucket's
// policy must get (tenantpipeline.BucketReadDeny).
const ImportedBucketReadDenyOutput = "IngestBucketReadDenyStatement"

// ImportedBucketUploadDeniesOutput is the output that carries the upload Denies an existing ingest
// bucket's policy must get (tenantpipeline.BucketUploadDenies), as a JSON array of statements.
const ImportedBucketUploadDeniesOutput = "IngestBucketUploadDenyStatements"

// ImportedBucketPolicy reports the Deny statements that an existing bucket's owner must add to its
// bucket policy (tenantpipeline.BucketWriteDeny and BucketReadDeny, and BucketUploadDenies for the key
// of its objects, nil for none): CDK cannot change the policy of a bucket it imports by name. The
// statements become stack outputs of stack, resolved at deploy time with the account's partition
// and id, and synth prints a warning that says so. The upload Denies name the key by its ARN, so
// with a key the app creates they are the key's stack's output: an output of an imported value is
// one cfn-lint warns of (W6001).
func ImportedBucketPolicy(stack awscdk.Stack, bucket awss3.IBucket, key awskms.IKey, o Options) {
	awscdk.NewCfnOutput(stack, jsii.String(ImportedBucketPolicyOutput), &awscdk.CfnOutputProps{
		Description: jsii.String("Add this statement to the policy of the existing ingest bucket: only the pipeline and its operators may write control/, work/ and quarantine/"),
		Value:       jsii.String(tenantpipeline.BucketWriteDenyJSON(bucket, o.RolePath(), o.Operators)),
	})
	awscdk.NewCfnOutput(stack, jsii.String(ImportedBucketReadDenyOutput), &awscdk.CfnOutputProps{
		Description: jsii.String("Add this statement to the policy of the existing ingest bucket: only the pipeline and its operators may read its objects (narrow its Resource to the pipeline's prefixes if the bucket holds other data)"),
		Value:       jsii.String(tenantpipeline.BucketReadDenyJSON(bucket, o.RolePath(), o.Operators)),
	})
	uploads := stack
	if _, created := key.(awskms.Key); created {
		uploads = awscdk.Stack_Of(key)
	}
	awscdk.NewCfnOutput(uploads, jsii.String(ImportedBucketUploadDeniesOutput), &awscdk.CfnOutputProps{
		Description: jsii.String("Add these statements to the policy of the existing ingest bucket: no SSE-C, no other key or storage class, no overwrite by customers"),
		Value:       jsii.String(tenantpipeline.BucketUploadDeniesJSON(bucket, key, o.RolePath(), o.Operators)),
	})
	msg := fmt.Sprintf("the ingest bucket %s is not managed by this app, so CDK cannot add the Deny that keeps everyone but the pipeline's roles "+
		"(under IAM path %s, each by its ARN) and the operators from writing its control/, work/ and quarantine/ prefixes; add the statement of stack output %s, "+
		"the statement of stack output %s (only they read its objects) "+
		"and the statements of stack output %s of stack %s (SSE-C, another key or storage class, customers' writes without If-None-Match) "+
		"to the bucket's policy after the deploy (docs/operations.md, \"Who may steer a tenant\"; docs/isolation.md, \"Uploads\")",
		o.BucketName, o.RolePath(), ImportedBucketPolicyOutput, ImportedBucketReadDenyOutput, ImportedBucketUploadDeniesOutput, *uploads.StackName())
	awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("tenantpipeline:ImportedBucketPolicy"), jsii.String(msg), nil)
}

// DefaultBusRuleQuota is EventBridge's default number of rules per event bus, per account and
// region; it can be raised through Service Quotas.
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html
const DefaultBusRuleQuota = 300

// WarnRuleQuota adds a synth warning to stack when the app defines more rules on the default event
// bus than the default quota allows, and says whether it did. Build counts every TenantPipeline's
// rules on the default bus: its S3 rule, and its wake-up status rule unless wake events are off.
func WarnRuleQuota(stack awscdk.Stack, rules int) bool {
	if rules <= DefaultBusRuleQuota {
		return false
	}
	msg := fmt.Sprintf("this app defines %d EventBridge rules on the default event bus, more than the default quota of %d rules per event bus "+
		"(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html); before deploying, raise \"Maximum number of rules per event bus\" "+
		"for EventBridge in Service Quotas, or deploys fail once the bus is full", rules, DefaultBusRuleQuota)
	awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("tenantpipeline:RuleQuota"), jsii.String(msg), nil)
	return true
}

// NewIngestBucket creates the ingest bucket: private, TLS only, versioned (so the pipeline reads
// exactly the version that triggered a file's event), sending its events to EventBridge, and with
// the pipeline's own work files expiring.
func NewIngestBucket(scope constructs.Construct, id string) awss3.Bucket {
	return newIngestBucket(scope, id, 0, nil)
}

// newIngestBucket is NewIngestBucket keeping results for resultsDays (0: the default), encrypted
// with key when one is given: SSE-KMS with S3 Bucket Keys, so that S3 asks KMS for a bucket-level
// key once in a while instead of a data key per object.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-key.html
func newIngestBucket(scope constructs.Construct, id string, resultsDays int, key awskms.IKey) awss3.Bucket {
	props := &awss3.BucketProps{
		BlockPublicAccess:  awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:         awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:         jsii.Bool(true),
		Versioned:          jsii.Bool(true),
		EventBridgeEnabled: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
		LifecycleRules:     tenantpipeline.LifecycleRules(resultsDays),
	}
	if key != nil {
		props.Encryption, props.EncryptionKey, props.BucketKeyEnabled = awss3.BucketEncryption_KMS, key, jsii.Bool(true)
	}
	return awss3.NewBucket(scope, jsii.String(id), props)
}

func suppressIngestNagFindings(stack awscdk.Stack, bucket awss3.Bucket) {
	cdknag.NagSuppressions_AddResourceSuppressions(bucket, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-S1"),
		Reason: jsii.String("Server access logs would need a second bucket that this app does not own; object-level audit is CloudTrail data events " +
			"on the account's trail, and every object the pipeline reads is named in its logs."),
	}}, jsii.Bool(true))
	// EventBridgeEnabled is applied by CDK's own bucket-notifications custom resource.
	cdknag.NagSuppressions_AddStackSuppressions(stack, &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM4"),
		Reason:    jsii.String("CDK's BucketNotificationsHandler custom resource uses AWSLambdaBasicExecutionRole to write its own logs."),
		AppliesTo: &[]any{"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"},
	}}, jsii.Bool(false))
}
