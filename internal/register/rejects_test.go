package register

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// rejectingFile is a CSV file of six records whose first spans two lines, so that line and record
// numbers differ: record n starts on line n+2 from record 2 on.
const rejectingFile = "id,v\n1,\"a\nb\"\n2,b\n3,c\n4,d\n5,e\n6,f\n"

func skipping(t pipeline.Tenant, statuses ...int) pipeline.Tenant {
	t.OnInvalidRecord = pipeline.OnInvalidSkipRecord
	t.RejectStatuses = statuses
	return t
}

// parts reads every register part written, by key, as its rejections.
func parts(t *testing.T, s3 *sourcetest.FakeS3) map[string][]results.Rejection {
	t.Helper()
	out := map[string][]results.Rejection{}
	for k, b := range s3.Puts {
		if !strings.Contains(k, "/"+results.PartsDir+"/") {
			continue
		}
		var list []results.Rejection
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			var r results.Rejection
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("part %s: line %q: %v", k, line, err)
			}
			list = append(list, r)
		}
		out[strings.TrimPrefix(k, ingest+"/")] = list
	}
	return out
}

func partKey(chunk int, first int64) string {
	return results.RegisterPartKey(pipeline.SiloOwner("t1"), execName, chunk, first)
}

// Record mode: a status the tenant lists rejects the one record under skipRecord, the next record
// is sent, the rejection (status, message, original bytes, line) is in the invocation's part and
// the counts say what it did; any other status or policy behaves as before.
func TestRecordSinkRejects(t *testing.T) {
	type chunkWant struct {
		registered, rejected int64
	}
	tests := []struct {
		name     string
		tenant   func(pipeline.Tenant) pipeline.Tenant
		status   int // the core system's answer to records 2 and 5
		want     []chunkWant
		wantFail string // the error type of chunk 0, if it fails
		wantPart map[string][]results.Rejection
	}{
		{"422 listed under skipRecord", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 400, 422) }, 422,
			[]chunkWant{{2, 1}, {2, 1}}, "", map[string][]results.Rejection{
				partKey(0, 1): {{Line: 4, Record: 2, Error: "the core system answered 422: amount must be positive", Status: 422, Raw: []byte("2,b")}},
				partKey(1, 4): {{Line: 7, Record: 5, Error: "the core system answered 422: amount must be positive", Status: 422, Raw: []byte("5,e")}},
			}},
		{"409 listed is a rejection, not a duplicate", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 409) }, 409,
			[]chunkWant{{2, 1}, {2, 1}}, "", map[string][]results.Rejection{
				partKey(0, 1): {{Line: 4, Record: 2, Error: "the core system answered 409: amount must be positive", Status: 409, Raw: []byte("2,b")}},
				partKey(1, 4): {{Line: 7, Record: 5, Error: "the core system answered 409: amount must be positive", Status: 409, Raw: []byte("5,e")}},
			}},
		{"422 not listed fails as before", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 400) }, 422, nil, pipeline.ErrPermanent, nil},
		{"422 listed under failFile fails as before", func(t pipeline.Tenant) pipeline.Tenant {
			t = skipping(t, 422)
			t.OnInvalidRecord = pipeline.OnInvalidFailFile
			return t
		}, 422, nil, pipeline.ErrPermanent, nil},
		{"409 not listed is registered as before", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 422) }, 409,
			[]chunkWant{{3, 0}, {3, 0}}, "", map[string][]results.Rejection{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu   sync.Mutex
				sent []int64
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rec, _ := strconv.ParseInt(r.Header.Get("Idempotency-Key")[len(execName)+1:], 10, 64)
				mu.Lock()
				sent = append(sent, rec)
				mu.Unlock()
				if rec == 2 || rec == 5 {
					w.WriteHeader(tc.status)
					fmt.Fprint(w, `{"message": "amount must be positive"}`)
					return
				}
				w.WriteHeader(http.StatusCreated)
			}))
			defer srv.Close()
			s3 := sourcetest.NewFakeS3()
			tenant := tc.tenant(csvTenant(srv.URL))
			src := pipeline.Source{Bucket: ingest, Key: "inbox/t1/r.csv", ETag: "etag-1"}
			h := newHandler(s3, &fakeSecrets{})
			for i, req := range fixture(t, s3, tenant, src, []byte(rejectingFile)) {
				res, err := h.Handle(context.Background(), req)
				if tc.wantFail != "" {
					if got := source.ErrorType(err); got != tc.wantFail {
						t.Fatalf("chunk %d: got %v (%s), want %s", i, err, got, tc.wantFail)
					}
					if got := parts(t, s3); len(got) != 0 {
						t.Errorf("got parts %v, want none", got)
					}
					return
				}
				if err != nil {
					t.Fatalf("chunk %d: %v", i, err)
				}
				if got := (chunkWant{res.Registered, res.Rejected}); got != tc.want[i] {
					t.Errorf("chunk %d: got registered %d rejected %d, want %d and %d", i, got.registered, got.rejected, tc.want[i].registered, tc.want[i].rejected)
				}
			}
			if want := []int64{1, 2, 3, 4, 5, 6}; !reflect.DeepEqual(sent, want) {
				t.Errorf("got POSTs %v, want %v (in order, once each)", sent, want)
			}
			if got := parts(t, s3); !reflect.DeepEqual(got, tc.wantPart) {
				t.Errorf("got parts %+v, want %+v", got, tc.wantPart)
			}
		})
	}
}

