package router

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/backlog/backlogtest"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/parking"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
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

// parkingRouter is a router of the test pool with a bound of max, and the settings' tenants
// minus those left out (a router whose settings do not name them yet).
func parkingRouter(t *testing.T, max int, b *backlog.Backlog, q *testfake.SQS, out *testfake.Logs, without ...string) *Router {
	t.Helper()
	env := routerEnv(t)
	maps.Copy(env, map[string]string{pipeline.EnvMaxQueuedFilesPerTenant: fmt.Sprint(max), pipeline.EnvPoolAdmissionTable: "pool-admission"})
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Backlog.Max != max {
		t.Fatalf("got bound %d from the environment, want %d", cfg.Backlog.Max, max)
	}
	if len(without) > 0 {
		cfg.Settings = settingsWithout(t, cfg.Settings, without...)
	}
	ns := cfg.MetricsNamespace
	r := newRouter(cfg, q, slog.New(slog.NewJSONHandler(out, nil)),
		metrics.NewDimension(out, ns, metrics.DimensionPool, cfg.Pool),
		func(tenant string) *metrics.Emitter { return metrics.New(out, ns, tenant) })
	r.backlog = b
	return r
}

// intake is the intake batch of one event per key, each key its own event id.
func intake(t *testing.T, keys ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, k := range keys {
		sum := sha256.Sum256([]byte(k))
		id := fmt.Sprintf("%x-0000-4000-8000-%x", sum[:4], sum[4:10])
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("in-%d", i), Body: eventBody(t, id, k)})
	}
	return ev
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

// The router sends a tenant's files while it has fewer than the bound queued, parks the rest in
// order, and a neighbour's files still flow.
func TestRouterParksPastTheBound(t *testing.T) {
	q := &testfake.SQS{Errs: map[string]error{}, Deduplicate: true}
	out := &testfake.Logs{}
	b, _ := newTestBacklog(t, 3, q)
	r := parkingRouter(t, 3, b, q, out)
	ks := append(fileKeys("acme", 0, 7), fileKeys("globex", 0, 2)...)
	resp, err := r.Handle(context.Background(), intake(t, ks...))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("got %v, %v, want every intake message handled", resp.BatchItemFailures, err)
	}
	if got, want := sentKeys(t, q, "acme"), fileKeys("acme", 0, 3); !slices.Equal(got, want) {
		t.Errorf("acme: got sent %v, want %v", got, want)
	}
	if got, want := sentKeys(t, q, "globex"), fileKeys("globex", 0, 2); !slices.Equal(got, want) {
		t.Errorf("globex: got sent %v, want %v", got, want)
	}
	st, err := b.State(context.Background(), "acme")
	if err != nil || st.Queued != 3 || st.Parked != 4 {
		t.Errorf("acme: got %d queued, %d parked (%v), want 3, 4", st.Queued, st.Parked, err)
	}
	var parked float64
	for _, l := range out.Lines(t) {
		if v, ok := l[metrics.FilesParked].(float64); ok && l["Tenant"] == "acme" {
			parked += v
		}
	}
	if parked != 4 {
		t.Errorf("got FilesParked %v for acme, want 4", parked)
	}
	// The intake message of a file comes back (a crash after it was counted): counted once.
	if _, err := r.Handle(context.Background(), intake(t, ks[:1]...)); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.State(context.Background(), "acme"); st.Queued != 3 || st.Parked != 4 {
		t.Errorf("after a redelivery: got %d queued, %d parked, want 3, 4", st.Queued, st.Parked)
	}
}

