package register

import (
	"context"
	"errors"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

const table = "t1-records"

// fakeDynamo is a DynamoDB table with a string-typed key schema. It applies PutItem's condition
// as DynamoDB documents it (attribute_not_exists is true for a missing item; strings compare by
// their UTF-8 bytes) and only for the sink's one expression, answers a missing or mistyped key
// with ValidationException, and records the order of writes per key and the writes in flight.
type fakeDynamo struct {
	mu          sync.Mutex
	keys        []string
	items       map[string]map[string]types.AttributeValue
	order       map[string][]int64 // per key: the record numbers of every PutItem, in call order
	inflight    int
	maxInflight int
	calls       int
	delay       func() time.Duration
	fail        func(rec int64) error
}

var _ ItemAPI = (*fakeDynamo)(nil)

// GetItem and UpdateItem serve the adaptive limit, which the sink's tests do not use.
func (f *fakeDynamo) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, errors.New("fakeDynamo holds no adaptive limit")
}

func (f *fakeDynamo) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, errors.New("fakeDynamo holds no adaptive limit")
}

func newFakeDynamo(keys ...string) *fakeDynamo {
	return &fakeDynamo{keys: keys, items: map[string]map[string]types.AttributeValue{}, order: map[string][]int64{}}
}

func apiErr(code string) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &smithy.GenericAPIError{Code: code, Message: "SECRET-RECORD-CONTENT"}}
}

