package tenantpipeline

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// GrantOperate lets grantee run pipectl against the tenant (docs/operations.md, "Permissions"):
// status, files, pause and resume, skip, redrive, replay (from the rule's dead-letter queue too)
// and the sequence commands, on this tenant's queue, state machines, event source mapping,
// controller and keys alone, and, with a customer-managed key, that key through SQS, S3 and Step
// Functions for those resources only. The bucket's and the queue's Denies still refuse whoever is
// not in SharedProps.Operators: list the grantee's role ARN there too. A grantee whose policy the
// app cannot change (an awsiam.ArnPrincipal; awsiam.Role_FromRoleArn is mutable by default)
// fails synth, naming it.
func (t *TenantPipeline) GrantOperate(grantee awsiam.IGrantable) awsiam.Grant {
	return t.Pipeline.grantOperate(t.Construct, grantee, operated{
		bucket: t.Props.Bucket, owner: t.owner(), prefix: t.Props.Tenant.Prefix,
		dlq: t.RuleDeadLetterQueue, mappingSteered: true,
	})
}

// GrantOperate lets grantee run pipectl against the pool's tenant tenantID, as
// TenantPipeline.GrantOperate does: that tenant's keys, and the pool's shared queue, state
// machines, controller and dead-letter queue, whose messages IAM cannot scope by tenant (a
// message group is no resource); pause and resume are the tenant's pause marker, the pool's
// mapping stays. A tenantID that is not one of the pool's tenants panics with a *PropsError, as
// GrantUpload's does.
func (t *TenantPool) GrantOperate(tenantID string, grantee awsiam.IGrantable) awsiam.Grant {
	for _, tn := range t.Props.Tenants {
		if tn.ID == tenantID {
			return t.Pipeline.grantOperate(t.Construct, grantee, operated{
				bucket: t.Props.Bucket, owner: pipeline.PoolOwner(t.keysPool(), tn.ID), prefix: tn.Prefix, dlq: t.RuleDeadLetterQueue,
			})
		}
	}
	var ids []string
	for _, tn := range t.Props.Tenants {
		ids = append(ids, tn.ID)
	}
	panic(&PropsError{Path: *t.Node().Path(), Err: fmt.Errorf("pool %q: GrantOperate: %q is not a tenant of the pool (its tenants: %v): "+
		"add the tenant to PoolProps.Tenants, or grant the pool it is in", t.Props.Name, tenantID, ids)})
}

// operated is what one GrantOperate reaches.
type operated struct {
	bucket interface {
		ArnForObjects(*string) *string
		BucketArn() *string
	}
	owner  pipeline.Owner
	prefix string
	dlq    awssqs.IQueue
	// mappingSteered: pause and resume switch the controller's event source mapping (a silo
	// tenant's own); a pool's tenant is paused by its marker, control/<tenant>/paused.json.
	mappingSteered bool
}

