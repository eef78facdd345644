package report

import (
	"bytes"
	"encoding/json"
	"github.com/example/tenantpipeline/internal/localrun/report/reportpage"
	"strings"
	"testing"
	"time"
)

// With --register-url the harness sees no record, so the summary must not claim record checks.
func TestSummaryExternalEndpoint(t *testing.T) {
	for _, tc := range []struct {
		external bool
		want     string
		notWant  string
	}{
		{true, "record checks skipped: external endpoint", "exactly once"},
		{false, "invariants: OK (file order, record order, exactly once", "skipped"},
	} {
		var b bytes.Buffer
		WriteSummary(&b, &Report{Tenants: map[string]*TenantReport{}, Violations: []string{}, ExternalEndpoint: tc.external}, nil)
		if !strings.Contains(b.String(), tc.want) || strings.Contains(b.String(), tc.notWant) {
			t.Errorf("external %v: got %q, want %q and not %q", tc.external, b.String(), tc.want, tc.notWant)
		}
		if !strings.Contains(b.String(), "HISTORY: events in the file execution's history") {
			t.Errorf("got %q, want the HISTORY legend", b.String())
		}
	}
}

// The summary gives the inter-file gap as its two parts, each with its own figures, never one
// mean over both: a long admission wait is not a slow wake-up.
func TestSummaryGapParts(t *testing.T) {
	var b bytes.Buffer
	WriteSummary(&b, &Report{Tenants: map[string]*TenantReport{}, Violations: []string{},
		InterFileGapSecond:          GapStats{N: 4, Mean: 15.65, P95: 30.5, Max: 31},
		InterFileGapWakeUpSecond:    GapStats{N: 4, Mean: 0.4, P95: 0.9, Max: 1},
		InterFileGapAdmissionSecond: GapStats{N: 4, Mean: 15.25, P95: 30, Max: 30.25}}, nil)
	want := "inter-file gap (n=4): wake-up mean 0.40s p95 0.90s max 1.00s; admission wait mean 15.25s p95 30.00s max 30.25s;"
	if !strings.Contains(b.String(), want) {
		t.Errorf("got %q, want it to contain %q", b.String(), want)
	}
	if strings.Contains(b.String(), "15.65") {
		t.Errorf("got %q, want no mean over both parts (15.65)", b.String())
	}
}

// The heartbeat says what each tenant waits on.
func TestWaitingOn(t *testing.T) {
	started := time.Now().Add(-12 * time.Second)
	rep := &Report{Tenants: map[string]*TenantReport{
		"a": {Files: []FileReport{{Key: "inbox/a/big.csv", Status: "RUNNING", StartedAt: &started}}, Queued: 2},
		"h": {Halted: &Halt{Key: "inbox/h/bad.csv", ExecutionName: "h-2"}, Queued: 1},
		"q": {Files: []FileReport{{Key: "inbox/q/x.csv", Status: "WAITING"}}, Queued: 1},
		"i": {},
	}}
	got := WaitingOn(rep, []string{"a", "h", "q", "i"})
	want := "a inbox/a/big.csv, running 12s | h an operator (halted at inbox/h/bad.csv) | q the controller (1 queued, none running) | 1 idle"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if Idle(rep) {
		t.Error("got idle, want busy")
	}
	if !Idle(&Report{Tenants: map[string]*TenantReport{"i": {}}}) {
		t.Error("got busy, want idle")
	}
}

// The report names each throttled function and the sink's peak in flight and 429s, in the JSON
// ("lambdaThrottles" is {} when nothing was throttled, never null) and in the printed summary.
func TestSummaryThrottlesAndSinkInFlight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rep      Report
		wantJSON []string
		want     []string
		notWant  []string
	}{
		{
			name:     "throttled, sink capped",
			rep:      Report{LambdaThrottles: map[string]int64{"register-b": 2, "register-a": 5}, SinkMaxInFlight: 7, Sink429: 1},
			wantJSON: []string{`"lambdaThrottles":{"register-a":5,"register-b":2}`, `"sinkMaxInFlight":7`, `"sink429":1`},
			want:     []string{"lambda throttles (TooManyRequestsException): register-a 5 register-b 2\n", "sink: at most 7 requests in flight, 1 answered 429\n"},
		},
		{
			name:     "nothing throttled, no sink request",
			rep:      Report{LambdaThrottles: map[string]int64{}},
			wantJSON: []string{`"lambdaThrottles":{}`, `"sinkMaxInFlight":0`, `"sink429":0`},
			notWant:  []string{"lambda throttles", "sink: at most"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rep.Tenants, tc.rep.Violations = map[string]*TenantReport{}, []string{}
			b, _ := json.Marshal(tc.rep)
			for _, want := range tc.wantJSON {
				if !strings.Contains(string(b), want) {
					t.Errorf("JSON: got %s, want it to contain %s", b, want)
				}
			}
			var out bytes.Buffer
			WriteSummary(&out, &tc.rep, nil)
			for _, want := range tc.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("summary: got %q, want it to contain %q", out.String(), want)
				}
			}
			for _, notWant := range tc.notWant {
				if strings.Contains(out.String(), notWant) {
					t.Errorf("summary: got %q, want no %q", out.String(), notWant)
				}
			}
		})
	}
}