func str(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func (f *fakeDynamo) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	rec := int64(0)
	if m, ok := in.Item["_meta"].(*types.AttributeValueMemberM); ok {
		fmt.Sscan(m.Value["recordNumber"].(*types.AttributeValueMemberN).Value, &rec)
	}
	f.mu.Lock()
	f.calls++
	f.inflight++
	f.maxInflight = max(f.maxInflight, f.inflight)
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inflight--; f.mu.Unlock() }()
	if f.delay != nil {
		select {
		case <-time.After(f.delay()):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.fail != nil {
		if err := f.fail(rec); err != nil {
			return nil, err
		}
	}
	if aws.ToString(in.TableName) != table {
		return nil, apiErr("ResourceNotFoundException")
	}
	var id []string
	for _, k := range f.keys {
		v, ok := in.Item[k].(*types.AttributeValueMemberS)
		if !ok || v.Value == "" {
			return nil, apiErr("ValidationException")
		}
		id = append(id, v.Value)
	}
	key := strings.Join(id, "\x00")
	if aws.ToString(in.ConditionExpression) != "attribute_not_exists(#pk) OR #seq < :seq" ||
		in.ExpressionAttributeNames["#pk"] != f.keys[0] || in.ExpressionAttributeNames["#seq"] != "_seq" {
		return nil, apiErr("ValidationException")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.order[key] = append(f.order[key], rec)
	// A comparison with an attribute the item lacks is false, as in DynamoDB: an item without _seq
	// fails the condition.
	if old, ok := f.items[key]; ok && (old["_seq"] == nil || !(str(old["_seq"]) < str(in.ExpressionAttributeValues[":seq"]))) {
		ccf := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
		if in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
			ccf.Item = old
		}
		return nil, ccf
	}
	f.items[key] = in.Item
	return &dynamodb.PutItemOutput{}, nil
}

func ddbTenant(format string, keys ...string) pipeline.Tenant {
	return pipeline.Tenant{Tenant: spec.Tenant{ID: "t1", Format: format, Encoding: "utf-8", ChunkSize: 1000, DynamoDB: &pipeline.DynamoDBSink{Key: keys, Table: table, Concurrency: 16}}}
}

func ddbSource(key, eventTime string) pipeline.Source {
	return pipeline.Source{Bucket: ingest, Key: key, ETag: "etag-1", EventTime: eventTime, Sequencer: "0055AED6DCD90281E5"}
}

func ddbHandler(s3 *sourcetest.FakeS3, db ItemAPI) *Handler {
	h := newHandler(s3, &fakeSecrets{})
	h.DynamoDB = db
	return h
}

// registerFile writes every chunk of a file through the sink.
func registerFile(t *testing.T, h *Handler, s3 *sourcetest.FakeS3, tenant pipeline.Tenant, src pipeline.Source, data string) error {
	t.Helper()
	for _, req := range fixture(t, s3, tenant, src, []byte(data)) {
		if _, err := h.Handle(context.Background(), req); err != nil {
			return err
		}
	}
	return nil
}

func TestDynamoDBItems(t *testing.T) {
	seq1 := "20261130T124749.000000000Z.00000000000000000000000055AED6DCD90281E5.000000000001"
	meta1 := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"executionName": &types.AttributeValueMemberS{Value: execName}, "recordNumber": &types.AttributeValueMemberN{Value: "1"}}}
	for _, tc := range []struct {
		name   string
		tenant pipeline.Tenant
		data   string
		key    string
		want   map[string]types.AttributeValue
	}{
		{"csv fields are strings", ddbTenant("csv", "id"), "id,amount,note\n42,1.50,\n", "42", map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: "42"}, "amount": &types.AttributeValueMemberS{Value: "1.50"}, "note": &types.AttributeValueMemberS{Value: ""},
			"_seq": &types.AttributeValueMemberS{Value: seq1}, "_meta": meta1}},
		{"jsonl keeps JSON types; a number key is stored as its digits", ddbTenant("jsonl", "id", "at"),
			`{"id": 7, "at": "2026-11-30", "n": 1.50, "big": 12345678901234567890123, "ok": true, "none": null, "tags": ["a", 2], "m": {"x": {"y": false}}}` + "\n",
			"7\x002026-11-30", map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: "7"}, "at": &types.AttributeValueMemberS{Value: "2026-11-30"},
				"n": &types.AttributeValueMemberN{Value: "1.50"}, "big": &types.AttributeValueMemberN{Value: "12345678901234567890123"},
				"ok": &types.AttributeValueMemberBOOL{Value: true}, "none": &types.AttributeValueMemberNULL{Value: true},
				"tags": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "a"}, &types.AttributeValueMemberN{Value: "2"}}},
				"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
					"y": &types.AttributeValueMemberBOOL{Value: false}}}}},
				"_seq": &types.AttributeValueMemberS{Value: seq1}, "_meta": meta1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newFakeDynamo(tc.tenant.DynamoDB.Key...)
			s3 := sourcetest.NewFakeS3()
			if err := registerFile(t, ddbHandler(s3, db), s3, tc.tenant, ddbSource("k", "2026-11-30T12:47:49Z"), tc.data); err != nil {
				t.Fatal(err)
			}
			if got := db.items[tc.key]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got item %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestDynamoDBConditionFailedIsSuccess: a key that already holds a newer (or the same) _seq is
// left alone, and the chunk succeeds.
func TestDynamoDBConditionFailedIsSuccess(t *testing.T) {
	db := newFakeDynamo("id")
	newer := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "2"}, "_seq": &types.AttributeValueMemberS{Value: "3"}}
	db.items["2"] = newer
	s3 := sourcetest.NewFakeS3()
	reqs := fixture(t, s3, ddbTenant("csv", "id"), ddbSource("k", "2026-11-30T12:47:49Z"), []byte("id,v\n1,a\n2,b\n3,c\n"))
	res, err := ddbHandler(s3, db).Handle(context.Background(), reqs[0])
	if err != nil || res.Registered != 3 {
		t.Fatalf("got %v, %d registered, want success with 3", err, res.Registered)
	}
	if !reflect.DeepEqual(db.items["2"], newer) || len(db.items) != 3 {
		t.Errorf("got item 2 = %v (%d items), want the newer one kept and 3 items", db.items["2"], len(db.items))
	}
}

func TestDynamoDBErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tenant   pipeline.Tenant
		data     string
		fail     func(int64) error
		src      func(*pipeline.Source)
		wantType string
		wantMsg  string
		written  int
	}{
		{"missing key field (jsonl)", ddbTenant("jsonl", "id"), "{\"id\":\"a\"}\n{\"name\":\"SECRET\"}\n", nil, nil,
			pipeline.ErrValidation, `s3://ingest-bucket/k: chunk 0: record 2: has no key field "id"`, 0},
		{"missing sort key column (csv)", ddbTenant("csv", "id", "at"), "id,v\n1,SECRET\n", nil, nil,
			pipeline.ErrValidation, `chunk 0: record 1: has no key field "at"`, 0},
		{"empty key", ddbTenant("csv", "id"), "id,v\n1,a\n,SECRET\n", nil, nil,
			pipeline.ErrValidation, `record 2: key field "id" is empty`, 0},
		{"key of another type", ddbTenant("jsonl", "id"), "{\"id\":true,\"v\":\"SECRET\"}\n", nil, nil,
			pipeline.ErrValidation, `record 1: key field "id" is not a string or a number`, 0},
		{"reserved attribute", ddbTenant("jsonl", "id"), "{\"id\":\"1\",\"_seq\":\"SECRET\"}\n", nil, nil,
			pipeline.ErrValidation, `record 1: has a field named "_seq", which the DynamoDB sink writes itself`, 0},
		{"ValidationException names the record, not the message", ddbTenant("csv", "id"), "id,v\n1,a\n2,b\n3,SECRET\n",
			func(r int64) error {
				if r == 3 {
					return apiErr("ValidationException")
				}
				return nil
			}, nil, pipeline.ErrValidation, "chunk 0: record 3: DynamoDB table t1-records rejected the item (ValidationException)", 2},
		{"the lowest failed record is reported", ddbTenant("csv", "id"), "id,v\n1,a\n2,b\n3,c\n4,d\n",
			func(r int64) error {
				if r >= 2 {
					return apiErr("ValidationException")
				}
				return nil
			}, nil, pipeline.ErrValidation, "chunk 0: record 2: DynamoDB table", -1},
		{"table missing", ddbTenant("csv", "id"), "id\n1\n", func(int64) error { return apiErr("ResourceNotFoundException") }, nil,
			pipeline.ErrPermanent, "record 1: DynamoDB table t1-records: ResourceNotFoundException", 0},
		{"access denied", ddbTenant("csv", "id"), "id\n1\n", func(int64) error { return apiErr("AccessDeniedException") }, nil,
			pipeline.ErrPermanent, "AccessDeniedException", 0},
		{"throttled beyond the SDK's retries", ddbTenant("csv", "id"), "id\n1\n", func(int64) error { return apiErr("ProvisionedThroughputExceededException") }, nil,
			pipeline.ErrRetryable, "record 1: DynamoDB table t1-records: ProvisionedThroughputExceededException after 10 attempts", 0},
		{"no answer", ddbTenant("csv", "id"), "id\n1\n", func(int64) error { return errors.New("connection reset") }, nil,
			pipeline.ErrRetryable, "record 1: DynamoDB did not answer", 0},
		{"no order for the file", ddbTenant("csv", "id"), "id\n1\n", nil, func(s *pipeline.Source) { s.EventTime, s.Sequencer = "", "" },
			pipeline.ErrPermanent, "the DynamoDB sink cannot order this file's records", 0},
		{"no table", func() pipeline.Tenant { t := ddbTenant("csv", "id"); t.DynamoDB.Table = ""; return t }(), "id\n1\n", nil, nil,
			pipeline.ErrPermanent, `tenant "t1" dynamodb needs a table`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newFakeDynamo(tc.tenant.DynamoDB.Key...)
			db.fail = tc.fail
			s3 := sourcetest.NewFakeS3()
			src := ddbSource("k", "2026-11-30T12:47:49Z")
			if tc.src != nil {
				tc.src(&src)
			}
			reqs := fixture(t, s3, tc.tenant, src, []byte(tc.data))
			_, err := ddbHandler(s3, db).Handle(context.Background(), reqs[0])
			if got := source.ErrorType(err); got != tc.wantType || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("got %s %v, want %s containing %q", got, err, tc.wantType, tc.wantMsg)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("got %q, want no record contents or DynamoDB message", err)
			}
			if tc.written >= 0 && len(db.items) != tc.written {
				t.Errorf("got %d items written, want %d", len(db.items), tc.written)
			}
		})
	}
}

