package register

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// TestWindow pins the AIMD window. ops are, in turn: "s" sends a request (numbered from 1), "x<n>"
// is a 429 or 503 answer to send n, "a" is an answer that grows the window, "c<n>" sets the cap.
// want is the size after each op.
func TestWindow(t *testing.T) {
	tests := []struct {
		name    string
		most    int
		carried int
		ops     []string
		want    []int
	}{
		{name: "starts at most without a carried window", most: 8, ops: []string{"s"}, want: []int{8}},
		{name: "starts at the carried window", most: 8, carried: 3, ops: []string{"s"}, want: []int{3}},
		{name: "a carried window above most starts at most", most: 4, carried: 9, ops: []string{"s"}, want: []int{4}},
		{
			name: "several slow-downs in one round trip halve once",
			most: 8, ops: []string{"s", "s", "s", "s", "x1", "x2", "x4", "x3"},
			want: []int{8, 8, 8, 8, 4, 4, 4, 4},
		},
		{
			name: "a slow-down to a send after the decrease halves again",
			most: 8, ops: []string{"s", "s", "x1", "s", "x2", "x3", "x3"},
			want: []int{8, 8, 4, 4, 4, 2, 2},
		},
		{
			name: "halves to 1 and no lower",
			most: 8, ops: []string{"s", "x1", "s", "x2", "s", "x3", "s", "x4", "s", "x5"},
			want: []int{8, 4, 4, 2, 2, 1, 1, 1, 1, 1},
		},
		{
			name: "a window's worth of answers adds one",
			most: 8, ops: []string{"s", "x1", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a"},
			want: []int{8, 4, 4, 4, 4, 5, 5, 5, 5, 5, 6, 6},
		},
		{name: "grows no further than most", most: 2, carried: 1, ops: []string{"a", "a", "a", "a", "a"}, want: []int{2, 2, 2, 2, 2}},
		{name: "an odd window halves down", most: 7, ops: []string{"s", "x1"}, want: []int{7, 3}},
		{name: "file order: one", most: 1, ops: []string{"s", "a", "x1"}, want: []int{1, 1, 1}},
		{
			name: "the cap bounds the size and keeps the window under it",
			most: 8, ops: []string{"c3", "s", "c0", "c12", "x1", "c2"},
			want: []int{3, 3, 1, 8, 4, 2},
		},
		{
			name: "a slow-down under a cap halves what was in flight",
			most: 8, ops: []string{"c3", "s", "x1", "c8"},
			want: []int{3, 3, 1, 1},
		},
		{
			name: "the window grows under a cap, so a larger share is used at once",
			most: 8, carried: 4, ops: []string{"c2", "a", "a", "a", "a", "c8"},
			want: []int{2, 2, 2, 2, 2, 5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWindow(tt.most, tt.carried)
			var got []int
			for _, op := range tt.ops {
				var n int
				switch {
				case op == "s":
					w.sending()
				case op == "a":
					w.grow()
				case scanOp(op, "x%d", &n):
					w.slowed(uint64(n))
				case scanOp(op, "c%d", &n):
					w.setCap(n)
				default:
					t.Fatalf("unknown op %q", op)
				}
				got = append(got, w.size())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got sizes %v, want %v", got, tt.want)
			}
		})
	}
}

func scanOp(op, format string, n *int) bool {
	_, err := fmt.Sscanf(op, format, n)
	return err == nil
}

// TestWindowCarried: what an invocation leaves is what the next starts at; a window at most
// leaves nothing, since a new window starts there.
func TestWindowCarried(t *testing.T) {
	tests := []struct {
		name string
		most int
		ops  func(w *window)
		want int
	}{
		{name: "untouched", most: 8, ops: func(w *window) { w.sending(); w.grow() }, want: 0},
		{name: "halved", most: 8, ops: func(w *window) { w.slowed(w.sending()) }, want: 4},
		{name: "halved and grown back part way", most: 8, ops: func(w *window) {
			w.slowed(w.sending())
			for range 4 {
				w.grow()
			}
		}, want: 5},
		{name: "the cap is not carried", most: 8, ops: func(w *window) { w.setCap(2) }, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWindow(tt.most, 0)
			tt.ops(w)
			if got := w.carried(); got != tt.want {
				t.Fatalf("got %d carried, want %d", got, tt.want)
			}
			want := tt.want
			if want == 0 {
				want = tt.most
			}
			if next := newWindow(tt.most, w.carried()); next.size() != want {
				t.Errorf("got the next invocation's window %d, want %d", next.size(), want)
			}
		})
	}
}

