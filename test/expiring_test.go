package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
)

// TestExpiringMessageAlarm: in both tiers, an alarm on the FIFO queue's ApproximateAgeOfOldestMessage
// fires at the queue's 14-day retention minus the workflow timeout minus the one-day margin, so a
// head file that starts before it can run its whole timeout without SQS deleting its message, and
// it notifies the alarm topic like the others.
func TestExpiringMessageAlarm(t *testing.T) {
	const day = 24 * 3600
	build := map[string]func(t *testing.T, timeout time.Duration) assertions.Template{
		"silo": func(t *testing.T, timeout time.Duration) assertions.Template {
			stack, _ := pipelineApp(t, func(p *tenantpipeline.Props) {
				p.WorkflowTimeout = timeout
				p.AlarmTopic = awssns.Topic_FromTopicArn(p.Bucket.Stack(), jsii.String("Alarms"), jsii.String("arn:aws:sns:eu-west-1:123456789012:ops"))
			}, nil)
			return assertions.Template_FromStack(stack, nil)
		},
		"pool": func(t *testing.T, timeout time.Duration) assertions.Template {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("Construct-Test"), nil)
			bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true)})
			topic := awssns.Topic_FromTopicArn(stack, jsii.String("Alarms"), jsii.String("arn:aws:sns:eu-west-1:123456789012:ops"))
			tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{Name: "default", Bucket: bucket,
				Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/h"}},
				Shared:  tenantpipeline.SharedProps{WorkflowTimeout: timeout, AlarmTopic: topic}})
			return assertions.Template_FromStack(stack, nil)
		},
	}
	for _, tier := range []string{"silo", "pool"} {
		for _, tc := range []struct {
			timeout time.Duration
			want    float64 // seconds: 14 days − timeout − 1 day
		}{
			{0, 12 * day}, // the default workflow timeout, 24 hours
			{2 * time.Hour, 13*day - 2*3600},
			{6 * 24 * time.Hour, 7 * day},
		} {
			t.Run(fmt.Sprintf("%s/timeout %v", tier, tc.timeout), func(t *testing.T) {
				tpl := build[tier](t, tc.timeout)
				alarms := tpl.FindResources(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{"Properties": map[string]any{
					"MetricName": "ApproximateAgeOfOldestMessage", "Namespace": "AWS/SQS", "Threshold": tc.want,
				}})
				var ids []string
				for id := range *alarms {
					ids = append(ids, id)
				}
				if len(ids) != 1 || !strings.Contains(ids[0], "ExpiringMessageAlarm") {
					t.Fatalf("got alarms %v on the queue's oldest message age at %v s, want ExpiringMessageAlarm", ids, tc.want)
				}
				p := (*(*alarms)[ids[0]])["Properties"].(map[string]any)
				for k, want := range map[string]any{
					"Statistic": "Maximum", "ComparisonOperator": "GreaterThanOrEqualToThreshold", "EvaluationPeriods": 1.0,
					"AlarmActions": []any{"arn:aws:sns:eu-west-1:123456789012:ops"}, "OKActions": []any{"arn:aws:sns:eu-west-1:123456789012:ops"},
				} {
					if got := asJSON(p[k]); got != asJSON(want) {
						t.Errorf("%s: got %s, want %s", k, got, asJSON(want))
					}
				}
				// On the FIFO queue the files wait in, not on a dead-letter or intake queue.
				queues := tpl.FindResources(jsii.String("AWS::SQS::Queue"), map[string]any{"Properties": map[string]any{
					"FifoQueue": true,
				}})
				dims := asJSON(p["Dimensions"])
				var on []string
				for id := range *queues {
					if strings.Contains(dims, `"`+id+`"`) {
						on = append(on, id)
					}
				}
				if len(on) != 1 || strings.Contains(on[0], "Intake") || strings.Contains(on[0], "Dead") {
					t.Errorf("got the alarm on queues %v (dimensions %s), want the tenant's or pool's FIFO queue", on, dims)
				}
				if d := asJSON(p["AlarmDescription"]); !strings.Contains(d, "retention") || !strings.Contains(d, "pipectl status") {
					t.Errorf("description %q lacks what it means and what to do", d)
				}
			})
		}
	}
}
