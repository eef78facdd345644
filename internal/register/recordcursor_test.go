package register

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// cursorAt is a cursor as the segment's state keeps it between Register tasks.
type cursorAt struct {
	Chunk  int
	Record int64
	Done   bool
}

// driveSegment runs req's segment as the per-invocation state machine does: each invocation gets
// a fresh deadline of budget on the clock and the cursor the previous one returned; a
// RetryableError or RecordLatencyError is retried with the same input (the task's Retry), at
// most retries times in a row. It returns the cursors returned and the last error.
func driveSegment(t *testing.T, h *Handler, clock *fakeClock, req pipeline.ChunkRequest, budget time.Duration, retries int) ([]cursorAt, error) {
	t.Helper()
	var got []cursorAt
	failures := 0
	for range 100 {
		ctx, cancel := context.WithDeadline(context.Background(), clock.now().Add(budget))
		res, err := h.Handle(ctx, req)
		cancel()
		if err != nil {
			if typ := source.ErrorType(err); (typ == pipeline.ErrRetryable || typ == pipeline.ErrRecordLatency) && failures < retries {
				failures++
				continue
			}
			return got, err
		}
		failures = 0
		got = append(got, cursorAt{res.Next, res.NextRecord, res.Done})
		if res.Done {
			return got, nil
		}
		req.Chunk, req.Record = res.Next, res.NextRecord
	}
	t.Fatal("the segment never finished")
	return nil, nil
}

// TestRegisterRunRecordCursor: Register's cursor moves by record inside a chunk. 40 records in
// chunks of 20; each POST takes 1 s on a fake clock, and an invocation's budget is 10 s (2 s
// margin, 2 s HTTP timeout), so it sends 7 records at most: a chunk takes several invocations.
// Records an earlier invocation registered are never sent again; a failed one is re-sent with the
// same key, by the Retry (inside the invocation's first chunk) or by the next invocation.
func TestRegisterRunRecordCursor(t *testing.T) {
	tests := []struct {
		name        string
		fail        map[int64]int // record number → status of its first POST
		wantCursors []cursorAt
		wantSent    []int64
	}{
		{name: "a chunk longer than the budget finishes over several invocations",
			wantCursors: []cursorAt{{0, 8, false}, {0, 15, false}, {1, 0, false}, {1, 28, false}, {1, 35, false}, {2, 0, true}},
			wantSent:    seq(1, 40)},
		{name: "a record that fails inside the invocation's first chunk: the Retry re-sends that invocation's records",
			fail:        map[int64]int{5: 502},
			wantCursors: []cursorAt{{0, 8, false}, {0, 15, false}, {1, 0, false}, {1, 28, false}, {1, 35, false}, {2, 0, true}},
			wantSent:    append(seq(1, 5), seq(1, 40)...)},
		{name: "the invocation's first record fails: the Retry re-sends it from the same cursor",
			fail:        map[int64]int{8: 502},
			wantCursors: []cursorAt{{0, 8, false}, {0, 15, false}, {1, 0, false}, {1, 28, false}, {1, 35, false}, {2, 0, true}},
			wantSent:    append(seq(1, 8), seq(8, 40)...)},
		{name: "a wait for the core system that does not fit resumes at the waiting record",
			fail:        map[int64]int{3: 503}, // Retry-After 60 s: more than the invocation has
			wantCursors: []cursorAt{{0, 3, false}, {0, 10, false}, {0, 17, false}, {1, 0, false}, {1, 28, false}, {1, 35, false}, {2, 0, true}},
			wantSent:    append(seq(1, 3), seq(3, 40)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now()}
			failed := map[int64]bool{}
			c := newCore(t, func(_ int, s seenRequest) int {
				clock.add(time.Second)
				if st, ok := tt.fail[s.Body.RecordNumber]; ok && !failed[s.Body.RecordNumber] {
					failed[s.Body.RecordNumber] = true
					return st
				}
				return 200
			})
			c.srv.Config.Handler = retryAfter(c.srv.Config.Handler, "60")
			s3 := sourcetest.NewFakeS3()
			tenant := csvTenant(c.srv.URL)
			tenant.ChunkSize = 20
			reqs := fixture(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, rows(40))
			h := newHandler(s3, &fakeSecrets{})
			h.now = clock.now
			h.sleep = func(context.Context, time.Duration) error { return nil }
			req := run(reqs, 0, 1)
			req.Segment = &pipeline.Segment{Index: 0, FirstChunk: 0, LastChunk: 1}

			got, err := driveSegment(t, h, clock, req, 10*time.Second, 1)
			if err != nil {
				t.Fatalf("got %v, want the segment done", err)
			}
			if !reflect.DeepEqual(got, tt.wantCursors) {
				t.Errorf("got cursors %v, want %v", got, tt.wantCursors)
			}
			var sent []int64
			for _, s := range c.seen {
				sent = append(sent, s.Body.RecordNumber)
				if want := IdempotencyKey(execName, s.Body.RecordNumber); s.Key != want {
					t.Errorf("record %d: got key %q, want %q (the same on every invocation)", s.Body.RecordNumber, s.Key, want)
				}
			}
			if !reflect.DeepEqual(sent, tt.wantSent) {
				t.Errorf("got records sent %v, want %v", sent, tt.wantSent)
			}
		})
	}
}

// retryAfter adds a Retry-After header to every answer of next.
func retryAfter(next http.Handler, v string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", v)
		next.ServeHTTP(w, r)
	})
}

