package register

import (
	"fmt"
	"reflect"
	"testing"
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
			want: []int{3, 3, 0, 8, 4, 2},
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
