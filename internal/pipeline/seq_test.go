package pipeline

import (
	"strings"
	"testing"
)

func TestSeqOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    Source
		record int64
		want   string
	}{
		{"time and sequencer", Source{EventTime: "2026-11-30T12:47:49Z", Sequencer: "0055AED6DCD90281E5"}, 42,
			"20261130T124749.000000000Z.00000000000000000000000055AED6DCD90281E5.000000000042"},
		{"time in another zone, lower-case sequencer", Source{EventTime: "2026-11-30T21:47:49.5+09:00", Sequencer: "0055aed6dcd90281e5"}, 1,
			"20261130T124749.500000000Z.00000000000000000000000055AED6DCD90281E5.000000000001"},
		{"sequencer only", Source{Sequencer: "FF"}, 999_999_999_999,
			"00000000T000000.000000000Z.00000000000000000000000000000000000000FF.999999999999"},
		{"time only", Source{EventTime: "2026-01-02T03:04:05Z"}, 7,
			"20260102T030405.000000000Z.0000000000000000000000000000000000000000.000000000007"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SeqOf(tc.src, tc.record)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			if len(got) != SeqLen {
				t.Errorf("got length %d, want %d", len(got), SeqLen)
			}
		})
	}
}

// TestSeqOrder: pairs in the order the pipeline must keep, each compared as DynamoDB compares
// strings (byte-wise).
func TestSeqOrder(t *testing.T) {
	type point struct {
		src    Source
		record int64
	}
	for _, tc := range []struct {
		name           string
		older, younger point
	}{
		{"record 9 before record 10", point{Source{EventTime: "2026-11-30T12:00:00Z", Sequencer: "A"}, 9}, point{Source{EventTime: "2026-11-30T12:00:00Z", Sequencer: "A"}, 10}},
		{"a later file's first record after an earlier file's last", point{Source{EventTime: "2026-11-30T12:00:00Z", Sequencer: "FFFF"}, 2_000_000}, point{Source{EventTime: "2026-11-30T12:00:01Z", Sequencer: "1"}, 1}},
		{"same second: shorter sequencer left-padded (AWS's rule)", point{Source{EventTime: "2026-11-30T12:00:00Z", Sequencer: "FF"}, 5}, point{Source{EventTime: "2026-11-30T12:00:00Z", Sequencer: "0100"}, 1}},
		{"across a year", point{Source{EventTime: "2026-12-31T23:59:59Z"}, 1}, point{Source{EventTime: "2027-01-01T00:00:00Z"}, 1}},
		{"zone does not matter", point{Source{EventTime: "2026-11-30T20:00:00+09:00"}, 1}, point{Source{EventTime: "2026-11-30T12:00:00Z"}, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := SeqOf(tc.older.src, tc.older.record)
			if err != nil {
				t.Fatal(err)
			}
			b, err := SeqOf(tc.younger.src, tc.younger.record)
			if err != nil {
				t.Fatal(err)
			}
			if !(a < b) {
				t.Errorf("got %s >= %s, want older < younger", a, b)
			}
		})
	}
}

func TestSeqOfRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    Source
		record int64
		want   string
	}{
		{"nothing to order by", Source{Bucket: "b", Key: "k"}, 1, "neither an event time nor an S3 sequencer"},
		{"bad time", Source{EventTime: "yesterday"}, 1, `event time "yesterday" is not RFC 3339`},
		{"sequencer not hex", Source{Sequencer: "XYZ"}, 1, `S3 sequencer "XYZ" is not a hexadecimal string`},
		{"sequencer too long", Source{Sequencer: strings.Repeat("A", 41)}, 1, "at most 40 digits"},
		{"record zero", Source{Sequencer: "A"}, 0, "record number 0 is outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SeqOf(tc.src, tc.record)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, %v, want an error containing %q", got, err, tc.want)
			}
		})
	}
}

func TestCompareSequencers(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"0A", "0A", 0},
		{"0A", "0B", -1},
		{"0B", "0A", 1},
		// Different lengths: a plain string compare gets these wrong.
		{"0A", "09FF", -1}, // 0x0A < 0x9FF, though "0A" > "09FF" as strings
		{"FF", "0100", -1}, // 0xFF < 0x100
		{"0100", "FF", 1},
		{"A", "000A", 0}, // leading zeros do not count
		{"", "0", 0},
		{"0055AED6DCD90281E5", "55AED6DCD90281E6", -1},
		{"0055aed6dcd90281e5", "0055AED6DCD90281E5", 0}, // S3 writes upper case; lower case reads the same
	} {
		t.Run(tc.a+"_"+tc.b, func(t *testing.T) {
			if got := CompareSequencers(tc.a, tc.b); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// A sort needs a strict weak ordering: less(a, a) is false; less is transitive; and being
// unordered (equivalent) is transitive too. Checked over every pair and triple of the values.
func TestCompareSequencersIsAStrictWeakOrdering(t *testing.T) {
	vals := []string{"", "0", "1", "01", "0A", "A", "09FF", "9FF", "FF", "0100", "100", "000A", "55AED6DCD90281E5", "0055AED6DCD90281E5", "FFFFFFFFFFFFFFFFFFFF"}
	less := func(a, b string) bool { return CompareSequencers(a, b) < 0 }
	equiv := func(a, b string) bool { return !less(a, b) && !less(b, a) }
	for _, a := range vals {
		if less(a, a) {
			t.Errorf("less(%q, %q) is true, want irreflexive", a, a)
		}
		for _, b := range vals {
			if CompareSequencers(a, b) != -CompareSequencers(b, a) {
				t.Errorf("compare(%q, %q) = %d but compare(%q, %q) = %d, want opposite signs", a, b, CompareSequencers(a, b), b, a, CompareSequencers(b, a))
			}
			for _, c := range vals {
				if less(a, b) && less(b, c) && !less(a, c) {
					t.Errorf("%q < %q < %q but not %q < %q, want transitive", a, b, c, a, c)
				}
				if equiv(a, b) && equiv(b, c) && !equiv(a, c) {
					t.Errorf("%q ~ %q ~ %q but not %q ~ %q, want equivalence transitive", a, b, c, a, c)
				}
			}
		}
	}
}
