package controller

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/backlog/backlogtest"
	"github.com/example/tenantpipeline/internal/parking"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
	"github.com/example/tenantpipeline/internal/testfake"
)

// The bounded backlog's tests run against dynalite and gofakes3 (backlogtest), started only by
// the tests that need them; the queues are testfake.SQS.

func TestMain(m *testing.M) {
	code := m.Run()
	backlogtest.Stop()
	os.Exit(code)
}

// newTestBacklog is a backlog of max per tenant on a fresh table and bucket.
func newTestBacklog(t *testing.T, max int, q backlog.Sender) (*backlog.Backlog, *s3.Client) {
	return newTestBacklogThrough(t, max, q, nil)
}

// newTestBacklogThrough is newTestBacklog with S3's requests passing through wrap first.
func newTestBacklogThrough(t *testing.T, max int, q backlog.Sender, wrap func(http.Handler) http.Handler) (*backlog.Backlog, *s3.Client) {
	t.Helper()
	url, err := backlogtest.Dynalite("../..")
	if err != nil {
		t.Fatalf("these tests need dynalite (make setup): %v", err)
	}
	db, table := backlogtest.Table(t, url)
	s := backlogtest.S3Through(t, testBucket, wrap)
	return parking.New(parking.Config{Table: table, Max: max}, testPool, db, s, q, testBucket, testQueueURL), s
}

// sentKeys are the object keys of the pool queue messages of tenant, in the order sent, each
// checked to carry its backlog id.
func sentKeys(t *testing.T, q *testfake.SQS, tenant string) []string {
	t.Helper()
	var out []string
	for _, m := range q.Sent() {
		if aws.ToString(m.QueueUrl) != testQueueURL || aws.ToString(m.MessageGroupId) != tenant {
			continue
		}
		if got := aws.ToString(m.MessageAttributes[backlog.AttrMessageID].StringValue); got != aws.ToString(m.MessageDeduplicationId) {
			t.Errorf("got %s %q, want the deduplication id %q", backlog.AttrMessageID, got, aws.ToString(m.MessageDeduplicationId))
		}
		out = append(out, keyOf(t, aws.ToString(m.MessageBody)))
	}
	return out
}

func fileKeys(tenant string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("inbox/%s/f%02d.csv", tenant, i))
	}
	return out
}

// fakeDeleter records DeleteMessage calls.
type fakeDeleter struct {
	mu      sync.Mutex
	deleted []string
}

func (f *fakeDeleter) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

// backlogMessages are tenant's files from to to, as the router counts or parks them.
func backlogMessages(t *testing.T, tenant string, from, to int) []backlog.Message {
	var out []backlog.Message
	for i, k := range fileKeys(tenant, from, to) {
		id := fmt.Sprintf("%08d-0000-4000-8000-000000000000", from+i)
		out = append(out, backlog.Message{Tenant: tenant, ID: id, Body: eventBody(t, id, k)})
	}
	return out
}