// TestRecordsExternalEndpoint: with --register-url the harness sees no record, so each file shows
// the records Split counted (a succeeded execution's output), "–" when there is no count, and
// the summary, the progress line and report.html say the counts are Split's; never "0 records".
func TestRecordsExternalEndpoint(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	done := FileReport{Key: "inbox/acme/a.csv", Status: "SUCCEEDED", UploadedAt: t0, StartedAt: &t0, StoppedAt: &t0, Expected: 250}
	failed := FileReport{Key: "inbox/acme/b.csv", Status: "FAILED", UploadedAt: t0, StartedAt: &t0, StoppedAt: &t0, Expected: -1}
	var total int64
	for _, f := range []*FileReport{&done, &failed} {
		total += f.SplitCount()
	}
	if done.Records != 250 || done.RecordsCountedBy != "split" || failed.Records != 0 || failed.RecordsCountedBy != "none" || total != 250 {
		t.Fatalf("got a.csv %d by %q, b.csv %d by %q, total %d; want 250 by split, 0 by none, 250",
			done.Records, done.RecordsCountedBy, failed.Records, failed.RecordsCountedBy, total)
	}
	rep := &Report{Tenants: map[string]*TenantReport{"acme": {Files: []FileReport{done, failed}}}, Violations: []string{}, ExternalEndpoint: true}
	ids := []string{"acme"}

	var b bytes.Buffer
	WriteSummary(&b, rep, ids)
	rows := map[string][]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "acme" {
			rows[f[1]] = f
		}
	}
	if got := rows["inbox/acme/a.csv"]; len(got) < 4 || got[3] != "250" {
		t.Errorf("summary row of a.csv: got %v, want RECORDS 250", got)
	}
	if got := rows["inbox/acme/b.csv"]; len(got) < 4 || got[3] != "–" {
		t.Errorf("summary row of b.csv: got %v, want RECORDS –", got)
	}
	if !strings.Contains(b.String(), "RECORDS: the records Split counted") {
		t.Errorf("summary: got %q, want it to say the counts are Split's", b.String())
	}
	if got, want := ProgressLine(rep, ids), "1 tenant (1 idle): 2/2 files done 1 failed, 250 records (Split's count)"; got != want {
		t.Errorf("progress: got %q, want %q", got, want)
	}

	var page bytes.Buffer
	if err := WriteHTML(&page, rep, ids, t0); err != nil {
		t.Fatal(err)
	}
	els, lanes := reportpage.Parse(t, page.Bytes())
	got := map[string]string{}
	for _, bar := range lanes.Bars["acme"] {
		got[bar.Attrs["data-key"]] = bar.Attrs["data-records"]
	}
	if got["inbox/acme/a.csv"] != "250" || got["inbox/acme/b.csv"] != "–" {
		t.Errorf("data-records: got %v, want a.csv 250, b.csv –", got)
	}
	for _, e := range els {
		if e.Name == "title" && e.Text != "Local run: 1 tenants, 2 files, 250 records (Split's count)" {
			t.Errorf("title: got %q, want 250 records, Split's count", e.Text)
		}
	}

	t.Run("the embedded sink: as counted", func(t *testing.T) {
		seen := FileReport{Key: "inbox/acme/a.csv", Status: "SUCCEEDED", Records: 250, Expected: 250}
		rep := &Report{Tenants: map[string]*TenantReport{"acme": {Files: []FileReport{seen}, RecordsRegistered: 250}}, Violations: []string{}}
		var b bytes.Buffer
		WriteSummary(&b, rep, ids)
		if strings.Contains(b.String(), "Split") || ProgressLine(rep, ids) != "1 tenant (1 idle): 1/1 files done, 250 records" {
			t.Errorf("got %q and %q, want the sink's count, no mention of Split", b.String(), ProgressLine(rep, ids))
		}
	})
}
