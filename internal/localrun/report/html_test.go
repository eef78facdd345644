package report

import (
	"bytes"
	"encoding/json"
	"github.com/example/tenantpipeline/internal/localrun/report/reportpage"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWriteHTML(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) *time.Time { x := t0.Add(time.Duration(ms) * time.Millisecond); return &x }
	file := func(key, status string, up, start, stop int) FileReport {
		f := FileReport{Key: key, ExecutionName: "exec-" + strings.Fields(key)[0], Status: status, UploadedAt: *at(up), Records: 10}
		if start >= 0 {
			f.StartedAt = at(start)
		}
		if stop >= 0 {
			f.StoppedAt = at(stop)
		}
		return f
	}
	hostile := `a<script>alert("x")</script> 'q' & 注文.csv`
	failed := file("bad.csv", "FAILED", 0, 1200, 1300)
	failed.Error, failed.Cause = "ValidationError", `line 7: <b>2 fields</b>`
	redriven := file("redriven.csv", "SUCCEEDED", 0, 1400, 2000)
	redriven.RedriveCount = 1
	halted := file("halted.csv", "FAILED", 100, 200, 300)
	skipped := file("skipped.csv", "FAILED", 0, 100, 150)
	skipped.Skipped = true
	replay := file("again.csv", "SUCCEEDED", 2600, 2600, 2900)
	replay.Replay = true
	rep := &Report{
		Tenants: map[string]*TenantReport{
			"acme": {Files: []FileReport{file(hostile, "SUCCEEDED", 0, 100, 1000), failed, redriven, file("late.csv", "SUCCEEDED", 2500, 2600, 2700), file("running.csv", "RUNNING", 2600, 2800, -1)}},
			"globex": {Files: []FileReport{halted, file("behind.csv", "WAITING", 150, -1, -1)},
				Halted: &Halt{Key: "halted.csv", ExecutionName: halted.ExecutionName, Status: "FAILED"}, Queued: 2},
			"initech": {Files: []FileReport{skipped, file("next.csv", "SUCCEEDED", 0, 400, 500)}, Replays: []FileReport{replay}},
			"idle":    {},
		},
		Violations: []string{`acme: <i>order</i>`},
	}
	ids := []string{"acme", "globex", "initech", "idle"}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rep, ids, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	page := buf.Bytes()
	els, lanes := reportpage.Parse(t, page)

	t.Run("one lane per tenant, in order", func(t *testing.T) {
		if got := strings.Join(lanes.Tenants, ","); got != strings.Join(ids, ",") {
			t.Errorf("lanes: got %s, want %s", got, strings.Join(ids, ","))
		}
	})

	t.Run("one bar per file", func(t *testing.T) {
		for _, id := range ids {
			tr := rep.Tenants[id]
			want := map[string]int{}
			for _, f := range append(append([]FileReport(nil), tr.Files...), tr.Replays...) {
				want[f.Key]++
			}
			got := map[string]int{}
			for _, b := range lanes.Bars[id] {
				got[b.Attrs["data-key"]]++
			}
			if len(got) != len(want) || len(lanes.Bars[id]) != len(tr.Files)+len(tr.Replays) {
				t.Errorf("%s bars: got %v, want %v", id, got, want)
			}
			for k, n := range want {
				if got[k] != n {
					t.Errorf("%s bars of %q: got %d, want %d", id, k, got[k], n)
				}
			}
		}
	})

	t.Run("colour by status", func(t *testing.T) {
		want := map[string]string{
			hostile: kindSucceeded, "bad.csv": kindFailed, "redriven.csv": kindRedriven, "running.csv": kindRunning, "late.csv": kindSucceeded,
			"halted.csv": kindHalted, "behind.csv": kindWaiting, "skipped.csv": kindSkipped, "next.csv": kindSucceeded, "again.csv": kindReplayed,
		}
		for _, id := range ids {
			for _, b := range lanes.Bars[id] {
				k := b.Attrs["data-key"]
				if !b.HasClass("kind-" + want[k]) {
					t.Errorf("%s %q: got class %q, want kind-%s", id, k, b.Attrs["class"], want[k])
				}
			}
		}
	})

	t.Run("times in ms from the first upload", func(t *testing.T) {
		want := map[string]reportpage.Span{
			hostile:       {Start: 0, RunStart: 100, Stop: 1000, Started: true},
			"running.csv": {Start: 2600, RunStart: 2800, Stop: 3000, Started: true}, // still running: drawn up to now
			"behind.csv":  {Start: 150, RunStart: 0, Stop: 3000, Started: false},    // never started: all queued
			"again.csv":   {Start: 2600, RunStart: 2600, Stop: 2900, Started: true}, // a replay: no queued time
		}
		for _, id := range ids {
			for _, b := range lanes.Bars[id] {
				if w, ok := want[b.Attrs["data-key"]]; ok {
					if got := reportpage.SpanOf(t, b); got != w {
						t.Errorf("%q: got %+v, want %+v", b.Attrs["data-key"], got, w)
					}
				}
			}
		}
		for _, id := range ids {
			if o := reportpage.RunningOverlaps(t, lanes.Bars[id]); len(o) > 0 {
				t.Errorf("%s: running parts overlap: %v", id, o)
			}
		}
	})

	t.Run("keys, errors and causes are text, never markup", func(t *testing.T) {
		for _, raw := range []string{"<script>alert", "<b>2 fields", "<i>order"} {
			if bytes.Contains(page, []byte(raw)) {
				t.Errorf("got %q unescaped in the page", raw)
			}
		}
		var keys, causes []string
		for _, b := range lanes.Bars["acme"] {
			keys, causes = append(keys, b.Attrs["data-key"]), append(causes, b.Attrs["data-cause"])
		}
		if keys[0] != hostile {
			t.Errorf("first key: got %q, want %q", keys[0], hostile)
		}
		if causes[1] != failed.Cause {
			t.Errorf("bad.csv cause: got %q, want %q", causes[1], failed.Cause)
		}
		if !strings.Contains(lanes.Bars["acme"][1].Attrs["title"], "error: ValidationError") {
			t.Errorf("bad.csv hover text: got %q, want it to name the error", lanes.Bars["acme"][1].Attrs["title"])
		}
		for _, e := range els {
			if e.Name == "li" && strings.Contains(e.Text, "order") && e.Text != "acme: <i>order</i>" {
				t.Errorf("violation: got %q, want the text as written", e.Text)
			}
		}
	})

	t.Run("gap summary per tenant and overall", func(t *testing.T) {
		// acme: bad.csv waited for the hostile file (200 ms), redriven.csv for bad.csv (100 ms),
		// running.csv for late.csv (100 ms); late.csv was uploaded after redriven.csv stopped, so
		// it never waited. initech: next.csv waited 250 ms. globex: behind.csv never started.
		want := map[string][]string{
			"acme":        {"acme", "3", "0.100 s", "0.133 s", "0.200 s", "0.200 s"},
			"globex":      {"globex", "0", "-", "-", "-", "-"},
			"initech":     {"initech", "1", "0.250 s", "0.250 s", "0.250 s", "0.250 s"},
			"idle":        {"idle", "0", "-", "-", "-", "-"},
			"all tenants": {"all tenants", "4", "0.100 s", "0.163 s", "0.250 s", "0.250 s"},
		}
		rows := 0
		for i, e := range els {
			if e.Name != "tr" || e.Attrs["data-tenant"] == "" {
				continue
			}
			rows++
			var cells []string
			for _, c := range els[i+1 : i+7] {
				cells = append(cells, strings.TrimSpace(c.Text))
			}
			if w := want[e.Attrs["data-tenant"]]; strings.Join(cells, "|") != strings.Join(w, "|") {
				t.Errorf("gap row %s: got %v, want %v", e.Attrs["data-tenant"], cells, w)
			}
		}
		if rows != len(want) {
			t.Errorf("gap rows: got %d, want %d", rows, len(want))
		}
		var gaps int
		for _, e := range els {
			if e.HasClass("gap") {
				gaps++
			}
		}
		if gaps != 4 {
			t.Errorf("gap marks on the lanes: got %d, want 4", gaps)
		}
	})

	t.Run("self-contained", func(t *testing.T) {
		for _, e := range els {
			for k, v := range e.Attrs {
				if k == "src" || k == "href" || (strings.Contains(v, "://") && v != "http://www.w3.org/2000/svg") {
					t.Errorf("<%s %s=%q>: got a reference out of the page, want none", e.Name, k, v)
				}
			}
			if e.Name == "link" || (e.Name == "script" && e.Attrs["src"] != "") {
				t.Errorf("got <%s>, want inline CSS and script only", e.Name)
			}
		}
		if bytes.Contains(page, []byte("@import")) || bytes.Contains(page, []byte("url(")) {
			t.Error("got a CSS import or url(), want none")
		}
	})
}

