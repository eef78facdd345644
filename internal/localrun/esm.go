package localrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// mapping is a Lambda event source mapping for an SQS queue, following Lambda's semantics
// (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html and services-sqs-errorhandling.html):
//   - it long-polls the queue and invokes the function synchronously with up to BatchSize messages;
//   - on success it deletes the batch, except the messages the function lists in
//     batchItemFailures when ReportBatchItemFailures is on;
//   - when the invocation fails (error, crash, timeout, throttle) it deletes nothing and leaves the
//     messages alone: they become visible again when their visibility timeout ends;
//   - a response naming an unknown message id fails the whole batch.
type mapping struct {
	run            *Run
	queue          *Queue
	fn             *Function
	batch          int
	reportFailures bool
}

func (m *mapping) poll(ctx context.Context) {
	for ctx.Err() == nil {
		if !m.run.pollGate(ctx, m) { // a disabled mapping does not poll (controlplane.go)
			continue
		}
		out, err := m.run.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            aws.String(m.queue.URL),
			MaxNumberOfMessages: int32(m.batch),
			// Lambda's pollers long-poll for 20 s, so an idle queue costs few ReceiveMessage calls
			// (they count in the API-call figures).
			WaitTimeSeconds:             20,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintf(m.run.cfg.Logs, "event source mapping %s: receive: %v\n", m.queue.Name, err)
				sleep(ctx, time.Second)
			}
			continue
		}
		if len(out.Messages) == 0 || m.run.releaseIfDisabled(ctx, m, out.Messages) {
			continue
		}
		m.run.setBusy(1)
		m.handle(ctx, out.Messages)
		m.run.setBusy(-1)
	}
}

func (m *mapping) handle(ctx context.Context, msgs []sqstypes.Message) {
	m.run.mu.Lock()
	if m.run.delivered == nil {
		m.run.delivered = map[string]map[string]bool{}
	}
	if m.run.delivered[m.queue.ARN] == nil {
		m.run.delivered[m.queue.ARN] = map[string]bool{}
	}
	for _, msg := range msgs {
		m.run.delivered[m.queue.ARN][aws.ToString(msg.MessageId)] = true
	}
	m.run.mu.Unlock()
	event := map[string]any{"Records": m.records(msgs)}
	payload, _ := json.Marshal(event)
	res, err := m.fn.Invoke(ctx, payload)
	if err != nil {
		if !errors.Is(err, ErrThrottled) && ctx.Err() == nil {
			m.run.mappingErrors.Add(1)
			fmt.Fprintf(m.run.cfg.Logs, "event source mapping %s: invoke: %v\n", m.queue.Name, err)
		}
		return
	}
	if res.ErrorType != "" {
		m.run.mappingErrors.Add(1)
		fmt.Fprintf(m.run.cfg.Logs, "event source mapping %s: function error %s: %s\n", m.queue.Name, res.ErrorType, res.Payload)
		return
	}
	keep := map[string]bool{}
	if m.reportFailures {
		var resp struct {
			BatchItemFailures []struct {
				ItemIdentifier string `json:"itemIdentifier"`
			} `json:"batchItemFailures"`
		}
		if len(res.Payload) > 0 && string(res.Payload) != "null" {
			if err := json.Unmarshal(res.Payload, &resp); err != nil {
				return // an unparsable response fails the batch
			}
		}
		ids := map[string]bool{}
		for _, msg := range msgs {
			ids[aws.ToString(msg.MessageId)] = true
		}
		for _, f := range resp.BatchItemFailures {
			if !ids[f.ItemIdentifier] {
				return // an empty or unknown identifier fails the whole batch
			}
			keep[f.ItemIdentifier] = true
		}
	}
	var entries []sqstypes.DeleteMessageBatchRequestEntry
	for i, msg := range msgs {
		if keep[aws.ToString(msg.MessageId)] {
			continue
		}
		entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle})
	}
	if len(entries) == 0 {
		return
	}
	if _, err := m.run.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.queue.URL), Entries: entries}); err != nil && ctx.Err() == nil {
		fmt.Fprintf(m.run.cfg.Logs, "event source mapping %s: delete: %v\n", m.queue.Name, err)
	}
}

// records renders messages as the SQS event Lambda sends.
func (m *mapping) records(msgs []sqstypes.Message) []map[string]any {
	out := make([]map[string]any, 0, len(msgs))
	for _, msg := range msgs {
		attrs := map[string]string{}
		for k, v := range msg.Attributes {
			attrs[k] = v
		}
		mattrs := map[string]any{}
		for k, v := range msg.MessageAttributes {
			mattrs[k] = map[string]any{"stringValue": v.StringValue, "binaryValue": v.BinaryValue, "dataType": v.DataType, "stringListValues": []string{}, "binaryListValues": []string{}}
		}
		out = append(out, map[string]any{
			"messageId":         aws.ToString(msg.MessageId),
			"receiptHandle":     aws.ToString(msg.ReceiptHandle),
			"body":              aws.ToString(msg.Body),
			"attributes":        attrs,
			"messageAttributes": mattrs,
			"md5OfBody":         aws.ToString(msg.MD5OfBody),
			"eventSource":       "aws:sqs",
			"eventSourceARN":    m.queue.ARN,
			"awsRegion":         region,
		})
	}
	return out
}

// Messages is how many distinct messages of the tenant's queue the event source mapping has handed
// to the controller so far (a message delivered again counts once).
func (r *Run) Messages(tenantID string) int {
	t := r.Tenant(tenantID)
	if t == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.delivered[t.Queue.ARN])
}

// MappingErrors is how many event source mapping invocations failed (a function error, a crash, a
// timeout; not a throttle): the deliveries whose messages came back only after their visibility
// timeout.
func (r *Run) MappingErrors() int64 { return r.mappingErrors.Load() }

func (r *Run) setBusy(d int) {
	r.mu.Lock()
	r.busy += d
	r.mu.Unlock()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// initialPollers is how many pollers Lambda starts an SQS event source mapping with: "Lambda
// begins long polling with five concurrent batches"
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html).
const initialPollers = 5

// mappingPollers is how many invocations of one SQS event source mapping may run at once. Without a
// reservation Lambda scales on the function's unreserved concurrency; on a FIFO queue it scales "to
// the number of active message groups", and a message group never has two batches in flight
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html,
// https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html). So the pollers need no limit of
// their own beyond the initial five: the queue hands each group to one of them at a time, and a
// tenant's queue, with its single group, has one invocation at a time. A reserved concurrency
// (ReservedConcurrentExecutions, opt-in) or the mapping's MaximumConcurrency caps them.
func mappingPollers(reserved, maximumConcurrency int) int {
	n := initialPollers
	if reserved > 0 {
		n = min(n, reserved)
	}
	if maximumConcurrency > 0 {
		n = min(n, maximumConcurrency)
	}
	return n
}
