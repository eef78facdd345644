package localrun

import (
	"strconv"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
)

// A replay's records are counted as its own (by the execution name in their Idempotency-Keys),
// never as the file's; a redriven file's records go to the run they were registered in.
func TestSnapshotCountsOperatorRuns(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var regs []emulate.SinkRecord
	for n := int64(1); n <= 40; n++ { // the file's own run registers 1-14, the redrive (from 100 s) 15-40
		when := at(int(n))
		if n > 14 {
			when = at(100 + int(n))
		}
		regs = append(regs, emulate.SinkRecord{Source: "in/1.csv", VersionID: "v1", RecordNumber: n, Key: "cont-7-" + strconv.FormatInt(n, 10), At: when})
	}
	for n := int64(1); n <= 10; n++ { // a replay of 2.csv, one batch of 10 records and singles
		regs = append(regs, emulate.SinkRecord{Source: "in/2.csv", VersionID: "v2", RecordNumber: n, Key: "rp-req1-c" + strconv.FormatInt(n, 10), At: at(300)})
	}
	regs = append(regs, emulate.SinkRecord{Source: "in/2.csv", VersionID: "v2", RecordNumber: 1, Key: "cont-8-1", At: at(50)})

	perSource, perReplay := recordsOf(regs)
	if perSource["in/1.csv\x00v1"] != 40 || perSource["in/2.csv\x00v2"] != 1 || perReplay["rp-req1"] != 10 {
		t.Errorf("got per file %v and per replay %v, want 1.csv 40, 2.csv 1 and replay rp-req1 10", perSource, perReplay)
	}

	stop0, stop1 := at(15), at(141)
	f := report.FileReport{Key: "in/1.csv", VersionID: "v1", Redrives: []time.Time{at(100)},
		Runs: []report.ExecutionRun{{Redrive: 0, Status: "FAILED", StartedAt: at(0), StoppedAt: &stop0}, {Redrive: 1, Status: "SUCCEEDED", StartedAt: at(100), StoppedAt: &stop1}}}
	cached := f.Runs
	countRuns(&f, regs)
	for i, want := range []int64{14, 26} {
		if got := f.Runs[i].Records; got == nil || *got != want {
			t.Errorf("run %d: got records %v, want %d", i, got, want)
		}
	}
	if cached[0].Records != nil {
		t.Error("countRuns wrote into the runs it was given, which redriveHistory caches")
	}
}

func TestWindowOverlaps(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	files := []report.FileReport{{Key: "a"}, {Key: "b"}, {Key: "c"}}
	req := func(src string, start, end int) emulate.SinkRequest {
		return emulate.SinkRequest{Source: src, Start: at(start), End: at(end)}
	}
	for _, tc := range []struct {
		name string
		reqs []emulate.SinkRequest
		want int
	}{
		{"one after another", []emulate.SinkRequest{req("a", 0, 10), req("a", 10, 20), req("b", 30, 40), req("c", 50, 60)}, 0},
		{"a file without requests between", []emulate.SinkRequest{req("a", 0, 10), req("c", 50, 60)}, 0},
		{"next starts during the last POST", []emulate.SinkRequest{req("a", 0, 10), req("a", 10, 100), req("b", 50, 60)}, 1},
		{"a stopped file still posting after the next started", []emulate.SinkRequest{req("a", 0, 10), req("b", 20, 30), req("a", 40, 50), req("c", 60, 70)}, 1},
		{"overlap with the file before the previous", []emulate.SinkRequest{req("a", 0, 100), req("b", 10, 20), req("c", 50, 60)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := windowOverlaps("t", files, tc.reqs); len(got) != tc.want {
				t.Errorf("got %d overlaps %v, want %d", len(got), got, tc.want)
			}
		})
	}
}
