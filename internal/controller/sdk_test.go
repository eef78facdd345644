package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/testfake"
)

// exchange is one HTTP request the real SDK clients must send, and the stubbed answer.
type exchange struct {
	op     string                                  // "<target>" for JSON APIs, "S3 <METHOD> <bucket><path>" for S3
	check  func(t *testing.T, body map[string]any) // checks the decoded JSON request (JSON APIs)
	s3Body string                                  // the exact request body an S3 PUT must carry
	// reqHeader are request headers that must be sent with these values ("" : must be absent).
	reqHeader map[string]string
	status    int
	header    map[string]string
	body      string
}

// stubTransport answers the SDK's requests from a script, in order, and records what was sent.
type stubTransport struct {
	t      *testing.T
	mu     sync.Mutex
	script []exchange
}

func (s *stubTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var raw []byte
	if req.Body != nil {
		raw, _ = io.ReadAll(req.Body)
	}
	op := req.Header.Get("X-Amz-Target")
	if op == "" {
		bucket, _, _ := strings.Cut(req.URL.Host, ".")
		op = "S3 " + req.Method + " " + bucket + req.URL.Path
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) == 0 {
		s.t.Errorf("got unexpected request %s, want none", op)
		return respond(req, 500, nil, `{}`), nil
	}
	x := s.script[0]
	s.script = s.script[1:]
	if op != x.op {
		s.t.Errorf("got request %s, want %s", op, x.op)
	}
	if x.check != nil {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			s.t.Errorf("%s: got body %q that is not JSON: %v", op, raw, err)
		}
		x.check(s.t, m)
	}
	for k, want := range x.reqHeader {
		if got := req.Header.Get(k); got != want {
			s.t.Errorf("%s: got header %s %q, want %q", op, k, got, want)
		}
	}
	if x.s3Body != "" && !bytes.Contains(raw, []byte(x.s3Body)) {
		s.t.Errorf("%s: got body %q, want it to carry %q", op, raw, x.s3Body)
	}
	return respond(req, x.status, x.header, x.body), nil
}

func respond(req *http.Request, status int, header map[string]string, body string) *http.Response {
	h := http.Header{}
	if strings.HasPrefix(req.Header.Get("X-Amz-Target"), "A") {
		h.Set("Content-Type", "application/x-amz-json-1.0")
	}
	for k, v := range header {
		h.Set(k, v)
	}
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Header: h, Request: req,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
	}
}

func (s *stubTransport) done(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.script {
		t.Errorf("got no request %s, want one", x.op)
	}
	s.script = nil
}

func (s *stubTransport) expect(xs ...exchange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, xs...)
}

// sdkHandler is a Handler built on the real aws-sdk-go-v2 clients over the stub, with the
// standard retryer (3 attempts) minus its sleeps.
func sdkHandler(t *testing.T, env map[string]string) (*Handler, *stubTransport, *testfake.Logs) {
	stub := &stubTransport{t: t}
	awsCfg := aws.Config{
		Region:      "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		HTTPClient:  &http.Client{Transport: stub},
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
				o.RateLimiter = ratelimit.None
			})
		},
	}
	cfg := mustConfig(t, env)
	out := &testfake.Logs{}
	h := newHandler(cfg, sfn.NewFromConfig(awsCfg), sqs.NewFromConfig(awsCfg), s3.NewFromConfig(awsCfg),
		slog.New(slog.NewJSONHandler(out, nil)), metrics.New(out, cfg.MetricsNamespace, cfg.Tenant.ID))
	h.throttleBackoff = noJitter(cfg)
	return h, stub, out
}

func wantFields(want map[string]any) func(t *testing.T, body map[string]any) {
	return func(t *testing.T, body map[string]any) {
		t.Helper()
		for k, w := range want {
			if got := body[k]; got != w {
				t.Errorf("got request field %s = %v, want %v", k, got, w)
			}
		}
	}
}

