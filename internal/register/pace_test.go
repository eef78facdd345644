package register

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/example/tenantpipeline/spec"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

func TestRecordRate(t *testing.T) {
	core := func(rps float64, files int) *pipeline.CoreSystem {
		return &pipeline.CoreSystem{Name: "c", MaxRunningFiles: files, MaxRecordsPerSecond: rps, Table: "adm"}
	}
	tests := []struct {
		name   string
		core   *pipeline.CoreSystem
		tenant float64
		want   float64
	}{
		{"no limits", nil, 0, 0},
		{"the core system's share", core(100, 4), 0, 25},
		{"a share below one record per second", core(3, 4), 0, 0.75},
		{"the tenant's cap under the share", core(100, 4), 10, 10},
		{"the share under the tenant's cap", core(100, 4), 50, 25},
		{"a core system without a rate: the tenant's", core(0, 4), 7, 7},
		{"no core system: the tenant's", nil, 7, 7},
		{"maxRunningFiles 0 is taken as 1", core(100, 0), 0, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := recordRate(pipeline.Tenant{Tenant: spec.Tenant{MaxRecordsPerSecond: tc.tenant}, CoreSystem: tc.core}); got != tc.want {
				t.Errorf("got %v records per second, want %v", got, tc.want)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	tests := []struct {
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"120", 120 * time.Second, true},
		{"0", 0, true},
		{" 5 ", 5 * time.Second, true},
		{"Tue, 01 Dec 2026 20:01:30 GMT", 90 * time.Second, true},   // IMF-fixdate
		{"Tuesday, 01-Dec-26 20:00:10 GMT", 10 * time.Second, true}, // RFC 850
		{"Tue Dec  1 20:00:03 2026", 3 * time.Second, true},         // asctime
		{"Tue, 01 Dec 2026 19:59:00 GMT", 0, true},                  // in the past
		{"99999999999999999999999", MaxRetryAfter, true},
		{"86400", MaxRetryAfter, true},
		{"", 0, false},
		{"soon", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"2026-12-01T20:01:00Z", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			got, ok := parseRetryAfter(tc.value, now)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("got %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// throttlingCore is a core system that answers each request with answer(n, key): a status and a
// Retry-After value ("" for none). It keeps every Idempotency-Key in arrival order.
type throttlingCore struct {
	mu     sync.Mutex
	keys   []string
	srv    *httptest.Server
	answer func(n int, key string) (int, string)
}

func newThrottlingCore(t *testing.T, answer func(n int, key string) (int, string)) *throttlingCore {
	c := &throttlingCore{answer: answer}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		c.mu.Lock()
		n := len(c.keys)
		c.keys = append(c.keys, key)
		c.mu.Unlock()
		status, after := c.answer(n, key)
		if after != "" {
			w.Header().Set("Retry-After", after)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *throttlingCore) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.keys...)
}

// pacedHandler is a handler on a fake clock whose sleeps move the clock and are recorded.
func pacedHandler(s3 *sourcetest.FakeS3, clock *fakeClock, out io.Writer) (*Handler, *[]time.Duration) {
	h := newHandler(s3, &fakeSecrets{})
	h.now = clock.now
	h.Metrics = out
	var mu sync.Mutex
	slept := &[]time.Duration{}
	h.sleep = func(_ context.Context, d time.Duration) error {
		mu.Lock()
		*slept = append(*slept, d)
		mu.Unlock()
		clock.add(d)
		return nil
	}
	return h, slept
}

// runPaced registers a file of n records in one invocation (3 a chunk in record mode, one chunk
// in batch mode) with a Lambda deadline of deadline on the clock (0: none).
func runPaced(t *testing.T, h *Handler, clock *fakeClock, tenant pipeline.Tenant, n int, deadline time.Duration) (pipeline.ChunkResult, error) {
	t.Helper()
	return runPacedWith(t, h, clock, tenant, n, deadline, nil)
}

// runPacedWith is runPaced with the request changed by edit first (nil: none).
func runPacedWith(t *testing.T, h *Handler, clock *fakeClock, tenant pipeline.Tenant, n int, deadline time.Duration, edit func(*pipeline.ChunkRequest)) (pipeline.ChunkResult, error) {
	t.Helper()
	var data bytes.Buffer
	data.WriteString("id\n")
	for i := 1; i <= n; i++ {
		data.WriteString(strconv.Itoa(i) + "\n")
	}
	s3 := h.S3.(*sourcetest.FakeS3)
	reqs := fixture(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k.csv", ETag: "etag-1"}, data.Bytes())
	req := reqs[0]
	req.LastChunk = len(reqs) - 1
	if edit != nil {
		edit(&req)
	}
	ctx := context.Background()
	if deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, clock.now().Add(deadline))
		defer cancel()
	}
	return h.Handle(ctx, req)
}

func keys(records ...int) []string {
	var k []string
	for _, r := range records {
		k = append(k, IdempotencyKey(execName, int64(r)))
	}
	return k
}

// TestSlowDownWaitedOut: a 429 or 503 is waited out inside the invocation (the Retry-After, or a
// capped backoff without one) and the same record is resent once, with the same Idempotency-Key;
// the file succeeds and CoreSystemThrottles counts the answer.
func TestSlowDownWaitedOut(t *testing.T) {
	start := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		status     int
		retryAfter string
		wantSleep  func(time.Duration) bool
	}{
		{"429 with delay-seconds", 429, "7", func(d time.Duration) bool { return d == 7*time.Second }},
		{"503 with an HTTP-date", 503, start.Add(30 * time.Second).Format(http.TimeFormat), func(d time.Duration) bool { return d == 30*time.Second }},
		{"429 without Retry-After: the backoff", 429, "", func(d time.Duration) bool { return d > 0 && d <= SlowDownMaxBackoff }},
		{"503 with garbage: the backoff", 503, "later", func(d time.Duration) bool { return d > 0 && d <= SlowDownMaxBackoff }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: start}
			once := false
			c := newThrottlingCore(t, func(_ int, key string) (int, string) {
				if key == IdempotencyKey(execName, 2) && !once {
					once = true
					return tc.status, tc.retryAfter
				}
				return 200, ""
			})
			var out bytes.Buffer
			h, slept := pacedHandler(sourcetest.NewFakeS3(), clock, &out)
			res, err := runPaced(t, h, clock, csvTenant(c.srv.URL), 3, 0)
			if err != nil {
				t.Fatalf("got %v, want success", err)
			}
			if got, want := c.seen(), keys(1, 2, 2, 3); !reflect.DeepEqual(got, want) {
				t.Errorf("got keys %q, want %q", got, want)
			}
			if !res.Done || res.Registered != 3 {
				t.Errorf("got %+v, want all 3 registered and done", res)
			}
			if len(*slept) != 1 || !tc.wantSleep((*slept)[0]) {
				t.Errorf("got sleeps %v, want one wait as the answer asks", *slept)
			}
			if got := emfValue(t, out.String(), "CoreSystemThrottles"); got != 1 {
				t.Errorf("got CoreSystemThrottles %v, want 1", got)
			}
		})
	}
}

// TestSlowDownNearDeadline: a 429 or 503 whose wait does not fit the invocation ends it
// successfully with the cursor at the record's chunk, even the invocation's first: the record is
// not resent in this invocation, no RetryableError spends the state machine's Retry budget, and
// the next invocation resends it with the same key.
func TestSlowDownNearDeadline(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		failKey   string
		batch     bool
		wantNext  int
		wantCount int64
		wantKeys  []string
	}{
		{"429 in the first chunk", 429, IdempotencyKey(execName, 2), false, 0, 1, keys(1, 2)},
		{"503 in the first chunk", 503, IdempotencyKey(execName, 2), false, 0, 1, keys(1, 2)},
		{"429 in a later chunk", 429, IdempotencyKey(execName, 5), false, 1, 4, keys(1, 2, 3, 4, 5)},
		{"503 to a batch", 503, BatchIdempotencyKey(execName, 0), true, 0, 0, []string{BatchIdempotencyKey(execName, 0)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Now, not a fixed date: the invocation's context carries a real deadline.
			clock := &fakeClock{t: time.Now()}
			failing := true
			c := newThrottlingCore(t, func(_ int, key string) (int, string) {
				if key == tc.failKey && failing {
					return tc.status, "600"
				}
				return 200, ""
			})
			tenant := csvTenant(c.srv.URL)
			if tc.batch {
				tenant = batchTenant(c.srv.URL)
			}
			h, slept := pacedHandler(sourcetest.NewFakeS3(), clock, nil)
			res, err := runPaced(t, h, clock, tenant, 6, 60*time.Second)
			if err != nil {
				t.Fatalf("got %v, want success with the cursor", err)
			}
			if res.Next != tc.wantNext || res.Done || res.Registered != tc.wantCount {
				t.Errorf("got %+v, want next %d, not done, %d registered", res, tc.wantNext, tc.wantCount)
			}
			if got := c.seen(); !reflect.DeepEqual(got, tc.wantKeys) {
				t.Errorf("got keys %q, want %q (the throttled request not resent)", got, tc.wantKeys)
			}
			// It waited what the invocation had, so the next one does not come straight back.
			var total time.Duration
			for _, d := range *slept {
				total += d
			}
			if total <= 0 || total >= 600*time.Second {
				t.Errorf("got %v waited, want part of the 600 s", total)
			}

			// The next invocation, after the Retry-After, resends the record with the same key.
			failing = false
			clock.add(600 * time.Second)
			next, err := runPaced(t, h, clock, tenant, 6, 0)
			if err != nil || !next.Done {
				t.Fatalf("next invocation: got %+v, %v; want done", next, err)
			}
			if got := c.seen(); !strings.Contains(strings.Join(got[len(tc.wantKeys):], ","), tc.failKey) {
				t.Errorf("got keys %q after the wait, want %s resent", got, tc.failKey)
			}
		})
	}
}

