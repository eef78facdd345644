package report

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The progress line is the run's total, then only the tenants that are not idle, at most
// progressTenants of them: with 53 tenants it stays short, whether most are idle or all are busy.
func TestProgressLineManyTenants(t *testing.T) {
	started := time.Now()
	done := FileReport{Key: "in/a.csv", Status: "SUCCEEDED"}
	running := FileReport{Key: "in/b.csv", Status: "RUNNING", StartedAt: &started}
	waiting := FileReport{Key: "in/c.csv", Status: "WAITING"}
	tenants := func(n int, busy func(i int) bool) (*Report, []string) {
		rep := &Report{Tenants: map[string]*TenantReport{}}
		var ids []string
		for i := range n {
			id := fmt.Sprintf("tenant-with-a-long-name-%02d", i)
			ids = append(ids, id)
			tr := &TenantReport{Files: []FileReport{done}, RecordsRegistered: 10}
			if busy(i) {
				tr.Files, tr.Queued = append(tr.Files, running, waiting), 1
			}
			rep.Tenants[id] = tr
		}
		return rep, ids
	}
	for _, tc := range []struct {
		name       string
		busy       func(i int) bool
		wantPrefix string
		named      []int // the tenants the line names
	}{
		{"two busy of 53", func(i int) bool { return i == 7 || i == 40 },
			"53 tenants (51 idle): 53/57 files done 2 running 2 waiting, 530 records | ", []int{7, 40}},
		{"all 53 busy", func(int) bool { return true },
			"53 tenants (0 idle): 53/159 files done 53 running 53 waiting, 530 records | ", []int{0, 1, 2, 3}},
		{"none busy", func(int) bool { return false }, "53 tenants (53 idle): 53/53 files done, 530 records", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, ids := tenants(53, tc.busy)
			line := ProgressLine(rep, ids)
			if !strings.HasPrefix(line, tc.wantPrefix) {
				t.Errorf("got %q, want it to start with %q", line, tc.wantPrefix)
			}
			if len(line) > 400 {
				t.Errorf("got a line of %d characters, want at most 400: %q", len(line), line)
			}
			for i, id := range ids {
				want := false
				for _, n := range tc.named {
					want = want || n == i
				}
				if got := strings.Contains(line, id+" "); got != want {
					t.Errorf("%s named: got %v, want %v: %q", id, got, want, line)
				}
			}
			heartbeat := WaitingOn(rep, ids)
			if len(heartbeat) > 400 || strings.Contains(heartbeat, "idle)") {
				t.Errorf("heartbeat: got %d characters %q, want at most 400 and no idle tenant named", len(heartbeat), heartbeat)
			}
		})
	}
	rep, ids := tenants(53, func(int) bool { return true })
	if line := ProgressLine(rep, ids); !strings.HasSuffix(line, " | 49 more busy") {
		t.Errorf("got %q, want the busy tenants past the first 4 counted", line)
	}
}

// A halted tenant is not idle: the line names it and counts it in the total.
func TestProgressLineHalted(t *testing.T) {
	failed := FileReport{Key: "in/bad.csv", Status: "FAILED"}
	rep := &Report{Tenants: map[string]*TenantReport{
		"h": {Files: []FileReport{failed}, Halted: &Halt{Key: "in/bad.csv"}, Queued: 1},
		"i": {Files: []FileReport{{Key: "in/ok.csv", Status: "SUCCEEDED"}}, RecordsRegistered: 3},
	}}
	want := "2 tenants (1 idle): 2/2 files done 1 failed 1 HALTED, 3 records | h 1/1 done 1 failed HALTED, 0 records"
	if got := ProgressLine(rep, []string{"h", "i"}); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
