// Package tenantpipeline provides the two constructs that deploy an ordered, per-tenant file
// pipeline: within a tenant, files are processed one at a time in arrival order and records in
// file order; tenants never wait for each other.
//
//   - TenantPipeline (New) is the silo tier: one tenant's own resources, an EventBridge rule on the
//     tenant's key prefix, a FIFO queue that serves as the tenant's lock, the controller, split and
//     register functions, the two state machines of package workflows, a rule that wakes the
//     controller when a file's execution ends, the DynamoDB sink's table when the tenant needs one,
//     and the tenant's alarms.
//   - TenantPool (NewPool) is the pooled tier: many tenants (PoolProps.Tenants) share one pool's
//     resources, whose number does not grow with its tenants, with the same guarantees per tenant.
//
// NewCoreSystem bounds the files and records that reach one core system across tenants of both
// tiers; NewDashboard adds one dashboard for the tenants of a stack.
//
// Both constructs build what they share through one core (core.go) and take what they share as
// SharedProps. Props are checked before anything is created or bundled: a construct with invalid
// props stays an empty scope, and synth fails the CDK way, naming every problem and the prop to
// change. What only the
// whole app shows, two constructs of one app whose prefixes overlap on one bucket (in any mix of
// the two) or a tenant id or pool name used twice, fails synth the CDK way, with CDK's "Validation
// failed with the following errors", naming both constructs. Synth returns either as an error, for
// a Go app to print before it exits with status 1; the package never exits the process.
//
// Each construct writes a stack output that describes it (TenantPipeline.Output, TenantPool.Output),
// by which pipectl finds the tenants in any stack. Their queues accept messages only from their
// rules, their functions' roles and Props.Operators; BucketWriteDeny is the matching statement for
// the ingest bucket's policy, which the constructs add to a bucket created in the app (or warn, for
// one they cannot change). See README.md and docs/ for why each piece is there.
package tenantpipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// TenantPipeline is one tenant's pipeline. Every resource it creates is exposed, so callers can
// add permissions, alarms or dashboards without reaching into the construct tree: the pipeline
// both tiers build (Pipeline: the tenant's queue, one message group, so one file in flight at a
// time; its functions, state machines, controller and event source), and the tenant's own.
type TenantPipeline struct {
	constructs.Construct
	Pipeline

	// Props are the props after defaults were applied.
	Props Props

	// Rule routes the tenant's "Object Created" events to Queue.
	Rule awsevents.Rule
	// RuleDeadLetterQueue keeps the events Rule could not deliver to Queue after its retries.
	RuleDeadLetterQueue awssqs.Queue
	// Alarms are the tenant's alarms.
	Alarms Alarms
	// Table is the DynamoDB sink's table when the construct created it; nil otherwise.
	Table awsdynamodb.Table
	// SinkTable is the table the DynamoDB sink writes: Table, Props.DynamoDBTable or the table
	// Tenant.DynamoDB.Table names. Nil without a DynamoDB sink.
	SinkTable awsdynamodb.ITable
	// Output is the stack output that describes the tenant for pipectl (pipeline.TenantOutput).
	Output awscdk.CfnOutput
	// UploaderRole is the role Props.Uploaders assume to upload the tenant's files under its
	// prefix and nowhere else (upload.go). Nil without Props.Uploaders.
	UploaderRole awsiam.Role
	// ReconcileRule invokes the controller on the admission reconciler's schedule, for its core
	// system (reconcile.go): set, when the app is synthesized, on the one silo tenant of a core
	// system that no pool of the app covers with the smallest id. Nil otherwise.
	ReconcileRule awsevents.Rule

	checks checks
	// coreSystem is the app's core system Tenant.CoreSystem names, nil for none.
	coreSystem *CoreSystem
}

// New creates the tenant's pipeline under scope/id. Its props are checked first, before anything
// is created or bundled: with invalid props the pipeline stays an empty scope, exposing no
// resource, and synth fails with CDK's "Validation failed with the following errors", one message
// per problem, each naming the prop to change (refused). What only the whole app shows (two constructs
// whose prefixes overlap, a tenant id used twice, the bucket's settings) fails synth, the CDK way,
// with CDK's "Validation failed with the following errors" (validation.go).
func New(scope constructs.Construct, id string, props *Props) *TenantPipeline {
	if props == nil {
		props = &Props{}
	}
	p := props.withDefaults()
	cs, csErr := coreSystemOf(scope, p.Tenant, "Tenant")
	t := &TenantPipeline{Construct: constructs.NewConstruct(scope, jsii.String(id)), Props: p, coreSystem: cs}
	if refused(t.Construct, errors.Join(p.validate(), csErr, checkUploaders(scope, "Uploaders", p.Uploaders))) {
		return t
	}
	t.build()
	exemptPath(t.Construct, p.RolePath, p.ExemptRolePath)
	addBucketDenies(t.Construct, fmt.Sprintf("tenant %q", p.Tenant.ID), p.Bucket, t.objects.keyOrNil(), p.RolePath, p.Operators)
	warnOwnRegisterRole(t.Construct, p.RegisterFunction, p.RolePath)
	t.checks.app = register(t.Construct, t)
	t.Node().AddValidation(&validation{t: t})
	return t
}