func TestFileKind(t *testing.T) {
	halt := &Halt{ExecutionName: "e1"}
	tests := []struct {
		name string
		f    FileReport
		halt *Halt
		want string
	}{
		{"succeeded", FileReport{Status: "SUCCEEDED", StartedAt: &time.Time{}}, nil, kindSucceeded},
		{"waiting", FileReport{Status: "WAITING"}, nil, kindWaiting},
		{"running", FileReport{Status: "RUNNING", StartedAt: &time.Time{}}, nil, kindRunning},
		{"failed", FileReport{Status: "FAILED"}, nil, kindFailed},
		{"timed out", FileReport{Status: "TIMED_OUT"}, nil, kindFailed},
		{"aborted", FileReport{Status: "ABORTED"}, nil, kindFailed},
		{"the file its tenant halted at", FileReport{Status: "FAILED", ExecutionName: "e1"}, halt, kindHalted},
		{"another failed file of a halted tenant", FileReport{Status: "FAILED", ExecutionName: "e0"}, halt, kindFailed},
		{"skipped", FileReport{Status: "FAILED", ExecutionName: "e0", Skipped: true}, nil, kindSkipped},
		{"replayed", FileReport{Status: "SUCCEEDED", Replay: true}, nil, kindReplayed},
		{"a replay that failed", FileReport{Status: "FAILED", Replay: true}, nil, kindFailed},
		{"redriven, then succeeded", FileReport{Status: "SUCCEEDED", RedriveCount: 1}, nil, kindRedriven},
		{"redriven, still running", FileReport{Status: "RUNNING", RedriveCount: 1}, nil, kindRedriven},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fileKind(tt.f, tt.halt); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestHTMLPath(t *testing.T) {
	for in, want := range map[string]string{
		".build/local/report.json": ".build/local/report.html",
		"out/run.JSON":             "out/run.html",
		"report":                   "report.html",
		"/tmp/a.b/r":               "/tmp/a.b/r.html",
	} {
		if got := HTMLPath(in); got != want {
			t.Errorf("HTMLPath(%q): got %q, want %q", in, got, want)
		}
	}
}

// A pooled tenant's lane names its pool; a silo tenant's lane is as it was.
func TestWriteHTMLPooledTenant(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	start, stop := t0.Add(100*time.Millisecond), t0.Add(900*time.Millisecond)
	f := FileReport{Key: "inbox/pool-a/p1/a.csv", ExecutionName: "p1-a", Status: "SUCCEEDED", UploadedAt: t0, StartedAt: &start, StoppedAt: &stop}
	rep := &Report{Tenants: map[string]*TenantReport{
		"p1":   {Tier: TierPool, Pool: "a", Files: []FileReport{f}},
		"acme": {Tier: TierSilo, Files: []FileReport{f}},
	}}
	var b strings.Builder
	if err := WriteHTML(&b, rep, []string{"p1", "acme"}, stop); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	if !strings.Contains(html, `<div class="name">p1<small>pool a · 1 file(s)`) || !strings.Contains(html, `data-tenant="p1" data-tier="pool" data-pool="a"`) {
		t.Errorf("p1's lane does not name pool a:\n%s", html)
	}
	if !strings.Contains(html, `<div class="name">acme<small>1 file(s)`) || !strings.Contains(html, `data-tenant="acme" style`) {
		t.Errorf("acme's silo lane changed:\n%s", html)
	}
	j, _ := json.Marshal(rep.Tenants["p1"])
	if !strings.Contains(string(j), `"tier":"pool","pool":"a"`) {
		t.Errorf("report.json: got %s, want tier and pool", j)
	}
}

// A file's admission wait is drawn as the end of its queued part, up to its start, and named in
// its hover text and details; a file that did not wait has none. report.json carries it.
func TestWriteHTMLAdmissionWait(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	start, stop := t0.Add(4*time.Second), t0.Add(8*time.Second)
	wait := 3.0
	waited := FileReport{Key: "inbox/acme/a.csv", ExecutionName: "acme-a", Status: "SUCCEEDED", UploadedAt: t0, StartedAt: &start, StoppedAt: &stop,
		AdmissionWaitSeconds: &wait}
	plain := FileReport{Key: "inbox/globex/b.csv", ExecutionName: "globex-b", Status: "SUCCEEDED", UploadedAt: t0, StartedAt: &start, StoppedAt: &stop}
	rep := &Report{Tenants: map[string]*TenantReport{"acme": {Files: []FileReport{waited}}, "globex": {Files: []FileReport{plain}}}}
	var b bytes.Buffer
	if err := WriteHTML(&b, rep, []string{"acme", "globex"}, stop); err != nil {
		t.Fatal(err)
	}
	els, lanes := reportpage.Parse(t, b.Bytes())
	var spans []reportpage.Element
	for _, e := range els {
		if e.Name == "span" && e.HasClass("admission") && !e.HasClass("swatch") {
			spans = append(spans, e)
		}
	}
	// Queued 4 s of a 8 s bar: the wait's 3 s start at 1 s (12.5%) and take 37.5%, on the queued track.
	if len(spans) != 1 || !strings.Contains(spans[0].Attrs["style"], "left: 12.5000%; width: 37.5000%; top: 33px") {
		t.Fatalf("got admission spans %v, want one at left 12.5%%, width 37.5%%, on the queued track", spans)
	}
	bar := lanes.Bars["acme"][0]
	if bar.Attrs["data-admission"] != "3.000 s" || !strings.Contains(bar.Attrs["title"], "admission wait: 3.000 s (of the queued time)") {
		t.Errorf("acme's bar: got data-admission %q, title %q, want the 3.000 s wait", bar.Attrs["data-admission"], bar.Attrs["title"])
	}
	if _, ok := lanes.Bars["globex"][0].Attrs["data-admission"]; ok {
		t.Errorf("globex's bar: got data-admission %q, want none", lanes.Bars["globex"][0].Attrs["data-admission"])
	}
	j, _ := json.Marshal(rep.Tenants["acme"].Files[0])
	if !strings.Contains(string(j), `"admissionWaitSeconds":3`) {
		t.Errorf("report.json file: got %s, want admissionWaitSeconds", j)
	}
	if j, _ := json.Marshal(plain); strings.Contains(string(j), "admissionWaitSeconds") {
		t.Errorf("report.json file without a wait: got %s, want no admissionWaitSeconds", j)
	}
}

// TestWriteHTMLRedrive: a redriven file is one bar per execution (its own run, then each
// redrive), each with its own status; no two bars of a lane run at once, and no gap is negative,
// whether the redrive came after later files (continue) or the tenant waited for it (halt).
func TestWriteHTMLRedrive(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) *time.Time { x := t0.Add(time.Duration(ms) * time.Millisecond); return &x }
	file := func(key string, up, start, stop int) FileReport {
		return FileReport{Key: key, ExecutionName: "exec-" + key, Status: "SUCCEEDED", UploadedAt: *at(up), StartedAt: at(start), StoppedAt: at(stop), Records: 10}
	}
	run := func(n int, status string, start, stop int) ExecutionRun {
		r := ExecutionRun{Redrive: n, Status: status, StartedAt: *at(start), StoppedAt: at(stop)}
		if status == "FAILED" {
			r.Error = "RegisterFailed"
		}
		return r
	}
	// cont: 1.csv fails at 200 ms, 2.csv and 3.csv run, then the operator's redrive of 1.csv.
	cont1 := file("1.csv", 0, 100, 1200)
	cont1.Runs, cont1.RedriveCount = []ExecutionRun{run(0, "FAILED", 100, 200), run(1, "SUCCEEDED", 1000, 1200)}, 1
	// halt: 1.csv fails, its first redrive fails again and the tenant stays halted at it; 2.csv waits.
	halt1 := file("1.csv", 0, 100, 1100)
	halt1.Status, halt1.Error = "FAILED", "RegisterFailed"
	halt1.Runs, halt1.RedriveCount = []ExecutionRun{run(0, "FAILED", 100, 200), run(1, "FAILED", 1000, 1100)}, 1
	waiting := FileReport{Key: "2.csv", Status: "WAITING", UploadedAt: *at(0)}
	// redone: 1.csv fails, its redrive succeeds, and 2.csv, waiting meanwhile, runs after it.
	redone1 := file("1.csv", 0, 100, 1100)
	redone1.Runs, redone1.RedriveCount = []ExecutionRun{run(0, "FAILED", 100, 200), run(1, "SUCCEEDED", 1000, 1100)}, 1
	rep := &Report{Tenants: map[string]*TenantReport{
		"cont":   {Files: []FileReport{cont1, file("2.csv", 0, 300, 500), file("3.csv", 0, 600, 800)}},
		"halt":   {Files: []FileReport{halt1, waiting}, Halted: &Halt{Key: "1.csv", ExecutionName: halt1.ExecutionName, Status: "FAILED"}},
		"redone": {Files: []FileReport{redone1, file("2.csv", 0, 1150, 1300)}},
	}}
	ids := []string{"cont", "halt", "redone"}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rep, ids, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	els, lanes := reportpage.Parse(t, buf.Bytes())

	type seg struct {
		run, status, kind, err string
		span                   reportpage.Span
	}
	want := map[string][]seg{ // the bars of 1.csv, in order
		"cont":   {{"0", "FAILED", kindFailed, "RegisterFailed", reportpage.Span{Start: 0, RunStart: 100, Stop: 200, Started: true}}, {"1", "SUCCEEDED", kindRedriven, "", reportpage.Span{Start: 1000, RunStart: 1000, Stop: 1200, Started: true}}},
		"halt":   {{"0", "FAILED", kindFailed, "RegisterFailed", reportpage.Span{Start: 0, RunStart: 100, Stop: 200, Started: true}}, {"1", "FAILED", kindHalted, "RegisterFailed", reportpage.Span{Start: 1000, RunStart: 1000, Stop: 1100, Started: true}}},
		"redone": {{"0", "FAILED", kindFailed, "RegisterFailed", reportpage.Span{Start: 0, RunStart: 100, Stop: 200, Started: true}}, {"1", "SUCCEEDED", kindRedriven, "", reportpage.Span{Start: 1000, RunStart: 1000, Stop: 1100, Started: true}}},
	}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			var got []seg
			for _, b := range lanes.Bars[id] {
				if b.Attrs["data-key"] == "1.csv" {
					got = append(got, seg{b.Attrs["data-run"], b.Attrs["data-status"], b.Attrs["data-kind"], b.Attrs["data-error"], reportpage.SpanOf(t, b)})
				}
			}
			if !reflect.DeepEqual(got, want[id]) {
				t.Errorf("1.csv bars: got %+v, want one per execution: %+v", got, want[id])
			}
			if n, files := len(lanes.Bars[id]), len(rep.Tenants[id].Files); n != files+1 {
				t.Errorf("bars: got %d, want %d (one per file, one more for the redrive)", n, files+1)
			}
			if o := reportpage.RunningOverlaps(t, lanes.Bars[id]); len(o) > 0 {
				t.Errorf("running parts overlap: %v", o)
			}
		})
	}

	t.Run("no gap is negative", func(t *testing.T) {
		// cont: 2.csv waited 100 ms for 1.csv's first run, 3.csv 100 ms for 2.csv; redone: 2.csv
		// waited 50 ms for the redrive. halt: 2.csv never started.
		wantRows := map[string]string{"cont": "2|0.100 s|0.100 s", "halt": "0|-|-", "redone": "1|0.050 s|0.050 s", "all tenants": "3|0.050 s|0.083 s"}
		for i, e := range els {
			if e.Name != "tr" || e.Attrs["data-tenant"] == "" {
				continue
			}
			var cells []string
			for _, c := range els[i+1 : i+7] {
				cells = append(cells, strings.TrimSpace(c.Text))
				if strings.HasPrefix(strings.TrimSpace(c.Text), "-0") || strings.Contains(c.Text, " -") {
					t.Errorf("gap row %s: got %q, want no negative value", e.Attrs["data-tenant"], c.Text)
				}
			}
			if got := strings.Join(cells[1:4], "|"); got != wantRows[e.Attrs["data-tenant"]] {
				t.Errorf("gap row %s (n|min|mean): got %s, want %s", e.Attrs["data-tenant"], got, wantRows[e.Attrs["data-tenant"]])
			}
		}
		for _, e := range els {
			if e.HasClass("gap") && strings.Contains(e.Attrs["style"], "width: -") {
				t.Errorf("gap mark %q: got a negative width", e.Attrs["style"])
			}
		}
	})
}