// TestKeyedWindowCarried: the window an invocation leaves in the segment's progress is where the
// next invocation of the file starts, the segment's first (a redrive) or a later one; progress
// written before the window, or at maxRecordsInFlight, starts at maxRecordsInFlight. 24 records
// of 24 keys in chunks of 12, maxRecordsInFlight 4; the core system holds the first window's
// worth of requests a while (a window of 4 sends its other two meanwhile) and fails the test if
// more are in flight before the first answer.
func TestKeyedWindowCarried(t *testing.T) {
	tests := []struct {
		name   string
		chunk  int    // the invocation's first chunk
		stored string // the segment's progress
		want   int    // the requests in flight at once
	}{
		{name: "the segment's first invocation starts at the carried window", chunk: 0, stored: `{"version":1,"next":0,"window":2}`, want: 2},
		{name: "a later invocation starts at the carried window", chunk: 1, stored: `{"version":1,"next":1,"window":2}`, want: 2},
		{name: "a later invocation with no window carried", chunk: 1, stored: `{"version":1,"next":1}`, want: 4},
		{name: "no progress", chunk: 0, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant, data, keys := keyedFile(keysOf(24, func(i int) string { return fmt.Sprint("c", i) }), 4)
			tenant.ChunkSize = 12
			fake := sourcetest.NewFakeS3()
			reqs := fixture(t, fake, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, data)
			req := run(reqs, tt.chunk, 1)
			req.Segment = &pipeline.Segment{Index: 0, FirstChunk: 0, LastChunk: 1}
			key := pipeline.ProgressKey(pipeline.SiloOwner(tenant.ID), execName, 0)
			if tt.stored != "" {
				fake.Put(work, key, &sourcetest.Object{Data: []byte(tt.stored)})
			}
			// The window is what is sent before the first answer; answers grow it (to 3 after 2),
			// so what is in flight later depends on the machine's timing and is not checked.
			core := newKeyedCore(t, tt.want, keys, int64(tt.chunk*12+1))
			core.firstWindow = true
			core.answer = holdFirst(tt.want, 200*time.Millisecond)
			h := keyedHandler(fake, core, io.Discard)
			res, err := h.Handle(context.Background(), req)
			if err != nil || !res.Done {
				t.Fatalf("got %v, done %v; want the segment registered", err, res.Done)
			}
			if core.firstPeak != tt.want {
				t.Errorf("got %d in flight before the first answer, want %d", core.firstPeak, tt.want)
			}
			// 12 answers from 2 bring the window back to 4 (2 + 3 + ... ): nothing left to carry.
			if put := string(fake.Puts[work+"/"+key]); strings.Contains(put, "window") {
				t.Errorf("got progress %s, want no window once it is back at maxRecordsInFlight", put)
			}
		})
	}
}

// holdFirst holds the first n requests until d after the n-th arrived, then answers every request
// 200: a schedule that may send more than n at once sends them meanwhile.
func holdFirst(n int, d time.Duration) func(context.Context, *keyedCall) keyedReply {
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
	)
	return func(ctx context.Context, _ *keyedCall) keyedReply {
		mu.Lock()
		arrived++
		first := arrived <= n
		if arrived == n {
			time.AfterFunc(d, func() { close(all) })
		}
		mu.Unlock()
		if first {
			select {
			case <-all:
			case <-ctx.Done():
				return keyedReply{}
			}
		}
		return keyedReply{status: 200}
	}
}