func sfnError(code string) exchange {
	return exchange{status: 400, body: fmt.Sprintf(`{"__type":"com.amazonaws.swf.service.v2.model#%s","message":"stub"}`, code)}
}

func describeOK(arn, status string) exchange {
	return exchange{status: 200, body: fmt.Sprintf(
		`{"executionArn":%q,"stateMachineArn":%q,"name":"n","status":%q,"startDate":1714554000,"stopDate":1714554060,"error":"States.TaskFailed"}`,
		arn, testStateMachine, status)}
}

func with(x exchange, op string, check func(*testing.T, map[string]any)) exchange {
	x.op, x.check = op, check
	return x
}

const (
	opDescribe   = "AWSStepFunctions.DescribeExecution"
	opStart      = "AWSStepFunctions.StartExecution"
	opVisibility = "AmazonSQS.ChangeMessageVisibility"
)

// The whole lifecycle of one file through the real clients: the request serialization of the
// execution ARN, the name, the raw key in the input, the queue URL and receipt handle, and the SDK's
// own retry of a throttled call.
func TestHandleWithSDKClients(t *testing.T) {
	const key = "inbox/acme/請求書 a+b 100%25.csv"
	h, stub, _ := sdkHandler(t, nil)
	body := eventBody(t, evID1, key)

	stub.expect(
		with(sfnError("ExecutionDoesNotExist"), opDescribe, wantFields(map[string]any{"executionArn": arn1})),
		// Not found: one look under the other idempotency key's name before starting (known answer:
		// sha256 of the length-prefixed bucket, key, "version\x00"+version id and sequencer).
		with(sfnError("ExecutionDoesNotExist"), opDescribe, wantFields(map[string]any{"executionArn": testExecPrefix + "ov-98c2ed009958c465eacba8d70a4f189ca779e8aec538a8f1466ed6459f6ed960"})),
		with(exchange{status: 200, body: fmt.Sprintf(`{"executionArn":%q,"startDate":1714554000}`, arn1)}, opStart,
			func(t *testing.T, b map[string]any) {
				wantFields(map[string]any{"stateMachineArn": testStateMachine, "name": evID1})(t, b)
				var in pipeline.WorkflowInput
				if err := json.Unmarshal([]byte(b["input"].(string)), &in); err != nil {
					t.Fatalf("got input that is not JSON: %v", err)
				}
				if in.Source.Key != key || in.Tenant.ID != "acme" || in.EventID != evID1 || in.Source.VersionID != "v-6f1c2a3b" {
					t.Errorf("got input %+v, want raw key %q, tenant acme, event %s, version v-6f1c2a3b", in, key, evID1)
				}
			}),
		with(exchange{status: 200, body: `{}`}, opVisibility,
			wantFields(map[string]any{"QueueUrl": testQueueURL, "ReceiptHandle": "rh-m1", "VisibilityTimeout": 1.0})),
	)
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("first delivery: got failures %v, want [m1]", got)
	}
	stub.done(t)

	// Second delivery: DescribeExecution is throttled twice; the SDK's retryer absorbs it.
	stub.expect(
		with(sfnError("ThrottlingException"), opDescribe, wantFields(map[string]any{"executionArn": arn1})),
		with(sfnError("ThrottlingException"), opDescribe, nil),
		with(describeOK(arn1, "SUCCEEDED"), opDescribe, nil),
	)
	resp, err = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); len(got) != 0 {
		t.Errorf("second delivery: got failures %v, want none", got)
	}
	stub.done(t)
}