// TestWriteHTMLFileCounts: the page's table of files shows every file's registered, rejected and
// unprocessed counts as text, "–" (not 0) while the file has no summary, and highlights a rejected
// or unprocessed count above 0; each bar carries the same counts for its hover text and details.
func TestWriteHTMLFileCounts(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) *time.Time { x := t0.Add(time.Duration(ms) * time.Millisecond); return &x }
	n := func(v int64) *int64 { return &v }
	hostile := `<b>注文</b> "q".csv`
	tests := []struct {
		name, tenant string
		file         FileReport
		// want are the cells' text: records, registered, rejected, unprocessed.
		want                         [4]string
		rejectedMarked, unprocMarked bool
	}{
		{"registered and rejected", "acme", FileReport{Key: "a.csv", ExecutionName: "e-a", Status: "SUCCEEDED", Records: 57,
			Registered: n(57), Rejected: n(3), Unprocessed: n(0)}, [4]string{"57", "57", "3", "0"}, true, false},
		{"every record registered", "acme", FileReport{Key: "b.csv", ExecutionName: "e-b", Status: "SUCCEEDED", Records: 60,
			Registered: n(60), Rejected: n(0), Unprocessed: n(0)}, [4]string{"60", "60", "0", "0"}, false, false},
		{"no summary yet", "acme", FileReport{Key: "c.csv", ExecutionName: "e-c", Status: "RUNNING"},
			[4]string{"0", "–", "–", "–"}, false, false},
		{"waiting", "acme", FileReport{Key: "d.csv", Status: "WAITING"}, [4]string{"0", "–", "–", "–"}, false, false},
		{"failed part way", "globex", FileReport{Key: "e.csv", ExecutionName: "e-e", Status: "FAILED", Records: 14,
			Registered: n(14), Rejected: n(0), Unprocessed: n(26)}, [4]string{"14", "14", "0", "26"}, false, true},
		{"a key that is markup", "globex", FileReport{Key: hostile, ExecutionName: "e-h", Status: "SUCCEEDED", Records: 2,
			Registered: n(1), Rejected: n(1), Unprocessed: n(0)}, [4]string{"2", "1", "1", "0"}, true, false},
		{"records counted by Split", "globex", FileReport{Key: "s.csv", ExecutionName: "e-s", Status: "SUCCEEDED", Records: 9, RecordsCountedBy: "split",
			Registered: n(9), Rejected: n(0), Unprocessed: n(0)}, [4]string{"9", "9", "0", "0"}, false, false},
		{"a replay", "globex", FileReport{Key: "a.csv", ExecutionName: "rp-1", Status: "SUCCEEDED", Replay: true, Records: 10,
			Registered: n(10), Rejected: n(0), Unprocessed: n(0)}, [4]string{"10", "10", "0", "0"}, false, false},
	}
	rep := &Report{Tenants: map[string]*TenantReport{"acme": {}, "globex": {}}}
	for i, tt := range tests {
		f := tt.file
		f.UploadedAt = *at(100 * i)
		if f.Status != "WAITING" {
			f.StartedAt = at(100*i + 10)
		}
		if f.Status == "SUCCEEDED" || f.Status == "FAILED" {
			f.StoppedAt = at(100*i + 90)
		}
		tr := rep.Tenants[tt.tenant]
		if f.Replay {
			tr.Replays = append(tr.Replays, f)
		} else {
			tr.Files = append(tr.Files, f)
		}
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rep, []string{"acme", "globex"}, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	els, lanes := reportpage.Parse(t, buf.Bytes())
	rows := reportpage.FileTable(els)
	if len(rows) != len(tests) {
		t.Fatalf("table of files: got %d rows, want %d (one per file and replay)", len(rows), len(tests))
	}
	bars := map[string]reportpage.Element{}
	for _, id := range []string{"acme", "globex"} {
		for _, b := range lanes.Bars[id] {
			bars[b.Attrs["data-key"]+"|"+b.Attrs["data-execution"]] = b
		}
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Rows come in lane order (acme's, then globex's), a tenant's files before its replays:
			// the order of the cases.
			row := rows[i]
			text := func(class string) string { return strings.TrimSpace(row.Cells[class].Text) }
			if row.Attrs["data-key"] != tt.file.Key || text("key") != tt.file.Key || text("tenant") != tt.tenant {
				t.Errorf("row %d: got tenant %q, key %q (data-key %q), want %s, %q", i, text("tenant"), text("key"), row.Attrs["data-key"], tt.tenant, tt.file.Key)
			}
			got := [4]string{text("records"), text("registered"), text("rejected"), text("unprocessed")}
			if got != tt.want {
				t.Errorf("records, registered, rejected, unprocessed: got %q, want %q", got, tt.want)
			}
			wantClass := "file"
			if tt.rejectedMarked {
				wantClass = "file rejects"
			}
			if m := row.Cells["rejected"].HasClass("some"); m != tt.rejectedMarked || row.Attrs["class"] != wantClass {
				t.Errorf("rejected marked: got cell %v, row class %q; want %v, %q", m, row.Attrs["class"], tt.rejectedMarked, wantClass)
			}
			if m := row.Cells["unprocessed"].HasClass("some"); m != tt.unprocMarked {
				t.Errorf("unprocessed marked: got %v, want %v", m, tt.unprocMarked)
			}
			if split := row.Cells["records"].Attrs["title"] == "Split's count"; split != (tt.file.RecordsCountedBy == "split") {
				t.Errorf("records: got title %q, want \"Split's count\" only for Split's count", row.Cells["records"].Attrs["title"])
			}
			if _, replay := row.Attrs["data-replay"]; replay != tt.file.Replay || strings.Contains(text("status"), "(replay)") != tt.file.Replay {
				t.Errorf("replay: got data-replay %v, status %q, want %v", replay, text("status"), tt.file.Replay)
			}
			bar, ok := bars[tt.file.Key+"|"+tt.file.ExecutionName]
			if !ok {
				t.Fatalf("no bar for %q", tt.file.Key)
			}
			wantUnproc := ""
			if tt.unprocMarked {
				wantUnproc = tt.want[3]
			}
			if bar.Attrs["data-registered"] != tt.want[1] || bar.Attrs["data-rejected"] != tt.want[2] || bar.Attrs["data-unprocessed"] != wantUnproc {
				t.Errorf("bar: got data-registered %q, data-rejected %q, data-unprocessed %q; want %q, %q, %q",
					bar.Attrs["data-registered"], bar.Attrs["data-rejected"], bar.Attrs["data-unprocessed"], tt.want[1], tt.want[2], wantUnproc)
			}
		})
	}
	if bytes.Contains(buf.Bytes(), []byte("<b>注文")) {
		t.Error("got the key's markup unescaped in the page")
	}
}

