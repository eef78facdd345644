package register

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// rows is a CSV file of n records whose id is the record number.
func rows(n int) []byte {
	var b strings.Builder
	b.WriteString("id\n")
	for i := range n {
		fmt.Fprintf(&b, "%d\n", i+1)
	}
	return []byte(b.String())
}

// run returns the request of chunks first..last of reqs, as the per-invocation segment sends it.
func run(reqs []pipeline.ChunkRequest, first, last int) pipeline.ChunkRequest {
	r := reqs[first]
	r.LastChunk = last
	return r
}

// TestRegisterRunCursor pins the invocation loop: which chunks one invocation registers, the cursor
// it returns, and where it stops. Chunks hold 3 records (30 records, chunks 0..9); each POST takes
// 1 s on a fake clock when the case has a deadline.
func TestRegisterRunCursor(t *testing.T) {
	tests := []struct {
		name      string
		first     int
		last      int           // 0 with first 0..: LastChunk absent
		deadline  time.Duration // 0: none
		fail      map[int64]int // record number → status of its first POST
		wantNext  int
		wantDone  bool
		wantErr   string // error type; "" for success
		wantSent  []int64
		wantCount int64
	}{
		{name: "the whole run without a deadline", first: 2, last: 5, wantNext: 6, wantDone: true,
			wantSent: seq(7, 18), wantCount: 12},
		{name: "no LastChunk: one chunk, as the per-chunk design sends", first: 4, last: 0, wantNext: 5, wantDone: true,
			wantSent: seq(13, 15), wantCount: 3},
		{name: "the last chunk of the segment", first: 9, last: 9, wantNext: 10, wantDone: true,
			wantSent: seq(28, 30), wantCount: 3},
		// 20 s, margin 2 s, HTTP timeout 2 s, 3 s per chunk: a new chunk starts while 20-t-2 ≥ 3+2,
		// so at t = 0, 3, 6, 9, 12 and not at 15.
		{name: "stops before the deadline and returns the next chunk", first: 0, last: 9, deadline: 20 * time.Second,
			wantNext: 5, wantDone: false, wantSent: seq(1, 15), wantCount: 15},
		// 7 s: after chunk 3 (t = 3), 7-3-2 = 2 < 3+2.
		{name: "a deadline too short for a second chunk", first: 3, last: 9, deadline: 7 * time.Second,
			wantNext: 4, wantDone: false, wantSent: seq(10, 12), wantCount: 3},
		{name: "first failure stops: a permanent error in a later chunk fails the invocation", first: 0, last: 9,
			fail: map[int64]int{8: 400}, wantErr: pipeline.ErrPermanent, wantSent: seq(1, 8)},
		{name: "a retryable error in a later chunk ends the invocation at that chunk", first: 0, last: 9,
			fail: map[int64]int{8: 502}, wantNext: 2, wantDone: false, wantSent: seq(1, 8), wantCount: 7},
		{name: "a retryable error in the first chunk is the task's to retry", first: 2, last: 9,
			fail: map[int64]int{8: 502}, wantErr: pipeline.ErrRetryable, wantSent: seq(7, 8)},
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
			s3 := sourcetest.NewFakeS3()
			reqs := fixture(t, s3, csvTenant(c.srv.URL), pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, rows(30))
			h := newHandler(s3, &fakeSecrets{})
			h.now = clock.now
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, clock.now().Add(tt.deadline))
				defer cancel()
			}
			res, err := h.Handle(ctx, run(reqs, tt.first, tt.last))
			if got := source.ErrorType(err); err != nil && got != tt.wantErr || err == nil && tt.wantErr != "" {
				t.Fatalf("got error %v (%s), want %q", err, got, tt.wantErr)
			}
			var sent []int64
			for _, s := range c.seen {
				sent = append(sent, s.Body.RecordNumber)
			}
			if !reflect.DeepEqual(sent, tt.wantSent) {
				t.Errorf("got records sent %v, want %v", sent, tt.wantSent)
			}
			if err != nil {
				return
			}
			want := pipeline.ChunkResult{Chunk: tt.first, Registered: tt.wantCount, Next: tt.wantNext, Done: tt.wantDone}
			if res != want {
				t.Errorf("got result %+v, want %+v", res, want)
			}
		})
	}
}

