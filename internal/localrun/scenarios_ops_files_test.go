//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Two uploads whose events EventBridge could not deliver (moved, as the rule target's retry policy
// would, to the rule's dead-letter queue) are re-sent in order by `pipectl replay --from-dlq`, and
// register after the file before them, exactly once; `pipectl files` then lists the tenant's files
// newest first with their status and records.
func TestScenarioOpsFilesAndDLQ(t *testing.T) {
	t.Parallel()
	r := startScenario(t, scenarioTenants, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"cont", "x.csv", csvOf(10)}})
	drain(t, ctx, r)

	// Paused, the uploads' events wait in the tenant's queue; the test moves them to the
	// dead-letter queue, as EventBridge would after failing to deliver them for 24 hours.
	pipectl(t, r, "pause", "cont", "--stack-prefix", opsPrefix)
	// An event's time has whole seconds, and S3 sequencers order the events of one key only
	// (notification-content-structure), so the dead-letter queue can give back the order of two
	// keys only from different seconds: z.csv is written in the second after y.csv's.
	uploadAll(t, ctx, r, []upload{{"cont", "y.csv", csvOf(12)}})
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	uploadAll(t, ctx, r, []upload{{"cont", "z.csv", csvOf(14)}})
	out := tenantOutputOf(t, r, "cont")
	if out.DLQURL == "" {
		t.Fatal("the tenant's stack output names no dead-letter queue")
	}
	var moved int
	for moved < 2 && ctx.Err() == nil {
		got, err := r.sqsAdmin.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(out.QueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range got.Messages {
			if _, err := r.sqsAdmin.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(out.DLQURL), MessageBody: m.Body}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.sqsAdmin.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(out.QueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
			moved++
		}
	}
	if moved != 2 {
		t.Fatalf("moved %d events to the dead-letter queue, want 2", moved)
	}
	pipectl(t, r, "replay", "cont", "--from-dlq", "--stack-prefix", opsPrefix)
	st := pipectlStatus(t, r, opsPrefix, "cont")
	if q := st.Tenants[0].Queue; q.Visible == nil || *q.Visible != 2 {
		t.Errorf("after replay --from-dlq: got queue %+v, want 2 visible", q)
	}
	left, err := r.sqsAdmin.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(out.DLQURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Messages) != 0 {
		t.Errorf("got %d messages left on the dead-letter queue, want none", len(left.Messages))
	}
	pipectl(t, r, "resume", "cont", "--stack-prefix", opsPrefix)
	waitFor(t, ctx, r, "the re-sent files registered", func(*report.Report) bool { return len(r.Sink.Registered("cont")) >= 10+12+14 })
	noViolations(t, drain(t, ctx, r))
	assertOrderedOnce(t, r, "cont", []string{"inbox/cont/x.csv", "inbox/cont/y.csv", "inbox/cont/z.csv"},
		map[string]int64{"inbox/cont/x.csv": 10, "inbox/cont/y.csv": 12, "inbox/cont/z.csv": 14})

	var files ops.FilesReport
	if err := json.Unmarshal([]byte(pipectl(t, r, "files", "cont", "--json", "--limit", "10", "--stack-prefix", opsPrefix)), &files); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		key     string
		records int64
	}{{"inbox/cont/z.csv", 14}, {"inbox/cont/y.csv", 12}, {"inbox/cont/x.csv", 10}}
	if len(files.Files) != len(want) {
		t.Fatalf("files: got %d files, want %d: %+v", len(files.Files), len(want), files.Files)
	}
	for i, w := range want {
		f := files.Files[i]
		if f.Key != w.key || f.Status != "SUCCEEDED" || f.Start == nil || f.Stop == nil || f.Error != nil {
			t.Errorf("files[%d]: got %s %s (start %v, stop %v, error %v), want %s SUCCEEDED with start and stop, no error",
				i, f.Key, f.Status, f.Start, f.Stop, f.Error, w.key)
		}
		// The local Step Functions server keeps history data whole, as AWS does, so the records
		// Split counted are known (RECORDS, never "-").
		if f.Records == nil || *f.Records != w.records {
			t.Errorf("files[%d] %s: got records %v, want %d", i, f.Key, f.Records, w.records)
		}
	}
}

