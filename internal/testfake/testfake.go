// Package testfake holds the test doubles and fixtures that more than one Lambda's tests use: an
// SQS sender that takes messages as SQS would, a log sink whose JSON lines tests read back, the
// EMF directives of a metrics line, and pool settings files. Only tests import it.
package testfake

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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
	"github.com/example/tenantpipeline/spec"
)

// SQS records SendMessage calls as SQS would take them; Errs answers a queue URL with an error
// instead. SendMessageBatch records each stored entry in Sends too (as the SendMessageInput it
// stands for), and each call's entries in Batches; an entry that FailEntry picks is answered as
// failed and not stored.
type SQS struct {
	mu        sync.Mutex
	Sends     []*sqs.SendMessageInput
	Batches   [][]*sqs.SendMessageInput
	Errs      map[string]error
	FailEntry func(*sqs.SendMessageInput) bool
	// Deduplicate makes SendMessageBatch accept an entry whose MessageDeduplicationId it stored
	// before without storing it again, as a FIFO queue does within its deduplication interval.
	Deduplicate bool
	stored      map[string]bool
}

// SendMessageBatch takes at most 10 entries, as SQS does
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html).
func (f *SQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Errs[aws.ToString(in.QueueUrl)]; err != nil {
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
		if f.FailEntry != nil && f.FailEntry(m) {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("try again"), SenderFault: false})
			continue
		}
		if f.Deduplicate && f.stored[aws.ToString(m.MessageDeduplicationId)] {
			out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("duplicate")})
			continue
		}
		if f.stored == nil {
			f.stored = map[string]bool{}
		}
		f.stored[aws.ToString(m.MessageDeduplicationId)] = true
		f.Sends = append(f.Sends, m)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprintf("sent-%d", len(f.Sends)))})
	}
	f.Batches = append(f.Batches, batch)
	return out, nil
}

func (f *SQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Errs[aws.ToString(in.QueueUrl)]; err != nil {
		return nil, err
	}
	f.Sends = append(f.Sends, in)
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("sent-%d", len(f.Sends)))}, nil
}

// Sent is a copy of Sends, taken under the lock the sends take, for a test that reads while a
// handler may still send.
func (f *SQS) Sent() []*sqs.SendMessageInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*sqs.SendMessageInput(nil), f.Sends...)
}

// Logs is a log output that handlers write to from several goroutines; Lines reads it back.
type Logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Logs) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Lines returns the JSON log lines written so far, failing the test at a line that is not JSON.
func (s *Logs) Lines(t testing.TB) []map[string]any {
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

// EMFDirective is one directive of an EMF line: its dimension set (each has one) and its metric
// names.
type EMFDirective struct {
	Dimensions []string
	Metrics    []string
}

// EMFDirectives returns an EMF line's directives
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
func EMFDirectives(d map[string]any) []EMFDirective {
	var out []EMFDirective
	for _, x := range d["_aws"].(map[string]any)["CloudWatchMetrics"].([]any) {
		dir := x.(map[string]any)
		var e EMFDirective
		for _, n := range dir["Dimensions"].([]any)[0].([]any) {
			e.Dimensions = append(e.Dimensions, n.(string))
		}
		for _, m := range dir["Metrics"].([]any) {
			e.Metrics = append(e.Metrics, m.(map[string]any)["Name"].(string))
		}
		out = append(out, e)
	}
	return out
}

// WritePoolSettings writes the pool settings given as JSON (pipeline.PoolSettings) to dir/name in
// the settings file's format, as the construct does, and returns its path.
func WritePoolSettings(t testing.TB, dir, name, js string) string {
	t.Helper()
	var s pipeline.PoolSettings
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, err := poolsettings.Encode(&s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// BadRowKey is a file of the tenant whose row BadRowSettings breaks.
const BadRowKey = "inbox/bad/a.csv"

// BadRowSettings writes a settings file of pool (tenants under prefix) with acme, globex (as the
// packages' testdata/pool-settings.json) and bad, whose row is broken as kind says, and returns its
// path:
//   - "undecodable": the row's bytes name a field no row has (a damaged file);
//   - "invalid": the row decodes, but its onFailure is no policy.
func BadRowSettings(t testing.TB, pool, prefix, kind string) string {
	t.Helper()
	s := pipeline.PoolSettings{Pool: pool, Prefix: prefix, Tenants: []pipeline.PoolTenant{
		{Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: "acme", Format: "csv", Encoding: "utf-8", ChunkSize: 100, MaxFieldBytes: 65536}}, Prefix: "inbox/acme/"},
		{Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: "bad", Format: "BADBAD", Encoding: "utf-8", ChunkSize: 100, MaxFieldBytes: 65536}}, Prefix: "inbox/bad/"},
		{Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: "globex", Format: "jsonl", Encoding: "utf-8", ChunkSize: 50, MaxFieldBytes: 4096}}, Prefix: "inbox/globex/",
			OnFailure: pipeline.OnFailureHalt, IdempotencyKey: pipeline.IdempotencyObjectVersion},
	}}
	if kind == "invalid" {
		s.Tenants[1].OnFailure = "stop"
	}
	b, err := poolsettings.Encode(&s)
	if err != nil {
		t.Fatal(err)
	}
	if kind == "undecodable" {
		b = bytes.Replace(b, []byte(`"format":"BADBAD"`), []byte(`"fxrmat":"BADBAD"`), 1)
	}
	path := filepath.Join(t.TempDir(), pipeline.PoolSettingsFile)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
