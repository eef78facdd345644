package localrun

// The SQS queues of the templates, created in fauxqs with the templates' attributes.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

func (r *Run) createQueue(ctx context.Context, asm *deploy.Assembly, res *deploy.Resolver, q *deploy.Resource) (*Queue, error) {
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
	// High throughput mode (a pool's queues). fauxqs 2.4 stores both attributes and returns them,
	// but has no quota to lift and deduplicates queue-wide whatever DeduplicationScope says
	// (dist/sqs/sqsStore.js): stricter than per message group only for a deduplication id sent to
	// two groups, which the pipeline never does (constructs/tenantpipeline, highThroughput).
	set("DeduplicationScope", props.DeduplicationScope)
	set("FifoThroughputLimit", props.FifoThroughputLimit)
	out, err := r.sqsAdmin.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return nil, fmt.Errorf("create queue %s: %w", name, err)
	}
	vis, _ := strconv.Atoi(cmp.Or(attrs["VisibilityTimeout"], "30"))
	return &Queue{Name: name, URL: aws.ToString(out.QueueUrl), ARN: fmt.Sprintf("arn:aws:sqs:%s:%s:%s", emulate.Region, emulate.Account, name), VisibilityTimeout: vis}, nil
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

// tenantDepth is the number of a tenant's messages, visible, in flight or delayed: its queue's
// depth for a silo tenant, its message group's in the pool's queue for a pooled one.
func (r *Run) tenantDepth(ctx context.Context, t *Tenant) (int, error) {
	if !t.Pooled() {
		return r.queueDepth(ctx, t.Queue)
	}
	groups, err := r.groupDepths(ctx, t.Queue)
	if err != nil {
		return 0, err
	}
	return groups[t.ID], nil
}

// groupDepths counts a FIFO queue's messages (visible, in flight, delayed) by message group. SQS
// has no API for it; fauxqs's inspection endpoint (GET /_fauxqs/queues/<name>) lists every message
// without changing it.
func (r *Run) groupDepths(ctx context.Context, q *Queue) (map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.sqsURL+"/_fauxqs/queues/"+url.PathEscape(q.Name), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("inspect queue %s: %s", q.Name, resp.Status)
	}
	type message struct {
		MessageGroupID string `json:"messageGroupId"`
	}
	var body struct {
		Messages struct {
			Ready, Delayed []message
			Inflight       []struct{ Message message }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("inspect queue %s: %w", q.Name, err)
	}
	n := map[string]int{}
	for _, m := range append(body.Messages.Ready, body.Messages.Delayed...) {
		n[m.MessageGroupID]++
	}
	for _, m := range body.Messages.Inflight {
		n[m.Message.MessageGroupID]++
	}
	return n, nil
}
