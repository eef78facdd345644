package tenantpipeline

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/example/tenantpipeline/internal/tenants"
)

// The per-tenant intake (tenants.IntakeTenant). An EventBridge rule's SQS target takes one static
// message group (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_SqsParameters.html),
// so with rules alone every tenant of a group waits behind the events of the others. Here the
// pool's one rule posts each event to a REST API whose integration calls SQS SendMessage on the
// intake with the message group named after the key's tenant segment (IntakeRequestTemplate):
// each tenant is its own group, Lambda runs a router invocation per active group
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html), and a tenant's burst
// holds only its own events. The call is synchronous: a SendMessage that fails answers 500, which
// EventBridge retries for up to 24 hours before the dead-letter queue, as it retries the SQS target
// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-api-gateway-target.html). A REST API
// is the one target that can compute the group without code: EventBridge Pipes cannot read an
// event bus, and a Lambda or Step Functions target would take the event off EventBridge's retries.
//
// Who may call it: the API takes AWS_IAM signatures only, and its resource policy denies every
// principal but the rule's role (IntakeAPIEventRole), so no one else can put an event in a tenant's
// group. The integration's role may send to the intake only.

// Where the pool's rule posts: POST /<IntakeAPIPath> on stage IntakeAPIStage.
const (
	IntakeAPIPath  = "events"
	IntakeAPIStage = "intake"
)

// newIntakeAPI creates the per-tenant intake's REST API, its integration's role and the rule's
// role, and returns the rule's target.
func (t *TenantPool) newIntakeAPI() awsevents.IRuleTarget {
	p := t.Props
	stack := awscdk.Stack_Of(t.Construct)
	// Neither of the intake API's roles touches the bucket, so neither is under RolePath, whose
	// roles the bucket's Denies exempt (roles.go).
	t.IntakeAPIEventRole = awsiam.NewRole(t.Construct, jsii.String("IntakeApiEventRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil),
		Description: jsii.String(fmt.Sprintf("Pool %s: EventBridge posts the pool's file events to its intake API", p.Name)),
	})
	deny := awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Principals: &[]awsiam.IPrincipal{awsiam.NewArnPrincipal(t.IntakeAPIEventRole.RoleArn())},
			Actions:    jsii.Strings("execute-api:Invoke"),
			Resources:  jsii.Strings("execute-api:/*"),
		}),
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("OnlyThePoolsRule"),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewStarPrincipal()},
			Actions:    jsii.Strings("execute-api:Invoke"),
			Resources:  jsii.Strings("execute-api:/*"),
			Conditions: &map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": *t.IntakeAPIEventRole.RoleArn()}},
		}),
	}})
	t.IntakeAPI = awsapigateway.NewRestApi(t.Construct, jsii.String("IntakeApi"), &awsapigateway.RestApiProps{
		RestApiName: jsii.String(*stack.StackName() + "-intake"),
		Description: jsii.String(fmt.Sprintf("Pool %s: the file events of its rule into the intake queue, each in its tenant's message group", p.Name)),
		// EventBridge reaches Regional and edge-optimized endpoints, not private ones
		// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-api-gateway-target.html).
		EndpointConfiguration: &awsapigateway.EndpointConfiguration{Types: &[]awsapigateway.EndpointType{awsapigateway.EndpointType_REGIONAL}},
		Policy:                deny,
		// API Gateway's logging needs the account's one CloudWatch role (AWS::ApiGateway::Account),
		// which an app must not overwrite; the stage's metrics are free.
		CloudWatchRole: jsii.Bool(false),
		DeployOptions: &awsapigateway.StageOptions{
			StageName:      jsii.String(IntakeAPIStage),
			MetricsEnabled: jsii.Bool(true),
		},
	})
	t.IntakeAPIRole = awsiam.NewRole(t.Construct, jsii.String("IntakeApiRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("apigateway.amazonaws.com"), nil),
		Description: jsii.String(fmt.Sprintf("Pool %s: the intake API sends each event to the intake queue", p.Name)),
	})
	t.IntakeAPIRole.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("sqs:SendMessage"),
		Resources: jsii.Strings(*t.Intake.QueueArn()),
	}))
	t.enc.grantQueues(t.IntakeAPIRole, true, t.Intake)
	integration := awsapigateway.NewAwsIntegration(&awsapigateway.AwsIntegrationProps{
		Service:               jsii.String("sqs"),
		Path:                  jsii.String(fmt.Sprintf("%s/%s", *stack.Account(), *t.Intake.QueueName())),
		IntegrationHttpMethod: jsii.String("POST"),
		Options: &awsapigateway.IntegrationOptions{
			CredentialsRole: t.IntakeAPIRole,
			// Only EventBridge's JSON: any other body is refused (415), never passed on.
			PassthroughBehavior: awsapigateway.PassthroughBehavior_NEVER,
			RequestParameters:   &map[string]*string{"integration.request.header.Content-Type": jsii.String("'application/x-www-form-urlencoded'")},
			RequestTemplates:    &map[string]*string{"application/json": jsii.String(IntakeRequestTemplate(p.Prefix))},
			// SQS's 2xx is the event stored; anything else, a throttle or a refusal, answers 500 so
			// that EventBridge retries it and, after 24 hours, keeps it on the dead-letter queue.
			IntegrationResponses: &[]*awsapigateway.IntegrationResponse{
				{StatusCode: jsii.String("500")},
				{StatusCode: jsii.String("200"), SelectionPattern: jsii.String(`2\d{2}`)},
			},
		},
	})
	t.IntakeAPI.Root().AddResource(jsii.String(IntakeAPIPath), nil).AddMethod(jsii.String("POST"), integration, &awsapigateway.MethodOptions{
		AuthorizationType: awsapigateway.AuthorizationType_IAM,
		MethodResponses:   &[]*awsapigateway.MethodResponse{{StatusCode: jsii.String("200")}, {StatusCode: jsii.String("500")}},
	})
	cdknag.NagSuppressions_AddResourceSuppressions(t.IntakeAPI, &[]*cdknag.NagPackSuppression{
		{Id: jsii.String("AwsSolutions-APIG1"), Reason: jsii.String("Access logging needs the account's one API Gateway CloudWatch role, which the app does not overwrite; every request is an EventBridge delivery, counted by the rule's Invocations and FailedInvocations and the stage's 4XXError and 5XXError metrics, and one that fails lands in the rule's dead-letter queue.")},
		{Id: jsii.String("AwsSolutions-APIG6"), Reason: jsii.String("Execution logging needs the account's one API Gateway CloudWatch role, which the app does not overwrite; the stage's metrics are on.")},
		{Id: jsii.String("AwsSolutions-APIG2"), Reason: jsii.String("The only caller is the pool's rule (the resource policy denies every other principal), whose body is EventBridge's event; the template reads its key and id, and any other content type is refused.")},
		{Id: jsii.String("AwsSolutions-APIG3"), Reason: jsii.String("The API takes only SigV4 requests of the pool's rule role (AWS_IAM and a resource policy Deny); there is no public caller for a web ACL to filter.")},
		{Id: jsii.String("AwsSolutions-COG4"), Reason: jsii.String("Authorized by IAM (AWS_IAM): the caller is EventBridge with the pool's rule role, not a user.")},
	}, jsii.Bool(true))
	return awseventstargets.NewApiGateway(t.IntakeAPI, &awseventstargets.ApiGatewayProps{
		Path:            jsii.String("/" + IntakeAPIPath),
		Method:          jsii.String("POST"),
		Stage:           jsii.String(IntakeAPIStage),
		EventRole:       t.IntakeAPIEventRole,
		DeadLetterQueue: t.RuleDeadLetterQueue,
		MaxEventAge:     seconds(RuleMaxEventAge),
		RetryAttempts:   jsii.Number(RuleRetryAttempts),
	})
}

