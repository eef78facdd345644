// Package shares divides a core system's requests in flight among its running files by what each
// can use (docs/configuration.md, "Request shares"). The core system's capacity is its
// maxRequestsInFlight, scaled down by its adaptive limit while that is below maxRunningFiles. Each
// running Register invocation of the core system has one entry in the core system's shares item
// (schema.SharesSK, in its admission table): its demand (the most it can use: a key-ordered
// file's maxRecordsInFlight, 1 for file order and batch), its tenant's weight, its grant (what it
// may keep in flight now) and its deadline. Targets water-fills the capacity by weight: one each
// first, then the rest to the files that can use more, in proportion to their weights and never
// above their demand, less a small reserve for files that start (Reserve). When more files run
// than the capacity holds, the newest entries get 0 and wait.
//
// The invariant is that the grants of the live entries never add up to more than the capacity.
// An invocation raises its own grant only by a write conditional on the item's version, and only
// into capacity no other grant holds; it lowers its grant only once its own requests in flight
// are at or below the new value. So a file that must give way keeps sending up to its old grant
// until its requests drain, and the file it gives way to raises its grant only after the write
// that lowered it. An entry whose invocation's deadline has passed is dead (Lambda ends an
// invocation at its timeout) and is pruned by the next write.
//
// Cost, per Register invocation of a file of a core system, whatever the number of tenants: one
// GetItem and one conditional UpdateItem to join, one UpdateItem to leave (Store.Remove), about one GetItem a
// second while it runs (two for an adaptive core system, whose limit item is read too), and one
// UpdateItem each time its grant changes (the join's GetItem, and the re-read after a lost race,
// are strongly consistent; the regular reads eventually consistent). The item holds one entry per
// running file (at most maxRunningFiles, plus entries of invocations that died before leaving),
// about 150 bytes each, so up to 27 running files it is under 4 KB: an eventually consistent read
// costs 0.5 read request units and a write one write request unit per KB
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html).
// That is 0.5 RRU a second per running file: 1,800 an hour, $0.000225 at on-demand's $0.125 per
// million RRU (us-east-1, https://aws.amazon.com/dynamodb/pricing/on-demand/).
package shares