// build creates the resources from t.Props: the pipeline both tiers share (core.go), then the
// tenant's own: its rule, the grants on its keys, its uploader role, alarms and output.
func (t *TenantPipeline) build() {
	p := t.Props
	tenant := p.Tenant
	// The table must exist before the controller's TENANT variable names it.
	t.SinkTable = t.sinkTable()
	env := map[string]string{
		pipeline.EnvTenant:         t.settingsJSON(),
		pipeline.EnvTenantPrefix:   tenant.Prefix,
		pipeline.EnvOnFailure:      tenant.OnFailure,
		pipeline.EnvIdempotencyKey: tenant.IdempotencyKey,
	}
	if t.coreSystem != nil {
		env[pipeline.EnvCoreSystemTables] = coreSystemTables(t.Construct, []*CoreSystem{t.coreSystem})
		defer t.coreSystem.addSilo(t)
	}
	t.Pipeline = newPipeline(t.Construct, pipelineProps{
		Shared: p.SharedProps,
		Bucket: p.Bucket,
		Describe: func(_, pkg string) string {
			return fmt.Sprintf("Tenant %s: %s", tenant.ID, pkg)
		},
		Register:              p.RegisterFunction,
		WorkflowLogGroupName:  t.workflowLogGroupName(),
		ControllerEnv:         env,
		DeployedEnv:           map[string]string{pipeline.EnvDeployedTenant: env[pipeline.EnvTenant]},
		ReservedConcurrency:   p.ControllerReservedConcurrency,
		StatusRuleDescription: fmt.Sprintf("Ends of tenant %s's file executions to its controller (wake-up)", tenant.ID),
	})

	t.Rule = awsevents.NewRule(t.Construct, jsii.String("Rule"), &awsevents.RuleProps{
		RuleName:    keyedRuleName(t.Construct, "Rule", p.EncryptionKey != nil),
		Description: jsii.String(fmt.Sprintf("Files of tenant %s to its FIFO queue", tenant.ID)),
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings("aws.s3"),
			DetailType: jsii.Strings("Object Created"),
			Detail: &map[string]any{
				"bucket": map[string]any{"name": []any{p.Bucket.BucketName()}},
				"object": map[string]any{"key": []any{map[string]any{"prefix": tenant.Prefix}}},
			},
		},
	})
	t.addRuleTarget()

	t.grantSplit()
	if t.bundled != nil {
		t.grantRegister(t.bundled)
	}
	t.grantController()
	t.denyForeignSends()
	t.encrypt()
	t.newUploaderRole()
	t.Alarms = t.newAlarms()
	t.addOutput()
	t.suppressNagFindings()
}

// grantSplit lets Split read the tenant's files, write its manifests and run its results task.
func (t *TenantPipeline) grantSplit() {
	tenant := t.Props.Tenant
	t.allowS3(t.Split, []string{"s3:GetObject", "s3:GetObjectVersion"}, tenant.Prefix+"*")
	t.allowList(t.Split, tenant.Prefix)
	t.allowS3(t.Split, []string{"s3:PutObject"}, pipeline.WorkDir(t.owner())+"*")
	t.allowResults(t.Split, t.owner())
}

// grantRegister lets the bundled Register read the tenant's files and manifests, keep its
// segments' progress and rejections, and reach the tenant's sink, secret and core system.
func (t *TenantPipeline) grantRegister(register awslambda.Function) {
	tenant := t.Props.Tenant
	if t.SinkTable != nil {
		allowPutItem(register, t.SinkTable)
	}
	t.allowS3(register, []string{"s3:GetObject", "s3:GetObjectVersion"}, tenant.Prefix+"*")
	t.allowList(register, tenant.Prefix)
	// The manifests Split writes, and each segment's progress, which Register writes after
	// every successful invocation and reads when a segment execution begins. A manifest is read
	// by its version id in a versioned bucket, which needs s3:GetObjectVersion
	// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions").
	t.allowS3(register, []string{"s3:GetObject", "s3:GetObjectVersion", "s3:PutObject"}, pipeline.WorkDir(t.owner())+"*")
	// The rejections of each invocation (the core system's, under skipRecord), as parts of the
	// file's results. The SmallFile task also does what the results task does there: it reads the
	// rejection parts, listing them, and writes the results files.
	if t.Props.smallFiles(false) > 0 {
		t.allowS3(register, []string{"s3:GetObject", "s3:PutObject"}, pipeline.ResultsDir(t.owner())+"*")
		t.allowList(register, pipeline.ResultsDir(t.owner()))
	} else {
		t.allowS3(register, []string{"s3:PutObject"}, pipeline.ResultsDir(t.owner())+"*")
	}
	if t.coreSystem != nil {
		grantAdaptiveLimit(register, t.coreSystem)
	}
	if tenant.RegisterAuthSecretARN != "" {
		register.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
			Resources: jsii.Strings(tenant.RegisterAuthSecretARN),
		}))
	}
}