// grantOperate adds the statements of docs/operations.md's permissions table for o to grantee's
// policy, and the key's for the same resources; a grantee that takes no statement fails synth
// through scope's validation, naming it.
func (p *Pipeline) grantOperate(scope constructs.Construct, grantee awsiam.IGrantable, o operated) awsiam.Grant {
	control := pipeline.ControlDir(o.owner)
	objects := func(patterns ...string) []string {
		var arns []string
		for _, pt := range patterns {
			arns = append(arns, *o.bucket.ArnForObjects(jsii.String(pt)))
		}
		return arns
	}
	sms := []awsstepfunctions.IStateMachine{p.Workflow.File, p.Workflow.Segment}
	var machines, executions []string
	for _, sm := range []awsstepfunctions.StateMachine{p.Workflow.File, p.Workflow.Segment} {
		machines = append(machines, *sm.StateMachineArn())
		// An execution's ARN: arn:…:states:<region>:<account>:execution:<state machine name>:<name>.
		// https://docs.aws.amazon.com/step-functions/latest/dg/concepts-state-machine-executions.html
		executions = append(executions, *awscdk.Arn_Format(&awscdk.ArnComponents{
			Service: jsii.String("states"), Resource: jsii.String("execution"),
			ResourceName: jsii.String(*sm.StateMachineName() + ":*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
		}, awscdk.Stack_Of(scope)))
	}
	// The control record of each redrive, replay or sequence request, which the controller checks
	// before it performs one (pipeline.NeedsRecord); pipectl reads one back when it retries a
	// request id.
	putMarkers := []string{control + "skip/*", control + "requests/*"}
	if !o.mappingSteered {
		putMarkers = append(putMarkers, control+"paused.json")
	}
	type st struct {
		actions, resources []string
		conditions         map[string]any
	}
	statements := []st{
		// Finding the tenant: pipectl pages through the account's stacks, which takes "*".
		// https://docs.aws.amazon.com/service-authorization/latest/reference/list_awscloudformation.html
		{[]string{"cloudformation:DescribeStacks"}, []string{"*"}, nil},
		// ListEventSourceMappings has no resource type: "*".
		// https://docs.aws.amazon.com/service-authorization/latest/reference/list_awslambda.html
		{[]string{"lambda:ListEventSourceMappings"}, []string{"*"}, nil},
		{[]string{"lambda:GetFunction"}, []string{*p.Controller.FunctionArn()}, nil},
		{[]string{"sqs:GetQueueAttributes", "sqs:SendMessage", "sqs:ChangeMessageVisibility"}, []string{*p.Queue.QueueArn()}, nil},
		{[]string{"sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:DeleteMessage"}, []string{*o.dlq.QueueArn()}, nil},
		{[]string{"states:ListExecutions"}, machines, nil},
		{[]string{"states:DescribeExecution", "states:GetExecutionHistory", "states:RedriveExecution"}, executions, nil},
		{[]string{"s3:GetObject", "s3:GetObjectVersion"}, objects(o.prefix+"*", control+"skip/*", control+"requests/*", control+"paused.json", control+"sequence/*", pipeline.WorkDir(o.owner)+"*"), nil},
		{[]string{"s3:PutObject"}, objects(putMarkers...), nil},
		// Listing the prefixes makes S3 answer a missing marker with 404, not 403.
		// https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html ("Permissions")
		{[]string{"s3:ListBucket"}, []string{*o.bucket.BucketArn()}, map[string]any{"StringLike": map[string]any{"s3:prefix": []string{o.prefix + "*", control + "*"}}}},
	}
	if o.mappingSteered {
		statements = append(statements, st{[]string{"lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"}, []string{*p.EventSource.EventSourceMappingArn()}, nil})
	}
	g := awsiam.Grant_Drop(grantee, jsii.String("operate the tenant"))
	missed := false
	for _, s := range statements {
		opts := &awsiam.GrantOnPrincipalOptions{Grantee: grantee, Actions: jsii.Strings(s.actions...), ResourceArns: jsii.Strings(s.resources...)}
		if s.conditions != nil {
			opts.Conditions = conditions(s.conditions)
		}
		one := awsiam.Grant_AddToPrincipal(opts)
		missed = missed || !*one.Success()
		g = g.Combine(one)
	}
	if missed {
		scope.Node().AddValidation(&propsValidation{scope, []string{fmt.Sprintf("GrantOperate to %s: the grantee has no policy this app can change (an ArnPrincipal): "+
			"pass a role of the app, or the operator's role as awsiam.Role_FromRoleArn (mutable), or attach docs/operations.md's permissions to it yourself",
			principalOf(scope, grantee))}})
		return g
	}
	// The key, for these resources alone: SQS, Step Functions and S3 call KMS with the caller's
	// credentials (grantQueues, grantStateMachines, and the objects under the tenant's keys).
	p.enc.grantQueues(grantee, true, p.Queue, o.dlq)
	p.enc.grantStateMachines(grantee, sms...)
	if p.objects != nil {
		p.objects.allow(grantee, []string{"kms:Decrypt", "kms:GenerateDataKey"}, map[string]any{
			"StringEquals": map[string]any{"kms:ViaService": p.objects.viaService("s3")},
			"StringLike": map[string]any{"kms:EncryptionContext:aws:s3:arn": append([]string{*o.bucket.BucketArn()},
				objects(o.prefix+"*", control+"*", pipeline.WorkDir(o.owner)+"*")...)},
		})
	}
	return g
}
