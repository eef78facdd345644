package report

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/results"
)

func TestTenantGaps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) *time.Time { x := t0.Add(time.Duration(s * float64(time.Second))); return &x }
	file := func(up, start, stop float64) FileReport {
		f := FileReport{UploadedAt: *at(up)}
		if start >= 0 {
			f.StartedAt = at(start)
		}
		if stop >= 0 {
			f.StoppedAt = at(stop)
		}
		return f
	}
	run := func(start, stop float64) ExecutionRun {
		r := ExecutionRun{Status: "FAILED", StartedAt: *at(start)}
		if stop >= 0 {
			r.StoppedAt = at(stop)
		}
		return r
	}
	redriven := func(f FileReport, runs ...ExecutionRun) FileReport {
		for i := range runs {
			runs[i].Redrive = i
		}
		f.Runs, f.RedriveCount = runs, len(runs)-1
		return f
	}
	tests := []struct {
		name  string
		files []FileReport
		want  []float64
	}{
		{"none", nil, nil},
		{"one file", []FileReport{file(0, 1, 2)}, nil},
		{"queued behind each other", []FileReport{file(0, 0.5, 3), file(0, 3.25, 5), file(0, 6, 7)}, []float64{0.25, 1}},
		{"uploaded after the previous stopped: no gap", []FileReport{file(0, 1, 2), file(10, 10.5, 11)}, nil},
		{"the next still waiting", []FileReport{file(0, 1, 2), file(0, -1, -1)}, nil},
		{"the previous still running", []FileReport{file(0, 1, -1), file(0, -1, -1)}, nil},
		// 1.csv fails at 1 s, 2.csv and 3.csv run, the operator's redrive of 1.csv runs from 5 to
		// 6 s: the execution's stop (6 s) is after 2.csv's start, which gave -4.75 s.
		{"continue: a redrive after later files", []FileReport{redriven(file(0, 0.5, 6), run(0.5, 1), run(5, 6)), file(0, 1.25, 3), file(0, 3.5, 4)}, []float64{0.25, 0.5}},
		// A halt tenant: 2.csv waits through the failure and the redrive, and starts after the
		// redrive's stop, not after the first run's.
		{"halt: the next file waits for the redrive", []FileReport{redriven(file(0, 0.5, 6), run(0.5, 1), run(5, 6)), file(0, 6.5, 7)}, []float64{0.5}},
		{"a redrive still running", []FileReport{redriven(file(0, 0.5, -1), run(0.5, 1), run(5, -1)), file(0, 1.25, 3)}, []float64{0.25}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := (&TenantReport{Files: tt.files}).Gaps()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			for _, g := range got {
				if g < 0 {
					t.Errorf("got gap %v, want none negative", g)
				}
			}
		})
	}
}

// TestTenantGapsReplay: a file waiting behind a replay waits from the replay's stop.
func TestTenantGapsReplay(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) *time.Time { x := t0.Add(time.Duration(s * float64(time.Second))); return &x }
	tr := &TenantReport{
		Files:   []FileReport{{UploadedAt: *at(0), StartedAt: at(0.5), StoppedAt: at(1)}, {UploadedAt: *at(0), StartedAt: at(3.25), StoppedAt: at(4)}},
		Replays: []FileReport{{UploadedAt: *at(2), StartedAt: at(2), StoppedAt: at(3), Replay: true}},
	}
	if got, want := tr.Gaps(), []float64{0.25}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestTenantGapParts: each gap splits into the admission wait (at most the gap) and the wake-up,
