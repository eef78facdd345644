package shares

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// entry is a live entry that joined i seconds after t0.
func entry(name string, i, demand, weight, grant int) Entry {
	return Entry{Execution: name, Demand: demand, Weight: weight, Grant: grant,
		Joined: t0.Add(time.Duration(i) * time.Second), Seen: t0, Until: t0.Add(2 * time.Minute)}
}

// files are n entries of one demand and weight 1, joined in order f00, f01, ...
func files(n, demand int) []Entry {
	var es []Entry
	for i := range n {
		es = append(es, entry(fmt.Sprintf("f%02d", i), i, demand, 1, 0))
	}
	return es
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func TestTargets(t *testing.T) {
	ten := files(10, 1)
	ten[0].Demand = 64 // one large key-ordered file among nine in file order
	cases := []struct {
		name     string
		entries  []Entry
		capacity int
		reserve  int
		want     map[string]int
	}{
		{"a file alone uses its demand", files(1, 8), 30, 0, map[string]int{"f00": 8}},
		{"a file alone never above the capacity", files(1, 64), 30, 0, map[string]int{"f00": 30}},
		{"two files split evenly", files(2, 30), 30, 0, map[string]int{"f00": 15, "f01": 15}},
		{"two files below the capacity each get their demand", files(2, 8), 30, 0, map[string]int{"f00": 8, "f01": 8}},
		{"odd capacity: the earlier file gets the extra one", files(2, 30), 15, 0, map[string]int{"f00": 8, "f01": 7}},
		{"ten files in key order", files(10, 8), 30, 0, map[string]int{
			"f00": 3, "f01": 3, "f02": 3, "f03": 3, "f04": 3, "f05": 3, "f06": 3, "f07": 3, "f08": 3, "f09": 3}},
		{"ten files: the large one takes what the nine in file order leave", ten, 30, 0, map[string]int{
			"f00": 21, "f01": 1, "f02": 1, "f03": 1, "f04": 1, "f05": 1, "f06": 1, "f07": 1, "f08": 1, "f09": 1}},
		{"weights: 2 to 1", []Entry{entry("a", 0, 64, 2, 0), entry("b", 1, 64, 1, 0)}, 30, 0, map[string]int{"a": 20, "b": 10}},
		{"weights: the heavier one capped at its demand gives the rest away", []Entry{entry("a", 0, 5, 10, 0), entry("b", 1, 64, 1, 0)}, 30, 0,
			map[string]int{"a": 5, "b": 25}},
		{"more files than capacity: the newest wait", files(5, 8), 3, 0, map[string]int{"f00": 1, "f01": 1, "f02": 1, "f03": 0, "f04": 0}},
		{"join order, not names, decides who waits", []Entry{entry("z", 0, 1, 1, 0), entry("a", 1, 1, 1, 0)}, 1, 0, map[string]int{"z": 1, "a": 0}},
		{"no entries", nil, 30, 0, map[string]int{}},
		{"a file alone leaves the reserve free", files(1, 64), 30, 3, map[string]int{"f00": 27}},
		{"the reserve never takes a floor", files(5, 8), 3, 2, map[string]int{"f00": 1, "f01": 1, "f02": 1, "f03": 0, "f04": 0}},
		{"two files share what the reserve leaves", files(2, 64), 30, 3, map[string]int{"f00": 14, "f01": 13}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Targets(c.entries, c.capacity, c.reserve)
			if !maps.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
			if s := sum(got); s > c.capacity {
				t.Errorf("got a sum of %d, want at most the capacity %d", s, c.capacity)
			}
		})
	}
}

// TestTargetsFileEnding: when a file ends, the others' targets grow into its share.
func TestTargetsFileEnding(t *testing.T) {
	three := files(3, 30)
	before := Targets(three, 30, 0)
	after := Targets(three[1:], 30, 0)
	if want := map[string]int{"f00": 10, "f01": 10, "f02": 10}; !maps.Equal(before, want) {
		t.Errorf("three files: got %v, want %v", before, want)
	}
	if want := map[string]int{"f01": 15, "f02": 15}; !maps.Equal(after, want) {
		t.Errorf("after f00 ended: got %v, want %v", after, want)
	}
}