// StartExecution throttled on every attempt: the message is kept (WARN), and the next delivery
// starts the execution once.
func TestHandleWithSDKClientsThrottledStart(t *testing.T) {
	h, stub, out := sdkHandler(t, nil)
	body := eventBody(t, evID1, "inbox/acme/a.csv")
	stub.expect(
		with(sfnError("ExecutionDoesNotExist"), opDescribe, nil),
		with(sfnError("ExecutionDoesNotExist"), opDescribe, nil), // the other idempotency key's name
		with(sfnError("ThrottlingException"), opStart, nil),
		with(sfnError("ThrottlingException"), opStart, nil),
		with(sfnError("ThrottlingException"), opStart, nil),
		with(exchange{status: 200, body: `{}`}, opVisibility, wantFields(map[string]any{"VisibilityTimeout": 1.0})),
	)
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("got failures %v, want [m1]", got)
	}
	stub.done(t)
	logs := out.Lines(t)
	var warned bool
	for _, l := range logs {
		if l["level"] == "ERROR" {
			t.Errorf("got ERROR line %v, want throttling at WARN", l)
		}
		warned = warned || (l["level"] == "WARN" && strings.Contains(l["msg"].(string), "message kept"))
	}
	if !warned {
		t.Errorf("got no WARN 'message kept' line, want one; logs: %v", logs)
	}

	stub.expect(
		with(sfnError("ExecutionDoesNotExist"), opDescribe, nil),
		with(sfnError("ExecutionDoesNotExist"), opDescribe, nil), // the other idempotency key's name
		with(exchange{status: 200, body: fmt.Sprintf(`{"executionArn":%q,"startDate":1714554000}`, arn1)}, opStart, wantFields(map[string]any{"name": evID1})),
		with(exchange{status: 200, body: `{}`}, opVisibility, wantFields(map[string]any{"VisibilityTimeout": 2.0})),
	)
	if _, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 2)}}); err != nil {
		t.Fatal(err)
	}
	stub.done(t)
}

