package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// wakeEnv turns wake-up events on with the default 5-minute safety net, and a queue visibility
// timeout (MAX_WAIT_SECONDS) that has grown to hold it.
var wakeEnv = map[string]string{
	pipeline.EnvWakeEvents:       "true",
	pipeline.EnvMaxWaitSeconds:   "600",
	pipeline.EnvSafetyNetSeconds: "300",
}

const (
	wakeStateObject = testBucket + "/control/acme/wake.json"
	wakeDoneObject  = testBucket + "/control/acme/wake-done.json"
	statusEventID   = "315c1398-40ff-a850-213b-158f73e60175"
)

// wakeDoneObjectOf is acme's wake-up record in the keys of keysPool ("" for a silo tenant's).
func wakeDoneObjectOf(keysPool string) string {
	return testBucket + "/" + pipeline.WakeDoneKey(pipeline.PoolOwner(keysPool, "acme"))
}

// wakeStateObjectOf is acme's wake-up state in the keys of keysPool ("" for a silo tenant's).
func wakeStateObjectOf(keysPool string) string {
	return testBucket + "/" + pipeline.WakeStateKey(pipeline.PoolOwner(keysPool, "acme"))
}

// statusPayload is the fixture status change event (an AWS example with this tenant's ARNs) for
// the execution name with status.
func statusPayload(t *testing.T, name, status string) json.RawMessage {
	t.Helper()
	s := strings.ReplaceAll(fixture(t, "status-change.json"), evID1, name)
	s = strings.Replace(s, `"status": "SUCCEEDED"`, fmt.Sprintf("%q: %q", "status", status), 1)
	return json.RawMessage(s)
}

func statusEvent(t *testing.T, name, status string) events.EventBridgeEvent {
	t.Helper()
	var ev events.EventBridgeEvent
	if err := json.Unmarshal(statusPayload(t, name, status), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// headQueue is the tenant's FIFO head message as SQS treats its receipt handles: only the handle
// of the current receive changes its visibility; an older one is rejected with
// ReceiptHandleIsInvalid, and any handle of a visible message with MessageNotInflight
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html).
type headQueue struct {
	mu      sync.Mutex
	current string // the current receive's handle; "" while the message is visible
	deleted bool
	changes []visibilityChange
	err     error // returned instead of any answer, when set
	// afterChange runs after a successful change, outside the lock.
	afterChange func(visibilityChange)
}

func (q *headQueue) receive(handle string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.current = handle
}

func (q *headQueue) visible() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.current == "" && !q.deleted
}

func (q *headQueue) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	if aws.ToString(in.QueueUrl) != testQueueURL {
		return nil, fmt.Errorf("wrong queue %s", aws.ToString(in.QueueUrl))
	}
	q.mu.Lock()
	c := visibilityChange{aws.ToString(in.ReceiptHandle), in.VisibilityTimeout}
	q.changes = append(q.changes, c)
	var err error
	switch {
	case q.err != nil:
		err = q.err
	case q.deleted:
		err = &sqstypes.ReceiptHandleIsInvalid{Message: aws.String("The input receipt handle is invalid.")}
	case q.current == "":
		err = &sqstypes.MessageNotInflight{Message: aws.String("The message is not in flight.")}
	case c.Receipt != q.current:
		err = &sqstypes.ReceiptHandleIsInvalid{Message: aws.String("The input receipt handle is invalid.")}
	case c.Seconds == 0:
		q.current = ""
	}
	hook := q.afterChange
	q.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if hook != nil {
		hook(c)
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// hookS3 runs afterPut once an object is stored.
type hookS3 struct {
	*fakeS3
	afterPut func(key string)
}

func (s *hookS3) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	out, err := s.fakeS3.PutObject(ctx, in, opts...)
	if err == nil && s.afterPut != nil {
		s.afterPut(aws.ToString(in.Key))
	}
	return out, err
}

// hookSFN runs afterDescribe once a DescribeExecution answer is computed.
type hookSFN struct {
	*fakeSFN
	afterDescribe func()
}

func (s *hookSFN) DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, opts ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	out, err := s.fakeSFN.DescribeExecution(ctx, in, opts...)
	if s.afterDescribe != nil {
		s.afterDescribe()
	}
	return out, err
}

type wakeRig struct {
	*rig
	q   *headQueue
	s3h *hookS3
	sfh *hookSFN
}

func newWakeRig(t *testing.T, env map[string]string) *wakeRig {
	t.Helper()
	all := maps.Clone(wakeEnv)
	maps.Copy(all, env)
	r := newRig(t, all)
	w := &wakeRig{rig: r, q: &headQueue{}, s3h: &hookS3{fakeS3: r.s3}, sfh: &hookSFN{fakeSFN: r.sfn}}
	r.h.sqs, r.h.s3, r.h.sfn = w.q, w.s3h, w.sfh
	return w
}

// deliver hands the head message (the event for key1, id evID1) to the controller as its
// receives'th receive, with receipt handle rh-<receives>, and deletes it if released.
func (w *wakeRig) deliver(t *testing.T, receives int) bool {
	t.Helper()
	msg := message("m1", eventBody(t, evID1, key1), receives)
	msg.ReceiptHandle = fmt.Sprintf("rh-%d", receives)
	w.q.receive(msg.ReceiptHandle)
	resp, err := w.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}})
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	released := len(resp.BatchItemFailures) == 0
	if released {
		w.q.mu.Lock()
		w.q.deleted = true
		w.q.mu.Unlock()
	}
	return released
}

func (w *wakeRig) wake(t *testing.T, name, status string) {
	t.Helper()
	if err := w.h.Wake(context.Background(), statusEvent(t, name, status)); err != nil {
		t.Fatalf("wake: got error %v, want none", err)
	}
}

func (w *wakeRig) putState(t *testing.T, name, handle string) {
	t.Helper()
	b, err := pipeline.EncodeWakeState(pipeline.WakeState{Version: 1, ExecutionName: name, ExecutionARN: testExecPrefix + name,
		MessageID: "m1", ReceiptHandle: handle, QueueURL: testQueueURL, WrittenAt: testStart})
	if err != nil {
		t.Fatal(err)
	}
	w.s3.objects[wakeStateObject] = string(b)
}

func (w *wakeRig) putDone(t *testing.T, name, status string) {
	t.Helper()
	b, err := pipeline.EncodeWakeDone(pipeline.WakeDone{Version: 1, ExecutionName: name, ExecutionARN: testExecPrefix + name,
		Status: status, EventID: statusEventID, WrittenAt: testStart})
	if err != nil {
		t.Fatal(err)
	}
	w.s3.objects[wakeDoneObject] = string(b)
}

func (w *wakeRig) state(t *testing.T) pipeline.WakeState {
	t.Helper()
	s, err := pipeline.DecodeWakeState([]byte(w.s3.objects[wakeStateObject]))
	if err != nil {
		t.Fatalf("wake state: %v", err)
	}
	return s
}

// checkMetrics compares the EMF sums of the named metrics.
func (w *wakeRig) checkMetrics(t *testing.T, want map[string]float64) {
	t.Helper()
	sums := w.metricSums(t)
	for name, v := range want {
		if got := sums[name]; got != v {
			t.Errorf("got metric %s = %v, want %v", name, got, v)
		}
	}
}