// the rest; the parts add up to the gap.
func TestTenantGapParts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) *time.Time { x := t0.Add(time.Duration(s * float64(time.Second))); return &x }
	file := func(start, stop float64, admission *float64) FileReport {
		return FileReport{UploadedAt: t0, StartedAt: at(start), StoppedAt: at(stop), AdmissionWaitSeconds: admission}
	}
	wait := func(s float64) *float64 { return &s }
	tests := []struct {
		name  string
		files []FileReport
		want  []GapPart
	}{
		{"no gate: the gap is all wake-up", []FileReport{file(0, 1, nil), file(1.5, 2, nil)}, []GapPart{{WakeUp: 0.5}}},
		{"an admission wait inside the gap", []FileReport{file(0, 1, nil), file(16.5, 17, wait(15))}, []GapPart{{WakeUp: 0.5, Admission: 15}}},
		// The first file waited for admission too, but no gap ends at it.
		{"the first file's wait is no gap's", []FileReport{file(5, 6, wait(4.5)), file(6.25, 7, nil)}, []GapPart{{WakeUp: 0.25}}},
		// A wait longer than the gap (its first ask before the stop it waited for) is cut to it.
		{"a wait past the gap is cut to it", []FileReport{file(0, 1, nil), file(3, 4, wait(5))}, []GapPart{{Admission: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &TenantReport{Files: tt.files}
			got := tr.GapParts()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			gaps := tr.Gaps()
			for i, p := range got {
				if p.WakeUp < 0 || p.Admission < 0 || i >= len(gaps) || p.WakeUp+p.Admission != gaps[i] {
					t.Errorf("part %d: got %+v, want two parts, none negative, adding up to the gap %v", i, p, gaps)
				}
			}
		})
	}
}

// A file's registered, rejected and unprocessed come from the summary of its own execution's
// current run, and report.json keeps them null, not 0, while there is none.
func TestReportFileCounts(t *testing.T) {
	sum := func(execution, status string, registered, rejected, unprocessed int64) *results.Summary {
		return &results.Summary{Execution: execution, Status: status, Records: registered + rejected + unprocessed,
			Registered: registered, Rejected: rejected, Unprocessed: unprocessed}
	}
	redriven := func(s *results.Summary, n int) *results.Summary { s.RedriveCount = n; return s }
	tests := []struct {
		name    string
		file    FileReport
		summary *results.Summary // nil: no summary.json
		want    string           // the file's counts in report.json
	}{
		{"succeeded", FileReport{ExecutionName: "e1", Status: "SUCCEEDED"}, sum("e1", "SUCCEEDED", 57, 3, 0),
			`"registered":57,"rejected":3,"unprocessed":0`},
		{"failed part way", FileReport{ExecutionName: "e1", Status: "FAILED"}, sum("e1", "FAILED", 14, 0, 26),
			`"registered":14,"rejected":0,"unprocessed":26`},
		{"no summary yet", FileReport{ExecutionName: "e1", Status: "RUNNING"}, nil,
			`"registered":null,"rejected":null,"unprocessed":null`},
		{"another execution's summary", FileReport{ExecutionName: "e1", Status: "SUCCEEDED"}, sum("e0", "SUCCEEDED", 57, 3, 0),
			`"registered":null,"rejected":null,"unprocessed":null`},
		// A redrive is running: the summary is its failed end's, not the file's now.
		{"a redrive still running", FileReport{ExecutionName: "e1", Status: "RUNNING", RedriveCount: 1}, sum("e1", "FAILED", 14, 0, 26),
			`"registered":null,"rejected":null,"unprocessed":null`},
		{"a redrive that succeeded", FileReport{ExecutionName: "e1", Status: "SUCCEEDED", RedriveCount: 1}, redriven(sum("e1", "SUCCEEDED", 40, 0, 0), 1),
			`"registered":40,"rejected":0,"unprocessed":0`},
		// A redrive failed again: until its own summary is written, the first run's is not its.
		{"a redrive that failed again", FileReport{ExecutionName: "e1", Status: "FAILED", RedriveCount: 1}, sum("e1", "FAILED", 14, 0, 26),
			`"registered":null,"rejected":null,"unprocessed":null`},
		{"a redrive that failed again, its summary written", FileReport{ExecutionName: "e1", Status: "FAILED", RedriveCount: 1},
			redriven(sum("e1", "FAILED", 20, 0, 20), 1), `"registered":20,"rejected":0,"unprocessed":20`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.file
			if tt.summary != nil {
				f.SetCounts(*tt.summary)
			}
			j, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(j), tt.want) {
				t.Errorf("report.json file: got %s, want it to carry %s", j, tt.want)
			}
		})
	}
}
