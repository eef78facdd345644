//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// A direct invoke of the controller with a made-up SQS event (whoever may call lambda:Invoke on
// it, not only who may send to the queue) cannot start a replay: the controller quarantines a
// replay request that has no control record under control/<tenant>/requests/, and starts
// nothing. Once an operator has written the record (pipectl does, under the bucket's Deny), the
// same request is performed: the record is what authorizes it. In both tiers.
func TestScenarioDirectInvokeOfTheControllerNeedsAControlRecord(t *testing.T) {
	t.Parallel()
	forEachTier(t, scenarioTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		tenant := r.Tenant("cont")
		key := tenant.Prefix + "x.csv"
		uploadAll(t, ctx, r, []upload{{"cont", "x.csv", csvOf(4)}})
		drain(t, ctx, r)
		registered := len(r.Sink.Registered("cont"))

		const requestID = "forged-1"
		head, err := r.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		m := pipeline.ControlMessage{Type: pipeline.ControlType, Version: pipeline.ControlVersion, Action: pipeline.ControlReplay, Tenant: "cont",
			Source: &pipeline.ControlSource{Bucket: r.Bucket, Key: key, VersionID: aws.ToString(head.VersionId), ETag: aws.ToString(head.ETag),
				Size: aws.ToInt64(head.ContentLength)},
			RequestedBy: r.OutsiderRoleARN(), Reason: "forged", RequestedAt: time.Now().UTC(), RequestID: requestID}
		body, err := pipeline.EncodeControl(m)
		if err != nil {
			t.Fatal(err)
		}
		fn := lambda.NewFromConfig(emulate.LocalAWS.Copy(), func(o *lambda.Options) {
			o.BaseEndpoint = aws.String(runEndpoint(t, r, "AWS_ENDPOINT_URL_LAMBDA"))
		})
		invoke := func(messageID string) {
			t.Helper()
			ev := events.SQSEvent{Records: []events.SQSMessage{{
				MessageId: messageID, ReceiptHandle: "made-up-" + messageID, Body: string(body), EventSource: "aws:sqs", EventSourceARN: tenant.Queue.ARN,
				Attributes: map[string]string{"MessageGroupId": "cont", "ApproximateReceiveCount": "1", "MessageDeduplicationId": requestID,
					"SentTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10)},
			}}}
			payload, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			out, err := fn.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(tenant.Controller.Name), Payload: payload})
			if err != nil {
				t.Fatalf("invoke %s: %v", tenant.Controller.Name, err)
			}
			if out.FunctionError != nil {
				t.Fatalf("invoke %s: function error %s: %s", tenant.Controller.Name, aws.ToString(out.FunctionError), out.Payload)
			}
		}
		replay := strings.Replace(tenant.FileMachine, ":stateMachine:", ":execution:", 1) + ":" + pipeline.ReplayExecutionPrefix + requestID
		started := func() bool {
			_, err := r.StepFunctions().DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(replay)})
			if errors.As(err, new(*sfntypes.ExecutionDoesNotExist)) {
				return false
			}
			if err != nil {
				t.Fatalf("describe %s: %v", replay, err)
			}
			return true
		}

		// Without a record: quarantined, nothing started, nothing registered.
		invoke("forged-m1")
		if started() {
			t.Fatalf("the forged replay started %s, want nothing started", replay)
		}
		if n := objectsUnder(t, ctx, r, pipeline.QuarantineDir(r.Tenant("cont").Owner())+"forged-m1"); n != 1 {
			t.Errorf("got %d quarantine records of the forged message, want 1", n)
		}
		if got := len(r.Sink.Registered("cont")); got != registered {
			t.Errorf("got %d records registered after the forged replay, want %d", got, registered)
		}

		// The operator's record makes the same request the operator's: it is performed.
		if _, err := r.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(pipeline.ControlRequestKey(r.Tenant("cont").Owner(), requestID)),
			Body: strings.NewReader(string(body)), IfNoneMatch: aws.String("*")}); err != nil {
			t.Fatalf("the operator's control record: %v", err)
		}
		invoke("forged-m2")
		if !started() {
			t.Fatalf("the recorded replay did not start %s", replay)
		}
	})
}
