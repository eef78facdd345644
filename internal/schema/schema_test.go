package schema

import (
	"strings"
	"testing"
)

// TestKeysKnownAnswers pins every key builder to the literal layout drawn in the package doc:
// a changed format would orphan the items a deployed table already holds.
func TestKeysKnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, got, want string
	}{
		{"core gate", CoreGate("ledger"), "core#ledger"},
		{"pool gate", PoolGate("p1"), "pool#p1"},
		{"gate queue", GateQueue(PoolGate("p1")), "pool#p1#queue"},
		{"slot", SlotSK(7), "slot#0007"},
		{"overflow", OverflowSK("exec-1"), "slot#x#exec-1"},
		{"counter", CounterSK(3), "ctr#03"},
		{"waiter", EntrySK(3, 42), "w#03#000000000042"},
		{"place", PlaceSK("t1"), "t#t1"},
		{"shares", SharesSK, "shares"},
		{"backlog", BacklogKey("t1"), "queue#t1"},
		{"parked", ParkedSK("t1"), "parked#t1"},
		{"shard", ShardKey(5), "backlog#05"},
		{"legacy shard", ShardKey(IndexShards), "backlog"},
		// FNV-1a (32-bit) of "t1" is 0x0844ecd6, computed apart from hash/fnv; modulo 16 it is 6.
		{"index of t1", IndexKey("t1"), "backlog#06"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

// TestKindsDoNotCollide: the meta item sorts after every counter and is not one; an overflow lease
// is a slot to a slot listing but is told apart by its prefix; backlog partitions never look like
// a gate's.
func TestKindsDoNotCollide(t *testing.T) {
	for w := 1; w <= 99; w++ {
		if c := CounterSK(w); c >= MetaSK || !strings.HasPrefix(c, CounterPrefix) {
			t.Errorf("counter %q: got it sorting at or after meta %q or without prefix %q", c, MetaSK, CounterPrefix)
		}
	}
	if !strings.HasPrefix(OverflowSK("x"), SlotPrefix) || strings.HasPrefix(SlotSK(0), OverflowPrefix) {
		t.Errorf("got overflow %q and slot %q, want the overflow under %q and the slot not under %q", OverflowSK("x"), SlotSK(0), SlotPrefix, OverflowPrefix)
	}
	for _, pk := range []string{BacklogKey("t"), IndexKey("t"), LegacyIndexKey} {
		for _, gate := range []string{"core#", "pool#"} {
			if strings.HasPrefix(pk, gate) {
				t.Errorf("backlog partition %q starts like a gate (%q)", pk, gate)
			}
		}
	}
	for _, sk := range []string{LimitSK, ControlSK, SharesSK, "breaker"} {
		if strings.HasPrefix(sk, SlotPrefix) {
			t.Errorf("gate item %q starts with the slot prefix %q, want a slot listing never to meet it", sk, SlotPrefix)
		}
	}
	if SharesSK == LimitSK || SharesSK == ControlSK || SharesSK == "breaker" {
		t.Errorf("got shares sort key %q equal to another item of the gate", SharesSK)
	}
	if MinMaxQueued > DefaultMaxQueued || DefaultMaxQueued > MaxMaxQueued {
		t.Errorf("got bounds %d <= %d <= %d false, want the default inside the bounds", MinMaxQueued, DefaultMaxQueued, MaxMaxQueued)
	}
}