// A redriven file's counts are its execution's summary, written at its last run's end: the bar of
// an earlier run shows none, the last run's bar and the file's row show them.
func TestWriteHTMLRedriveCounts(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) *time.Time { x := t0.Add(time.Duration(ms) * time.Millisecond); return &x }
	reg, rej := int64(38), int64(2)
	f := FileReport{Key: "1.csv", ExecutionName: "e1", Status: "SUCCEEDED", UploadedAt: t0, StartedAt: at(100), StoppedAt: at(1200),
		Records: 38, RedriveCount: 1, Registered: &reg, Rejected: &rej,
		Runs: []ExecutionRun{{Redrive: 0, Status: "FAILED", StartedAt: *at(100), StoppedAt: at(200), Error: "RegisterFailed"},
			{Redrive: 1, Status: "SUCCEEDED", StartedAt: *at(1000), StoppedAt: at(1200)}}}
	rep := &Report{Tenants: map[string]*TenantReport{"cont": {Files: []FileReport{f}}}}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rep, []string{"cont"}, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	els, lanes := reportpage.Parse(t, buf.Bytes())
	var got []string
	for _, b := range lanes.Bars["cont"] {
		got = append(got, b.Attrs["data-run"]+":"+b.Attrs["data-registered"]+"/"+b.Attrs["data-rejected"])
	}
	if want := []string{"0:–/–", "1:38/2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("bars (run:registered/rejected): got %v, want %v", got, want)
	}
	rows := reportpage.FileTable(els)
	if len(rows) != 1 || strings.TrimSpace(rows[0].Cells["registered"].Text) != "38" || strings.TrimSpace(rows[0].Cells["rejected"].Text) != "2" {
		t.Errorf("table of files: got %+v, want one row for 1.csv with 38 registered, 2 rejected", rows)
	}
}