// S3 answering the write of a parked file's slot with 409 ConditionalRequestConflict (a concurrent
// write) is "look again": the intake batch does not fail, and the file is parked once and fed back
// once, in order.
func TestRouterParksThroughAWriteConflict(t *testing.T) {
	q := &testfake.SQS{Errs: map[string]error{}, Deduplicate: true}
	c := &backlogtest.Conflict{Part: "/parked/", N: 1}
	b, s := newTestBacklogThrough(t, 1, q, c.Wrap)
	r := parkingRouter(t, 1, b, q, &testfake.Logs{})
	resp, err := r.Handle(context.Background(), intake(t, fileKeys("acme", 0, 3)...))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("got %v, %v, want every intake message handled", resp.BatchItemFailures, err)
	}
	if c.Answered() != 1 {
		t.Fatalf("got %d conflicts answered, want 1: the test did not exercise one", c.Answered())
	}
	if st, _ := b.State(context.Background(), "acme"); st.Queued != 1 || st.Parked != 2 || st.NextPark != 2 {
		t.Errorf("got %d queued, %d parked, next slot %d, want 1, 2, 2: each file parked once", st.Queued, st.Parked, st.NextPark)
	}
	list, err := s.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), Prefix: aws.String(backlog.ParkedPrefix(pipeline.PoolOwner(testPool, "acme")))})
	if err != nil || len(list.Contents) != 2 {
		t.Fatalf("got %d parked objects (%v), want 2", len(list.Contents), err)
	}
	for round := range 2 {
		id := aws.ToString(q.Sends[round].MessageDeduplicationId)
		if err := b.Released(context.Background(), "acme", id); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Drain(context.Background(), "acme"); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := sentKeys(t, q, "acme"), fileKeys("acme", 0, 3); !slices.Equal(got, want) {
		t.Errorf("got sent %v, want each file once, in order: %v", got, want)
	}
}

// A file under the pool's prefix whose first segment is a tenant id the router does not know is
// parked for that id, never dead-lettered; a key that cannot be a tenant's still is.
func TestRouterParksFilesOfATenantItDoesNotKnowYet(t *testing.T) {
	q := &testfake.SQS{Errs: map[string]error{}, Deduplicate: true}
	out := &testfake.Logs{}
	b, s := newTestBacklog(t, 10, q)
	r := parkingRouter(t, 10, b, q, out, "globex")
	resp, err := r.Handle(context.Background(), intake(t, append(fileKeys("globex", 0, 3), "inbox/Not_A_Tenant/a.csv", "inbox/loose.csv")...))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("got %v, %v, want every intake message handled", resp.BatchItemFailures, err)
	}
	if got := sentKeys(t, q, "globex"); len(got) != 0 {
		t.Errorf("got %v sent for a tenant the router does not know, want none", got)
	}
	if st, _ := b.State(context.Background(), "globex"); st.Parked != 3 {
		t.Errorf("got %d of globex's files parked, want 3", st.Parked)
	}
	if _, err := s.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(backlog.ParkedKey(pipeline.PoolOwner(testPool, "globex"), 0))}); err != nil {
		t.Errorf("got %v for the first parked file, want it under %s", err, backlog.ParkedPrefix(pipeline.PoolOwner(testPool, "globex")))
	}
	var dlq []string
	for _, m := range q.Sends {
		if aws.ToString(m.QueueUrl) == testDLQURL {
			dlq = append(dlq, keyOf(t, aws.ToString(m.MessageBody)))
		}
	}
	if want := []string{"inbox/Not_A_Tenant/a.csv", "inbox/loose.csv"}; !slices.Equal(dlq, want) {
		t.Errorf("got dead-lettered %v, want %v", dlq, want)
	}
	warned := 0
	var counted float64
	for _, l := range out.Lines(t) {
		if l["level"] == "WARN" && strings.Contains(fmt.Sprint(l["msg"]), "do not name yet parked") {
			warned++
		}
		if v, ok := l[metrics.FilesParkedForUnknownTenant].(float64); ok {
			counted += v
		}
	}
	if warned != 3 || counted != 3 {
		t.Errorf("got %d WARN lines, %v FilesParkedForUnknownTenant, want 3, 3", warned, counted)
	}

	// New settings name the tenant: the next router routes its parked files first, in order,
	// even before any new file of it arrives, and its newer files after them.
	r2 := parkingRouter(t, 10, b, q, out)
	if _, err := r2.Handle(context.Background(), intake(t, fileKeys("acme", 0, 1)...)); err != nil {
		t.Fatal(err)
	}
	if got, want := sentKeys(t, q, "globex"), fileKeys("globex", 0, 3); !slices.Equal(got, want) {
		t.Errorf("after the settings named globex, got sent %v, want its parked files %v", got, want)
	}
	if _, err := r2.Handle(context.Background(), intake(t, fileKeys("globex", 3, 5)...)); err != nil {
		t.Fatal(err)
	}
	if got, want := sentKeys(t, q, "globex"), fileKeys("globex", 0, 5); !slices.Equal(got, want) {
		t.Errorf("got sent %v, want %v", got, want)
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
			env := routerEnv(t)
			env[pipeline.EnvMaxQueuedFilesPerTenant] = tc.value
			env[pipeline.EnvPoolAdmissionTable] = "pool-admission"
			if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	env := routerEnv(t)
	env[pipeline.EnvMaxQueuedFilesPerTenant] = "10"
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "POOL_ADMISSION_TABLE: is required") {
		t.Errorf("without its table: got %v, want POOL_ADMISSION_TABLE required", err)
	}
}