// TestRateLimit: records go at the file's share of the core system's rate, one token a record in
// record mode and n a batch of n; a wait that does not fit ends the invocation with its cursor.
func TestRateLimit(t *testing.T) {
	core := &pipeline.CoreSystem{Name: "core-a", MaxRunningFiles: 2, MaxRecordsPerSecond: 4, Table: "adm"} // 2 a second a file
	tests := []struct {
		name      string
		batch     bool
		records   int
		deadline  time.Duration
		wantWait  time.Duration // the sum of the sleeps
		wantSent  int           // requests
		wantNext  int
		wantDone  bool
		wantCount int64
	}{
		// A burst of 2, then one record every 0.5 s.
		{"record mode", false, 5, 0, 1500 * time.Millisecond, 5, 2, true, 5},
		// 5 tokens against a bucket of 2: 1.5 s.
		{"a batch of 5 takes 5 tokens", true, 5, 0, 1500 * time.Millisecond, 1, 1, true, 5},
		// 100 tokens at 2 a second do not fit 20 s: nothing sent, the cursor stays, no error.
		{"a wait past the deadline ends the invocation", true, 100, 20 * time.Second, 16 * time.Second, 0, 0, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now()} // the context's deadline is real
			c := newThrottlingCore(t, func(int, string) (int, string) { return 200, "" })
			tenant := csvTenant(c.srv.URL)
			if tc.batch {
				tenant = batchTenant(c.srv.URL)
			}
			tenant.CoreSystem = core
			var out bytes.Buffer
			h, slept := pacedHandler(sourcetest.NewFakeS3(), clock, &out)
			res, err := runPaced(t, h, clock, tenant, tc.records, tc.deadline)
			if err != nil {
				t.Fatalf("got %v, want success", err)
			}
			var total time.Duration
			for _, d := range *slept {
				total += d
			}
			if total != tc.wantWait {
				t.Errorf("got %v waited (%v), want %v", total, *slept, tc.wantWait)
			}
			if got := len(c.seen()); got != tc.wantSent {
				t.Errorf("got %d requests, want %d", got, tc.wantSent)
			}
			if res.Next != tc.wantNext || res.Done != tc.wantDone || res.Registered != tc.wantCount {
				t.Errorf("got %+v, want next %d, done %v, %d registered", res, tc.wantNext, tc.wantDone, tc.wantCount)
			}
			if tc.wantCount > 0 {
				if got := emfValue(t, out.String(), "RateLimitWaitSeconds"); got != tc.wantWait.Seconds() {
					t.Errorf("got RateLimitWaitSeconds %v, want %v", got, tc.wantWait.Seconds())
				}
			}
		})
	}
}