// report.html shows each file's registered and rejected counts (from its summary.json), "–" for a
// file without a summary.
func TestBarTitleCounts(t *testing.T) {
	n8, n2 := int64(8), int64(2)
	for _, tc := range []struct {
		f    FileReport
		want string
	}{
		{FileReport{Key: "a.csv", Status: "SUCCEEDED", Records: 10, Registered: &n8, Rejected: &n2}, "registered: 8, rejected: 2"},
		{FileReport{Key: "b.csv", Status: "SUCCEEDED", Records: 10}, "registered: –, rejected: –"},
	} {
		if got := barTitle(htmlBar{File: tc.f, Kind: "ok"}); !strings.Contains(got, tc.want) {
			t.Errorf("%s: got title %q, want it to contain %q", tc.f.Key, got, tc.want)
		}
	}
}

// TestWriteHTMLTenantOrder: the lanes and the table of files list the tenants that have a file
// (or a replay) first, then the idle ones, each part in the order given.
func TestWriteHTMLTenantOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	done := func(key string) FileReport {
		stop := t0.Add(time.Second)
		return FileReport{Key: key, ExecutionName: "exec-" + key, Status: "SUCCEEDED", UploadedAt: t0, StartedAt: &t0, StoppedAt: &stop}
	}
	replay := done("again.csv")
	replay.Replay = true
	rep := &Report{Tenants: map[string]*TenantReport{
		"acme": {}, "globex": {Files: []FileReport{done("注文.csv")}}, "hooli": {},
		"initech": {Replays: []FileReport{replay}}, "umbrella": {Files: []FileReport{done("b.csv")}},
	}}
	tests := []struct {
		name string
		ids  []string
		want []string
	}{
		{"idle tenants first in ids", []string{"acme", "globex", "hooli", "initech", "umbrella"}, []string{"globex", "initech", "umbrella", "acme", "hooli"}},
		{"the order given is kept in each part", []string{"umbrella", "hooli", "initech", "acme", "globex"}, []string{"umbrella", "initech", "globex", "hooli", "acme"}},
		{"a tenant without a report is idle", []string{"nobody", "globex"}, []string{"globex", "nobody"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteHTML(&buf, rep, tt.ids, t0.Add(2*time.Second)); err != nil {
				t.Fatal(err)
			}
			els, lanes := reportpage.Parse(t, buf.Bytes())
			if got, want := strings.Join(lanes.Tenants, ","), strings.Join(tt.want, ","); got != want {
				t.Errorf("lanes: got %s, want %s", got, want)
			}
			var rows []string
			for _, e := range els {
				if e.Name == "td" && e.HasClass("tenant") && (len(rows) == 0 || rows[len(rows)-1] != e.Text) {
					rows = append(rows, e.Text)
				}
			}
			var busy []string
			for _, id := range tt.want {
				if tr := rep.Tenants[id]; tr != nil && len(tr.Files)+len(tr.Replays) > 0 {
					busy = append(busy, id)
				}
			}
			if got, want := strings.Join(rows, ","), strings.Join(busy, ","); got != want {
				t.Errorf("table of files: got tenants %s, want %s", got, want)
			}
		})
	}
}

