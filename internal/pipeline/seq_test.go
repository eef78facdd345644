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
		{"ordered", Source{Order: 1764581234567890}, 42,
			"q00001764581234567890.000000000042"},
		{"ordered ignores time and sequencer", Source{Order: 7, EventTime: "2026-11-30T12:47:49Z", Sequencer: "FF"}, 1,
			"q00000000000000000007.000000000001"},
		{"largest order and record", Source{Order: MaxOrder}, MaxRecord,
			"q00009007199254740991.999999999999"},
		{"unordered replay", Source{Unordered: true, EventTime: "2026-11-30T12:47:49Z"}, 3,
			"-00000000000000000000.000000000003"},
		{"legacy: time and sequencer", Source{EventTime: "2026-11-30T12:47:49Z", Sequencer: "0055AED6DCD90281E5"}, 42,
			"20261130T124749.000000000Z.00000000000000000000000055AED6DCD90281E5.000000000042"},
		{"legacy: time in another zone, lower-case sequencer", Source{EventTime: "2026-11-30T21:47:49.5+09:00", Sequencer: "0055aed6dcd90281e5"}, 1,
			"20261130T124749.500000000Z.00000000000000000000000055AED6DCD90281E5.000000000001"},
		{"legacy: sequencer only", Source{Sequencer: "FF"}, 999_999_999_999,
			"00000000T000000.000000000Z.00000000000000000000000000000000000000FF.999999999999"},
		{"legacy: time only", Source{EventTime: "2026-01-02T03:04:05Z"}, 7,
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
			wantLen := SeqLen
			if tc.src.Order == 0 && !tc.src.Unordered {
				wantLen = LegacySeqLen
			}
			if len(got) != wantLen {
				t.Errorf("got length %d, want %d", len(got), wantLen)
			}
		})
	}
	if SeqLen != 34 || LegacySeqLen != 80 {
		t.Errorf("got SeqLen %d, LegacySeqLen %d, want 34, 80", SeqLen, LegacySeqLen)
	}
}

// TestSeqOrder: pairs in the order the pipeline must keep, each compared as DynamoDB compares
// strings (byte-wise).
func TestSeqOrder(t *testing.T) {
	type point struct {
		src    Source
		record int64
	}
	legacyLate := Source{EventTime: "9999-12-31T23:59:59.999999999Z", Sequencer: strings.Repeat("F", 40)}
	for _, tc := range []struct {
		name           string
		older, younger point
	}{
		{"ordered: record 9 before record 10", point{Source{Order: 5}, 9}, point{Source{Order: 5}, 10}},
		{"ordered: a later file's first record after an earlier file's last", point{Source{Order: 5}, MaxRecord}, point{Source{Order: 6}, 1}},
		{"ordered: 9 before 10 (fixed width, not text order)", point{Source{Order: 9}, 1}, point{Source{Order: 10}, 1}},
		{"ordered: across a power of ten", point{Source{Order: 999_999_999_999_999}, 1}, point{Source{Order: 1_000_000_000_000_000}, 1}},
		// The case the event time format got wrong: two keys in the same second, the queue ran the
		// file with the larger sequencer first. Only the order counts now.
		{"ordered: queue order beats time and sequencer",
			point{Source{Order: 100, EventTime: "2026-11-30T12:00:00Z", Sequencer: "FFFF"}, 1},
			point{Source{Order: 101, EventTime: "2026-11-30T12:00:00Z", Sequencer: "0001"}, 1}},
		{"ordered above any legacy item", point{legacyLate, MaxRecord}, point{Source{Order: 1}, 1}},
		{"unordered below any legacy item", point{Source{Unordered: true}, MaxRecord}, point{Source{Sequencer: "0"}, 1}},
		{"unordered below any ordered item", point{Source{Unordered: true}, MaxRecord}, point{Source{Order: 1}, 1}},
		{"unordered: a later record of the file still wins", point{Source{Unordered: true}, 1}, point{Source{Unordered: true}, 2}},
		{"legacy: record 9 before record 10", point{Source{EventTime: "2026-11-30T12:00:00Z", Sequencer: "A"}, 9}, point{Source{EventTime: "2026-11-30T12:00:00Z", Sequencer: "A"}, 10}},
		{"legacy: same second, shorter sequencer left-padded (AWS's rule)", point{Source{EventTime: "2026-11-30T12:00:00Z", Sequencer: "FF"}, 5}, point{Source{EventTime: "2026-11-30T12:00:00Z", Sequencer: "0100"}, 1}},
		{"legacy: across a year", point{Source{EventTime: "2026-12-31T23:59:59Z"}, 1}, point{Source{EventTime: "2027-01-01T00:00:00Z"}, 1}},
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
		{"nothing to order by", Source{Bucket: "b", Key: "k"}, 1, "no order, neither an event time nor an S3 sequencer"},
		{"negative order", Source{Order: -1}, 1, "order -1 is outside"},
		{"order above 2^53-1", Source{Order: MaxOrder + 1}, 1, "order 9007199254740992 is outside"},
		{"ordered and unordered", Source{Order: 3, Unordered: true}, 1, "marked unordered"},
		{"bad time", Source{EventTime: "yesterday"}, 1, `event time "yesterday" is not RFC 3339`},
		{"sequencer not hex", Source{Sequencer: "XYZ"}, 1, `S3 sequencer "XYZ" is not a hexadecimal string`},
		{"sequencer too long", Source{Sequencer: strings.Repeat("A", 41)}, 1, "at most 40 digits"},
		{"record zero", Source{Order: 1}, 0, "record number 0 is outside"},
		{"record too large", Source{Order: 1}, MaxRecord + 1, "record number 1000000000000 is outside"},
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
