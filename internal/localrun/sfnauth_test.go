package localrun

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

func TestSFNResource(t *testing.T) {
	for _, tc := range []struct{ op, body, resource, stateMachine string }{
		{"StartExecution", `{"stateMachineArn":"arn:aws:states:us-east-1:1:stateMachine:files","name":"x"}`,
			"arn:aws:states:us-east-1:1:stateMachine:files", "arn:aws:states:us-east-1:1:stateMachine:files"},
		{"DescribeExecution", `{"executionArn":"arn:aws:states:us-east-1:1:execution:files:abc"}`,
			"arn:aws:states:us-east-1:1:execution:files:abc", "arn:aws:states:us-east-1:1:stateMachine:files"},
		{"DescribeMapRun", `{"mapRunArn":"arn:aws:states:us-east-1:1:mapRun:files/m:r"}`, "*", ""},
		{"ListStateMachines", `{}`, "*", ""},
	} {
		if r, sm := sfnResource(tc.op, []byte(tc.body)); r != tc.resource || sm != tc.stateMachine {
			t.Errorf("%s: got %q, %q; want %q, %q", tc.op, r, sm, tc.resource, tc.stateMachine)
		}
	}
}

// A session's Step Functions call is judged by its role's policies, and on a state machine under a
// customer-managed key by the key's use in its name: GenerateDataKey to start an execution,
// Decrypt to read one, under the state machine's ARN as encryption context.
func TestSFNCallsJudged(t *testing.T) {
	r := newTenantAuthRig(t)
	const (
		key   = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
		files = "arn:aws:states:us-east-1:123456789012:stateMachine:files"
		plain = "arn:aws:states:us-east-1:123456789012:stateMachine:plain"
		exec  = "arn:aws:states:us-east-1:123456789012:execution:files:f-1"
	)
	for _, m := range r.auth.asm.OfType("AWS::StepFunctions::StateMachine") {
		arn := map[string]string{"EncryptedMachine": files, "PlainMachine": plain}[m.LogicalID]
		r.auth.res.Set(m, deploy.Identity{Ref: arn, Attrs: map[string]string{"Arn": arn}})
	}
	r.setKeyPolicy(key, mustStatement(rootKeyStatement))
	server := serveGuarded(t, r.auth.guardSFN, "application/x-amz-json-1.0", `{"executionArn":"`+exec+`","startDate":0}`)
	start := allow([]string{"states:StartExecution"}, []string{files, plain}, nil)
	describe := allow([]string{"states:DescribeExecution"}, []string{"arn:aws:states:us-east-1:123456789012:execution:files:*"}, nil)
	useKey := func(action string) statement {
		return mustStatement(`{"Effect":"Allow","Action":"` + action + `","Resource":"` + key + `",
			"Condition":{"StringEquals":{"kms:EncryptionContext:aws:states:stateMachineArn":"` + files + `"}}}`)
	}
	startFiles := func(c *sfn.Client) error {
		_, err := c.StartExecution(context.Background(), &sfn.StartExecutionInput{StateMachineArn: aws.String(files), Name: aws.String("f-1")})
		return err
	}
	for i, tc := range []struct {
		name     string
		identity []statement
		call     func(*sfn.Client) error
		want     bool
	}{
		{"start, with the key", []statement{start, useKey("kms:GenerateDataKey")}, startFiles, true},
		{"start, without the key", []statement{start}, startFiles, false},
		{"start, the key only to decrypt", []statement{start, useKey("kms:Decrypt")}, startFiles, false},
		{"no start", []statement{useKey("kms:GenerateDataKey")}, startFiles, false},
		{"start a state machine without a key", []statement{start}, func(c *sfn.Client) error {
			_, err := c.StartExecution(context.Background(), &sfn.StartExecutionInput{StateMachineArn: aws.String(plain), Name: aws.String("p-1")})
			return err
		}, true},
		{"describe, with the key", []statement{describe, useKey("kms:Decrypt")}, func(c *sfn.Client) error {
			_, err := c.DescribeExecution(context.Background(), &sfn.DescribeExecutionInput{ExecutionArn: aws.String(exec)})
			return err
		}, true},
		{"describe, without the key", []statement{describe}, func(c *sfn.Client) error {
			_, err := c.DescribeExecution(context.Background(), &sfn.DescribeExecutionInput{ExecutionArn: aws.String(exec)})
			return err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := r.sessionConfig(t, fmt.Sprintf("sfn%d", i), tc.identity)
			err := tc.call(sfn.NewFromConfig(cfg, func(o *sfn.Options) { o.BaseEndpoint = aws.String(server) }))
			wantAllowed(t, err, tc.want, "AccessDeniedException")
		})
	}
}
