package localrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// mapping is a Lambda event source mapping for an SQS queue, following Lambda's semantics
// (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html and services-sqs-errorhandling.html):
//   - it long-polls the queue and invokes the function synchronously with up to BatchSize messages;
//   - on success it deletes the batch, except the messages the function lists in
//     batchItemFailures when ReportBatchItemFailures is on;
//   - when the invocation fails (error, crash, timeout) it deletes nothing and leaves the
//     messages alone: they become visible again when their visibility timeout ends;
//   - a throttled invocation (TooManyRequestsException) is retried with backoff while the batch is
//     still in flight, then left alone like a failed one (invokeBatch);
//   - a response naming an unknown message id fails the whole batch.
type mapping struct {
	cloud          *Cloud
	queue          *Queue
	fn             *emulate.Function
	batch          int
	reportFailures bool
	// scale is how many pollers the mapping starts with and may grow to (mappingScale).
	scale pollerScale

	mu       sync.Mutex
	pollers  int // pollers running
	holding  int // pollers with a batch they have not finished handling
	inFlight int // invocations in progress
	peak     int // the most invocations in progress at once
	peakPoll int // the most pollers running at once
}

// start starts the mapping's first pollers; more start as messages arrive (poll).
func (m *mapping) start(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for range m.scale.initial {
		m.spawn(ctx)
	}
}

// spawn starts one poller; m.mu is held.
func (m *mapping) spawn(ctx context.Context) {
	m.pollers++
	m.peakPoll = max(m.peakPoll, m.pollers)
	m.cloud.pollers.Add(1)
	go func() {
		defer m.cloud.pollers.Done()
		m.poll(ctx)
	}()
}

// received adjusts the pollers to demand after a ReceiveMessage call: a poller that got a batch
// when every other poller holds one too starts another poller (up to the maximum), so that the
// next message group finds one waiting; a poller whose long poll came back empty stops when there
// are more pollers than the mapping starts with. It reports whether the caller stops.
func (m *mapping) received(ctx context.Context, got int, err error) (stop bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case err == nil && got == 0 && m.pollers > m.scale.initial:
		m.pollers--
		return true
	case got > 0:
		m.holding++
		if m.holding == m.pollers && m.pollers < m.scale.max {
			m.spawn(ctx)
		}
	}
	return false
}

// handled ends a batch received.
func (m *mapping) handled() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.holding--
}

// invoking counts an invocation of the function in progress (+1) or finished (-1), and the peak.
func (m *mapping) invoking(d int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight += d
	m.peak = max(m.peak, m.inFlight)
}

// Peak is the most invocations of the mapping that were in progress at once, and the most pollers
// that ran at once.
func (m *mapping) Peak() (invocations, pollers int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak, m.peakPoll
}

func (m *mapping) poll(ctx context.Context) {
	for ctx.Err() == nil {
		if !m.cloud.pollGate(ctx, m) { // a disabled mapping does not poll (controlplane.go)
			continue
		}
		out, err := m.cloud.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            aws.String(m.queue.URL),
			MaxNumberOfMessages: int32(m.batch),
			// Lambda's pollers long-poll for 20 s, so an idle queue costs few ReceiveMessage calls
			// (they count in the API-call figures).
			WaitTimeSeconds:             20,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		received := time.Now()
		var got int
		if err == nil {
			got = len(out.Messages)
		}
		if m.received(ctx, got, err) {
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintf(m.cloud.logs, "event source mapping %s: receive: %v\n", m.queue.Name, err)
				sleep(ctx, time.Second)
			}
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		if !m.cloud.releaseIfDisabled(ctx, m, out.Messages) {
			m.cloud.setBusy(1)
			m.handle(ctx, out.Messages, received)
			m.cloud.setBusy(-1)
		}
		m.handled()
	}
}

func (m *mapping) handle(ctx context.Context, msgs []sqstypes.Message, received time.Time) {
	m.cloud.mu.Lock()
	if m.cloud.delivered == nil {
		m.cloud.delivered = map[string]map[string]string{}
	}
	if m.cloud.delivered[m.queue.ARN] == nil {
		m.cloud.delivered[m.queue.ARN] = map[string]string{}
	}
	for _, msg := range msgs {
		m.cloud.delivered[m.queue.ARN][aws.ToString(msg.MessageId)] = msg.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
	}
	m.cloud.mu.Unlock()
	event := map[string]any{"Records": m.records(msgs)}
	payload, _ := json.Marshal(event)
	res, err := m.invokeBatch(ctx, payload, received)
	if err != nil {
		if !errors.Is(err, emulate.ErrThrottled) && ctx.Err() == nil {
			m.cloud.mappingErrors.Add(1)
			fmt.Fprintf(m.cloud.logs, "event source mapping %s: invoke: %v\n", m.queue.Name, err)
		}
		return
	}
	if res.ErrorType != "" {
		m.cloud.mappingErrors.Add(1)
		fmt.Fprintf(m.cloud.logs, "event source mapping %s: function error %s: %s\n", m.queue.Name, res.ErrorType, res.Payload)
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
	if _, err := m.cloud.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.queue.URL), Entries: entries}); err != nil && ctx.Err() == nil {
		fmt.Fprintf(m.cloud.logs, "event source mapping %s: delete: %v\n", m.queue.Name, err)
	}
}

