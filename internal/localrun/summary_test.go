package localrun

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The report's "violations" is [] when nothing broke, never null.
func TestViolationsEmptyIsArray(t *testing.T) {
	r := &Run{Sink: &Sink{}}
	rep := &Report{Tenants: map[string]*TenantReport{}}
	rep.Violations = r.checkInvariants(rep)
	b, _ := json.Marshal(rep)
	if !strings.Contains(string(b), `"violations":[]`) {
		t.Errorf("got %s, want \"violations\":[]", b)
	}
}

// SQS takes integer attributes as decimal strings; 1.2096e+06 is rejected by real SQS.
func TestAttrString(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{float64(1209600), "1209600"}, // MessageRetentionPeriod: 14 days
		{float64(330), "330"},
		{float64(262144), "262144"},
		{"true", "true"},
		{true, "true"},
		{nil, ""},
	} {
		if got := attrString(tc.in); got != tc.want {
			t.Errorf("attrString(%v): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The runner's hints are pipectl's: a halt at a core system's failure can be redriven too.
func TestHaltCommands(t *testing.T) {
	started := time.Unix(1_800_000_000, 0)
	halt := &Tenant{ID: "h", Config: map[string]any{"id": "h", "onFailure": "halt"}}
	for _, tc := range []struct {
		name, errName, cause string
		want                 []string
	}{
		{"validation", "ValidationError", `{"errorType":"ValidationError","errorMessage":"line 6"}`,
			[]string{"pipectl skip h h-2 --reason '<why this file is skipped>'"}},
		{"a segment's PermanentError", "States.TaskFailed", `PermanentError: {"errorType":"PermanentError","errorMessage":"record 15: rejected"}`,
			[]string{"pipectl skip h h-2 --reason '<why this file is skipped>'", "pipectl redrive h h-2"}},
		{"a segment's ValidationError", "States.TaskFailed", `ValidationError: {"errorType":"ValidationError","errorMessage":"line 6"}`,
			[]string{"pipectl skip h h-2 --reason '<why this file is skipped>'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := FileReport{Key: "inbox/h/bad.csv", ExecutionName: "h-2", Status: "FAILED", Error: tc.errName, Cause: tc.cause, StartedAt: &started, StoppedAt: &started}
			h := halted(halt, &TenantReport{Files: []FileReport{f}, Queued: 1})
			if h == nil {
				t.Fatal("got no halt, want one")
			}
			if got := h.Commands("h"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHalted(t *testing.T) {
	started := time.Unix(1_800_000_000, 0)
	halt := &Tenant{ID: "h", Config: map[string]any{"id": "h", "onFailure": "halt"}}
	cont := &Tenant{ID: "c", Config: map[string]any{"id": "c"}}
	failed := FileReport{Key: "inbox/h/bad.csv", ExecutionName: "h-2", Status: "FAILED", Error: "ValidationError",
		Cause: `{"errorType":"ValidationError","errorMessage":"inbox/h/bad.csv line 6: 1 fields, want 2"}`, StartedAt: &started, StoppedAt: &started}
	ok := FileReport{Key: "inbox/h/a.csv", ExecutionName: "h-1", Status: "SUCCEEDED", StartedAt: &started, StoppedAt: &started}
	waiting := FileReport{Key: "inbox/h/c.csv", Status: "WAITING"}
	for _, tc := range []struct {
		name   string
		tenant *Tenant
		tr     TenantReport
		want   string // halted execution, "" for none
	}{
		{"halt tenant, failed head, queue holds it", halt, TenantReport{Files: []FileReport{ok, failed, waiting}, Queued: 2}, "h-2"},
		{"released: queue empty", halt, TenantReport{Files: []FileReport{ok, failed}}, ""},
		{"continue tenant never halts", cont, TenantReport{Files: []FileReport{ok, failed, waiting}, Queued: 1}, ""},
		{"a later file started (skipped)", halt, TenantReport{Files: []FileReport{failed, ok}, Queued: 1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := halted(tc.tenant, &tc.tr)
			got := ""
			if h != nil {
				got = h.ExecutionName
			}
			if got != tc.want {
				t.Fatalf("got halted %q, want %q", got, tc.want)
			}
			if h == nil {
				return
			}
			var b bytes.Buffer
			WriteHalt(&b, "h", h)
			for _, want := range []string{
				"line 6", // the cause names the line
				"pipectl skip h h-2 --reason '<why this file is skipped>'\n",
			} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("got %q, want it to contain %q", b.String(), want)
				}
			}
			// pipectl refuses to redrive a file that failed validation: the runner does not suggest it.
			if strings.Contains(b.String(), "pipectl redrive") {
				t.Errorf("got %q, want no redrive hint for a ValidationError", b.String())
			}
		})
	}
}

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
	want := "a inbox/a/big.csv, running 12s | h an operator (halted at inbox/h/bad.csv) | q the controller (1 queued, none running) | i nothing (idle)"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if idle(rep) {
		t.Error("got idle, want busy")
	}
	if !idle(&Report{Tenants: map[string]*TenantReport{"i": {}}}) {
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
	done := FileReport{Key: "inbox/acme/a.csv", Status: "SUCCEEDED", UploadedAt: t0, StartedAt: &t0, StoppedAt: &t0, expected: 250}
	failed := FileReport{Key: "inbox/acme/b.csv", Status: "FAILED", UploadedAt: t0, StartedAt: &t0, StoppedAt: &t0, expected: -1}
	var total int64
	for _, f := range []*FileReport{&done, &failed} {
		total += f.splitCount()
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
	if got, want := ProgressLine(rep, ids), "acme 2/2 done 1 failed, 250 records (Split's count)"; got != want {
		t.Errorf("progress: got %q, want %q", got, want)
	}

	var page bytes.Buffer
	if err := WriteHTML(&page, rep, ids, t0); err != nil {
		t.Fatal(err)
	}
	els, lanes := parseHTML(t, page.Bytes())
	got := map[string]string{}
	for _, bar := range lanes.bars["acme"] {
		got[bar.attrs["data-key"]] = bar.attrs["data-records"]
	}
	if got["inbox/acme/a.csv"] != "250" || got["inbox/acme/b.csv"] != "–" {
		t.Errorf("data-records: got %v, want a.csv 250, b.csv –", got)
	}
	for _, e := range els {
		if e.name == "title" && e.text != "Local run: 1 tenants, 2 files, 250 records (Split's count)" {
			t.Errorf("title: got %q, want 250 records, Split's count", e.text)
		}
	}

	t.Run("the embedded sink: as counted", func(t *testing.T) {
		seen := FileReport{Key: "inbox/acme/a.csv", Status: "SUCCEEDED", Records: 250, expected: 250}
		rep := &Report{Tenants: map[string]*TenantReport{"acme": {Files: []FileReport{seen}, RecordsRegistered: 250}}, Violations: []string{}}
		var b bytes.Buffer
		WriteSummary(&b, rep, ids)
		if strings.Contains(b.String(), "Split") || ProgressLine(rep, ids) != "acme 1/1 done, 250 records" {
			t.Errorf("got %q and %q, want the sink's count, no mention of Split", b.String(), ProgressLine(rep, ids))
		}
	})
}