// settingsWithout is the settings index x without the tenants named: what a router whose settings
// are older than those tenants reads.
func settingsWithout(t *testing.T, x *poolsettings.Index, without ...string) *poolsettings.Index {
	t.Helper()
	s := pipeline.PoolSettings{Version: pipeline.PoolSettingsVersion, Pool: x.Pool, Prefix: x.Prefix}
	for e := range x.All() {
		if slices.Contains(without, e.ID) {
			continue
		}
		pt, err := x.Tenant(e.ID)
		if err != nil {
			t.Fatal(err)
		}
		s.Tenants = append(s.Tenants, pt)
	}
	b, err := poolsettings.Encode(&s)
	if err != nil {
		t.Fatal(err)
	}
	out, err := poolsettings.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// countingDB counts the conditional writes that count a file in its tenant's queue (Backlog.Admit).
type countingDB struct {
	admission.ItemAPI
	admits int
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if strings.Contains(aws.ToString(in.ConditionExpression), "size(#q) < :max") && strings.Contains(aws.ToString(in.ConditionExpression), "#p = #u") {
		c.admits++
	}
	return c.ItemAPI.UpdateItem(ctx, in, optFns...)
}

// A flood of one tenant in one intake batch: once a file of the tenant is parked, its later files
// are parked without trying to count them (which could only fail), in order, and fed back in
// order as the queue frees. ROUTER_PARK_EACH, the reference design, tries each.
func TestRouterParksAFloodWithoutCountingEachFile(t *testing.T) {
	for _, tc := range []struct {
		parkEach bool
		admits   int
	}{{false, 2}, {true, 10}} {
		t.Run(fmt.Sprintf("park each %v", tc.parkEach), func(t *testing.T) {
			parksAFlood(t, tc.parkEach, tc.admits)
		})
	}
}

func parksAFlood(t *testing.T, parkEach bool, admits int) {
	q := &testfake.SQS{Errs: map[string]error{}, Deduplicate: true}
	b, _ := newTestBacklog(t, 1, q)
	db := &countingDB{ItemAPI: b.DB}
	b.DB = db
	r := parkingRouter(t, 1, b, q, &testfake.Logs{})
	r.cfg.ParkEach = parkEach
	resp, err := r.Handle(context.Background(), intake(t, fileKeys("acme", 0, 10)...))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("got %v, %v, want every intake message handled", resp.BatchItemFailures, err)
	}
	if db.admits != admits {
		t.Errorf("got %d attempts to count a file, want %d", db.admits, admits)
	}
	if st, _ := b.State(context.Background(), "acme"); st.Queued != 1 || st.Parked != 9 {
		t.Errorf("got %d queued, %d parked, want 1, 9", st.Queued, st.Parked)
	}
	for round := range 9 {
		id := aws.ToString(q.Sends[round].MessageDeduplicationId)
		if err := b.Released(context.Background(), "acme", id); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Drain(context.Background(), "acme"); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := sentKeys(t, q, "acme"), fileKeys("acme", 0, 10); !slices.Equal(got, want) {
		t.Errorf("got sent %v, want each file once, in order: %v", got, want)
	}
}
