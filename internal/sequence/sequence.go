// Package sequence keeps a sequenced tenant's place in its own order of files (spec.Sequence;
// README, "Order"): the next number expected (or the last name processed), the file that runs,
// the files held ahead of their turn, the numbers skipped, and since when a missing number holds
// the tenant.
//
// Everything lives in the tenant's bucket, under control/<tenant>/sequence/:
//
//	state.json         the State, written with If-Match on its ETag (If-None-Match: * the first
//	                   time), so two writers never lose each other's change
//	held/<key>.json    one Held per file held ahead of its turn; the key sorts as the sequence
//	                   does (a number zero-padded to 19 digits, a name as hex), so a listing with
//	                   MaxKeys 1 finds the lowest held file
//
// Decisions are made at the head of the tenant's FIFO message group, one file at a time (the
// controller, internal/controller/sequence.go). A held file is out of the queue: its message is
// deleted once its Held object is written, and the controller sends its body back to the tenant's
// group when its turn comes. Nothing polls per held file: the tenant's tick (Tick), one message
// in a group of its own, comes back once a minute only while a number is missing or a name
// settles, whatever the number of held files.
package sequence

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// StateVersion is the only State.Version this code reads and writes.
const StateVersion = 1

// MaxSkips bounds State.Skipped: the oldest entries go first. A number below the next expected one
// that no kept entry covers is refused as a duplicate, not as late.
const MaxSkips = 100

// Prefix is control/<tenant>/sequence/ (pipeline.SequencePrefix).
func Prefix(o pipeline.Owner) string { return pipeline.SequencePrefix(o) }

// StateKey is control/<tenant>/sequence/state.json.
func StateKey(o pipeline.Owner) string { return Prefix(o) + "state.json" }

// HeldPrefix is control/<tenant>/sequence/held/.
func HeldPrefix(o pipeline.Owner) string { return Prefix(o) + "held/" }

// HeldKey is the object of a file held with value v. Numbers are zero-padded to 19 digits (the
// most an int64 has) and names hex-encoded, so that S3's listing order (UTF-8 binary) is the
// sequence's order.
func HeldKey(o pipeline.Owner, kind string, v spec.SequenceValue) string {
	return HeldPrefix(o) + heldName(kind, v) + ".json"
}

func heldName(kind string, v spec.SequenceValue) string {
	if kind == spec.SequenceNumber {
		return fmt.Sprintf("%019d", v.Num)
	}
	return "n" + hex.EncodeToString([]byte(v.Text))
}

// State is a sequenced tenant's place in its sequence.
type State struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"`
	// Next is the number expected next (kind number).
	Next int64 `json:"next"`
	// Last is the last name processed; "" before the first (kind name).
	Last string `json:"last,omitempty"`
	// Running is the file whose turn it is and whose execution the controller started; its
	// release moves the sequence on.
	Running *Entry `json:"running,omitempty"`
	// Woken is the held file sent back to the tenant's queue because its turn came; it runs when
	// it reaches the head.
	Woken *Entry `json:"woken,omitempty"`
	// GapSince is when the tenant began to wait for a missing number while holding later ones.
	GapSince *time.Time `json:"gapSince,omitempty"`
	// Skipped are the numbers skipped (by an operator, by onGap "skip", or by a set past them),
	// newest last; a skipped number that arrives later is refused as late. A range whose From is
	// at least Next is a skip ahead of the sequence, passed over when Next reaches it.
	Skipped []Skip `json:"skipped,omitempty"`
	// Tick is when the tenant's tick was sent; nil when none is out.
	Tick *time.Time `json:"tick,omitempty"`
	// Updated is the last change, for operators.
	Updated time.Time `json:"updated"`
}

// Entry names one file of the sequence.
type Entry struct {
	Value     string `json:"value"`
	Num       int64  `json:"num,omitempty"`
	Execution string `json:"execution"`
	Key       string `json:"key"`
}

