package tenantpipeline

import (
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Step Functions sends "Step Functions Execution Status Change" events of Standard workflows to
// the account's default event bus, with source aws.states; delivery is best effort, so an event
// may be lost or arrive twice, and the controller's safety-net check covers both.
// https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html
// https://docs.aws.amazon.com/step-functions/latest/dg/cw-events.html (detail: executionArn,
// stateMachineArn, name, status, startDate, stopDate)
const (
	statusEventSource     = "aws.states"
	statusEventDetailType = "Step Functions Execution Status Change"
)

// statusRuleStatuses are the statuses the status rule matches: the ends of an execution.
var statusRuleStatuses = []string{pipeline.StatusSucceeded, pipeline.StatusFailed, pipeline.StatusTimedOut, pipeline.StatusAborted}

// controlPrefixProtected is the controller's CONTROL_PREFIX_PROTECTED: "true" when the ingest
// bucket's own policy carries BucketWriteDeny for these roles and operators, else "false". With
// it, the controller releases a file on the SUCCEEDED its wake-up handler recorded under
// control/, without confirming it (docs/controller.md, "Releasing on the status event"): only
// the Deny keeps others from writing that record. It is read when the template is rendered, so
// a statement the app adds after the construct counts. A bucket this app imports has a policy
// CDK cannot read, so its controllers always confirm: fail closed, even when its owner added the
// statement.
func controlPrefixProtected(bucket awss3.IBucket, rolePath string, ops Operators) string {
	return *awscdk.Lazy_String(&writeDenyProducer{bucket: bucket, rolePath: rolePath, ops: ops}, nil)
}

type writeDenyProducer struct {
	bucket   awss3.IBucket
	rolePath string
	ops      Operators
}

// Produce implements awscdk.IStableStringProducer.
func (p *writeDenyProducer) Produce() *string {
	return jsii.String(strconv.FormatBool(hasWriteDeny(p.bucket, p.rolePath, p.ops)))
}

// hasWriteDeny reports whether bucket is created in this app and its policy holds exactly the
// statement BucketWriteDeny makes for rolePath and ops.
func hasWriteDeny(bucket awss3.IBucket, rolePath string, ops Operators) bool {
	return bucket != nil && policyHolds(bucket, BucketWriteDeny(bucket, rolePath, ops))
}

// newStatusRule sends the ends of sm's executions to controller.
func newStatusRule(scope constructs.Construct, description string, sm awsstepfunctions.IStateMachine, controller awslambda.IFunction) awsevents.Rule {
	rule := awsevents.NewRule(scope, jsii.String("StatusRule"), &awsevents.RuleProps{
		Description: jsii.String(description),
		// No EventBus: the default bus, where Step Functions sends these events.
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings(statusEventSource),
			DetailType: jsii.Strings(statusEventDetailType),
			Detail: &map[string]any{
				"stateMachineArn": []any{sm.StateMachineArn()},
				"status":          statusRuleStatuses,
			},
		},
	})
	// The whole event is the function's input (the target's default); the target adds the
	// function's resource policy for this rule alone (aws:SourceArn).
	rule.AddTarget(awseventstargets.NewLambdaFunction(controller, nil))
	return rule
}