// limitItems is an admission table holding one core system's limit item, for the adaptive tests.
type limitItems struct {
	mu      sync.Mutex
	item    map[string]types.AttributeValue
	updates []string // the limits written
	err     error
}

func (f *limitItems) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, errors.New("not the sink's table")
}

func (f *limitItems) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if aws.ToString(in.TableName) != "adm" || in.Key[schema.AttrPK].(*types.AttributeValueMemberS).Value != schema.CoreGate("core-a") ||
		in.Key[schema.AttrSK].(*types.AttributeValueMemberS).Value != schema.LimitSK {
		return nil, errors.New("not the limit item")
	}
	return &dynamodb.GetItemOutput{Item: f.item}, nil
}

func (f *limitItems) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.HasPrefix(aws.ToString(in.UpdateExpression), "ADD ") { // a clean invocation counted
		n := 0
		if c, ok := f.item[admission.AttrClean].(*types.AttributeValueMemberN); ok {
			n, _ = strconv.Atoi(c.Value)
		}
		clean := &types.AttributeValueMemberN{Value: strconv.Itoa(n + 1)}
		f.item[admission.AttrClean] = clean
		return &dynamodb.UpdateItemOutput{Attributes: map[string]types.AttributeValue{admission.AttrClean: clean}}, nil
	}
	next := in.ExpressionAttributeValues[":next"]
	f.item = map[string]types.AttributeValue{
		schema.AttrLimit: next, schema.AttrUpdatedAt: in.ExpressionAttributeValues[":now"],
	}
	if strings.Contains(aws.ToString(in.UpdateExpression), "#decreasedAt") {
		f.item[admission.AttrDecreasedAt] = in.ExpressionAttributeValues[":now"]
	}
	f.updates = append(f.updates, next.(*types.AttributeValueMemberN).Value)
	return &dynamodb.UpdateItemOutput{}, nil
}