// TestRegisterRunRecordCursorBatch: in batch mode a chunk is one POST under one key
// (<execution>-c<chunk>), so the cursor moves per completed batch and never points inside one.
// 64 records in 4 batches of 16; each POST takes 1 s, and an 8 s budget holds 3 of them.
func TestRegisterRunRecordCursorBatch(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	c := newBatchCore(t, func(int) int { clock.add(time.Second); return 200 })
	s3 := sourcetest.NewFakeS3()
	reqs := fixtureV2(t, s3, batchTenant(c.srv.URL), pipeline.Source{Bucket: ingest, Key: "k", ETag: "e"}, batchRows(64))
	h := newHandler(s3, &fakeSecrets{})
	h.now = clock.now
	req := run(reqs, 0, 3)
	req.Segment = &pipeline.Segment{Index: 0, FirstChunk: 0, LastChunk: 3}

	got, err := driveSegment(t, h, clock, req, 8*time.Second, 0)
	if err != nil {
		t.Fatalf("got %v, want the segment done", err)
	}
	if want := []cursorAt{{3, 0, false}, {4, 0, true}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got cursors %v, want %v", got, want)
	}
	var keys []string
	for _, s := range c.seen {
		keys = append(keys, s.Key)
	}
	want := []string{BatchIdempotencyKey(execName, 0), BatchIdempotencyKey(execName, 1), BatchIdempotencyKey(execName, 2), BatchIdempotencyKey(execName, 3)}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("got keys %q, want %q: each batch once", keys, want)
	}

	// A cursor inside a batch would send part of it under the chunk's key: refused, nothing sent.
	// (With the segment's progress behind it: progress ahead of a cursor is where it starts.)
	s3.Put(work, pipeline.ProgressKey(pipeline.SiloOwner(req.Tenant.ID), execName, 0), &sourcetest.Object{Data: []byte(`{"version":1,"next":1}`)})
	req.Chunk, req.Record = 1, 20
	if _, err := h.Handle(context.Background(), req); source.ErrorType(err) != pipeline.ErrPermanent {
		t.Errorf("got %v, want a PermanentError for a cursor inside a batch", err)
	}
	if len(c.seen) != 4 {
		t.Errorf("got %d POSTs, want none after the refused cursor", len(c.seen)-4)
	}
}

// TestRegisterRunRecordOutsideChunk: a cursor's record that is not one of its chunk's is a wiring
// fault; nothing is sent.
func TestRegisterRunRecordOutsideChunk(t *testing.T) {
	c := newCore(t, nil)
	s3 := sourcetest.NewFakeS3()
	reqs := fixture(t, s3, csvTenant(c.srv.URL), pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, rows(9))
	for _, record := range []int64{3, 7} { // chunk 1 holds records 4..6
		req := run(reqs, 1, 2)
		req.Segment = &pipeline.Segment{Index: 0, FirstChunk: 0, LastChunk: 2}
		req.Record = record
		if _, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), req); source.ErrorType(err) != pipeline.ErrPermanent {
			t.Errorf("record %d: got %v, want PermanentError", record, err)
		}
	}
	if len(c.seen) != 0 {
		t.Errorf("got %d POSTs, want none", len(c.seen))
	}
}

// TestRegisterRunRecordLatency: a POST the core system never answers within the HTTP timeout had
// the whole of it (no POST starts with less), and a retry gives it no more: it is a
// RecordLatencyError naming the record or batch, on every attempt, rather than a bare timeout.
// It fails the task (the Retry re-sends this invocation's records before it, with the same keys),
// never a cursor handed on for a failure that is not the budget's.
func TestRegisterRunRecordLatency(t *testing.T) {
	tests := []struct {
		name     string
		batch    bool
		segment  bool
		wantText string
		wantSent int // POSTs over both invocations
	}{
		{name: "record mode", segment: true, wantText: "record 3 got no answer within the HTTP timeout 200ms", wantSent: 6},
		{name: "batch mode", batch: true, segment: true, wantText: "chunk 0 (records 1-3) got no answer within the HTTP timeout 200ms", wantSent: 2},
		{name: "record mode without a segment", wantText: "record 3 got no answer within the HTTP timeout 200ms", wantSent: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			var posts atomic.Int32 // handlers of timed-out POSTs still run beside the next ones
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				posts.Add(1)
				if tt.batch || strings.Contains(r.Header.Get("Idempotency-Key"), "-3") {
					<-release // never answers in time
				}
			}))
			defer srv.Close()
			defer close(release)
			s3 := sourcetest.NewFakeS3()
			tenant := csvTenant(srv.URL)
			reqs := fixture(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, rows(3))
			if tt.batch {
				tenant = batchTenant(srv.URL)
				reqs = fixtureV2(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "e"}, batchRows(3))
			}
			h := newHandler(s3, &fakeSecrets{})
			h.HTTPTimeout = 200 * time.Millisecond
			req := reqs[0]
			if tt.segment {
				req.Segment = &pipeline.Segment{Index: 0, FirstChunk: 0, LastChunk: 0}
			}
			for attempt := range 2 { // the first attempt and the task's Retry, with the same input
				_, err := h.Handle(context.Background(), req)
				if got := source.ErrorType(err); got != pipeline.ErrRecordLatency || !strings.Contains(err.Error(), tt.wantText) {
					t.Errorf("attempt %d: got %v (%s), want a RecordLatencyError containing %q", attempt+1, err, got, tt.wantText)
				}
			}
			if got := int(posts.Load()); got != tt.wantSent {
				t.Errorf("got %d POSTs, want %d", got, tt.wantSent)
			}
		})
	}
}
