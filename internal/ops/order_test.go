package ops

import (
	"slices"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/s3event"
)

func TestArrivalOrder(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ev := func(key, seq string, sec int) s3event.Event {
		return s3event.ObjectCreated(key+"@"+seq, at.Add(time.Duration(sec)*time.Second), "ingest", s3event.Object{Key: key, Sequencer: seq})
	}
	for _, tc := range []struct {
		name string
		a, b s3event.Event
		want int
	}{
		{"earlier event time first", ev("k", "FF", 0), ev("k", "01", 1), -1},
		{"later event time last", ev("k", "01", 1), ev("k", "FF", 0), 1},
		{"one key, one second: sequencer", ev("k", "0A", 0), ev("k", "0B", 0), -1},
		{"sequencers of different lengths are padded", ev("k", "0A", 0), ev("k", "09FF", 0), -1},
		{"padded the other way round", ev("k", "09FF", 0), ev("k", "0A", 0), 1},
		{"leading zeros do not count", ev("k", "00A", 0), ev("k", "A", 0), 0},
		{"different keys in one second: still by sequencer", ev("a", "02", 0), ev("b", "1", 0), 1},
		{"no sequencers: equal", ev("a", "", 0), ev("b", "", 0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := arrivalOrder(tc.a, tc.b); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// The order is a strict weak ordering over a mix of keys, times and sequencer lengths, as the
// sort requires, and sorting puts each key's events in sequencer order.
func TestArrivalOrderIsAStrictWeakOrdering(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var evs []s3event.Event
	for i, o := range []struct {
		key, seq string
		sec      int
	}{
		{"a", "0A", 0}, {"a", "09FF", 0}, {"b", "0B", 0}, {"a", "1", 0}, {"b", "", 0}, {"c", "00A", 0},
		{"a", "FF", 1}, {"b", "0100", 1}, {"c", "100", 1}, {"a", "0000000000000000000000000000000000000001", 1},
	} {
		evs = append(evs, s3event.ObjectCreated(string(rune('0'+i)), at.Add(time.Duration(o.sec)*time.Second), "ingest", s3event.Object{Key: o.key, Sequencer: o.seq}))
	}
	less := func(a, b s3event.Event) bool { return arrivalOrder(a, b) < 0 }
	equiv := func(a, b s3event.Event) bool { return !less(a, b) && !less(b, a) }
	for _, a := range evs {
		if less(a, a) {
			t.Errorf("less(%s, %s) is true, want irreflexive", a.ID, a.ID)
		}
		for _, b := range evs {
			if less(a, b) && less(b, a) {
				t.Errorf("%s < %s and %s < %s, want asymmetric", a.ID, b.ID, b.ID, a.ID)
			}
			for _, c := range evs {
				if less(a, b) && less(b, c) && !less(a, c) {
					t.Errorf("%s < %s < %s but not %s < %s, want transitive", a.ID, b.ID, c.ID, a.ID, c.ID)
				}
				if equiv(a, b) && equiv(b, c) && !equiv(a, c) {
					t.Errorf("%s ~ %s ~ %s but not %s ~ %s, want equivalence transitive", a.ID, b.ID, c.ID, a.ID, c.ID)
				}
			}
		}
	}
	sorted := slices.Clone(evs)
	slices.SortStableFunc(sorted, arrivalOrder)
	var keyA []string
	for _, e := range sorted {
		if e.Detail.Object.Key == "a" {
			keyA = append(keyA, e.Detail.Object.Sequencer)
		}
	}
	if want := []string{"1", "0A", "09FF", "0000000000000000000000000000000000000001", "FF"}; !slices.Equal(keyA, want) {
		t.Errorf("got key a's sequencers in order %v, want %v", keyA, want)
	}
}