// Skip is a range of numbers skipped, with its audit trail.
type Skip struct {
	From   int64     `json:"from"`
	To     int64     `json:"to"`
	At     time.Time `json:"at"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
}

// New is the state of a tenant that has processed nothing yet.
func New(r spec.SequenceRule) State {
	return State{Version: StateVersion, Kind: r.Kind, Next: r.Start}
}

// Held is a file held ahead of its turn: the message that brought it, to be sent back.
type Held struct {
	Value     string    `json:"value"`
	Num       int64     `json:"num,omitempty"`
	Execution string    `json:"execution"`
	Key       string    `json:"key"`
	Arrived   time.Time `json:"arrived"`
	Body      string    `json:"body"`
}

// Refusals: why a file of a sequenced tenant is not registered (summary.json "refusal").
const (
	RefusedUnmatched = "unmatched"
	RefusedDuplicate = "duplicate"
	RefusedLate      = "late"
)

// Verdict is what becomes of a file at the head of its tenant's group.
type Verdict int

const (
	// Run: its turn has come.
	Run Verdict = iota
	// Hold: it is ahead of its turn.
	Hold
	// Refuse: it can never run in the sequence.
	Refuse
	// Again: it is held already, under the same execution (a repeated event): nothing to do.
	Again
)

// Decide is the verdict for a file with value v and execution name at the head of the group.
// held is the file held under v, if any. The reason is set with Refuse.
func Decide(st State, v spec.SequenceValue, execution string, held *Held) (Verdict, string) {
	if st.Running != nil && st.Running.Execution == execution {
		return Run, ""
	}
	if st.Woken != nil && st.Woken.Execution == execution {
		return Run, ""
	}
	if st.Kind == spec.SequenceNumber {
		switch {
		case v.Num < st.Next:
			if st.skipped(v.Num) {
				return Refuse, RefusedLate
			}
			return Refuse, RefusedDuplicate
		case held != nil && held.Execution == execution:
			return Again, ""
		case held != nil:
			return Refuse, RefusedDuplicate
		case v.Num == st.Next && st.Running == nil && st.Woken == nil:
			return Run, ""
		case v.Num == st.Next:
			// Another file of the number runs or was woken: this one is a second file of it.
			return Refuse, RefusedDuplicate
		}
		return Hold, ""
	}
	switch {
	case st.Last != "" && v.Text < st.Last:
		return Refuse, RefusedLate
	case st.Last != "" && v.Text == st.Last:
		return Refuse, RefusedDuplicate
	case held != nil && held.Execution == execution:
		return Again, ""
	case held != nil:
		return Refuse, RefusedDuplicate
	case st.Running != nil && st.Running.Value == v.Text, st.Woken != nil && st.Woken.Value == v.Text:
		return Refuse, RefusedDuplicate
	}
	// A name runs only once it has settled: it is held, and woken when it is the lowest held
	// name and its settle time has passed.
	return Hold, ""
}

// skipped reports whether n is in a recorded skip.
func (st State) skipped(n int64) bool {
	return slices.ContainsFunc(st.Skipped, func(s Skip) bool { return s.From <= n && n <= s.To })
}

// AddSkip records a skip, keeping at most MaxSkips.
func (st *State) AddSkip(s Skip) {
	st.Skipped = append(st.Skipped, s)
	if n := len(st.Skipped) - MaxSkips; n > 0 {
		st.Skipped = slices.Delete(st.Skipped, 0, n)
	}
}

// PassSkips moves Next past numbers skipped ahead of it.
func (st *State) PassSkips() {
	for moved := true; moved; {
		moved = false
		for _, s := range st.Skipped {
			if s.From <= st.Next && st.Next <= s.To {
				st.Next = s.To + 1
				moved = true
			}
		}
	}
}

// Done moves the sequence past the running file e, if it is the running one; it reports whether
// it did.
func (st *State) Done(e Entry, now time.Time) bool {
	if st.Running == nil || st.Running.Execution != e.Execution {
		return false
	}
	if st.Kind == spec.SequenceNumber {
		st.Next = max(st.Next, st.Running.Num+1)
		st.PassSkips()
	} else if st.Running.Value > st.Last {
		st.Last = st.Running.Value
	}
	st.Running = nil
	st.Updated = now
	return true
}

// Display is a value as operators see it: the number without its padding, or the name.
func Display(kind string, e Entry) string {
	if kind == spec.SequenceNumber {
		return strconv.FormatInt(e.Num, 10)
	}
	return e.Value
}