// grantController lets the controller read the File Processed event's objects, take its file's
// lease in the tenant's core system, and keep the tenant's keys: quarantine records, skip
// markers, the order counter of a DynamoDB sink, and, with wake events, the wake-up state (it
// writes control/<tenant>/wake.json and the wake-up handler control/<tenant>/wake-done.json;
// each reads both).
func (t *TenantPipeline) grantController() {
	tenant, fn := t.Props.Tenant, t.Controller
	// The File Processed event: the counts from summary.json, and the marker of each event put
	// (results/<tenant>/<execution>/event-<redrive count>.json).
	t.allowS3Keys(fn, []string{"s3:GetObject"}, results.Key(t.owner(), "*", results.SummaryFile))
	t.allowS3Keys(fn, []string{"s3:GetObject", "s3:PutObject"}, results.Key(t.owner(), "*", "event-*.json"))
	if cs := t.coreSystem; cs != nil {
		// Admission: the file's lease in its core system's gate, taken before StartExecution.
		grantLeases(fn, cs.Table)
		// Its releases wake the core system's next waiter in whichever queue it waits.
		tagForWakeUps(t.Queue, cs)
		grantWakeUps(fn, cs)
	}
	t.allowS3(fn, []string{"s3:PutObject"}, pipeline.QuarantineDir(t.owner())+"*")
	t.allowS3(fn, []string{"s3:GetObject"}, pipeline.ControlDir(t.owner())+"skip/*")
	// An operator action (redrive, replay, sequence-skip, sequence-set) is performed only as the
	// operator's control record under control/<tenant>/requests/ says (pipeline.NeedsRecord).
	t.allowS3(fn, []string{"s3:GetObject"}, pipeline.ControlRequestsPrefix(t.owner())+"*")
	// Without ListBucket, S3 answers a GetObject of a missing key with 403 instead of 404, and the
	// controller could not tell "no skip marker" from "no access".
	t.allowList(fn, pipeline.ControlDir(t.owner()))
	if tenant.DynamoDB != nil {
		// The DynamoDB sink ranks files by their place in the tenant's queue: the controller keeps
		// the tenant's order counter, control/<tenant>/order.json (docs/data-path.md).
		t.allowS3Keys(fn, []string{"s3:GetObject", "s3:PutObject"}, pipeline.OrderKey(t.owner()))
	}
	if t.Props.WakeEvents() {
		t.allowS3Keys(fn, []string{"s3:GetObject", "s3:PutObject"}, pipeline.WakeStateKey(t.owner()), pipeline.WakeDoneKey(t.owner()))
	}
	if tenant.Sequence != nil {
		t.grantSequence()
	}
}

// grantSequence lets the controller of a sequenced tenant keep its order (internal/sequence): read,
// write and delete its state and held files under control/<tenant>/sequence/ (listed under the
// control prefix's ListBucket); write the summary.json of a file it refuses; and send to the
// tenant's own queue, to give a held file back to the tenant's group when its turn comes and to
// keep the tenant's tick going in the tick group (pipeline.TickGroup). The queue's Deny spares the
// controller's role (denyForeignSends); with a key, a sender needs kms:GenerateDataKey on it
// (grantQueues). A tenant without a sequence gets none of it.
func (t *TenantPipeline) grantSequence() {
	fn := t.Controller
	t.allowS3(fn, []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, pipeline.SequencePrefix(t.owner())+"*")
	// The control record of the sequence-skip it asks for itself (onGap "skip").
	t.allowS3(fn, []string{"s3:PutObject"}, pipeline.ControlRequestsPrefix(t.owner())+"*")
	t.allowS3Keys(fn, []string{"s3:PutObject"}, results.Key(t.owner(), "*", results.SummaryFile))
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("sqs:SendMessage"),
		Resources: jsii.Strings(*t.Queue.QueueArn()),
	}))
	t.enc.grantQueues(fn, true, t.Queue)
}