// A halted tenant through the real S3 client: a 404 NoSuchKey for the marker keeps it blocked,
// a marker releases the file.
func TestHandleWithSDKClientsSkipMarker(t *testing.T) {
	h, stub, out := sdkHandler(t, map[string]string{pipeline.EnvOnFailure: pipeline.OnFailureHalt})
	body := eventBody(t, evID1, "inbox/acme/a.csv")
	markerOp := "S3 GET " + testBucket + "/control/acme/skip/" + evID1

	stub.expect(
		with(describeOK(arn1, "FAILED"), opDescribe, nil),
		exchange{op: markerOp, status: 404, header: map[string]string{"Content-Type": "application/xml"},
			body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><RequestId>R</RequestId><HostId>H</HostId></Error>`},
		with(exchange{status: 200, body: `{}`}, opVisibility, wantFields(map[string]any{"VisibilityTimeout": 900.0})),
	)
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("without marker: got failures %v, want [m1]", got)
	}
	stub.done(t)

	stub.expect(
		with(describeOK(arn1, "FAILED"), opDescribe, nil),
		exchange{op: markerOp, status: 200, header: map[string]string{"x-amz-version-id": "mv1", "Content-Type": "text/plain"}, body: "OPS-7 resent as b.csv"},
		// The file failed in a segment (States.TaskFailed): before it is released, its history shows
		// that no segment iteration started (failed files: stopped.go).
		with(exchange{status: 200, body: `{"events":[]}`}, "AWSStepFunctions.GetExecutionHistory", nil),
	)
	resp, err = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); len(got) != 0 {
		t.Errorf("with marker: got failures %v, want none", got)
	}
	stub.done(t)
	var skipped bool
	for _, l := range out.Lines(t) {
		skipped = skipped || (l["level"] == "WARN" && l["skipMarkerVersionId"] == "mv1" && l["reason"] == "OPS-7 resent as b.csv")
	}
	if !skipped {
		t.Errorf("got no WARN skip line with the marker version and reason, want one")
	}
}

// A malformed body is written to quarantine through the real S3 client before it is released.
func TestHandleWithSDKClientsQuarantine(t *testing.T) {
	h, stub, _ := sdkHandler(t, nil)
	body := `{"Records":[{"s3":{"object":{"key":"inbox/acme/red+flower.csv"}}}]}`
	stub.expect(exchange{op: "S3 PUT " + testBucket + "/quarantine/acme/m9.json", s3Body: body, status: 200, header: map[string]string{"ETag": `"x"`}})
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m9", body, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(resp); len(got) != 0 {
		t.Errorf("got failures %v, want none", got)
	}
	stub.done(t)
}

func ids(resp events.SQSEventResponse) []string {
	out := []string{}
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

const (
	opHistory = "AWSStepFunctions.GetExecutionHistory"
	opStop    = "AWSStepFunctions.StopExecution"
)

func describeStopped(arn, stateMachine, status string, stop int64) exchange {
	return exchange{status: 200, body: fmt.Sprintf(
		`{"executionArn":%q,"stateMachineArn":%q,"name":"n","status":%q,"startDate":1714553000.25,"stopDate":%d}`,
		arn, stateMachine, status, stop)}
}

// segmentHistoryPage is the newest page of a file execution that timed out while its segment
// execution child ran, as Step Functions answers GetExecutionHistory with reverseOrder: epoch
// seconds for timestamps, and the task's StartExecution response as a JSON string in
// taskSubmittedEventDetails.output.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_GetExecutionHistory.html
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_TaskSubmittedEventDetails.html
func segmentHistoryPage(child string) string {
	output, _ := json.Marshal(map[string]any{
		"ExecutionArn":        child,
		"SdkHttpMetadata":     map[string]any{"AllHttpHeaders": map[string]any{"Content-Type": []string{"application/x-amz-json-1.0"}}, "HttpStatusCode": 200},
		"SdkResponseMetadata": map[string]any{"RequestId": "8a1c2f6e-0000-4000-8000-000000000000"},
		"StartDate":           1714554001456,
	})
	page, _ := json.Marshal(map[string]any{
		"events": []any{
			map[string]any{"timestamp": 1714554060.123, "type": "ExecutionTimedOut", "id": 16, "previousEventId": 15,
				"executionTimedOutEventDetails": map[string]any{"error": "States.Timeout"}},
			map[string]any{"timestamp": 1714554001.5, "type": "TaskSubmitted", "id": 15, "previousEventId": 14,
				"taskSubmittedEventDetails": map[string]any{"resourceType": "states", "resource": "startExecution.sync:2",
					"output": string(output), "outputDetails": map[string]any{"truncated": false}}},
			map[string]any{"timestamp": 1714554001.2, "type": "TaskStarted", "id": 14, "previousEventId": 13,
				"taskStartedEventDetails": map[string]any{"resourceType": "states", "resource": "startExecution.sync:2"}},
		},
		"nextToken": "AAAAKgAAAAIAAAAAAAAAAQ==",
	})
	return string(page)
}

// A file that TIMED_OUT while its segment execution ran, through the real clients: the history is
// read newest first, the child's ARN parsed from the output string, the running child stopped, and
// the message held until the child's stopDate + REGISTER_TIMEOUT_SECONDS (20 s) + 30 s.
func TestHandleWithSDKClientsStoppedFile(t *testing.T) {
	const child = testSegPrefix + evID1 + "-0"
	h, stub, _ := sdkHandler(t, nil)
	body := eventBody(t, evID1, "inbox/acme/a.csv")
	history := with(exchange{status: 200, body: segmentHistoryPage(child)}, opHistory,
		wantFields(map[string]any{"executionArn": arn1, "reverseOrder": true, "maxResults": 25.0, "includeExecutionData": true}))
	fileTimedOut := with(describeStopped(arn1, testStateMachine, "TIMED_OUT", 1714554060), opDescribe, wantFields(map[string]any{"executionArn": arn1}))

	steps := []struct {
		name        string
		now         time.Time
		script      []exchange
		wantRelease bool
	}{
		{
			name: "child running: stopped, held 50 s",
			now:  time.Unix(1714554120, 0), // 09:02:00, the file stopped at 09:01:00
			script: []exchange{fileTimedOut, history,
				with(describeOK(child, "RUNNING"), opDescribe, wantFields(map[string]any{"executionArn": child})),
				with(exchange{status: 200, body: `{"stopDate":1714554120.5}`}, opStop, wantFields(map[string]any{"executionArn": child})),
				with(exchange{status: 200, body: `{}`}, opVisibility, wantFields(map[string]any{"VisibilityTimeout": 50.0})),
			},
		},
		{
			name: "child aborted at 09:02:00.5: held until 09:02:50.5",
			now:  time.Unix(1714554150, 0), // 09:02:30
			script: []exchange{fileTimedOut, history,
				with(exchange{status: 200, body: `{"executionArn":"` + child + `","stateMachineArn":"` + testSegmentSM +
					`","name":"n","status":"ABORTED","startDate":1714554001.456,"stopDate":1714554120.5}`}, opDescribe, wantFields(map[string]any{"executionArn": child})),
				with(exchange{status: 200, body: `{}`}, opVisibility, wantFields(map[string]any{"VisibilityTimeout": 21.0})),
			},
		},
		{
			name: "after the bound: released",
			now:  time.Unix(1714554171, 0), // 09:02:51
			script: []exchange{fileTimedOut, history,
				with(describeStopped(child, testSegmentSM, "ABORTED", 1714554121), opDescribe, nil),
			},
			wantRelease: true,
		},
	}
	for i, s := range steps {
		h.now = func() time.Time { return s.now }
		stub.expect(s.script...)
		resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, i+1)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(ids(resp)) == 0; got != s.wantRelease {
			t.Errorf("%s: got released %v, want %v", s.name, got, s.wantRelease)
		}
		stub.done(t)
	}
}