// TestAdaptiveLimit: for an adaptive core system a 429 halves the limit once, however many 429s
// the invocation sees, unless the file was admitted before the limit's last decrease (it is of the
// generation that decrease answered); the file's admission is its segment's fileStarted. An
// invocation that registered without one counts as clean, and the limit's worth of clean ones adds
// one back; a core system that is not adaptive is never written; and a store that fails never
// fails the file.
func TestAdaptiveLimit(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	old := strconv.FormatInt(now.Add(-time.Hour).UnixMilli(), 10)
	tests := []struct {
		name        string
		adaptive    bool
		stored      string // "" absent
		clean       string // the stored clean count; "" absent
		fileStarted string // the segment's; "" none
		throttle    int    // 429s before record 2 is accepted
		storeErr    error
		want        []string
	}{
		{"429s halve maxRunningFiles once", true, "", "", "", 3, nil, []string{"4"}},
		{"a file admitted after the last decrease halves it", true, "6", "", now.Add(-time.Minute).Format(time.RFC3339Nano), 2, nil, []string{"3"}},
		{"a file admitted before the last decrease does not", true, "6", "", now.Add(-2 * time.Hour).Format(time.RFC3339Nano), 2, nil, nil},
		{"a file of unknown admission does not, right after a decrease", true, "6", "", "", 2, nil, nil},
		{"an unreadable fileStarted is unknown admission", true, "6", "", "yesterday", 2, nil, nil},
		{"a clean invocation is counted", true, "3", "", "", 0, nil, nil},
		{"the limit's worth of clean invocations adds one", true, "3", "2", "", 0, nil, []string{"4"}},
		{"success at maxRunningFiles writes nothing", true, "", "", "", 0, nil, nil},
		{"not adaptive: never written", false, "3", "", "", 3, nil, nil},
		{"the store fails: the file still succeeds", true, "3", "", "", 1, errors.New("throttled"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: now}
			n := 0
			c := newThrottlingCore(t, func(_ int, key string) (int, string) {
				if key == IdempotencyKey(execName, 2) && n < tc.throttle {
					n++
					return 429, "0"
				}
				return 200, ""
			})
			db := &limitItems{err: tc.storeErr}
			if tc.stored != "" {
				db.item = map[string]types.AttributeValue{schema.AttrLimit: &types.AttributeValueMemberN{Value: tc.stored},
					schema.AttrUpdatedAt: &types.AttributeValueMemberN{Value: old}, admission.AttrDecreasedAt: &types.AttributeValueMemberN{Value: old}}
				if tc.clean != "" {
					db.item[admission.AttrClean] = &types.AttributeValueMemberN{Value: tc.clean}
				}
			}
			h, _ := pacedHandler(sourcetest.NewFakeS3(), clock, nil)
			h.DynamoDB = db
			// The limit item alone: the request shares are tested in shares_test.go.
			h.StaticShares = true
			tenant := csvTenant(c.srv.URL)
			tenant.CoreSystem = &pipeline.CoreSystem{Name: "core-a", MaxRunningFiles: 8, Adaptive: tc.adaptive, Table: "adm"}
			if _, err := runPacedWith(t, h, clock, tenant, 3, 0, func(r *pipeline.ChunkRequest) {
				if tc.fileStarted != "" {
					r.Segment = &pipeline.Segment{Index: 0, FirstChunk: r.Chunk, LastChunk: r.LastChunk, FileStarted: tc.fileStarted}
				}
			}); err != nil {
				t.Fatalf("got %v, want success", err)
			}
			if !reflect.DeepEqual(db.updates, tc.want) {
				t.Errorf("got limits written %q, want %q", db.updates, tc.want)
			}
			if tc.name == "a clean invocation is counted" {
				if got := db.item[admission.AttrClean].(*types.AttributeValueMemberN).Value; got != "1" {
					t.Errorf("got clean count %s, want 1", got)
				}
			}
		})
	}
}