// newGoFunction creates a function of one of this module's Go packages (provided.al2023, arm64),
// logging to logs, with the package in its metadata for the local run (MetadataSource). With a
// customer-managed key (nil: none), Lambda encrypts the environment with it (KmsKeyArn): a
// controller's environment holds its tenant's settings. Lambda decrypts it at init through a KMS
// grant for the function's role, made when the function is created or updated (CDK adds no role
// statement for it, nor does this), so the principal that deploys must be allowed to use the key:
// the key policy's account statement lets IAM allow it. The page lists the KMS actions:
// https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars-encryption.html
func newGoFunction(scope constructs.Construct, id, pkg string, code awslambda.Code, timeout time.Duration, memoryMB int, env map[string]string,
	logs awslogs.ILogGroup, description string, key awskms.IKey) awslambda.Function {
	vars := map[string]*string{}
	for k, v := range env {
		vars[k] = jsii.String(v)
	}
	props := &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         code,
		Timeout:      seconds(timeout),
		MemorySize:   jsii.Number(memoryMB),
		Environment:  &vars,
		LogGroup:     logs,
		Description:  jsii.String(description),
	}
	if key != nil {
		props.EnvironmentEncryption = key
	}
	fn := awslambda.NewFunction(scope, jsii.String(id), props)
	fn.Node().DefaultChild().(awscdk.CfnResource).AddMetadata(jsii.String(MetadataSource), pkg)
	return fn
}

// allowResults lets the Split function's results task (internal/split, results.go) do its work for
// one tenant: read the manifest (by the version id Split's write returned, which takes
// s3:GetObjectVersion: https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html,
// "Permissions") and the segments' progress under work/<tenant>/, list and read the rejection
// parts and write the results under results/<tenant>/.
func (t *TenantPipeline) allowResults(fn awslambda.IFunction, o pipeline.Owner) {
	t.allowS3(fn, []string{"s3:GetObject", "s3:GetObjectVersion"}, pipeline.WorkDir(o)+"*")
	t.allowS3(fn, []string{"s3:GetObject", "s3:PutObject"}, pipeline.ResultsDir(o)+"*")
	t.allowList(fn, pipeline.ResultsDir(o))
}

// owner is whose keys the tenant's are: a silo tenant's.
func (t *TenantPipeline) owner() pipeline.Owner { return pipeline.SiloOwner(t.Props.Tenant.ID) }

// allowS3 grants exact S3 object actions on one key pattern of the ingest bucket.
func (t *TenantPipeline) allowS3(fn awslambda.IFunction, actions []string, pattern string) {
	grantObjects(fn, t.Props.Bucket, actions, pattern)
}

// grantObjects grants exact S3 object actions on one key pattern of bucket.
func grantObjects(fn awslambda.IFunction, bucket awss3.IBucket, actions []string, pattern string) {
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: jsii.Strings(*bucket.ArnForObjects(jsii.String(pattern))),
	}))
}

// allowS3Keys grants exact S3 object actions on exact keys of the ingest bucket.
func (t *TenantPipeline) allowS3Keys(fn awslambda.IFunction, actions []string, keys ...string) {
	var arns []string
	for _, k := range keys {
		arns = append(arns, *t.Props.Bucket.ArnForObjects(jsii.String(k)))
	}
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: jsii.Strings(arns...),
	}))
}

// settingsJSON is the TENANT variable: the tenant's settings, with the DynamoDB sink's table name
// filled in (a token when the table is created here, resolved at deploy time).
func (t *TenantPipeline) settingsJSON() string {
	s := settings(t.Props.Tenant, t.coreSystem)
	if s.DynamoDB != nil && t.SinkTable != nil {
		s.DynamoDB.Table = *t.SinkTable.TableName()
	}
	if s.DynamoDB != nil && *awscdk.Token_IsUnresolved(s.DynamoDB.Table) {
		return *toJSON(t.Construct, s)
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// allowList grants s3:ListBucket on the ingest bucket for keys under prefix only. With it, S3
// answers a read of a missing key or version with 404 (NoSuchKey, NoSuchVersion) instead of 403
// AccessDenied, so a vanished object surfaces as ObjectChangedError rather than "access denied".
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html (Permissions)
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html (s3:prefix)
func (t *TenantPipeline) allowList(fn awslambda.IFunction, prefix string) {
	grantList(fn, t.Props.Bucket, prefix)
}

// grantList grants s3:ListBucket on bucket for keys under prefix only (allowList).
func grantList(fn awslambda.IFunction, bucket awss3.IBucket, prefix string) {
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:    jsii.Strings("s3:ListBucket"),
		Resources:  jsii.Strings(*bucket.BucketArn()),
		Conditions: &map[string]any{"StringLike": map[string]any{"s3:prefix": prefix + "*"}},
	}))
}

func seconds(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}
