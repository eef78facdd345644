package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// recorder is an account that records what Apply asks of it, one line per call, and refuses the
// resource named in fail.
type recorder struct {
	calls []string
	fail  string
}

func (r *recorder) call(res *Resource, format string, args ...any) error {
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
	if res.LogicalID == r.fail {
		return errors.New("refused")
	}
	return nil
}

func (r *recorder) CreateBucket(_ context.Context, res *Resource, b Bucket) error {
	return r.call(res, "bucket %s", b.Name)
}

func (r *recorder) CreateQueue(_ context.Context, res *Resource, q Queue) (string, error) {
	return "http://sqs.local/" + q.Name, r.call(res, "queue %s %s fifo=%s", q.Name, q.ARN, q.Attributes["FifoQueue"])
}

func (r *recorder) CreateStateMachine(_ context.Context, res *Resource, m StateMachine) error {
	return r.call(res, "state machine %s %s %s", m.Name, m.ARN, m.Definition)
}

func (r *recorder) CreateTable(_ context.Context, res *Resource, t Table) error {
	return r.call(res, "table %s %v", t.Name, t.KeySchema)
}

func (r *recorder) CreateLogGroup(_ context.Context, res *Resource, g LogGroup) error {
	return r.call(res, "log group %s %s key=%s", g.Name, g.ARN, g.KmsKeyId)
}

func (r *recorder) CreateFunction(_ context.Context, res *Resource, f Function) error {
	return r.call(res, "function %s %s %s QUEUE=%s TABLE=%s LOGS=%s", f.Name, f.ARN, f.Source, f.Variables["QUEUE"], f.Variables["TABLE"], f.LogGroup)
}

func (r *recorder) PutFunctionEventInvokeConfig(_ context.Context, res *Resource, c InvokeConfig) error {
	return r.call(res, "invoke config %s retries=%d age=%s destinations=%v", c.FunctionName, *c.MaximumRetryAttempts, c.MaximumEventAge, c.Destinations)
}

func (r *recorder) PutInsightRule(_ context.Context, res *Resource, ir InsightRule) error {
	return r.call(res, "insight rule %s %s", ir.Name, ir.Body)
}

func (r *recorder) PutRule(_ context.Context, res *Resource, rule Rule) error {
	return r.call(res, "rule %s %s -> %s group %s", res.LogicalID, rule.Pattern, rule.Targets[0].Arn, rule.Targets[0].MessageGroupID)
}

func (r *recorder) CreateEventSourceMapping(_ context.Context, res *Resource, m Mapping) (string, error) {
	return "uuid-1", r.call(res, "mapping %s -> %s batch=%d", m.EventSourceArn, m.FunctionName, m.BatchSize)
}

