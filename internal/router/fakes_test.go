package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
)

// Test fixtures shared by the router's tests.
const (
	testQueueURL   = "https://sqs.eu-west-1.amazonaws.com/123456789012/acme.fifo"
	testBucket     = "ingest"
	testPool       = "shared-1"
	testPoolPrefix = "inbox/"
	evID1          = "6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2"
	evID2          = "7a2d3b4c-1e5f-4a6b-9c7d-8e9fa0b1c2d3"
	acmeKey        = "inbox/acme/2024-05-01 orders.csv"
	globexKey      = "inbox/globex/2024-05-01 orders.jsonl"
)

var testStart = time.Date(2024, 5, 1, 9, 0, 0, 0, time.UTC)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writePoolSettings writes the pool settings given as JSON (pipeline.PoolSettings) to dir/name in
// the settings file's format, as the construct does, and returns its path.
func writePoolSettings(t *testing.T, dir, name, js string) string {
	t.Helper()
	var s pipeline.PoolSettings
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, err := s.Encode()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var docs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("got a log line that is not JSON: %q", l)
		}
		docs = append(docs, m)
	}
	return docs
}

// eventBody is the EventBridge event S3 sends for one new object version under the tenant prefix.
func eventBody(t *testing.T, id, key string) string {
	t.Helper()
	ev := s3event.ObjectCreated(id, testStart.Add(-2*time.Minute), testBucket, s3event.Object{
		Key: key, Size: 1234, ETag: "9b2cf535f27731c974343645a3985328", VersionID: "v-" + id[:8], Sequencer: "0062E99A88DC407460",
	})
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeSender records SendMessage calls as SQS would take them; errs answers a queue URL with an
// error instead. SendMessageBatch records each stored entry in sends too (as the SendMessageInput
// it stands for), and each call's entries in batches; an entry that failEntry picks is answered as
// failed and not stored.
type fakeSender struct {
	mu        sync.Mutex
	sends     []*sqs.SendMessageInput
	batches   [][]*sqs.SendMessageInput
	errs      map[string]error
	failEntry func(*sqs.SendMessageInput) bool
	// deduplicate makes SendMessageBatch accept an entry whose MessageDeduplicationId it stored
	// before without storing it again, as a FIFO queue does within its deduplication interval.
	deduplicate bool
	stored      map[string]bool
}

func (f *fakeSender) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs[aws.ToString(in.QueueUrl)]; err != nil {
		return nil, err
	}
	if n := len(in.Entries); n == 0 || n > 10 {
		return nil, fmt.Errorf("AWS.SimpleQueueService.TooManyEntriesInBatchRequest: %d entries", n)
	}
	out := &sqs.SendMessageBatchOutput{}
	var batch []*sqs.SendMessageInput
	for _, e := range in.Entries {
		m := &sqs.SendMessageInput{QueueUrl: in.QueueUrl, MessageBody: e.MessageBody, MessageGroupId: e.MessageGroupId, MessageDeduplicationId: e.MessageDeduplicationId,
			MessageAttributes: e.MessageAttributes}
		batch = append(batch, m)
		if f.failEntry != nil && f.failEntry(m) {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("try again"), SenderFault: false})
			continue
		}
		if f.deduplicate && f.stored[aws.ToString(m.MessageDeduplicationId)] {
			out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("duplicate")})
			continue
		}
		if f.stored == nil {
			f.stored = map[string]bool{}
		}
		f.stored[aws.ToString(m.MessageDeduplicationId)] = true
		f.sends = append(f.sends, m)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprintf("sent-%d", len(f.sends)))})
	}
	f.batches = append(f.batches, batch)
	return out, nil
}

func (f *fakeSender) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs[aws.ToString(in.QueueUrl)]; err != nil {
		return nil, err
	}
	f.sends = append(f.sends, in)
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("sent-%d", len(f.sends)))}, nil
}

type emfDirective struct {
	dimensions []string
	metrics    []string
}

// emfDirectives returns an EMF line's directives: the dimension set (each has one) and the metric names.
func emfDirectives(d map[string]any) []emfDirective {
	var out []emfDirective
	for _, x := range d["_aws"].(map[string]any)["CloudWatchMetrics"].([]any) {
		dir := x.(map[string]any)
		var e emfDirective
		for _, n := range dir["Dimensions"].([]any)[0].([]any) {
			e.dimensions = append(e.dimensions, n.(string))
		}
		for _, m := range dir["Metrics"].([]any) {
			e.metrics = append(e.metrics, m.(map[string]any)["Name"].(string))
		}
		out = append(out, e)
	}
	return out
}