import (
	"cmp"
	"container/heap"
	"slices"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Entry is one running Register invocation's share.
type Entry struct {
	// Execution is the file's execution name: one invocation of a file runs at a time.
	Execution string
	// Demand is the most requests the invocation can keep in flight, at least 1.
	Demand int
	// Weight is the tenant's weight (pipeline.Tenant.AdmissionWeight), at least 1.
	Weight int
	// Grant is what the invocation may keep in flight now.
	Grant int
	// Joined orders the entries: the earliest keep their floor of one when the capacity is short.
	// It is the file's admission when known, so a file keeps its place across its invocations.
	Joined time.Time
	// Seen is the entry's last write (its heartbeat); Until the invocation's deadline, after
	// which the entry is dead.
	Seen  time.Time
	Until time.Time
}

// Skew is added to an entry's deadline before it is taken for dead, for the clocks of two Lambda
// execution environments, which need not agree to the millisecond.
const Skew = 5 * time.Second

// Live reports whether the entry's invocation may still be running at now.
func (e Entry) Live(now time.Time) bool { return now.Before(e.Until.Add(Skew)) }

// Capacity is the requests in flight the core system's running files share: its
// maxRequestsInFlight (pipeline.CoreSystem.RequestsInFlight), scaled by adaptiveLimit /
// maxRunningFiles while the adaptive limit is below maxRunningFiles (the core system answers 429),
// at least 1. adaptiveLimit 0 or above maxRunningFiles is no scaling.
func Capacity(c pipeline.CoreSystem, adaptiveLimit int) int {
	n := c.RequestsInFlight()
	if adaptiveLimit > 0 && c.MaxRunningFiles > 0 && adaptiveLimit < c.MaxRunningFiles {
		n = n * adaptiveLimit / c.MaxRunningFiles
	}
	return max(1, n)
}

// Reserve is how much of the capacity the water-filling holds back for files that start, so that
// a file admitted next finds its floor of one free at once instead of waiting for the others to
// drain: one per running-file slot not in use (maxRunningFiles - running), at most a twentieth of
// the capacity, at least one while a slot is free. It costs a file running alone a twentieth of
// the capacity at most (one request of 30), so that a large file alone keeps the core system
// busy; a second file that starts takes the reserve at once, and a third waits a refresh or two
// for the others to drain. Once every slot runs a file nothing is held back.
func Reserve(c pipeline.CoreSystem, capacity, running int) int {
	free := c.MaxRunningFiles - running
	if free <= 0 || capacity <= running {
		return 0
	}
	return min(free, max(1, capacity/20), capacity-running)
}

// Sum is the grants of the entries live at now.
func Sum(entries []Entry, now time.Time) int {
	n := 0
	for _, e := range entries {
		if e.Live(now) {
			n += e.Grant
		}
	}
	return n
}

// Targets is what each live entry should hold, by execution: the capacity water-filled by weight
// with a floor of one each, each capped at its demand, and reserve (Reserve) left over. The
// entries are taken in join order (Joined, then Execution, so every reader computes the same
// answer); when there are more of them than the capacity, the first ones get 1 and the rest 0.
// Past the floor, each further request goes to the entry that would then hold the least per unit
// of weight ((grant+1)/weight), the earlier one on a tie, among those below their demand, until
// only reserve is left. Capacity no entry can use stays free.
func Targets(entries []Entry, capacity, reserve int) map[string]int {
	es := slices.Clone(entries)
	slices.SortFunc(es, func(a, b Entry) int {
		return cmp.Or(a.Joined.Compare(b.Joined), cmp.Compare(a.Execution, b.Execution))
	})
	out := make(map[string]int, len(es))
	left := max(0, capacity)
	h := &fill{}
	for i, e := range es {
		if left == 0 {
			out[e.Execution] = 0
			continue
		}
		out[e.Execution] = 1
		left--
		if d := max(1, e.Demand); d > 1 {
			h.items = append(h.items, filling{name: e.Execution, order: i, weight: max(1, e.Weight), grant: 1, demand: d})
		}
	}
	heap.Init(h)
	for left > max(0, reserve) && h.Len() > 0 {
		f := &h.items[0]
		f.grant++
		out[f.name] = f.grant
		left--
		if f.grant == f.demand {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	return out
}

// filling is one entry being water-filled.
type filling struct {
	name                         string
	order, weight, grant, demand int
}

// fill is a heap of the entries below their demand, the next to get a request first.
type fill struct{ items []filling }

func (h *fill) Len() int { return len(h.items) }

// Less: a gets the next request before b when (a.grant+1)/a.weight < (b.grant+1)/b.weight, in
// integers, the earlier entry on a tie.
func (h *fill) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	l, r := (a.grant+1)*b.weight, (b.grant+1)*a.weight
	if l != r {
		return l < r
	}
	return a.order < b.order
}
func (h *fill) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *fill) Push(x any)    { h.items = append(h.items, x.(filling)) }
func (h *fill) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// Step is one invocation's move on the shares as read at now: the grant it should write (grant
// itself when nothing is to be written) and the most it may keep in flight meanwhile (limit).
//   - Its target above its grant: it raises the grant into the capacity the other live entries
//     leave free, up to the target.
//   - Its target below its grant: it keeps at most the target in flight from now on, and writes
//     the lower grant once its own requests in flight (inFlight) are at or below it.
//
// reserve is Targets'. self must be one of entries.
func Step(entries []Entry, self string, capacity, reserve, inFlight int, now time.Time) (grant, limit int) {
	var live []Entry
	others := 0
	mine := -1
	for _, e := range entries {
		if !e.Live(now) && e.Execution != self {
			continue
		}
		live = append(live, e)
		if e.Execution == self {
			mine = e.Grant
		} else {
			others += e.Grant
		}
	}
	if mine < 0 {
		return 0, 0
	}
	target := Targets(live, capacity, reserve)[self]
	switch {
	case target > mine:
		grant = max(mine, min(target, capacity-others))
		return grant, grant
	case target < mine && inFlight <= target:
		return target, target
	case target < mine:
		return mine, target
	}
	return mine, mine
}