// TestWriteHTMLFontStack: the page's font stack names fonts that have Japanese glyphs on each
// desktop system (macOS, Linux, Windows) before the generic family, so a Japanese file name
// renders in a font meant for it rather than in whatever fallback the browser picks.
func TestWriteHTMLFontStack(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteHTML(&buf, &Report{Tenants: map[string]*TenantReport{}}, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	els, _ := reportpage.Parse(t, buf.Bytes())
	var body string
	for _, e := range els {
		if e.Name != "style" {
			continue
		}
		for _, rule := range strings.Split(e.Text, "}") {
			if sel, decl, ok := strings.Cut(rule, "{"); ok && strings.TrimSpace(sel) == "body" {
				body = decl
			}
		}
	}
	var families []string
	for _, d := range strings.Split(body, ";") {
		if p, v, ok := strings.Cut(d, ":"); ok && strings.TrimSpace(p) == "font" {
			// font: <size>/<line-height> <family>, <family>, ...
			_, list, _ := strings.Cut(strings.TrimSpace(v), " ")
			for _, f := range strings.Split(list, ",") {
				families = append(families, strings.Trim(strings.TrimSpace(f), `"`))
			}
		}
	}
	at := func(name string) int { return slices.Index(families, name) }
	generic := at("sans-serif")
	if generic != len(families)-1 {
		t.Fatalf("body font families: got %q, want sans-serif last", families)
	}
	for _, cjk := range []string{"Hiragino Sans", "Noto Sans CJK JP", "Yu Gothic", "Meiryo"} {
		if i := at(cjk); i < 0 || i > generic {
			t.Errorf("body font families: got %q, want %q before sans-serif", families, cjk)
		}
	}
}