// esmThrottleBackoff bounds the waits between the retries of a throttled batch. AWS documents that
// the mapping "gradually backs off retries" without an interval; these grow from under 2 s to 5 s,
// with the SDK's own jittered exponential backoff.
var esmThrottleBackoff = retry.NewExponentialJitterBackoff(5 * time.Second)

// invokeBatch invokes the function with a batch received at received. A throttled invocation never
// ran, and Lambda retries it: "If the invocation fails due to throttling, Lambda gradually backs off
// retries ... Lambda continues to retry the message until the message's timestamp exceeds your
// queue's visibility timeout"
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html). The batch stays
// in flight meanwhile, so a FIFO queue hands out nothing behind it in its message groups. The last
// retry starts no later than one function timeout before the visibility timeout ends, so that no
// invocation of the batch can still run when its messages become visible again to another poller;
// after it, the throttle is the answer and the messages come back, in order, after their
// visibility timeout.
func (m *mapping) invokeBatch(ctx context.Context, payload []byte, received time.Time) (emulate.Result, error) {
	visibleAgain := received.Add(time.Duration(m.queue.VisibilityTimeout) * time.Second)
	for attempt := 1; ; attempt++ {
		m.invoking(1)
		res, err := m.fn.Invoke(ctx, payload)
		m.invoking(-1)
		if !isThrottle(err) {
			return res, err
		}
		wait, berr := esmThrottleBackoff.BackoffDelay(attempt, err)
		if berr != nil || time.Now().Add(wait+m.fn.Timeout).After(visibleAgain) {
			return res, err
		}
		m.cloud.mappingThrottleRetries.Add(1)
		sleep(ctx, wait)
		if ctx.Err() != nil {
			return res, err
		}
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
			"awsRegion":         emulate.Region,
		})
	}
	return out
}

// Messages is how many distinct messages of the tenant's queue the event source mapping has handed
// to the controller so far (a message delivered again counts once); for a pooled tenant, the
// messages of its message group in the pool's queue.
func (r *Run) Messages(tenantID string) int {
	t := r.Tenant(tenantID)
	if t == nil {
		return 0
	}
	return r.messagesOf(t)
}

// messagesOf is Messages of one tenant.
func (c *Cloud) messagesOf(t *Tenant) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.Pooled() {
		return len(c.delivered[t.Queue.ARN])
	}
	n := 0
	for _, g := range c.delivered[t.Queue.ARN] {
		if g == t.ID {
			n++
		}
	}
	return n
}

// MappingThrottleRetries is how many times an event source mapping retried a throttled batch.
func (c *Cloud) MappingThrottleRetries() int64 { return c.mappingThrottleRetries.Load() }

// MappingErrors is how many event source mapping invocations failed (a function error, a crash, a
// timeout; not a throttle): the deliveries whose messages came back only after their visibility
// timeout.
func (c *Cloud) MappingErrors() int64 { return c.mappingErrors.Load() }

func (c *Cloud) setBusy(d int) {
	c.mu.Lock()
	c.busy += d
	c.mu.Unlock()
}

// inFlight is how many event source mapping and asynchronous invocations are in progress.
func (c *Cloud) inFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy
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

// Bounds of an event source mapping's ScalingConfig.MaximumConcurrency: "The minimum value is 2 and
// the maximum value is 1000" (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html#sqs-max-concurrency,
// https://docs.aws.amazon.com/lambda/latest/api/API_ScalingConfig.html). Without it, or a reserved
// concurrency, a mapping scales on the function's unreserved concurrency, which the account's
// default concurrency limit of 1,000 bounds
// (https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html).
const (
	minMaximumConcurrency   = 2
	maxMaximumConcurrency   = 1000
	accountConcurrencyLimit = 1000
)

// pollerScale is how many pollers of one mapping run: initial from the start, up to max as
// messages arrive. Each poller has at most one invocation in progress, so max bounds the mapping's
// concurrency.
type pollerScale struct{ initial, max int }

// mappingScale is how many invocations of one SQS event source mapping may run at once, and how
// many pollers it starts with. Lambda begins with five pollers and scales up while messages wait;
// on a FIFO queue it scales "to the number of active message groups", since a message group never
// has two batches in flight, capped by the mapping's ScalingConfig.MaximumConcurrency and by the
// function's reserved concurrency
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html,
// https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html): concurrency = min(active message
// groups, MaximumConcurrency, reserved). The queue enforces the groups (fauxqs hands out no message
// of a group with a message in flight); the pollers enforce the caps: the mapping starts with
// min(5, cap) pollers and grows by one whenever a poller receives a batch while no other poller is
// waiting on the queue (mapping.received), up to the cap, and shrinks back when long polls come
// back empty. A silo tenant's queue, with one group, has one invocation at a time and five idle
// long polls, as before; a pool queue with 20 active tenants and MaximumConcurrency 10 has 10
// invocations at once, one with 3 active tenants has 3, and an idle pool costs five long polls.
func mappingScale(reserved, maximumConcurrency int) pollerScale {
	limit := accountConcurrencyLimit
	if reserved > 0 {
		limit = min(limit, reserved)
	}
	if maximumConcurrency > 0 {
		limit = min(limit, maximumConcurrency)
	}
	return pollerScale{initial: min(initialPollers, limit), max: limit}
}