// narrowIntakeEventRole leaves the rule's role execute-api:Invoke alone: CDK's API Gateway target
// grants execute-api:ManageConnections beside it, which only WebSocket APIs use
// (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonapigatewaymanagement.html).
func (t *TenantPool) narrowIntakeEventRole() {
	policy := t.IntakeAPIEventRole.Node().TryFindChild(jsii.String("DefaultPolicy"))
	if policy == nil {
		panic("the intake API's event role has no DefaultPolicy: CDK's API Gateway target changed")
	}
	policy.Node().DefaultChild().(awsiam.CfnPolicy).AddPropertyOverride(jsii.String("PolicyDocument.Statement.0.Action"), "execute-api:Invoke")
}

// RouterConcurrency is how many router invocations a pool with the per-tenant intake runs at once
// (its event source mapping's MaximumConcurrency): Lambda would otherwise scale the mapping to one
// invocation per active message group, which is one per tenant with new files, out of the
// account's concurrency. 16, as many as the sharded intake's default groups.
// https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html
const RouterConcurrency = 16

// routerConcurrency is the router's MaximumConcurrency: RouterConcurrency, or with the sharded
// intake its groups (2 at least, Lambda's minimum).
func (t *TenantPool) routerConcurrency() int {
	if t.perTenantIntake() {
		return RouterConcurrency
	}
	return max(2, t.Props.IntakeGroups)
}

// perTenantIntake says whether the pool's intake gives each tenant its own message group.
func (t *TenantPool) perTenantIntake() bool { return t.Props.Intake == tenants.IntakeTenant }
