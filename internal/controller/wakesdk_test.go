package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// The wake-up path through the real aws-sdk-go-v2 clients over a stubbed transport: the S3 keys and
// bodies, the receipt handle and queue URL, and SQS's stale-handle errors as the SDK decodes them.
func TestWakeWithSDKClients(t *testing.T) {
	h, stub, out := sdkHandler(t, wakeEnv)
	body := eventBody(t, evID1, key1)
	notFound := exchange{status: 404, header: map[string]string{"Content-Type": "application/xml"},
		body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><RequestId>R</RequestId><HostId>H</HostId></Error>`}
	stateOp := "S3 PUT " + testBucket + "/control/acme/wake.json"
	doneGet := "S3 GET " + testBucket + "/control/acme/wake-done.json"

	// The first delivery: no record yet, the state, the safety net, then StartExecution.
	stub.expect(
		with(notFound, doneGet, nil),
		exchange{op: stateOp, s3Body: `"executionName":"` + evID1 + `","executionArn":"` + arn1 + `","messageId":"m1","receiptHandle":"rh-m1","queueUrl":"` + testQueueURL + `"`,
			status: 200, header: map[string]string{"ETag": `"x"`}},
		with(exchange{status: 200, body: `{}`}, opVisibility, wantFields(map[string]any{"QueueUrl": testQueueURL, "ReceiptHandle": "rh-m1", "VisibilityTimeout": 300.0})),
		with(exchange{status: 200, body: fmt.Sprintf(`{"executionArn":%q,"startDate":1714554000}`, arn1)}, opStart, wantFields(map[string]any{"name": evID1})),
	)
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("first delivery: got failures %v, want [m1]", got)
	}
	stub.done(t)

	state, err := pipeline.EncodeWakeState(pipeline.WakeState{Version: 1, ExecutionName: evID1, ExecutionARN: arn1, MessageID: "m1",
		ReceiptHandle: "rh-m1", QueueURL: testQueueURL, WrittenAt: testStart})
	if err != nil {
		t.Fatal(err)
	}
	stateGet := exchange{op: "S3 GET " + testBucket + "/control/acme/wake.json", status: 200, header: map[string]string{"Content-Type": "application/json"}, body: string(state)}
	donePut := exchange{op: "S3 PUT " + testBucket + "/control/acme/wake-done.json", s3Body: `"executionName":"` + evID1 + `","executionArn":"` + arn1 + `","status":"SUCCEEDED","eventId":"` + statusEventID + `"`,
		status: 200, header: map[string]string{"ETag": `"y"`}}
	sqsError := func(code, query string) exchange {
		return exchange{status: 400, header: map[string]string{"x-amzn-query-error": query},
			body: fmt.Sprintf(`{"__type":"com.amazonaws.sqs#%s","message":"Value rh-m1 for parameter ReceiptHandle is invalid."}`, code)}
	}
	// The status event: the state, the record, then the message made visible; then the same event
	// again, answered as SQS answers a stale handle.
	stub.expect(
		stateGet, donePut,
		with(exchange{status: 200, body: `{}`}, opVisibility, wantFields(map[string]any{"QueueUrl": testQueueURL, "ReceiptHandle": "rh-m1", "VisibilityTimeout": 0.0})),
		stateGet, donePut,
		with(sqsError("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid;Sender"), opVisibility, nil),
		stateGet, donePut,
		with(sqsError("MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight;Sender"), opVisibility, nil),
	)
	for range 3 {
		if _, err := h.Invoke(context.Background(), statusPayload(t, evID1, "SUCCEEDED")); err != nil {
			t.Fatalf("got error %v, want none", err)
		}
	}
	stub.done(t)

	// The woken delivery reads the record, confirms it with one DescribeExecution and releases the
	// file: no wake-up state, no visibility change.
	doneBody, err := pipeline.EncodeWakeDone(pipeline.WakeDone{Version: 1, ExecutionName: evID1, ExecutionARN: arn1, Status: "SUCCEEDED", EventID: statusEventID, WrittenAt: testStart})
	if err != nil {
		t.Fatal(err)
	}
	stub.expect(exchange{op: doneGet, status: 200, header: map[string]string{"Content-Type": "application/json"}, body: string(doneBody)},
		with(describeOK(arn1, "SUCCEEDED"), opDescribe, wantFields(map[string]any{"executionArn": arn1})))
	resp, err = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); len(got) != 0 {
		t.Errorf("woken delivery: got failures %v, want none", got)
	}
	stub.done(t)

	var woke, stale int
	for _, l := range out.Lines(t) {
		if l["level"] == "ERROR" || l["level"] == "WARN" {
			t.Errorf("got %s line %v, want none", l["level"], l)
		}
		if l["level"] == "INFO" && l["msg"] == "execution ended; head message made visible" {
			woke++
		}
		if l["level"] == "INFO" && strings.Contains(fmt.Sprint(l["msg"]), "no longer current") {
			stale++
		}
	}
	if woke != 1 || stale != 2 {
		t.Errorf("got %d wake-ups and %d stale handles, want 1 and 2", woke, stale)
	}
}

// The call budget of the wake-up design: a file whose SUCCEEDED event arrives costs one
// StartExecution and one DescribeExecution per safety-net delivery while it runs (at most 12 per
// running file-hour with the 5-minute safety net), plus, only when control/ is not protected, the
// one that confirms the recorded end. Protected, a file shorter than the safety net costs no
// describe at all.
func TestWakeCallBudget(t *testing.T) {
	for _, protected := range []bool{true, false} {
		for _, safetyNets := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("protected %v, %d safety-net deliveries", protected, safetyNets), func(t *testing.T) {
				w := newWakeRig(t, map[string]string{pipeline.EnvControlPrefixProtected: fmt.Sprint(protected)})
				if w.deliver(t, 1) {
					t.Fatal("first delivery: got released, want the file waited for")
				}
				receives := 1
				for range safetyNets {
					receives++
					if w.deliver(t, receives) {
						t.Fatalf("safety-net delivery %d: got released, want held", receives)
					}
				}
				w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				w.wake(t, evID1, "SUCCEEDED")
				if !w.q.visible() {
					t.Fatal("got the head message not woken, want it visible")
				}
				receives++
				if !w.deliver(t, receives) {
					t.Fatal("woken delivery: got held, want released")
				}
				want := safetyNets // one per safety net
				if !protected {
					want++ // the confirmation
				}
				if w.sfn.starts != 1 || w.sfn.describes != want {
					t.Errorf("got %d starts and %d describes, want 1 and %d", w.sfn.starts, w.sfn.describes, want)
				}
				if got := w.countLevel(t, "ERROR"); got != 0 {
					t.Errorf("got %d ERROR lines, want none: %v", got, w.logs(t))
				}
			})
		}
	}
}

// Through the real aws-sdk-go-v2 clients: with control/ protected, the woken delivery reads the
// record and releases the file with that one S3 GET: no DescribeExecution, no wake-up state, no
// visibility change.
func TestReleaseOnRecordWithSDKClients(t *testing.T) {
	env := maps.Clone(wakeEnv)
	env[pipeline.EnvControlPrefixProtected] = "true"
	h, stub, _ := sdkHandler(t, env)
	doneBody, err := pipeline.EncodeWakeDone(pipeline.WakeDone{Version: 1, ExecutionName: evID1, ExecutionARN: arn1, Status: "SUCCEEDED",
		EventID: statusEventID, WrittenAt: testStart})
	if err != nil {
		t.Fatal(err)
	}
	stub.expect(exchange{op: "S3 GET " + testBucket + "/control/acme/wake-done.json", status: 200,
		header: map[string]string{"Content-Type": "application/json"}, body: string(doneBody)})
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", eventBody(t, evID1, key1), 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); len(got) != 0 {
		t.Errorf("woken delivery: got failures %v, want none", got)
	}
	stub.done(t)
}
