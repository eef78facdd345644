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
)

// startFauxqs starts the SQS emulator of the local run for a test.
func startFauxqs(t *testing.T) *sqs.Client {
	t.Helper()
	root := moduleRoot(t)
	fq, err := startNode(t.Context(), NodeBinary(root), filepath.Join(root, "local/fauxqs/server.mjs"), []string{"--region", region}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fq.Close)
	return sqs.NewFromConfig(localAWS, func(o *sqs.Options) { o.BaseEndpoint = aws.String(fq.URL) })
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
	return &Queue{Name: name, URL: aws.ToString(out.QueueUrl), ARN: fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, account, name), VisibilityTimeout: 30}
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
			f := &Function{Name: "controller", ARN: "arn:aws:lambda:us-east-1:000000000000:function:controller", Binary: self,
				Env: []string{"LOCALRUN_TEST_RUNTIME=1"}, Timeout: 10 * time.Second, Concurrency: tc.reserved, Logs: io.Discard}
			defer f.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := &Run{cfg: Config{Logs: io.Discard}, sqs: client, sqsAdmin: client, runCtx: ctx, esmOf: map[*mapping]*esm{}}
			mp := &mapping{run: r, queue: q, fn: f, batch: 1, reportFailures: true, scale: mappingScale(f.Concurrency, tc.maxConc)}
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
			// One poller waits beside the invocations; a second may start while a poller that just
			// deleted its batch has not yet counted it handled.
			if limit := max(mp.scale.initial, tc.wantPeak+2); pollers > limit {
				t.Errorf("pollers: got %d at once, want at most %d", pollers, limit)
			}
			if got := f.Invocations(); got != int64(tc.groups*perGroup) {
				t.Errorf("invocations: got %d, want %d", got, tc.groups*perGroup)
			}
		})
	}
}
