package register

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// sinkUnderTest is one sink with a destination that fails record `failAt` (0: none) with the given
// kind of failure, and reports every write it saw, in the order it saw them (a batch as its
// records).
type sinkUnderTest struct {
	sink   Sink
	tenant pipeline.Tenant
	seen   func() []int64
}

// failure is a destination's answer in each sink's own terms.
type failure struct {
	status int    // HTTP sinks
	code   string // DynamoDB
}

var failures = map[Rejection]failure{
	RejectedRecord:    {status: http.StatusUnprocessableEntity, code: "ValidationException"},
	RejectedSink:      {status: http.StatusNotFound, code: "ResourceNotFoundException"},
	RejectedRetryable: {status: http.StatusInternalServerError, code: "InternalServerError"},
}

func httpSink(t *testing.T, tenant pipeline.Tenant, failAt int64, kind Rejection) sinkUnderTest {
	var (
		mu   sync.Mutex
		seen []int64
	)
	batch := tenant.BatchMode()
	c := newBatchCore(t, nil)
	c.reply = func(n int) int {
		c.mu.Lock()
		s := c.seen[n]
		c.mu.Unlock()
		var got []int64
		if batch {
			for i := range s.Body.Records {
				got = append(got, s.Body.FirstRecordNumber+int64(i))
			}
		} else {
			rec, _ := strconv.ParseInt(s.Key[len(execName)+1:], 10, 64)
			got = append(got, rec)
		}
		mu.Lock()
		seen = append(seen, got...)
		mu.Unlock()
		for _, r := range got {
			if r == failAt {
				return failures[kind].status
			}
		}
		return http.StatusOK
	}
	if !batch {
		// Record mode's body is not the batch format: decode only what the reply needs.
		c.srv.Config.Handler = recordHandler(c)
	}
	tenant.RegisterURL = c.srv.URL
	h := newHandler(sourcetest.NewFakeS3(), &fakeSecrets{})
	return sinkUnderTest{sink: h.openSink(tenant, c.srv.URL, h.newPace(pipeline.ChunkRequest{Tenant: tenant}), &chunkRejects{}), tenant: tenant, seen: func() []int64 { mu.Lock(); defer mu.Unlock(); return seen }}
}

// recordHandler serves record mode's POSTs for a batchCore, keeping only the idempotency key.
func recordHandler(c *batchCore) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		n := len(c.seen)
		c.seen = append(c.seen, batchSeen{Key: r.Header.Get("Idempotency-Key")})
		c.mu.Unlock()
		w.WriteHeader(c.reply(n))
	})
}

func dynamoSinkUnderTest(failAt int64, kind Rejection) sinkUnderTest {
	var (
		mu   sync.Mutex
		seen []int64
	)
	db := newFakeDynamo("id")
	db.fail = func(rec int64) error {
		mu.Lock()
		seen = append(seen, rec)
		mu.Unlock()
		if rec == failAt {
			return apiErr(failures[kind].code)
		}
		return nil
	}
	h := ddbHandler(sourcetest.NewFakeS3(), db)
	tenant := ddbTenant("csv", "id")
	// One writer at a time: every record has its own key, so the writes go in file order.
	tenant.DynamoDB.Concurrency = 1
	return sinkUnderTest{sink: h.openSink(tenant, "", h.newPace(pipeline.ChunkRequest{Tenant: tenant}), &chunkRejects{}), tenant: tenant, seen: func() []int64 { mu.Lock(); defer mu.Unlock(); return seen }}
}