// A released counted message is uncounted and deleted, then the tenant's oldest parked file is
// sent; a kept message changes nothing, and a retried release uncounts nothing twice. The sweep,
// which would feed the parked files back too, has looked just before and does not look again
// within the minute: only the release's own drain can send them.
func TestPoolReleaseFeedsParkedFilesBack(t *testing.T) {
	ctx := context.Background()
	q := &testfake.SQS{Errs: map[string]error{}, Deduplicate: true}
	b, _ := newTestBacklog(t, 1, q)
	// acme's three files as the router takes them: the first counted and sent, two parked.
	files := backlogMessages(t, "acme", 0, 3)
	for i, m := range files {
		if send, err := b.Route(ctx, m); err != nil || send != (i == 0) {
			t.Fatalf("file %d: got send %v, %v, want %v", i, send, err, i == 0)
		}
	}
	if err := b.Send(ctx, files[0]); err != nil {
		t.Fatal(err)
	}
	pr := newPoolRig(t, map[string]string{pipeline.EnvMaxQueuedFilesPerTenant: "1"})
	d := &fakeDeleter{}
	now := testStart
	pr.p.backlog, pr.p.deleter, pr.p.sweep.Now = b, d, func() time.Time { return now }
	if _, err := pr.p.Handle(ctx, events.SQSEvent{}); err != nil { // the sweep looks, and finds no room
		t.Fatal(err)
	}
	if got, want := sentKeys(t, q, "acme"), fileKeys("acme", 0, 1); !slices.Equal(got, want) {
		t.Fatalf("before the release: got sent %v, want the head only %v", got, want)
	}

	rec := poolMessage("m1", "not an event", "acme") // quarantined: released
	rec.MessageAttributes = map[string]events.SQSMessageAttribute{backlog.AttrMessageID: {StringValue: aws.String(files[0].ID), DataType: "String"}}
	for round := range 2 {
		resp, err := pr.p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{rec}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("round %d: got %v, %v, want the record released", round, resp.BatchItemFailures, err)
		}
	}
	if got, want := sentKeys(t, q, "acme"), fileKeys("acme", 0, 2); !slices.Equal(got, want) {
		t.Errorf("got sent %v, want the head and then the oldest parked file %v", got, want)
	}
	if !slices.Equal(d.deleted, []string{"rh-m1", "rh-m1"}) {
		t.Errorf("got deleted %v, want the released record's receipt handle, once a release", d.deleted)
	}
	if st, _ := b.State(ctx, "acme"); st.Queued != 1 || st.Parked != 1 {
		t.Errorf("got %d queued, %d parked, want 1, 1: the retried release uncounted nothing", st.Queued, st.Parked)
	}
	// An operator's message (no backlog id) is released without touching the backlog.
	op := poolMessage("m2", "not an event either", "acme")
	if _, err := pr.p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{op}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.State(ctx, "acme"); st.Queued != 1 || st.Parked != 1 || len(d.deleted) != 2 {
		t.Errorf("after an uncounted message: got %d queued, %d parked, %d deletes, want 1, 1, 2", st.Queued, st.Parked, len(d.deleted))
	}
}

func TestBacklogEnvironmentRejects(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
	}{
		{"zero", "0", "MAX_QUEUED_FILES_PER_TENANT: 0 is out of range, want 1 to 1000"},
		{"too many", "1001", "MAX_QUEUED_FILES_PER_TENANT: 1001 is out of range, want 1 to 1000"},
		{"not a number", "ten", `MAX_QUEUED_FILES_PER_TENANT: "ten" is not a whole number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			penv := poolEnv(t)
			penv[pipeline.EnvMaxQueuedFilesPerTenant] = tc.value
			if _, err := PoolConfigFromEnv(func(k string) string { return penv[k] }); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// A tenant whose queue emptied with files still parked (a crash between a release and its drain)
// gets them from the pool controller's sweep, on its next invocation of any tenant; the sweep
// looks at most once a minute.
func TestPoolSweepFeedsParkedFilesBack(t *testing.T) {
	q := &testfake.SQS{Errs: map[string]error{}, Deduplicate: true}
	b, _ := newTestBacklog(t, 2, q)
	for i := range 3 {
		m := backlog.Message{Tenant: "globex", ID: fmt.Sprintf("ev-%d", i), Body: eventBody(t, fmt.Sprintf("%08d-0000-4000-8000-000000000000", i), fmt.Sprintf("inbox/globex/f%02d.csv", i))}
		if _, err := b.Park(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	pr := newPoolRig(t, map[string]string{pipeline.EnvMaxQueuedFilesPerTenant: "2"})
	now := testStart
	pr.p.backlog, pr.p.deleter, pr.p.sweep.Now = b, &fakeDeleter{}, func() time.Time { return now }
	if _, err := pr.p.Handle(context.Background(), events.SQSEvent{}); err != nil {
		t.Fatal(err)
	}
	if got, want := sentKeys(t, q, "globex"), fileKeys("globex", 0, 2); !slices.Equal(got, want) {
		t.Errorf("got sent %v, want the two oldest parked files %v", got, want)
	}
	// Room again (both released by hand here), but within the minute: the sweep does not look.
	for i := range 2 {
		if err := b.Released(context.Background(), "globex", fmt.Sprintf("ev-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	pr.p.Handle(context.Background(), events.SQSEvent{})
	if got := sentKeys(t, q, "globex"); len(got) != 2 {
		t.Errorf("got %d sent within the minute, want 2", len(got))
	}
	now = now.Add(parking.SweepInterval)
	pr.p.Handle(context.Background(), events.SQSEvent{})
	if got, want := sentKeys(t, q, "globex"), fileKeys("globex", 0, 3); !slices.Equal(got, want) {
		t.Errorf("got sent %v after a minute, want %v", got, want)
	}
}

func keyOf(t *testing.T, body string) string {
	t.Helper()
	ev, err := s3event.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return ev.Detail.Object.Key
}
