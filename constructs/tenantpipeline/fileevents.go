package tenantpipeline

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/results"
)

// The File Processed event (README, "The File Processed event"): the controller puts one on the
// bus at each end of a file execution, with source tenantpipeline and detail-type
// "File Processed".

// fileEventBus is the bus the File Processed events go to: bus, or the account's default bus.
func fileEventBus(scope constructs.Construct, bus awsevents.IEventBus) awsevents.IEventBus {
	if bus != nil {
		return bus
	}
	return awsevents.EventBus_FromEventBusName(scope, jsii.String("DefaultEventBus"), jsii.String("default"))
}

// fileEventBusStatement lets its holder put events on bus only with the source tenantpipeline:
// events:source is the condition key of PutEvents for an entry's Source
// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html), so the role
// cannot pose as another application on a shared bus.
func fileEventBusStatement(bus awsevents.IEventBus) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:    jsii.Strings("events:PutEvents"),
		Resources:  jsii.Strings(*bus.EventBusArn()),
		Conditions: &map[string]any{"StringEquals": map[string]any{"events:source": results.EventSource}},
	})
}

// grantFileEvents names bus to the controller (pipeline.EnvEventBusName) and lets it put the File
// Processed events there.
func grantFileEvents(controller awslambda.Function, bus awsevents.IEventBus) {
	controller.AddToRolePolicy(fileEventBusStatement(bus))
}

// grantFailedResults lets the controller invoke the Split function's results task, which writes a
// failed file's results (the state machine writes them only on success; internal/controller,
// results.go). Only lambda:InvokeFunction, and only on that function's unqualified ARN.
// https://docs.aws.amazon.com/lambda/latest/dg/lambda-api-permissions-ref.html
func grantFailedResults(controller awslambda.Function, split awslambda.IFunction) {
	controller.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("lambda:InvokeFunction"),
		Resources: jsii.Strings(*split.FunctionArn()),
	}))
}
