package report

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report/reportpage"
)

// operatorRunsReport is a tenant with a file failed at record 15 and redriven to success, and a
// replay of another file: 14 records registered by the file's own run, 26 by the redrive, 10 by
// the replay.
func operatorRunsReport(t0 time.Time) *Report {
	at := func(ms int) *time.Time { x := t0.Add(time.Duration(ms) * time.Millisecond); return &x }
	n := func(v int64) *int64 { return &v }
	redriven := FileReport{Key: "in/1.csv", ExecutionName: "e1", Status: "SUCCEEDED", UploadedAt: t0, StartedAt: at(100), StoppedAt: at(5300),
		Records: 40, RedriveCount: 1, HistoryEvents: 90,
		Runs: []ExecutionRun{{Redrive: 0, Status: "FAILED", StartedAt: *at(100), StoppedAt: at(1350), Error: "RegisterFailed", Records: n(14)},
			{Redrive: 1, Status: "SUCCEEDED", StartedAt: *at(5000), StoppedAt: at(5300), Records: n(26)}}}
	other := FileReport{Key: "in/2.csv", ExecutionName: "e2", Status: "SUCCEEDED", UploadedAt: t0, StartedAt: at(1400), StoppedAt: at(1900), Records: 10}
	replay := FileReport{Key: "in/2.csv", ExecutionName: "rp-1", Status: "SUCCEEDED", Replay: true, UploadedAt: *at(6000), StartedAt: at(6000), StoppedAt: at(6700), Records: 10}
	return &Report{Tenants: map[string]*TenantReport{"cont": {Files: []FileReport{redriven, other}, Replays: []FileReport{replay}, RecordsRegistered: 60}},
		Violations: []string{}}
}

// The summary has a row per run of a redriven file, with that run's records and seconds (not the
// execution's start to its last stop, which spans both runs and the wait between), and a row for
// a replay with its own records.
func TestSummaryOperatorRuns(t *testing.T) {
	var b bytes.Buffer
	WriteSummary(&b, operatorRunsReport(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), []string{"cont"})
	rows := map[string][]string{}
	var order []string
	for _, line := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(line, "cont ") {
			continue
		}
		cells := regexpCells(line)
		rows[cells[1]] = cells
		order = append(order, cells[1])
	}
	want := []struct{ file, status, records, seconds string }{
		{"in/1.csv", "FAILED", "14", "1.25"},
		{"in/1.csv (redrive 1)", "SUCCEEDED", "26", "0.30"},
		{"in/2.csv", "SUCCEEDED", "10", "0.50"},
		{"in/2.csv (replay)", "SUCCEEDED", "10", "0.70"},
	}
	if len(order) != len(want) {
		t.Fatalf("summary rows: got %q, want %d rows\n%s", order, len(want), b.String())
	}
	for i, w := range want {
		r := rows[order[i]]
		if got := []string{r[1], r[2], r[3], r[6]}; !reflect.DeepEqual(got, []string{w.file, w.status, w.records, w.seconds}) {
			t.Errorf("row %d (file, status, records, seconds): got %q, want %q", i, got, []string{w.file, w.status, w.records, w.seconds})
		}
	}
	if !strings.Contains(b.String(), "RUNS: a redriven file has a row per run") {
		t.Errorf("got %q, want the RUNS legend", b.String())
	}
}

// regexpCells splits a summary line into its cells: columns are two or more spaces apart.
func regexpCells(line string) []string {
	var cells []string
	for _, c := range strings.Split(line, "  ") {
		if c = strings.TrimSpace(c); c != "" {
			cells = append(cells, c)
		}
	}
	return cells
}

// report.html draws each run with its own records: the redrive's bars 14 and 26, the replay's bar
// 10 (not 0), and the title counts every record registered, the replay's included.
func TestWriteHTMLOperatorRunRecords(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var page bytes.Buffer
	if err := WriteHTML(&page, operatorRunsReport(t0), []string{"cont"}, t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	els, lanes := reportpage.Parse(t, page.Bytes())
	var got []string
	for _, bar := range lanes.Bars["cont"] {
		s := reportpage.SpanOf(t, bar)
		got = append(got, fmt.Sprintf("%s run %s: %s records, %d ms", bar.Attrs["data-execution"], bar.Attrs["data-run"], bar.Attrs["data-records"], s.Stop-s.RunStart))
	}
	want := []string{"e1 run 0: 14 records, 1250 ms", "e1 run 1: 26 records, 300 ms", "e2 run 0: 10 records, 500 ms", "rp-1 run 0: 10 records, 700 ms"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bars: got %q, want %q", got, want)
	}
	for _, e := range els {
		if e.Name == "title" {
			if !strings.Contains(e.Text, "60 records") {
				t.Errorf("title: got %q, want 60 records", e.Text)
			}
			break // the page's; the charts' titles follow
		}
	}
}