func seq(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// TestRegisterRunRetryResendsOnlyItsOwnChunks: an invocation that fails is retried by the state
// machine with the same input (the cursor), so the retry re-sends only that invocation's records,
// under the keys the first attempt used; chunks of earlier invocations are never sent again. Record
// mode keys are <execution>-<record>, batch mode keys <execution>-c<chunk>.
func TestRegisterRunRetryResendsOnlyItsOwnChunks(t *testing.T) {
	t.Run("record mode", func(t *testing.T) {
		failOnce := true
		c := newCore(t, func(_ int, s seenRequest) int {
			if s.Body.RecordNumber == 14 && failOnce {
				failOnce = false
				return 400 // permanent: the invocation fails at record 14 (chunk 4)
			}
			return 200
		})
		s3 := sourcetest.NewFakeS3()
		reqs := fixture(t, s3, csvTenant(c.srv.URL), pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, rows(30))
		// Invocation 1 registers chunks 0..2 and hands on cursor 3 (its deadline leaves room for
		// exactly those, as in the budget test).
		first, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), run(reqs, 0, 2))
		if err != nil || first.Next != 3 || !first.Done {
			t.Fatalf("invocation 1: got %+v, %v", first, err)
		}
		cursor := run(reqs, 3, 9)
		if _, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), cursor); source.ErrorType(err) != pipeline.ErrPermanent {
			t.Fatalf("invocation 2: got %v, want PermanentError", err)
		}
		// The Retry (or a redrive of the segment) runs the same input in a fresh environment.
		res, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), cursor)
		if err != nil || res.Next != 10 || !res.Done {
			t.Fatalf("retry: got %+v, %v", res, err)
		}
		var keys []string
		for _, s := range c.seen[9:] {
			keys = append(keys, s.Key)
		}
		var want []string
		for _, n := range append(seq(10, 14), seq(10, 30)...) {
			want = append(want, IdempotencyKey(execName, n))
		}
		if !reflect.DeepEqual(keys, want) {
			t.Errorf("got keys after invocation 1 %q, want %q (records 10-14, then 10-30)", keys, want)
		}
	})
	t.Run("batch mode", func(t *testing.T) {
		n := 0
		c := newBatchCore(t, func(int) int {
			n++
			if n == 2 {
				return 502 // the invocation's second chunk: it ends at that chunk
			}
			return 200
		})
		s3 := sourcetest.NewFakeS3()
		tenant := batchTenant(c.srv.URL)
		reqs := fixtureV2(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "e"}, batchRows(64)) // 4 chunks of 16
		h := newHandler(s3, &fakeSecrets{})
		res, err := h.Handle(context.Background(), run(reqs, 1, 3))
		if err != nil || res.Next != 2 || res.Done {
			t.Fatalf("invocation 1: got %+v, %v; want next 2, not done", res, err)
		}
		res, err = h.Handle(context.Background(), run(reqs, res.Next, 3))
		if err != nil || res.Next != 4 || !res.Done {
			t.Fatalf("invocation 2: got %+v, %v; want next 4, done", res, err)
		}
		var keys []string
		for _, s := range c.seen {
			keys = append(keys, s.Key)
		}
		want := []string{BatchIdempotencyKey(execName, 1), BatchIdempotencyKey(execName, 2),
			BatchIdempotencyKey(execName, 2), BatchIdempotencyKey(execName, 3)}
		if !reflect.DeepEqual(keys, want) {
			t.Errorf("got keys %q, want %q", keys, want)
		}
	})
}