// TestSinkContract runs the ordered-write contract against each sink through the Sink interface:
// records are written in file order, each exactly once; when record k fails, the count written is
// the records before it (none for a batch, whose unit is the chunk), the first failure names k (a
// batch's first record) with its Rejection, and nothing after k is written.
func TestSinkContract(t *testing.T) {
	const first = 11 // the chunk's first record: the file's 11th
	recs := make([]records.Record, 5)
	var all []int64
	for i := range recs {
		n := int64(first + i)
		recs[i] = records.Record{Number: n, Fields: []string{"k" + strconv.FormatInt(n, 10), "v"}}
		all = append(all, n)
	}
	sinks := []struct {
		name  string
		batch bool
		open  func(t *testing.T, failAt int64, kind Rejection) sinkUnderTest
	}{
		{"record", false, func(t *testing.T, failAt int64, kind Rejection) sinkUnderTest {
			return httpSink(t, csvTenant(""), failAt, kind)
		}},
		{"batch", true, func(t *testing.T, failAt int64, kind Rejection) sinkUnderTest {
			return httpSink(t, batchTenant(""), failAt, kind)
		}},
		{"dynamodb", false, func(_ *testing.T, failAt int64, kind Rejection) sinkUnderTest {
			return dynamoSinkUnderTest(failAt, kind)
		}},
	}
	cases := []struct {
		name   string
		failAt int64 // 0: none
		kind   Rejection
	}{
		{"all written", 0, 0},
		{"first record rejected", first, RejectedRecord},
		{"middle record rejected", first + 2, RejectedRecord},
		{"last record retryable", first + 4, RejectedRetryable},
		{"sink fails at the middle record", first + 2, RejectedSink},
	}
	for _, s := range sinks {
		for _, tc := range cases {
			t.Run(s.name+"/"+tc.name, func(t *testing.T) {
				sut := s.open(t, tc.failAt, tc.kind)
				req := pipeline.ChunkRequest{Tenant: sut.tenant, Source: ddbSource("k.csv", "2026-12-01T00:00:00Z"),
					ExecutionName: execName, Header: []string{"id", "v"}, Chunk: 3}
				h := newHandler(sourcetest.NewFakeS3(), &fakeSecrets{})
				n, err := sut.sink.Write(context.Background(), h.budget(context.Background(), req), req, recs)

				wantSeen, wantN := all, int64(len(all))
				if tc.failAt != 0 {
					k := tc.failAt - first
					wantSeen, wantN = all[:k+1], k
					if s.batch {
						wantSeen, wantN = all, 0
					}
				}
				if got := sut.seen(); !reflect.DeepEqual(got, wantSeen) {
					t.Errorf("got writes %v, want %v (in order, once each, none after the failure)", got, wantSeen)
				}
				if n != wantN {
					t.Errorf("got %d written, want %d", n, wantN)
				}
				if tc.failAt == 0 {
					if err != nil {
						t.Errorf("got %v, want no error", err)
					}
					return
				}
				var we *WriteError
				if !errors.As(err, &we) {
					t.Fatalf("got %T %v, want a *WriteError", err, err)
				}
				wantRec := tc.failAt
				if s.batch {
					wantRec = first
				}
				if we.Record != wantRec || we.Kind != tc.kind {
					t.Errorf("got failure at record %d (%v), want record %d (%v)", we.Record, we.Kind, wantRec, tc.kind)
				}
				wantType := pipeline.ErrPermanent
				switch {
				case tc.kind == RejectedRetryable:
					wantType = pipeline.ErrRetryable
				case tc.kind == RejectedRecord && s.name == "dynamodb":
					wantType = pipeline.ErrValidation
				}
				if got := source.ErrorType(we.Err); got != wantType {
					t.Errorf("got the state machine error %s, want %s", got, wantType)
				}
			})
		}
	}
}

// TestRejection: the Rejection of each pipeline error a sink raises.
func TestRejection(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		want   Rejection
	}{
		{"deadline guard", &pipeline.RetryableError{Err: errNearDeadline}, 0, Stopped},
		{"retryable", &pipeline.RetryableError{}, 503, RejectedRetryable},
		{"validation", &pipeline.ValidationError{}, 0, RejectedRecord},
		{"400", &pipeline.PermanentError{}, 400, RejectedRecord},
		{"413", &pipeline.PermanentError{}, 413, RejectedRecord},
		{"422", &pipeline.PermanentError{}, 422, RejectedRecord},
		{"401", &pipeline.PermanentError{}, 401, RejectedSink},
		{"403", &pipeline.PermanentError{}, 403, RejectedSink},
		{"404", &pipeline.PermanentError{}, 404, RejectedSink},
		{"redirect", &pipeline.PermanentError{}, 308, RejectedSink},
		{"no answer", &pipeline.PermanentError{}, 0, RejectedSink},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := rejection(tc.err, tc.status); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
