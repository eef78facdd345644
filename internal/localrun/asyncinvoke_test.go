//go:build e2e || figures

package localrun

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// A failed asynchronous invocation is retried MaximumRetryAttempts times (default 2), after 1 and
// 2 minutes scaled by LambdaOptions.AsyncRetryScale, no longer than MaximumEventAgeInSeconds allows; then
// the event goes unchanged to the function's dead-letter queue with RequestID, ErrorCode and
// ErrorMessage (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html,
// https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html#invocation-dlq).
func TestInvokeAsyncDeadLetterQueue(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client := startFauxqs(t)
	const scale = 0.005 // 1 min is 300 ms, 2 min 600 ms, 60 s of event age 300 ms
	intp := func(n int) *int { return &n }
	for i, tc := range []struct {
		name        string
		do          string
		async       emulate.AsyncConfig
		invocations int64
		dead        bool
		minElapsed  time.Duration
	}{
		{name: "success", do: "answer", invocations: 1},
		{name: "default retries", do: "fail", invocations: 3, dead: true, minElapsed: 900 * time.Millisecond},
		{name: "no retry", do: "fail", async: emulate.AsyncConfig{MaximumRetryAttempts: intp(0)}, invocations: 1, dead: true},
		{name: "one retry", do: "fail", async: emulate.AsyncConfig{MaximumRetryAttempts: intp(1)}, invocations: 2, dead: true, minElapsed: 300 * time.Millisecond},
		{name: "event too old to retry", do: "fail", async: emulate.AsyncConfig{MaximumEventAge: time.Minute}, invocations: 1, dead: true},
		{name: "crash", do: "exit", async: emulate.AsyncConfig{MaximumRetryAttempts: intp(0)}, invocations: 1, dead: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dlq := createTestQueue(t, client, "router-dlq-"+strconv.Itoa(i))
			tc.async.DeadLetterTargetARN = dlq.ARN
			f := &emulate.Function{Name: "router", ARN: "arn:aws:lambda:us-east-1:000000000000:function:router", Binary: self,
				Env: []string{"LOCALRUN_TEST_RUNTIME=1"}, Timeout: 5 * time.Second, Logs: io.Discard, Async: tc.async}
			defer f.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &Cloud{ctx: ctx, logs: io.Discard, opts: cloudOptions{lambda: LambdaOptions{AsyncRetryScale: scale}}, sqs: client, queues: map[string]*Queue{dlq.ARN: dlq}}
			payload := `{"do":"` + tc.do + `","id":"event-1"}`
			start := time.Now()
			r.invokeAsync(f, []byte(payload))
			r.status().async.Wait()
			elapsed := time.Since(start)
			if got := f.Invocations(); got != tc.invocations {
				t.Errorf("invocations: got %d, want %d", got, tc.invocations)
			}
			if elapsed < tc.minElapsed {
				t.Errorf("elapsed: got %s, want at least %s (the scaled retry waits)", elapsed, tc.minElapsed)
			}
			out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlq.URL), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.dead {
				if len(out.Messages) != 0 {
					t.Errorf("dead-letter queue: got %d messages, want none", len(out.Messages))
				}
				return
			}
			if len(out.Messages) != 1 {
				t.Fatalf("dead-letter queue: got %d messages, want 1", len(out.Messages))
			}
			m := out.Messages[0]
			if got := aws.ToString(m.Body); got != payload {
				t.Errorf("body: got %s, want the event unchanged %s", got, payload)
			}
			attr := func(k string) (string, string) {
				v := m.MessageAttributes[k]
				return aws.ToString(v.DataType), aws.ToString(v.StringValue)
			}
			if typ, v := attr("RequestID"); typ != "String" || len(v) != 32 {
				t.Errorf("RequestID: got %s %q, want a String request id", typ, v)
			}
			if typ, v := attr("ErrorCode"); typ != "Number" || v != "200" {
				t.Errorf("ErrorCode: got %s %q, want Number 200 (a function error)", typ, v)
			}
			wantMsg := "failed on purpose"
			if tc.do == "exit" {
				wantMsg = "Runtime exited with error: exit status 2"
			}
			if typ, v := attr("ErrorMessage"); typ != "String" || !strings.Contains(v, wantMsg) {
				t.Errorf("ErrorMessage: got %s %q, want a String with %q", typ, v, wantMsg)
			}
			if c := r.StatusEventCounts(); c.DeadLettered != 1 || c.Retries != tc.invocations-1 {
				t.Errorf("counts: got %+v, want 1 dead-lettered and %d retries", c, tc.invocations-1)
			}
		})
	}
}

// A throttled asynchronous invocation goes back to Lambda's queue and is retried, "for up to 6
// hours by default. The retry interval increases exponentially from 1 second after the first
// attempt to a maximum of 5 minutes"
// (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html): the event
// runs once the account's concurrency frees up, and is neither dead-lettered nor discarded.
func TestInvokeAsyncRetriesThrottles(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{0, time.Second}, {1, 2 * time.Second}, {2, 4 * time.Second}, {8, 256 * time.Second},
		{9, 5 * time.Minute}, {100, 5 * time.Minute},
	} {
		if got := asyncThrottleWait(tc.n); got != tc.want {
			t.Errorf("wait after %d throttles: got %s, want %s", tc.n, got, tc.want)
		}
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client := startFauxqs(t)
	dlq := createTestQueue(t, client, "controller-dlq")
	account := emulate.NewAccountConcurrency(1)
	newFn := func(name string) *emulate.Function {
		f := &emulate.Function{Name: name, ARN: "arn:aws:lambda:us-east-1:000000000000:function:" + name, Binary: self,
			Env: []string{"LOCALRUN_TEST_RUNTIME=1"}, Timeout: 10 * time.Second, Logs: io.Discard, Account: account,
			Async: emulate.AsyncConfig{DeadLetterTargetARN: dlq.ARN}}
		t.Cleanup(f.Close)
		return f
	}
	other, controller := newFn("other"), newFn("controller")
	started := make(chan struct{})
	other.OnInvoke = func(*emulate.Function) { close(started) }
	go other.Invoke(context.Background(), []byte(`{"do":"sleep"}`))
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &Cloud{ctx: ctx, logs: io.Discard, opts: cloudOptions{lambda: LambdaOptions{AsyncRetryScale: 0.01}}, sqs: client, queues: map[string]*Queue{dlq.ARN: dlq}}
	r.invokeAsync(controller, []byte(`{"do":"answer"}`))
	deadline := time.Now().Add(time.Minute)
	for controller.Throttles() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("throttles: got %d after a minute, want 3", controller.Throttles())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for other.KillRunning() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	r.status().async.Wait()
	if got := controller.Invocations(); got != 1 {
		t.Errorf("invocations: got %d, want 1 (the event ran once)", got)
	}
	if c := r.StatusEventCounts(); c.DeadLettered != 0 || c.Discarded != 0 || c.Retries < 3 {
		t.Errorf("counts: got %+v, want 3 or more retries, none dead-lettered or discarded", c)
	}
}
