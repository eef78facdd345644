package localrun

// The SQS queues of the templates, created in fauxqs with the templates' attributes.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func (r *Run) createQueue(ctx context.Context, asm *Assembly, res *Resolver, q *Resource) (*Queue, error) {
	var props struct {
		QueueName                     string
		FifoQueue                     any
		ContentBasedDeduplication     any
		VisibilityTimeout             any
		ReceiveMessageWaitTimeSeconds any
		MessageRetentionPeriod        any
		DelaySeconds                  any
		MaximumMessageSize            any
		DeduplicationScope            string
		FifoThroughputLimit           string
	}
	for _, k := range []string{"QueueName", "FifoQueue", "ContentBasedDeduplication", "VisibilityTimeout", "ReceiveMessageWaitTimeSeconds", "MessageRetentionPeriod", "DelaySeconds", "MaximumMessageSize", "DeduplicationScope", "FifoThroughputLimit"} {
		raw, ok := q.Properties[k]
		if !ok {
			continue
		}
		v, err := res.Resolve(q.Stack, raw)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(map[string]any{k: v})
		json.Unmarshal(b, &props)
	}
	fifo := fmt.Sprint(props.FifoQueue) == "true"
	name := props.QueueName
	if name == "" {
		name = physicalName(q, 75)
		if fifo {
			name += ".fifo"
		}
	}
	attrs := map[string]string{}
	set := func(k string, v any) {
		if s := attrString(v); s != "" {
			attrs[k] = s
		}
	}
	if fifo {
		attrs["FifoQueue"] = "true"
	}
	set("ContentBasedDeduplication", props.ContentBasedDeduplication)
	set("VisibilityTimeout", props.VisibilityTimeout)
	set("ReceiveMessageWaitTimeSeconds", props.ReceiveMessageWaitTimeSeconds)
	set("MessageRetentionPeriod", props.MessageRetentionPeriod)
	set("DelaySeconds", props.DelaySeconds)
	set("MaximumMessageSize", props.MaximumMessageSize)
	set("DeduplicationScope", props.DeduplicationScope)
	set("FifoThroughputLimit", props.FifoThroughputLimit)
	out, err := r.sqsAdmin.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return nil, fmt.Errorf("create queue %s: %w", name, err)
	}
	vis, _ := strconv.Atoi(cmpOr(attrs["VisibilityTimeout"], "30"))
	return &Queue{Name: name, URL: aws.ToString(out.QueueUrl), ARN: fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, account, name), VisibilityTimeout: vis}, nil
}

// attrString renders a template value as an SQS attribute value. SQS takes integers as decimal
// strings ("MessageRetentionPeriod – An integer from 60 seconds (1 minute) to 1,209,600 seconds",
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SetQueueAttributes.html);
// a JSON number decodes to float64, which fmt prints as 1.2096e+06.
func attrString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// queueDepth is the number of messages of a queue, visible or in flight.
func (r *Run) queueDepth(ctx context.Context, q *Queue) (int, error) {
	out, err := r.sqsAdmin.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range out.Attributes {
		x, _ := strconv.Atoi(v)
		n += x
	}
	return n, nil
}
