package emulate

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// awsLess compares two sequencers as AWS says to: left-pad the shorter with zeros, then compare
// the strings (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
func awsLess(a, b string) bool {
	n := max(len(a), len(b))
	return strings.Repeat("0", n-len(a))+a < strings.Repeat("0", n-len(b))+b
}

var sequencerForm = regexp.MustCompile(`^[0-9A-F]{18}$`)

// TestSequencersPerKey: every key's sequencers grow, and across keys they follow no order: keys
// written one after another start both above and below each other.
func TestSequencersPerKey(t *testing.T) {
	s := NewSequencers(SequencersPerKey, 12345)
	const keys, events = 200, 5
	first := make([]string, keys)
	last := map[int]string{}
	for e := range events {
		for k := range keys {
			got := s.next("ingest", fmt.Sprintf("inbox/t/f%03d.csv", k))
			if !sequencerForm.MatchString(got) {
				t.Fatalf("got sequencer %q, want 18 upper-case hexadecimal digits", got)
			}
			if prev, ok := last[k]; ok && !awsLess(prev, got) {
				t.Errorf("key %d, event %d: got %s after %s, want it larger", k, e, got, prev)
			}
			last[k] = got
			if e == 0 {
				first[k] = got
			}
		}
	}
	up, down := 0, 0
	for k := 1; k < keys; k++ {
		if awsLess(first[k-1], first[k]) {
			up++
		} else {
			down++
		}
	}
	if up < keys/4 || down < keys/4 {
		t.Errorf("got %d keys starting above the key written before them and %d below, want both common (no order across keys)", up, down)
	}
	// A key's first sequencer depends on the seed and the key alone, not on the writes before.
	other := NewSequencers(SequencersPerKey, 12345)
	other.next("ingest", "inbox/t/unrelated.csv")
	if got := other.next("ingest", "inbox/t/f007.csv"); got != first[7] {
		t.Errorf("got first sequencer %s after another write, want %s as without it", got, first[7])
	}
	if got := NewSequencers(SequencersPerKey, 54321).next("ingest", "inbox/t/f007.csv"); got == first[7] {
		t.Errorf("got the same first sequencer %s under another seed, want another", got)
	}
	// The same key in another bucket is another key.
	if a, b := s.next("other", "inbox/t/f000.csv"), last[0]; a == b {
		t.Errorf("got the same sequencer %s in two buckets, want each its own", a)
	}
}

// TestSequencersGlobal: the switch back to one counter, which follows the order of the writes
// across keys.
func TestSequencersGlobal(t *testing.T) {
	s := NewSequencers(SequencersGlobal, 0)
	prev := ""
	for k := range 300 {
		got := s.next("ingest", fmt.Sprintf("inbox/t/f%03d.csv", k))
		if !sequencerForm.MatchString(got) {
			t.Fatalf("got sequencer %q, want 18 upper-case hexadecimal digits", got)
		}
		if prev != "" && !awsLess(prev, got) {
			t.Fatalf("write %d: got %s after %s, want it larger across keys", k, got, prev)
		}
		prev = got
	}
}
