//go:build e2e || figures

package localrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// startFauxqs starts the SQS emulator of the local run for a test.
func startFauxqs(t *testing.T) *sqs.Client {
	t.Helper()
	root := moduleRoot(t)
	fq, err := emulate.StartNode(t.Context(), deploy.NodeBinary(root), filepath.Join(root, "local/fauxqs/server.mjs"), []string{"--region", emulate.Region}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fq.Close)
	return sqs.NewFromConfig(emulate.LocalAWS, func(o *sqs.Options) { o.BaseEndpoint = aws.String(fq.URL) })
}

// createTestQueue creates a queue in fauxqs (a FIFO one when the name ends in .fifo).
func createTestQueue(t *testing.T, client *sqs.Client, name string) *Queue {
	t.Helper()
	attrs := map[string]string{"VisibilityTimeout": "30"}
	if filepath.Ext(name) == ".fifo" {
		attrs["FifoQueue"] = "true"
	}
	out, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return &Queue{Name: name, URL: aws.ToString(out.QueueUrl), ARN: fmt.Sprintf("arn:aws:sqs:%s:%s:%s", emulate.Region, emulate.Account, name), VisibilityTimeout: 30}
}

// An SQS event source mapping of a FIFO queue runs min(active message groups, MaximumConcurrency)
// invocations at once (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html):
// the test measures the peak against fauxqs, with every invocation holding its message for 400 ms.
// A fixed five pollers would give 5 where 10 and 12 are wanted; the pollers grow with demand only,
// so a queue with few groups keeps few long polls.
func TestMappingScalesToMessageGroups(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client := startFauxqs(t)
	for i, tc := range []struct {
		groups, maxConc, reserved int
		wantPeak                  int
	}{
		{groups: 20, maxConc: 10, wantPeak: 10}, // a pool with 20 active tenants
		{groups: 3, maxConc: 10, wantPeak: 3},   // a pool with 3 active tenants
		{groups: 1, wantPeak: 1},                // a silo tenant's queue
		{groups: 12, wantPeak: 12},              // no cap: every active group
		{groups: 8, maxConc: 10, reserved: 4, wantPeak: 4},
	} {
		t.Run(fmt.Sprintf("groups=%d,max=%d,reserved=%d", tc.groups, tc.maxConc, tc.reserved), func(t *testing.T) {
			q := createTestQueue(t, client, "scale-"+strconv.Itoa(i)+".fifo")
			const perGroup = 3
			for g := range tc.groups {
				var entries []sqstypes.SendMessageBatchRequestEntry
				for n := range perGroup {
					entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(n)), MessageBody: aws.String(`{"do":"hold"}`),
						MessageGroupId: aws.String(fmt.Sprintf("tenant-%02d", g)), MessageDeduplicationId: aws.String(fmt.Sprintf("%d-%d", g, n))})
				}
				if _, err := client.SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.URL), Entries: entries}); err != nil {
					t.Fatal(err)
				}
			}
			f := &emulate.Function{Name: "controller", ARN: "arn:aws:lambda:us-east-1:000000000000:function:controller", Binary: self,
				Env: []string{"LOCALRUN_TEST_RUNTIME=1"}, Timeout: 10 * time.Second, Concurrency: tc.reserved, Logs: io.Discard}
			defer f.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := &Cloud{logs: io.Discard, sqs: client, sqsAdmin: client, ctx: ctx, esmOf: map[*mapping]*esm{}}
			mp := &mapping{cloud: r, queue: q, fn: f, batch: 1, reportFailures: true, scale: mappingScale(f.Concurrency, tc.maxConc)}
			mp.start(ctx)
			deadline := time.Now().Add(time.Minute)
			for {
				n, err := r.queueDepth(t.Context(), q)
				if err != nil {
					t.Fatal(err)
				}
				r.mu.Lock()
				busy := r.busy
				r.mu.Unlock()
				if n == 0 && busy == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the queue still holds %d messages after a minute", n)
				}
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			r.pollers.Wait()
			peak, pollers := mp.Peak()
			if peak != tc.wantPeak {
				t.Errorf("peak concurrent invocations: got %d, want %d", peak, tc.wantPeak)
			}
			// A poller starts another only when every poller holds a batch, and a holding poller
			// holds one group's batch, so pollers grow past the active groups only by pollers that
			// deleted their batch and have not yet counted it handled: on a loaded machine each of
			// them may be, so at most twice the groups (the bound that holds whatever the timing).
			if limit := max(mp.scale.initial, 2*tc.wantPeak); pollers > limit {
				t.Errorf("pollers: got %d at once, want at most %d", pollers, limit)
			}
			if got := f.Invocations(); got != int64(tc.groups*perGroup) {
				t.Errorf("invocations: got %d, want %d", got, tc.groups*perGroup)
			}
		})
	}
}

// A throttled batch stays in flight and is retried with backoff, as Lambda retries a throttled SQS
// batch "until the message's timestamp exceeds your queue's visibility timeout"
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html): each message of
// the FIFO group reaches the function in its first receive (the function fails a message delivered
// a second time), in order, once the account's concurrency frees up; nothing is lost.
func TestMappingRetriesThrottledBatch(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client := startFauxqs(t)
	q := createTestQueue(t, client, "throttled.fifo") // visibility timeout 30 s
	const messages = 3
	for n := range messages {
		if _, err := client.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(`{"do":"first-receive"}`),
			MessageGroupId: aws.String("tenant"), MessageDeduplicationId: aws.String(strconv.Itoa(n))}); err != nil {
			t.Fatal(err)
		}
	}
	account := emulate.NewAccountConcurrency(1)
	newFn := func(name string) *emulate.Function {
		f := &emulate.Function{Name: name, ARN: "arn:aws:lambda:us-east-1:000000000000:function:" + name, Binary: self,
			Env: []string{"LOCALRUN_TEST_RUNTIME=1"}, Timeout: 10 * time.Second, Logs: io.Discard, Account: account}
		t.Cleanup(f.Close)
		return f
	}
	other, controller := newFn("other"), newFn("controller")
	// Another function holds the account's one unit until the mapping has been throttled twice.
	started := make(chan struct{})
	other.OnInvoke = func(*emulate.Function) { close(started) }
	go other.Invoke(context.Background(), []byte(`{"do":"sleep"}`))
	<-started
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := &Cloud{logs: io.Discard, sqs: client, sqsAdmin: client, ctx: ctx, esmOf: map[*mapping]*esm{}}
	mp := &mapping{cloud: r, queue: q, fn: controller, batch: 1, reportFailures: true, scale: mappingScale(0, 0)}
	mp.start(ctx)
	deadline := time.Now().Add(2 * time.Minute)
	for r.MappingThrottleRetries() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("throttle retries: got %d after two minutes, want 2", r.MappingThrottleRetries())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for other.KillRunning() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	for {
		n, err := r.queueDepth(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 || r.MappingErrors() > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	r.pollers.Wait()
	if got := r.MappingErrors(); got != 0 {
		t.Errorf("failed invocations: got %d, want 0 (a throttled message came back for a second receive)", got)
	}
	if got := controller.Invocations(); got != messages {
		t.Errorf("invocations: got %d, want %d, one per message", got, messages)
	}
	if got := controller.Throttles(); got < 2 {
		t.Errorf("throttles: got %d, want at least 2", got)
	}
	if n, _ := r.queueDepth(t.Context(), q); n != 0 {
		t.Errorf("queue: got %d messages left, want 0", n)
	}
}