// s3Error is an S3 error answer as S3 sends it: XML with the code.
func s3Error(op string, status int, code string) exchange {
	return exchange{op: op, status: status, header: map[string]string{"Content-Type": "application/xml"},
		body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>stub</Message><RequestId>R</RequestId><HostId>H</HostId></Error>`}
}

// A DynamoDB tenant's order through the real S3 client: a 403 on the missing counter is read as
// missing and written with If-None-Match *; S3's 412 (another writer came first) is recognised, the
// counter read again and written with If-Match its ETag; the order goes into the execution input.
func TestHandleWithSDKClientsOrderCounter(t *testing.T) {
	h, stub, _ := sdkHandler(t, ddbEnv())
	body := eventBody(t, evID1, "inbox/acme/a.csv")
	counter := "S3 GET " + testBucket + "/control/acme/order.json"
	put := "S3 PUT " + testBucket + "/control/acme/order.json"
	const stored = int64(8_000_000_000_000_000) // above the clock, so the order is stored + 1
	stub.expect(
		with(sfnError("ExecutionDoesNotExist"), opDescribe, nil),
		with(sfnError("ExecutionDoesNotExist"), opDescribe, nil), // the other idempotency key's name
		s3Error(counter, 403, "AccessDenied"),
		func() exchange {
			x := s3Error(put, 412, "PreconditionFailed")
			x.reqHeader = map[string]string{"If-None-Match": "*", "If-Match": ""}
			return x
		}(),
		exchange{op: counter, status: 200, header: map[string]string{"ETag": `"e1"`, "Content-Type": "application/json"}, body: counterBody(stored)},
		exchange{op: put, status: 200, header: map[string]string{"ETag": `"e2"`}, reqHeader: map[string]string{"If-Match": `"e1"`, "If-None-Match": ""},
			s3Body: fmt.Sprintf(`"order":%d`, stored+1)},
		with(exchange{status: 200, body: fmt.Sprintf(`{"executionArn":%q,"startDate":1714554000}`, arn1)}, opStart, func(t *testing.T, m map[string]any) {
			var in pipeline.WorkflowInput
			if err := json.Unmarshal([]byte(m["input"].(string)), &in); err != nil {
				t.Fatal(err)
			}
			if in.Source.Order != stored+1 {
				t.Errorf("got input order %d, want %d", in.Source.Order, stored+1)
			}
		}),
		with(exchange{status: 200, body: `{}`}, opVisibility, nil),
	)
	if _, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", body, 1)}}); err != nil {
		t.Fatal(err)
	}
	stub.done(t)
}