// tenantOutputOf is the tenant's stack output as DescribeStacks answers it locally.
func tenantOutputOf(t *testing.T, r *Run, id string) pipeline.TenantOutput {
	t.Helper()
	for _, s := range r.StackOutputs() {
		for _, o := range s.Outputs {
			if o.OutputKey != pipeline.TenantOutputKey(id) {
				continue
			}
			out, err := pipeline.DecodeTenantOutput(o.OutputValue)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("no stack output for tenant %s", id)
	return pipeline.TenantOutput{}
}

// A pooled tenant's events that never reached the pool (kept, as the rule target's retry policy
// would after failing to deliver them to the intake, in the pool's dead-letter queue) are re-sent
// in order by `pipectl replay --from-dlq`, into the tenant's message group, and register after the
// file before them, exactly once, while the dead-letter queue keeps nothing of them.
func TestScenarioOpsPoolReplayFromDLQ(t *testing.T) {
	t.Parallel()
	r := startScenario(t, withTierJSON(scenarioTenants, "pool"), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	in := r.Tenant("cont").Prefix
	uploadAll(t, ctx, r, []upload{{"cont", "x.csv", csvOf(10)}})
	drain(t, ctx, r)

	var intake, dlq *Queue
	for _, q := range r.queues {
		switch name := strings.ToLower(q.Name); {
		case strings.Contains(name, "poolintake"):
			intake = q
		case strings.Contains(name, "poolruledeadletterqueue"):
			dlq = q
		}
	}
	if intake == nil || dlq == nil {
		t.Fatalf("the pool's intake and dead-letter queues: got %v and %v", intake, dlq)
	}
	var router *esm
	for _, e := range r.esms {
		if e.EventSourceArn == intake.ARN {
			router = e
		}
	}
	// With the router stopped, the uploads' events wait in the intake; the test moves them to the
	// dead-letter queue, as EventBridge would after failing to deliver them for 24 hours. Whole
	// seconds apart, as in the silo scenario: only then can their order be told again.
	router.SetEnabled(false)
	uploadAll(t, ctx, r, []upload{{"cont", "y.csv", csvOf(12)}})
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	uploadAll(t, ctx, r, []upload{{"cont", "z.csv", csvOf(14)}})
	var moved int
	for moved < 2 && ctx.Err() == nil {
		got, err := r.sqsAdmin.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(intake.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range got.Messages {
			if _, err := r.sqsAdmin.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq.URL), MessageBody: m.Body}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.sqsAdmin.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(intake.URL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
			moved++
		}
	}
	if moved != 2 {
		t.Fatalf("moved %d events to the dead-letter queue, want 2", moved)
	}
	router.SetEnabled(true)
	pipectl(t, r, "replay", "cont", "--from-dlq", "--stack-prefix", opsPrefix)
	waitFor(t, ctx, r, "the re-sent files registered", func(*report.Report) bool { return len(r.Sink.Registered("cont")) >= 10+12+14 })
	noViolations(t, drain(t, ctx, r))
	assertOrderedOnce(t, r, "cont", []string{in + "x.csv", in + "y.csv", in + "z.csv"},
		map[string]int64{in + "x.csv": 10, in + "y.csv": 12, in + "z.csv": 14})
	left, err := r.sqsAdmin.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlq.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Messages) != 0 {
		t.Errorf("got %d messages left on the dead-letter queue, want none", len(left.Messages))
	}
	// pipectl files lists the pooled tenant's own files, newest first, none of another tenant's.
	uploadAll(t, ctx, r, []upload{{"halt", "other.csv", csvOf(3)}})
	drain(t, ctx, r)
	var files ops.FilesReport
	if err := json.Unmarshal([]byte(pipectl(t, r, "files", "cont", "--json", "--limit", "10", "--stack-prefix", opsPrefix)), &files); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files.Files {
		got = append(got, f.Key+" "+f.Status)
	}
	if want := []string{in + "z.csv SUCCEEDED", in + "y.csv SUCCEEDED", in + "x.csv SUCCEEDED"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("files: got %v, want %v", got, want)
	}
}
