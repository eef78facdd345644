package tenantpipeline

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// The rule target's retry policy. EventBridge retries a failed delivery with backoff for up to
// 24 hours and 185 attempts, then drops the event unless the target has a dead-letter queue; these
// are those maxima, set explicitly, so an outage of the tenant's queue loses nothing for a day and
// every event that still fails is kept in the dead-letter queue.
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-retry-policy.html
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html
const (
	RuleMaxEventAge   = 24 * time.Hour
	RuleRetryAttempts = 185
)

// addRuleTarget sends the rule's events to the tenant's FIFO queue, with an explicit retry policy
// and a dead-letter queue for events that could not be delivered.
func (t *TenantPipeline) addRuleTarget() {
	// A standard queue: EventBridge dead-letter queues cannot be FIFO queues. Encrypted with
	// SSE-SQS, which EventBridge can send to (it cannot use the AWS-managed alias/aws/sqs key).
	t.RuleDeadLetterQueue = awssqs.NewQueue(t.Construct, jsii.String("RuleDeadLetterQueue"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: seconds(QueueRetention),
		// Dead-lettered events are files that never reached the tenant's queue: keep them when the
		// tenant is removed.
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	// The target also adds queue policies that let only this rule send to either queue (aws:SourceArn).
	t.Rule.AddTarget(awseventstargets.NewSqsQueue(t.Queue, &awseventstargets.SqsQueueProps{
		MessageGroupId:  jsii.String(t.Props.Tenant.ID),
		DeadLetterQueue: t.RuleDeadLetterQueue,
		MaxEventAge:     seconds(RuleMaxEventAge),
		RetryAttempts:   jsii.Number(RuleRetryAttempts),
	}))
	cdknag.NagSuppressions_AddResourceSuppressions(t.RuleDeadLetterQueue, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SQS3"),
		Reason: jsii.String("This queue is itself the dead-letter queue of the tenant's EventBridge rule target (cdk-nag only recognizes " +
			"SQS redrive policies); its messages are alarmed on and re-sent by an operator."),
	}}, jsii.Bool(true))
}
