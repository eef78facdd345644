package deploy

import (
	"encoding/json"
	"strings"
	"testing"
)

// apiTemplate is a REST API with POST /v1/events, an AWS integration with SQS queue q.fifo, on
// stage live; integration replaces the method's Integration when set.
func apiTemplate(t *testing.T, integration string) (*Assembly, *Resolver) {
	t.Helper()
	if integration == "" {
		integration = `{"Type": "AWS", "IntegrationHttpMethod": "POST", "Credentials": {"Fn::GetAtt": ["Role", "Arn"]},
			"Uri": {"Fn::Join": ["", ["arn:aws:apigateway:", {"Ref": "AWS::Region"}, ":sqs:path/", {"Ref": "AWS::AccountId"}, "/q.fifo"]]},
			"PassthroughBehavior": "NEVER", "RequestTemplates": {"application/json": "Action=SendMessage"},
			"IntegrationResponses": [{"StatusCode": "500"}, {"SelectionPattern": "2\\d{2}", "StatusCode": "200"}]}`
	}
	template := `{
	"Api": {"Type": "AWS::ApiGateway::RestApi", "Properties": {"Name": "intake"}},
	"V1": {"Type": "AWS::ApiGateway::Resource", "Properties": {"RestApiId": {"Ref": "Api"}, "ParentId": {"Fn::GetAtt": ["Api", "RootResourceId"]}, "PathPart": "v1"}},
	"Events": {"Type": "AWS::ApiGateway::Resource", "Properties": {"RestApiId": {"Ref": "Api"}, "ParentId": {"Ref": "V1"}, "PathPart": "events"}},
	"Post": {"Type": "AWS::ApiGateway::Method", "Properties": {"RestApiId": {"Ref": "Api"}, "ResourceId": {"Ref": "Events"}, "HttpMethod": "POST",
		"AuthorizationType": "AWS_IAM", "Integration": ` + integration + `}},
	"Stage": {"Type": "AWS::ApiGateway::Stage", "Properties": {"RestApiId": {"Ref": "Api"}, "StageName": "live"}},
	"Role": {"Type": "AWS::IAM::Role", "Properties": {"Path": "/p/"}}
	}`
	return oneStack(t, template)
}

// ReadAPIMethod finds the method an execute-api ARN names, through the API's id, the stage and the
// resources' path parts, and refuses what the local run does not deliver to.
func TestReadAPIMethod(t *testing.T) {
	asm, res := apiTemplate(t, "")
	api, _ := res.ResolveString(asm.Stacks[0], json.RawMessage(`{"Ref": "Api"}`))
	if len(api) != 10 || strings.ToLower(api) != api {
		t.Errorf("API id %q, want 10 lower-case characters as API Gateway gives them", api)
	}
	arn := "arn:aws:execute-api:us-east-1:000000000000:" + api + "/live/POST/v1/events"
	m, err := asm.ReadAPIMethod(res, arn)
	if err != nil {
		t.Fatal(err)
	}
	if m.APIID != api || m.Stage != "live" || m.HTTPMethod != "POST" || m.Path != "/v1/events" || m.Authorization != "AWS_IAM" ||
		m.QueueName != "q.fifo" || !strings.HasPrefix(m.Credentials, "arn:aws:iam::000000000000:role/p/") ||
		m.PassthroughBehavior != "NEVER" || m.RequestTemplates["application/json"] != "Action=SendMessage" ||
		m.Responses[""] != "500" || m.Responses[`2\d{2}`] != "200" {
		t.Errorf("got %+v", m)
	}
	for _, c := range []struct{ name, arn, integration, want string }{
		{"another stage", "arn:aws:execute-api:us-east-1:000000000000:" + api + "/test/POST/v1/events", "", `has no stage "test"`},
		{"another path", "arn:aws:execute-api:us-east-1:000000000000:" + api + "/live/POST/v1", "", "has no POST method on /v1"},
		{"another method", "arn:aws:execute-api:us-east-1:000000000000:" + api + "/live/GET/v1/events", "", "has no GET method"},
		{"another API", "arn:aws:execute-api:us-east-1:000000000000:abcdefghij/live/POST/v1/events", "", "no REST API of the templates has the id abcdefghij"},
		{"not execute-api", "arn:aws:sqs:us-east-1:000000000000:q.fifo", "", "is not an execute-api ARN"},
		{"a Lambda proxy integration", arn, `{"Type": "AWS_PROXY", "Uri": "arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/f/invocations"}`,
			"the local run delivers to AWS integrations with SQS"},
		{"SQS of another account", arn, `{"Type": "AWS", "Uri": "arn:aws:apigateway:us-east-1:sqs:path/111122223333/q.fifo"}`,
			"the local run delivers to AWS integrations with SQS"},
		{"an SQS action path", arn, `{"Type": "AWS", "Uri": "arn:aws:apigateway:us-east-1:sqs:action/SendMessage"}`,
			"the local run delivers to AWS integrations with SQS"},
	} {
		asm, res := apiTemplate(t, c.integration)
		if _, err := asm.ReadAPIMethod(res, c.arn); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
