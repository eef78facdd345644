package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/s3event"
)

// maxUnroutedKeys is how many of the newest unrouted keys status names.
const maxUnroutedKeys = 5

// unrouted reads the pool's dead-letter queue, as replay --from-dlq does, for the events of
// objects under the pool's prefix that no tenant's prefix holds (poolsettings.Index.TenantOf):
// they reach no tenant's message group, so only that queue keeps them. It returns their count and
// their distinct keys, newest first (arrivalOrder), at most maxUnroutedKeys.
//
// It only looks: a visibility timeout of 0 leaves every message visible to the next reader (a
// replay --from-dlq, or this loop again), so messages are told apart by MessageId and the loop
// ends at a receive that brings no new one, or at maxDLQ messages.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ReceiveMessage.html
func (o *Ops) unrouted(ctx context.Context, p poolInfo) (count int, keys []string, err error) {
	seen := map[string]bool{}
	var events []s3event.Event
	for len(seen) < maxDLQ {
		out, err := o.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(p.out.DLQURL), MaxNumberOfMessages: 10, VisibilityTimeout: 0, WaitTimeSeconds: 1,
		})
		if err != nil {
			return 0, nil, fmt.Errorf("pool %s: receive from %s: %w", p.out.Pool, p.out.DLQURL, err)
		}
		fresh := 0
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			if id == "" {
				id = aws.ToString(m.ReceiptHandle)
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			fresh++
			ev, err := s3event.Parse([]byte(aws.ToString(m.Body)))
			if err != nil || ev.Detail.Bucket.Name != p.out.Bucket || !strings.HasPrefix(ev.Detail.Object.Key, p.out.Prefix) {
				continue
			}
			if _, ok := p.settings.TenantOf(ev.Detail.Object.Key); ok {
				continue
			}
			events = append(events, ev)
		}
		if fresh == 0 {
			break
		}
	}
	slices.SortStableFunc(events, func(a, b s3event.Event) int { return arrivalOrder(b, a) })
	for _, ev := range events {
		if len(keys) < maxUnroutedKeys && !slices.Contains(keys, ev.Detail.Object.Key) {
			keys = append(keys, ev.Detail.Object.Key)
		}
	}
	return len(events), keys, nil
}