// emfValue is the value of metric name in the EMF lines of out (0 when absent).
func emfValue(t *testing.T, out, name string) float64 {
	t.Helper()
	var v float64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("got an EMF line that is not JSON: %v", err)
		}
		if f, ok := doc[name].(float64); ok {
			v += f
		}
	}
	return v
}

// TestRateLimitDynamoDB: the DynamoDB sink takes one token of its core system's rate per item.
func TestRateLimitDynamoDB(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	s3 := sourcetest.NewFakeS3()
	db := newFakeDynamo("id")
	h, slept := pacedHandler(s3, clock, nil)
	h.DynamoDB = db
	tenant := ddbTenant("csv", "id")
	tenant.DynamoDB.Concurrency = 1 // one writer: its sleeps add up on the fake clock
	tenant.CoreSystem = &pipeline.CoreSystem{Name: "core-a", MaxRunningFiles: 2, MaxRecordsPerSecond: 4, Table: "adm"}
	if err := registerFile(t, h, s3, tenant, ddbSource("k.csv", "2026-12-01T00:00:00Z"), "id,v\n1,a\n2,b\n3,c\n4,d\n5,e\n"); err != nil {
		t.Fatal(err)
	}
	var total time.Duration
	for _, d := range *slept {
		total += d
	}
	// A burst of 2, then one item every 0.5 s.
	if total != 1500*time.Millisecond || db.calls != 5 {
		t.Errorf("got %v waited over %d writes, want 1.5s over 5", total, db.calls)
	}
}

// TestSlowDownForever: a core system that answers 429 "Retry-After: 0" to every resend is
// resent to until the budget has no room for another POST; the invocation still ends with its
// cursor, not with a RetryableError that spends the state machine's Retry budget.
func TestSlowDownForever(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	c := newThrottlingCore(t, func(_ int, key string) (int, string) {
		clock.add(time.Second) // each answer takes a second
		if key == IdempotencyKey(execName, 2) {
			return 429, "0"
		}
		return 200, ""
	})
	h, _ := pacedHandler(sourcetest.NewFakeS3(), clock, nil)
	res, err := runPaced(t, h, clock, csvTenant(c.srv.URL), 3, 20*time.Second)
	if err != nil {
		t.Fatalf("got %v, want success with the cursor", err)
	}
	if res.Next != 0 || res.Done {
		t.Errorf("got %+v, want next 0, not done", res)
	}
	if n := len(c.seen()); n < 3 {
		t.Errorf("got %d requests, want record 2 resent until the budget ran out", n)
	}
}