// The part is written before the cursor passes the rejections: when it cannot be written, the
// invocation fails retryable and returns no cursor, and its retry rewrites the same key.
func TestRejectionsPartBeforeCursor(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("Idempotency-Key"), "-2") {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	s3 := sourcetest.NewFakeS3()
	src := pipeline.Source{Bucket: ingest, Key: "inbox/t1/r.csv", ETag: "etag-1"}
	reqs := fixture(t, s3, skipping(csvTenant(srv.URL), 422), src, []byte(rejectingFile))
	h := newHandler(s3, &fakeSecrets{})
	s3.PutErr = fmt.Errorf("service unavailable")
	if _, err := h.Handle(context.Background(), reqs[0]); source.ErrorType(err) != pipeline.ErrRetryable {
		t.Fatalf("got %v, want a RetryableError", err)
	}
	s3.PutErr = nil
	res, err := h.Handle(context.Background(), reqs[0])
	if err != nil || res.Rejected != 1 || res.Registered != 2 {
		t.Fatalf("retry: got %+v, %v, want 2 registered and 1 rejected", res, err)
	}
	got := parts(t, s3)
	if len(got) != 1 || len(got[partKey(0, 1)]) != 1 || got[partKey(0, 1)][0].Error != "the core system answered 422" {
		t.Errorf("got parts %+v, want one rejection of record 2 without a message under %s", got, partKey(0, 1))
	}
}

// Batch mode: a 2xx answer's "rejected" rejects records of the batch by index (docs/data-path.md);
// the others are registered. An answer that names a record it cannot, or a status the tenant does
// not list, fails closed.
func TestBatchSinkRejects(t *testing.T) {
	tests := []struct {
		name           string
		tenant         func(pipeline.Tenant) pipeline.Tenant
		status         int
		body           string
		wantRegistered int64
		wantRejected   []results.Rejection
		wantFail       string
	}{
		{"207 rejects two", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 422) }, 207,
			`{"rejected": [{"index": 4, "status": 422, "message": "no such account"}, {"index": 1, "status": 422}]}`, 4,
			[]results.Rejection{
				{Line: 4, Record: 2, Error: "the core system answered 422", Status: 422, Raw: []byte("2,b")},
				{Line: 7, Record: 5, Error: "the core system answered 422: no such account", Status: 422, Raw: []byte("5,e")},
			}, ""},
		{"200 with none", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 422) }, 200, `{"rejected": []}`, 6, nil, ""},
		{"200 plain text", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 422) }, 200, `ok`, 6, nil, ""},
		{"an unlisted status fails", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 400) }, 207,
			`{"rejected": [{"index": 1, "status": 422}]}`, 0, nil, pipeline.ErrPermanent},
		{"an index outside the batch fails", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 422) }, 207,
			`{"rejected": [{"index": 6, "status": 422}]}`, 0, nil, pipeline.ErrPermanent},
		{"an index twice fails", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 422) }, 207,
			`{"rejected": [{"index": 1, "status": 422}, {"index": 1, "status": 422}]}`, 0, nil, pipeline.ErrPermanent},
		{"a broken object fails", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 422) }, 207,
			`{"rejected": [{"index": "1"}]}`, 0, nil, pipeline.ErrPermanent},
		{"without skipRecord the answer is not read", func(t pipeline.Tenant) pipeline.Tenant { return t }, 207,
			`{"rejected": [{"index": 1, "status": 422}]}`, 6, nil, ""},
		{"a whole batch's 422 fails as before", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 422) }, 422,
			`{"message": "bad batch"}`, 0, nil, pipeline.ErrPermanent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			posts := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				posts++
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			s3 := sourcetest.NewFakeS3()
			src := pipeline.Source{Bucket: ingest, Key: "inbox/t1/b.csv", ETag: "etag-1"}
			reqs := fixtureV2(t, s3, tc.tenant(batchTenant(srv.URL)), src, []byte(rejectingFile))
			if len(reqs) != 1 {
				t.Fatalf("got %d chunks, want 1", len(reqs))
			}
			res, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), reqs[0])
			if tc.wantFail != "" {
				if got := source.ErrorType(err); got != tc.wantFail {
					t.Fatalf("got %v (%s), want %s", err, got, tc.wantFail)
				}
				if strings.Contains(err.Error(), "no such account") || strings.Contains(err.Error(), "bad batch") {
					t.Errorf("got %q, want no message of the core system in the error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Registered != tc.wantRegistered || res.Rejected != int64(len(tc.wantRejected)) || posts != 1 {
				t.Errorf("got %d registered, %d rejected in %d POSTs, want %d, %d in 1", res.Registered, res.Rejected, posts, tc.wantRegistered, len(tc.wantRejected))
			}
			got := parts(t, s3)[partKey(0, 1)]
			if !reflect.DeepEqual(got, tc.wantRejected) {
				t.Errorf("got part %+v, want %+v", got, tc.wantRejected)
			}
		})
	}
}

