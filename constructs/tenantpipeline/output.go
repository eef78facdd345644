package tenantpipeline

import (
	"encoding/json"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// addOutput describes the tenant in one stack output, logical id pipeline.TenantOutputKey(id),
// value the JSON of pipeline.TenantOutput: what pipectl needs to find the tenant's resources from
// the deployed stack alone (docs/operations.md).
func (t *TenantPipeline) addOutput() {
	p := t.Props
	o := pipeline.TenantOutput{
		Version:                pipeline.TenantOutputVersion,
		ID:                     p.Tenant.ID,
		Policy:                 p.Tenant.OnFailure,
		IdempotencyKey:         p.Tenant.IdempotencyKey,
		Bucket:                 *p.Bucket.BucketName(),
		Prefix:                 p.Tenant.Prefix,
		QueueURL:               *t.Queue.QueueUrl(),
		QueueARN:               *t.Queue.QueueArn(),
		StateMachineARN:        *t.StateMachine.StateMachineArn(),
		SegmentStateMachineARN: *t.Workflow.Segment.StateMachineArn(),
		ControllerFunction:     *t.Controller.FunctionName(),
		EventSourceMappingUUID: *t.EventSource.EventSourceMappingId(),
		DLQURL:                 *t.RuleDeadLetterQueue.QueueUrl(),
	}
	if t.UploaderRole != nil {
		o.UploaderRoleARN = *t.UploaderRole.RoleArn()
	}
	t.Output = awscdk.NewCfnOutput(t.Construct, jsii.String("Output"), &awscdk.CfnOutputProps{
		Description: jsii.String("Tenant " + p.Tenant.ID + " for pipectl (JSON, version 1)"),
		Value:       toJSON(t.Construct, o),
	})
	t.Output.OverrideLogicalId(jsii.String(pipeline.TenantOutputKey(p.Tenant.ID)))
}

// toJSON renders v, whose strings may hold CDK tokens, as a JSON string that CloudFormation
// completes: Stack.ToJsonString escapes each token's deploy-time value as a JSON string.
func toJSON(scope constructs.Construct, v any) *string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		panic(err)
	}
	return awscdk.Stack_Of(scope).ToJsonString(doc, nil)
}
