package localrun

// The depths of the SQS queues of the templates (created in fauxqs by CreateQueue, account.go), as
// the snapshot reads them.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// queueDepth is the number of messages of a queue, visible or in flight.
func (c *Cloud) queueDepth(ctx context.Context, q *Queue) (int, error) {
	out, err := c.sqsAdmin.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
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
// depth for a silo tenant, its message group's in the pool's queue for a pooled one. A sequenced
// tenant's tick (pipeline.TickGroup) is not counted: it is the pipeline's timer, in a group of
// its own, and comes back while a gap lasts whatever the files do. groups keeps each pool queue's
// depths by message group for the caller's pass over the tenants, so that the queue is listed
// once a pass, not once for each of its tenants.
func (c *Cloud) tenantDepth(ctx context.Context, t *Tenant, groups map[string]map[string]int) (int, error) {
	if !t.Pooled() {
		n, err := c.queueDepth(ctx, t.Queue)
		if _, seq := t.SequenceRule(); err != nil || n == 0 || !seq {
			return n, err
		}
		ticks, err := c.tickDepth(ctx, t)
		return n - ticks, err
	}
	depths, ok := groups[t.Queue.Name]
	if !ok {
		var err error
		if depths, err = c.groupDepths(ctx, t.Queue); err != nil {
			return 0, err
		}
		groups[t.Queue.Name] = depths
	}
	return depths[t.ID], nil
}

// groupDepths counts a FIFO queue's messages (visible, in flight, delayed) by message group. SQS
// has no API for it; fauxqs's inspection endpoint (GET /_fauxqs/queues/<name>) lists every message
// without changing it.
func (c *Cloud) groupDepths(ctx context.Context, q *Queue) (map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.sqsURL+"/_fauxqs/queues/"+url.PathEscape(q.Name), nil)
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