// The DynamoDB sink: the table holds, under key "3", an item the pipeline did not write (no _seq).
func TestDynamoSinkRejects(t *testing.T) {
	tests := []struct {
		name           string
		tenant         func(pipeline.Tenant) pipeline.Tenant
		validation     bool // record 5 is refused with a ValidationException
		replay         bool // the file is written twice
		wantRegistered int64
		wantRejected   []int64
		wantFail       string
	}{
		{"a foreign item under skipRecord is a rejection", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 422) }, false, false, 5, []int64{3}, ""},
		{"a replay is no rejection", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 422) }, false, true, 5, []int64{3}, ""},
		{"a foreign item under failFile counts as before", func(t pipeline.Tenant) pipeline.Tenant { return t }, false, false, 6, nil, ""},
		{"ValidationException with 400 listed", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 400) }, true, false, 4, []int64{3, 5}, ""},
		{"ValidationException without 400 fails as before", func(t pipeline.Tenant) pipeline.Tenant { return skipping(t, 422) }, true, false, 0, nil, pipeline.ErrValidation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := newFakeDynamo("id")
			db.items["3"] = map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "3"}}
			if tc.validation {
				db.fail = func(rec int64) error {
					if rec == 5 {
						return apiErr("ValidationException")
					}
					return nil
				}
			}
			s3 := sourcetest.NewFakeS3()
			h := ddbHandler(s3, db)
			tenant := tc.tenant(ddbTenant("csv", "id"))
			tenant.ChunkSize = 10
			src := ddbSource("inbox/t1/d.csv", "2026-12-01T00:00:00Z")
			rounds := 1
			if tc.replay {
				rounds = 2
			}
			var res pipeline.ChunkResult
			var err error
			for range rounds {
				res, err = h.Handle(context.Background(), fixture(t, s3, tenant, src, []byte(rejectingFile))[0])
			}
			if tc.wantFail != "" {
				if got := source.ErrorType(err); got != tc.wantFail {
					t.Fatalf("got %v (%s), want %s", err, got, tc.wantFail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var gotRejected []int64
			for _, r := range parts(t, s3)[partKey(0, 1)] {
				gotRejected = append(gotRejected, r.Record)
				if r.Status != 400 || !strings.HasPrefix(r.Error, "DynamoDB answered 400") || string(r.Raw) != fmt.Sprintf("%d,%c", r.Record, 'a'+r.Record-1) {
					t.Errorf("got rejection %+v, want status 400, DynamoDB's reason and the record's bytes", r)
				}
			}
			sort.Slice(gotRejected, func(i, j int) bool { return gotRejected[i] < gotRejected[j] })
			if res.Registered != tc.wantRegistered || !reflect.DeepEqual(gotRejected, tc.wantRejected) || res.Rejected != int64(len(tc.wantRejected)) {
				t.Errorf("got %d registered, rejected %v (%d), want %d and %v", res.Registered, gotRejected, res.Rejected, tc.wantRegistered, tc.wantRejected)
			}
			if _, ok := db.items["3"]["_seq"]; ok {
				t.Errorf("got the foreign item overwritten, want it kept")
			}
		})
	}
}

// The rejections a cursor passes: before the stop record, in record order (the DynamoDB sink adds
// them out of order); all of them when the chunk is done.
func TestChunkRejectsBefore(t *testing.T) {
	c := &chunkRejects{start: 100}
	for _, n := range []int64{9, 3, 6} {
		c.add(records.Record{Number: n}, 422, "x")
	}
	for _, tc := range []struct {
		stop int64
		want []int64
	}{{0, []int64{3, 6, 9}}, {9, []int64{3, 6}}, {4, []int64{3}}, {3, nil}} {
		var got []int64
		for _, r := range c.before(tc.stop) {
			got = append(got, r.Record)
			if r.chunkStart != 100 {
				t.Errorf("got chunk start %d, want 100", r.chunkStart)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("before %d: got %v, want %v", tc.stop, got, tc.want)
		}
	}
}

// A rejection keeps the first 200 bytes of the answer's message, whole characters, on one line.
func TestAnswerMessage(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	for _, tc := range []struct{ name, body, want string }{
		{"message field", `{"message": "amount\nmust be positive", "code": 7}`, "amount must be positive"},
		{"plain body", "Unprocessable Entity\n", "Unprocessable Entity"},
		{"empty", "", ""},
		{"json without message", `{"error": "x"}`, `{"error": "x"}`},
		{"cut at 200 bytes on a character boundary", long, strings.Repeat("é", 100)},
		{"invalid bytes", "bad \xff byte", "bad ? byte"},
		{"invalid bytes in a long message", "\xff" + long, "?" + strings.Repeat("é", 99)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := answerMessage([]byte(tc.body)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