// Apply creates every resource after what it refers to, each with its physical name, ARN and
// resolved properties, whatever order the template lists them in, and names the resource an
// account refuses.
func TestApply(t *testing.T) {
	template := `{
	"Mp": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"EventSourceArn": {"Fn::GetAtt": ["Q", "Arn"]}, "FunctionName": {"Ref": "Ctl"}, "BatchSize": 1}},
	"Rl": {"Type": "AWS::Events::Rule", "Properties": {"EventPattern": {"source": ["aws.s3"]}, "Targets": [{"Arn": {"Fn::GetAtt": ["Q", "Arn"]}, "Id": "t", "SqsParameters": {"MessageGroupId": "g"}}]}},
	"Ir": {"Type": "AWS::CloudWatch::InsightRule", "Properties": {"RuleName": "blocked", "RuleBody": "{}", "RuleState": "ENABLED"}},
	"Cfg": {"Type": "AWS::Lambda::EventInvokeConfig", "Properties": {"FunctionName": {"Ref": "Ctl"}, "Qualifier": "$LATEST", "MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60}},
	"Ctl": {"Type": "AWS::Lambda::Function", "Metadata": {"tenantpipeline:source": "lambdas/controller"},
		"Properties": {"FunctionName": "acme-controller", "Environment": {"Variables": {"QUEUE": {"Ref": "Q"}, "TABLE": {"Ref": "Tbl"}}}, "LoggingConfig": {"LogGroup": {"Ref": "Lg"}}}},
	"Lg": {"Type": "AWS::Logs::LogGroup", "Properties": {"KmsKeyId": {"Fn::GetAtt": ["Key", "Arn"]}, "RetentionInDays": 30}},
	"Key": {"Type": "AWS::KMS::Key", "Properties": {}},
	"Tbl": {"Type": "AWS::DynamoDB::Table", "Properties": {"KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}], "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}]}},
	"Sm": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {"DefinitionString": {"Fn::Join": ["", ["{\"F\":\"", {"Fn::GetAtt": ["Ctl", "Arn"]}, "\",\"Q\":\"${q}\"}"]]},
		"DefinitionSubstitutions": {"q": {"Ref": "Q"}}}},
	"Q": {"Type": "AWS::SQS::Queue", "Properties": {"FifoQueue": true}},
	"In": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "ingest"}}
	}`
	load := func(t *testing.T) (*Assembly, *Resolver) { return oneStack(t, template) }
	asm, res := load(t)
	acct := &recorder{}
	if err := Apply(context.Background(), asm, res, acct); err != nil {
		t.Fatal(err)
	}
	const queueARN = "arn:aws:sqs:us-east-1:000000000000:q.fifo"
	const fnARN = "arn:aws:lambda:us-east-1:000000000000:function:acme-controller"
	logs := generatedName("S", "Lg", MaxLogGroupName) // CloudFormation's name for a log group without one
	key, _ := res.modelledIdentity(asm.Stacks[0], "Key", asm.Stacks[0].Resources["Key"])
	want := []string{
		"bucket ingest",
		"queue q.fifo " + queueARN + " fifo=true",
		`state machine sm arn:aws:states:us-east-1:000000000000:stateMachine:sm {"F":"` + fnARN + `","Q":"http://sqs.local/q.fifo"}`,
		"table tbl [{pk HASH}]",
		"log group " + logs + " arn:aws:logs:us-east-1:000000000000:log-group:" + logs + " key=" + key.Attrs["Arn"],
		"function acme-controller " + fnARN + " lambdas/controller QUEUE=http://sqs.local/q.fifo TABLE=tbl LOGS=" + logs,
		"invoke config acme-controller retries=0 age=1m0s destinations=false",
		"insight rule blocked {}",
		`rule Rl {"source":["aws.s3"]} -> ` + queueARN + " group g",
		"mapping " + queueARN + " -> acme-controller batch=1",
	}
	if !slices.Equal(acct.calls, want) {
		t.Errorf("got calls\n%s\nwant\n%s", strings.Join(acct.calls, "\n"), strings.Join(want, "\n"))
	}
	if id, _ := res.Identity(asm.Stacks[0].Resources["Mp"]); id.Ref != "uuid-1" {
		t.Errorf("the mapping's Ref: got %q, want the UUID the account returned", id.Ref)
	}

	// A refusal stops the deploy at that resource, named.
	asm, res = load(t)
	acct = &recorder{fail: "Q"}
	err := Apply(context.Background(), asm, res, acct)
	if err == nil || err.Error() != "queue q.fifo (Q): refused" || len(acct.calls) != 2 {
		t.Errorf("got %v after %d calls, want \"queue q.fifo (Q): refused\" after the bucket and the queue", err, len(acct.calls))
	}
}

// oneStack is an assembly of one stack "S" with the resources of template (a JSON object of
// logical ids), resolved in us-east-1 of account 000000000000.
func oneStack(t *testing.T, template string) (*Assembly, *Resolver) {
	t.Helper()
	st := &Stack{Name: "S", Resources: map[string]*Resource{}}
	if err := json.Unmarshal([]byte(template), &st.Resources); err != nil {
		t.Fatal(err)
	}
	for id, r := range st.Resources {
		r.Stack, r.LogicalID = st, id
	}
	asm := &Assembly{Stacks: []*Stack{st}}
	res, err := NewResolver(asm, "us-east-1", "000000000000")
	if err != nil {
		t.Fatal(err)
	}
	return asm, res
}