// TestCapacity: a 429 storm lowers the adaptive limit, and the capacity falls with it, never
// below 1.
func TestCapacity(t *testing.T) {
	core := pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 10, MaxRequestsInFlight: 30, Adaptive: true}
	cases := []struct {
		name     string
		core     pipeline.CoreSystem
		adaptive int
		want     int
	}{
		{"no adaptive limit", core, 0, 30},
		{"limit at maxRunningFiles", core, 10, 30},
		{"halved", core, 5, 15},
		{"storm: down to one file", core, 1, 3},
		{"never below one", pipeline.CoreSystem{MaxRunningFiles: 10, MaxRequestsInFlight: 10}, 0, 10},
		{"one request per file, one file left", pipeline.CoreSystem{MaxRunningFiles: 10, MaxRequestsInFlight: 10}, 1, 1},
		{"maxRequestsInFlight defaults to maxRunningFiles", pipeline.CoreSystem{MaxRunningFiles: 4}, 0, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Capacity(c.core, c.adaptive); got != c.want {
				t.Errorf("got %d, want %d", got, c.want)
			}
		})
	}
	// The storm's shares: two large files that held 15 each hold 8 and 7 of 15 once the
	// limit is halved, and 2 and 1 of 3 at its bottom.
	for _, c := range []struct {
		limit int
		want  map[string]int
	}{{10, map[string]int{"f00": 15, "f01": 15}}, {5, map[string]int{"f00": 8, "f01": 7}}, {1, map[string]int{"f00": 2, "f01": 1}}} {
		if got := Targets(files(2, 64), Capacity(core, c.limit), 0); !maps.Equal(got, c.want) {
			t.Errorf("adaptive limit %d: got %v, want %v", c.limit, got, c.want)
		}
	}
}

func TestReserve(t *testing.T) {
	core := pipeline.CoreSystem{MaxRunningFiles: 10, MaxRequestsInFlight: 30}
	for _, c := range []struct {
		name              string
		capacity, running int
		want              int
	}{
		{"one running of ten: a twentieth of the capacity", 30, 1, 1},
		{"a large capacity: a twentieth of it", 100, 1, 5},
		{"nine running: one free slot", 30, 9, 1},
		{"every slot running: none", 30, 10, 0},
		{"a small capacity: at least one", 10, 1, 1},
		{"a storm: more files than capacity, none", 3, 5, 0},
	} {
		if got := Reserve(core, c.capacity, c.running); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}

func TestStep(t *testing.T) {
	now := t0.Add(time.Second)
	dead := entry("dead", 0, 30, 1, 30)
	dead.Until = t0.Add(-time.Minute)
	cases := []struct {
		name      string
		entries   []Entry
		reserve   int
		inFlight  int
		wantGrant int
		wantLimit int
	}{
		{"alone: raised to its demand", []Entry{entry("me", 0, 8, 1, 0)}, 0, 0, 8, 8},
		{"raised only into free capacity", []Entry{entry("other", 0, 30, 1, 25), entry("me", 1, 30, 1, 0)}, 0, 0, 5, 5},
		{"no free capacity: waits at 0", []Entry{entry("other", 0, 30, 1, 30), entry("me", 1, 30, 1, 0)}, 0, 0, 0, 0},
		{"lowering: keeps the grant while its requests drain", []Entry{entry("me", 0, 30, 1, 30), entry("new", 1, 30, 1, 0)}, 0, 20, 30, 15},
		{"lowering: writes the lower grant once drained", []Entry{entry("me", 0, 30, 1, 30), entry("new", 1, 30, 1, 0)}, 0, 15, 15, 15},
		{"at its target: nothing to write", []Entry{entry("me", 0, 30, 1, 15), entry("other", 1, 30, 1, 15)}, 0, 15, 15, 15},
		{"a dead entry's grant is free", []Entry{dead, entry("me", 1, 30, 1, 0)}, 0, 0, 30, 30},
		{"not in the entries: nothing", []Entry{entry("other", 0, 30, 1, 0)}, 0, 0, 0, 0},
		{"alone with a reserve: the rest", []Entry{entry("me", 0, 64, 1, 0)}, 3, 0, 27, 27},
		{"a newcomer takes the reserve at once", []Entry{entry("other", 0, 64, 1, 27), entry("me", 1, 64, 1, 0)}, 3, 0, 3, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			grant, limit := Step(c.entries, "me", 30, c.reserve, c.inFlight, now)
			if grant != c.wantGrant || limit != c.wantLimit {
				t.Errorf("got grant %d limit %d, want grant %d limit %d", grant, limit, c.wantGrant, c.wantLimit)
			}
			if limit > grant {
				t.Errorf("got limit %d above grant %d", limit, grant)
			}
		})
	}
}