// stubTransport answers DynamoDB's JSON protocol: statuses[i] for the i-th request, then 200.
type stubTransport struct {
	mu       sync.Mutex
	requests int
	answers  []string // error codes; "" is success
}

func (s *stubTransport) Do(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	n := s.requests
	s.requests++
	s.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	code, status, body := "", 200, "{}"
	if n < len(s.answers) {
		code = s.answers[n]
	}
	if code != "" {
		// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html
		status = 400
		if code == "InternalServerError" {
			status = 500
		}
		body = fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"SECRET-RECORD-CONTENT"}`, code)
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// TestDynamoDBThroughTheSDK: the real client, configured as main configures it, over a stubbed
// transport: throttling and 5xx are retried by the SDK's retryer beyond its default 3 attempts,
// a failed condition is success, a ValidationException fails the file.
func TestDynamoDBThroughTheSDK(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answers  []string
		wantType string
		requests int
	}{
		{"throttling then success", []string{"ProvisionedThroughputExceededException", "ThrottlingException", "ProvisionedThroughputExceededException", "InternalServerError", "ThrottlingException"}, "", 6},
		{"condition failed is success", []string{"ConditionalCheckFailedException"}, "", 1},
		{"validation", []string{"ValidationException"}, pipeline.ErrValidation, 1},
		{"throttled past every attempt", []string{"ThrottlingException", "ThrottlingException", "ThrottlingException", "ThrottlingException", "ThrottlingException",
			"ThrottlingException", "ThrottlingException", "ThrottlingException", "ThrottlingException", "ThrottlingException"}, pipeline.ErrRetryable, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := &stubTransport{answers: tc.answers}
			cfg := aws.Config{Region: "ap-northeast-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
			db := NewDynamoDB(cfg, func(o *dynamodb.Options) {
				o.BaseEndpoint = aws.String("http://dynamodb.test")
				o.HTTPClient = stub
				o.Retryer = retry.AddWithMaxBackoffDelay(o.Retryer, time.Millisecond)
			})
			s3 := sourcetest.NewFakeS3()
			reqs := fixture(t, s3, ddbTenant("csv", "id"), ddbSource("k", "2026-11-30T12:47:49Z"), []byte("id,v\n1,a\n"))
			res, err := ddbHandler(s3, db).Handle(context.Background(), reqs[0])
			if got := source.ErrorType(err); got != tc.wantType && !(tc.wantType == "" && err == nil) {
				t.Fatalf("got %s %v, want %q", got, err, tc.wantType)
			}
			if tc.wantType == "" && res.Registered != 1 {
				t.Errorf("got %d registered, want 1", res.Registered)
			}
			if stub.requests != tc.requests {
				t.Errorf("got %d requests, want %d", stub.requests, tc.requests)
			}
		})
	}
}

// TestDynamoDBPerKeyOrder: records of different keys are written concurrently, within the bound;
// records of one key strictly in file order, so every key ends with its last record.
func TestDynamoDBPerKeyOrder(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,v\n")
	last := map[string]string{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		k := fmt.Sprint("k", rng.IntN(9))
		if i%50 < 10 {
			k = "hot" // runs of one key
		}
		fmt.Fprintf(&b, "%s,%d\n", k, i+1)
		last[k] = fmt.Sprint(i + 1)
	}
	for _, conc := range []int{1, 4, 16} {
		t.Run(fmt.Sprint("concurrency ", conc), func(t *testing.T) {
			db := newFakeDynamo("id")
			var mu sync.Mutex
			db.delay = func() time.Duration {
				mu.Lock()
				defer mu.Unlock()
				return time.Duration(200+rng.IntN(800)) * time.Microsecond
			}
			tenant := ddbTenant("csv", "id")
			tenant.DynamoDB.Concurrency = conc
			s3 := sourcetest.NewFakeS3()
			reqs := fixture(t, s3, tenant, ddbSource("k", "2026-11-30T12:47:49Z"), []byte(b.String()))
			res, err := ddbHandler(s3, db).Handle(context.Background(), reqs[0])
			if err != nil || res.Registered != 300 {
				t.Fatalf("got %v, %d registered, want 300", err, res.Registered)
			}
			for k, recs := range db.order {
				for i := 1; i < len(recs); i++ {
					if recs[i] <= recs[i-1] {
						t.Errorf("key %s: got record %d written after %d, want file order", k, recs[i], recs[i-1])
					}
				}
			}
			for k, v := range last {
				if got := str(db.items[k]["v"]); got != v {
					t.Errorf("key %s: got v=%s, want its last record's %s", k, got, v)
				}
			}
			if db.maxInflight > conc || (conc > 1 && db.maxInflight < 2) {
				t.Errorf("got at most %d writes in flight, want 2..%d", db.maxInflight, conc)
			}
		})
	}
}

// TestDynamoDBReplayCannotRegress: files rank by their queue order, whatever their event times and
// sequencers say. After a newer file, a redrive of it and replays of an older file (with its order,
// or unordered) change nothing; items of the event time format rank below every ordered file; a
// re-upload (a new order) wins.
func TestDynamoDBReplayCannotRegress(t *testing.T) {
	db := newFakeDynamo("id")
	s3 := sourcetest.NewFakeS3()
	h := ddbHandler(s3, db)
	tenant := ddbTenant("csv", "id")
	tenant.ChunkSize = 2
	ordered := func(key string, order int64, eventTime, sequencer string) pipeline.Source {
		src := ddbSource(key, eventTime)
		src.Order, src.Sequencer = order, sequencer
		return src
	}
	legacy := ddbSource("inbox/t1/l.csv", "2026-11-30T12:00:05Z") // before the controller took orders
	older := ordered("inbox/t1/a.csv", 100, "2026-11-30T12:00:09Z", "FFFF")
	// The queue ran b.csv after a.csv; its event time and sequencer are both smaller.
	newer := ordered("inbox/t1/b.csv", 101, "2026-11-30T12:00:00Z", "0011")
	unordered := older
	unordered.Order, unordered.Unordered = 0, true
	values := func() map[string]string {
		m := map[string]string{}
		for k, it := range db.items {
			m[k] = str(it["v"])
		}
		return m
	}
	steps := []struct {
		name string
		src  pipeline.Source
		data string
		want map[string]string
	}{
		{"a file written before orders", legacy, "id,v\n1,l1\n4,l4\n", map[string]string{"1": "l1", "4": "l4"}},
		{"older file", older, "id,v\n1,a1\n2,a2\n1,a3\n", map[string]string{"1": "a3", "2": "a2", "4": "l4"}},
		{"newer file", newer, "id,v\n1,b1\n3,b3\n", map[string]string{"1": "b1", "2": "a2", "3": "b3", "4": "l4"}},
		{"redrive of the newer file", newer, "id,v\n1,b1\n3,b3\n", map[string]string{"1": "b1", "2": "a2", "3": "b3", "4": "l4"}},
		{"replay of the older file (its order)", older, "id,v\n1,a1\n2,a2\n1,a3\n", map[string]string{"1": "b1", "2": "a2", "3": "b3", "4": "l4"}},
		{"unordered replay of the older file", unordered, "id,v\n1,a1\n2,a2\n1,a3\n5,a5\n", map[string]string{"1": "b1", "2": "a2", "3": "b3", "4": "l4", "5": "a5"}},
		{"redrive of the file from before orders", legacy, "id,v\n1,l1\n4,l4\n", map[string]string{"1": "b1", "2": "a2", "3": "b3", "4": "l4", "5": "a5"}},
		{"re-upload of the older file's data (a new order)", ordered("inbox/t1/a.csv", 102, "2026-11-30T12:10:00Z", "0001"), "id,v\n1,a1\n2,a2\n1,a3\n",
			map[string]string{"1": "a3", "2": "a2", "3": "b3", "4": "l4", "5": "a5"}},
	}
	for _, st := range steps {
		if err := registerFile(t, h, s3, tenant, st.src, st.data); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := values(); !reflect.DeepEqual(got, st.want) {
			t.Errorf("after %s: got %v, want %v", st.name, got, st.want)
		}
	}
}

// TestDynamoDBStopsBeforeDeadline: writes still running when the budget ends return a
// RetryableError in time, instead of the invocation being killed at its timeout. A write here never
// ends by itself, so the handler comes back only because each write's context ends with the budget:
// before the invocation's deadline, by about the margin.
func TestDynamoDBStopsBeforeDeadline(t *testing.T) {
	db := &deadlineDynamo{fakeDynamo: newFakeDynamo("id")}
	db.delay = func() time.Duration { return time.Hour }
	s3 := sourcetest.NewFakeS3()
	reqs := fixture(t, s3, ddbTenant("csv", "id"), ddbSource("k", "2026-11-30T12:47:49Z"), []byte("id\n1\n2\n"))
	h := ddbHandler(s3, db)
	h.DeadlineMargin = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2200*time.Millisecond)
	defer cancel()
	_, err := h.Handle(ctx, reqs[0])
	if source.ErrorType(err) != pipeline.ErrRetryable || !strings.Contains(err.Error(), "the Lambda timeout is near") {
		t.Errorf("got %v, want a RetryableError naming the timeout", err)
	}
	deadline, _ := ctx.Deadline()
	if len(db.deadlines) == 0 {
		t.Fatal("got no write, want the handler to have started writing")
	}
	for i, d := range db.deadlines {
		// The budget's end is the deadline less the margin, counted from the time the call is made:
		// before the invocation's deadline whatever the load.
		if d.IsZero() || !d.Before(deadline) {
			t.Errorf("write %d: got its context ending at %s, want it ending with the budget, before the invocation's deadline %s (margin %s)",
				i, d.Format(time.StampMilli), deadline.Format(time.StampMilli), h.DeadlineMargin)
		}
	}
}

// deadlineDynamo records the deadline of each PutItem's context.
type deadlineDynamo struct {
	*fakeDynamo
	mu        sync.Mutex
	deadlines []time.Time
}

func (d *deadlineDynamo) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	dl, _ := ctx.Deadline()
	d.mu.Lock()
	d.deadlines = append(d.deadlines, dl)
	d.mu.Unlock()
	return d.fakeDynamo.PutItem(ctx, in, opts...)
}

// In a pool, the DynamoDB sink writes the tenant's table with the tenant's client, never the
// function's own.
func TestDynamoDBSinkActsForTheInputsTenant(t *testing.T) {
	tenantS3, tenantDB, own := sourcetest.NewFakeS3(), newFakeDynamo("id"), newFakeDynamo("id")
	h := ddbHandler(sourcetest.NewFakeS3(), own)
	h.ForTenant = func(id string) (*TenantClients, error) {
		if id != "t1" {
			return nil, fmt.Errorf("no clients for %q", id)
		}
		return &TenantClients{S3: tenantS3, DynamoDB: tenantDB}, nil
	}
	if err := registerFile(t, h, tenantS3, ddbTenant("csv", "id"), ddbSource("pools/p/t1/k", "2026-11-30T12:47:49Z"), "id,v\n1,a\n2,b\n"); err != nil {
		t.Fatal(err)
	}
	if tenantDB.calls != 2 || own.calls != 0 {
		t.Errorf("got %d PutItem calls with t1's client and %d with the function's own, want 2 and 0", tenantDB.calls, own.calls)
	}
}
