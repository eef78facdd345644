package report

import (
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/svgchart"
)

// The HTML report is a picture of one run: each tenant a lane on a shared time axis, each execution
// of a file a bar, coloured by what became of it. A file's first run is drawn from its upload to its
// stop, queued time apart from running time; each redrive and replay is a bar of its own, from its
// start (an operator's, not an upload) to its stop. Under the lanes a table lists every file with
// its counts, rejections marked. It is one file with its CSS, script and charts inline, so it opens
// without a network.
// html/template escapes every key, error and cause, which may hold anything (<, quotes, Japanese).

//go:embed html.tmpl
var reportHTMLSource string

var reportHTML = template.Must(template.New("report").Parse(reportHTMLSource))

// Bar kinds, in the order a file's kind is decided: a file that is several of these shows the
// first. Each is a CSS class (kind-<name>) and a legend entry.
const (
	kindHalted    = "halted"    // the failed file a halt tenant is stopped at
	kindSkipped   = "skipped"   // failed, then skipped by an operator
	kindFailed    = "failed"    // FAILED, TIMED_OUT or ABORTED
	kindReplayed  = "replayed"  // a replay's execution
	kindRedriven  = "redriven"  // redriven at least once
	kindRunning   = "running"   // still running when the report was written
	kindRefused   = "refused"   // a sequenced tenant's file refused by the controller: never to run
	kindHeld      = "held"      // a sequenced tenant's file held ahead of its turn
	kindWaiting   = "waiting"   // no execution yet
	kindSucceeded = "succeeded" // none of the above
)

var legend = []struct{ Kind, Text string }{
	{kindSucceeded, "succeeded"}, {kindRunning, "running"}, {kindFailed, "failed"}, {kindHalted, "halted (waits for an operator)"},
	{kindSkipped, "skipped by an operator"}, {kindReplayed, "replayed"}, {kindRedriven, "redriven"},
	{kindHeld, "held ahead of its turn (sequence)"}, {kindRefused, "refused (sequence: unmatched, duplicate or late)"},
}

// fileKind says what became of a file, for its colour.
func fileKind(f FileReport, halt *Halt) string {
	switch {
	case halt != nil && f.ExecutionName != "" && f.ExecutionName == halt.ExecutionName && !f.Replay:
		return kindHalted
	case f.Skipped:
		return kindSkipped
	case f.Status == "FAILED" || f.Status == "TIMED_OUT" || f.Status == "ABORTED":
		return kindFailed
	case f.Replay:
		return kindReplayed
	case f.RedriveCount > 0:
		return kindRedriven
	case f.Status == "RUNNING":
		return kindRunning
	case f.Status == StatusRefused:
		return kindRefused
	case f.Status == StatusHeld:
		return kindHeld
	case f.Status == "WAITING" || f.StartedAt == nil:
		return kindWaiting
	}
	return kindSucceeded
}

// Lane geometry in pixels: the running track on top, then one thin track per file queued at once.
const (
	runTop       = 6
	runHeight    = 22
	queuedTop    = runTop + runHeight + 5
	queuedStride = 6
)

type htmlReport struct {
	Title      string
	Origin     string // the first upload, UTC
	SpanMs     int64
	Ticks      []htmlTick
	Lanes      []htmlLane
	Legend     []struct{ Kind, Text string }
	Gaps       []htmlGapRow
	GapChart   template.HTML
	Files      int
	Records    int64
	Wall       string
	PerSecond  string
	Violations []string
	External   bool
	// SplitCounted is true when records are Split's counts: the run registered to an external
	// endpoint, which the harness cannot see.
	SplitCounted bool
	// FileRows are the table of files: each tenant's files then its replays, tenants in lane order.
	FileRows []htmlFileRow
	// Breakers are the core systems whose breaker changed during the run, by name (breakerRows).
	Breakers []htmlBreakerRow
}

// htmlFileRow is one file (or replay) of the table of files, with its counts as printed: "–" while
// the file has no summary (FileReport.Registered).
type htmlFileRow struct {
	Tenant, Key, Execution, Status, Kind string
	// Sequence is the file's value in its tenant's sequence, Refusal why it was refused; "" if none.
	Sequence, Refusal                 string
	Replay                            bool
	Records                           string
	SplitCounted                      bool // Records is Split's count
	Registered, Rejected, Unprocessed string
	// SomeRejected and SomeUnprocessed mark a count above 0, which the page highlights.
	SomeRejected, SomeUnprocessed bool
}

// fileRow is the row of f in the table of files.
func fileRow(tenant string, f FileReport, halt *Halt) htmlFileRow {
	return htmlFileRow{
		Tenant: tenant, Key: f.Key, Execution: orDash(f.ExecutionName), Status: f.Status, Kind: fileKind(f, halt), Replay: f.Replay,
		Sequence: f.Sequence, Refusal: f.Refusal,
		Records: f.RecordsText(), SplitCounted: f.RecordsCountedBy == "split",
		Registered: CountText(f.Registered), Rejected: CountText(f.Rejected), Unprocessed: CountText(f.Unprocessed),
		SomeRejected: positive(f.Rejected), SomeUnprocessed: positive(f.Unprocessed),
	}
}

func positive(n *int64) bool { return n != nil && *n > 0 }

type htmlTick struct {
	Left  string // CSS percentage
	Label string
}

type htmlLane struct {
	Tenant string
	// Pool is the pool of a pooled tenant; a silo tenant's lane is shown as before.
	Pool   string
	Height int
	// Files counts the tenant's files and replays; Bars has one more per redrive.
	Files  int
	Bars   []htmlBar
	Gaps   []htmlGap
	Halted bool
	// Held is the files the tenant holds ahead of their turn, and Awaits the number it waits
	// for while a gap lasts ("" without one); a tenant without a sequence has neither.
	Held   int
	Awaits string
}

type htmlBar struct {
	// File is the file as this bar's execution left it: a redrive's bar has the redrive's status
	// and times.
	File    FileReport
	Kind    string
	Started bool
	// Run is 0 for the file's own run, n for its n-th redrive.
	Run int
	// StartMs is the upload (a replay's start), RunStartMs the execution's start and StopMs its
	// stop (or the report's end), in ms from the first upload.
	StartMs, RunStartMs, StopMs int64
	// Left and Width place the bar in its lane; the others place its parts in the bar.
	Left, Width, QueuedWidth, QueuedTop, RunLeft, RunWidth string
	// AdmissionLeft and AdmissionWidth place the admission wait, the end of the queued part
	// (Admission is "" when the file did not wait for admission).
	AdmissionLeft, AdmissionWidth string
	// Title is the hover text; Queued, Admission and Running are durations as printed; Cause is readable.
	Title, Queued, Admission, Running, Cause string
	// Registered and Rejected are the file's counts as printed ("–" when unknown); Unprocessed is
	// "" unless some records were never sent.
	Registered, Rejected, Unprocessed string
}

type htmlGap struct {
	Left, Width string
	Seconds     string
}

type htmlGapRow struct {
	Tenant              string
	N                   int
	Min, Mean, P95, Max string
	Overall             bool
}

// HTMLPath is where the HTML report of the JSON report at path goes: beside it, with .json
// replaced by .html.
func HTMLPath(path string) string {
	if ext := filepath.Ext(path); strings.EqualFold(ext, ".json") {
		path = strings.TrimSuffix(path, ext)
	}
	return path + ".html"
}

// WriteHTML writes the HTML report of rep to w, with the tenants' lanes in the order of ids,
// those with files before those without (withFilesFirst). A file still waiting or running is
// drawn up to now.
func WriteHTML(w io.Writer, rep *Report, ids []string, now time.Time) error {
	return reportHTML.Execute(w, buildHTMLReport(rep, withFilesFirst(rep, ids), now))
}

// withFilesFirst is ids with the tenants that have a file or a replay first, then the idle ones,
// each part in the order of ids: a run that fed a few tenants of many shows their lanes at the
// top, not below a page of empty ones.
func withFilesFirst(rep *Report, ids []string) []string {
	var busy, idle []string
	for _, id := range ids {
		if tr := rep.Tenants[id]; tr != nil && len(tr.Files)+len(tr.Replays) > 0 {
			busy = append(busy, id)
		} else {
			idle = append(idle, id)
		}
	}
	return append(busy, idle...)
}

func buildHTMLReport(rep *Report, ids []string, now time.Time) htmlReport {
	var origin, end time.Time
	see := func(t time.Time) {
		if origin.IsZero() || t.Before(origin) {
			origin = t
		}
		if t.After(end) {
			end = t
		}
	}
	open := false
	for _, id := range ids {
		tr := rep.Tenants[id]
		if tr == nil {
			continue
		}
		for _, f := range append(append([]FileReport(nil), tr.Files...), tr.Replays...) {
			see(f.UploadedAt)
			if f.StartedAt != nil {
				see(*f.StartedAt)
			}
			if f.StoppedAt != nil {
				see(*f.StoppedAt)
			} else {
				open = true
			}
		}
	}
	if open && now.After(end) {
		end = now
	}
	if origin.IsZero() {
		origin, end = now, now
	}
	span := max(end.Sub(origin), time.Millisecond)
	ms := func(t time.Time) int64 { return t.Sub(origin).Milliseconds() }
	pct := func(d time.Duration, of time.Duration) string {
		return fmt.Sprintf("%.4f%%", 100*float64(d)/float64(max(of, time.Nanosecond)))
	}

	out := htmlReport{Breakers: breakerRows(rep, origin),
		Origin: origin.UTC().Format("2006-01-02 15:04:05.000 UTC"), SpanMs: span.Milliseconds(), Legend: legend,
		Wall: fmt.Sprintf("%.1f s", rep.WallSeconds), PerSecond: fmt.Sprintf("%.0f", rep.RecordsPerSecond),
		Violations: rep.Violations, External: rep.ExternalEndpoint,
	}
	step := niceSeconds(span.Seconds() / 8)
	for s := 0.0; s <= span.Seconds()+step/1000; s += step {
		out.Ticks = append(out.Ticks, htmlTick{Left: pct(time.Duration(s*float64(time.Second)), span), Label: tickSeconds(s, step)})
	}

	var series []svgchart.Series
	var all []float64
	for _, id := range ids {
		lane := htmlLane{Tenant: id}
		tr := rep.Tenants[id]
		if tr == nil {
			tr = &TenantReport{}
		}
		lane.Halted = tr.Halted != nil
		if q := tr.Sequence; q != nil {
			lane.Held = q.Held
			if q.GapSince != nil {
				lane.Awaits = q.Next
			}
		}
		if tr.Tier == TierPool {
			lane.Pool = cmp.Or(tr.Pool, "-")
		}
		files := append(append([]FileReport(nil), tr.Files...), tr.Replays...)
		for _, f := range files {
			out.FileRows = append(out.FileRows, fileRow(id, f, tr.Halted))
		}
		out.Files += len(files)
		lane.Files = len(files)
		out.Records += tr.records()
		segs := barRuns(files, tr.Halted)
		runs := make([]FileReport, len(segs))
		for i, sg := range segs {
			runs[i] = sg.file
		}
		tracks := queuedTracks(runs, end)
		for i, sg := range segs {
			f := sg.file
			stop := end
			if f.StoppedAt != nil {
				stop = *f.StoppedAt
			}
			runStart := stop
			if f.StartedAt != nil {
				runStart = *f.StartedAt
			}
			whole := stop.Sub(f.UploadedAt)
			b := htmlBar{
				File: f, Kind: fileKind(f, sg.halt), Started: f.StartedAt != nil, Run: sg.run,
				StartMs: ms(f.UploadedAt), RunStartMs: ms(runStart), StopMs: ms(stop),
				Left: pct(f.UploadedAt.Sub(origin), span), Width: pct(whole, span),
				QueuedWidth: pct(runStart.Sub(f.UploadedAt), whole), RunLeft: pct(runStart.Sub(f.UploadedAt), whole),
				RunWidth:  pct(stop.Sub(runStart), whole),
				QueuedTop: fmt.Sprintf("%dpx", queuedTop+tracks[i]*queuedStride),
				Queued:    seconds(runStart.Sub(f.UploadedAt)), Running: "-",
				Cause:      ReadableCause(f.Cause),
				Registered: CountText(f.Registered), Rejected: CountText(f.Rejected),
			}
			if positive(f.Unprocessed) {
				b.Unprocessed = CountText(f.Unprocessed)
			}
			if f.StartedAt != nil {
				b.Running = seconds(stop.Sub(runStart))
			}
			if f.AdmissionWaitSeconds != nil && *f.AdmissionWaitSeconds > 0 {
				// The wait ends at the start (or, still waiting, at the report's end); it is part
				// of the queued time, never longer.
				queued := runStart.Sub(f.UploadedAt)
				wait := min(time.Duration(*f.AdmissionWaitSeconds*float64(time.Second)), queued)
				b.AdmissionLeft, b.AdmissionWidth = pct(queued-wait, whole), pct(wait, whole)
				b.Admission = seconds(time.Duration(*f.AdmissionWaitSeconds * float64(time.Second)))
			}
			if f.Replay {
				b.Queued = "- (a replay: queued as a control message)"
			}
			if sg.run > 0 {
				b.Queued = "- (a redrive: started by an operator)"
			}
			b.Title = barTitle(b)
			lane.Bars = append(lane.Bars, b)
			lane.Height = max(lane.Height, queuedTop+(tracks[i]+1)*queuedStride+2)
		}
		// The gaps drawn are the ones counted (TenantReport.gapSpans).
		for _, g := range tr.gapSpans() {
			lane.Gaps = append(lane.Gaps, htmlGap{
				Left: pct(g.from.Sub(origin), span), Width: pct(g.to.Sub(g.from), span), Seconds: seconds(g.to.Sub(g.from)),
			})
		}
		lane.Height = max(lane.Height, queuedTop+queuedStride+2)
		out.Lanes = append(out.Lanes, lane)

		gaps := tr.Gaps()
		all = append(all, gaps...)
		out.Gaps = append(out.Gaps, gapRow(id, gaps, false))
		if len(gaps) > 0 {
			series = append(series, svgchart.Series{Label: id, Values: gaps})
		}
	}
	out.Gaps = append(out.Gaps, gapRow("all tenants", all, true))
	series = append(series, svgchart.Series{Label: "all tenants", Values: all})
	if len(all) > 0 {
		// svgchart escapes every label itself, so its document is safe to inline.
		out.GapChart = template.HTML(svgchart.StripChart{Title: "Distribution (log scale)", Unit: "s", Log: true, Series: series,
			Note: "from the stop of the execution a waiting file followed to the file's start"}.SVG())
	}
	out.Title = fmt.Sprintf("Local run: %d tenants, %d files, %d records", len(ids), out.Files, out.Records)
	if rep.splitCounted() {
		out.Title += " (Split's count)"
		out.SplitCounted = true
	}
	return out
}

// barRun is one bar: a file as one of its executions left it, and the halt that can colour it.
type barRun struct {
	file FileReport
	run  int
	halt *Halt
}

// barRuns splits each redriven file into its runs (FileReport.Runs): the first keeps the file's
// upload and admission wait, a redrive starts with no queued time, each run shows the records
// registered during it when they are known (ExecutionRun.Records), an earlier run shows its own
// error and no summary counts (the file's are its last run's summary), and only the last run can be the
// one its tenant is halted at or an operator skipped. Other files are one bar each.
func barRuns(files []FileReport, halt *Halt) []barRun {
	var out []barRun
	for _, f := range files {
		if len(f.Runs) == 0 {
			out = append(out, barRun{file: f, halt: halt})
			continue
		}
		for n, run := range f.Runs {
			b := f
			b.Status, b.StartedAt, b.StoppedAt, b.RedriveCount = run.Status, &run.StartedAt, run.StoppedAt, run.Redrive
			b.Runs = nil
			if run.Records != nil {
				b.Records = *run.Records // the run's own, not the file's over every run
			}
			h := halt
			if n > 0 {
				b.UploadedAt, b.AdmissionWaitSeconds = run.StartedAt, nil
			}
			if n < len(f.Runs)-1 {
				b.Skipped, b.Error, b.Cause, h = false, run.Error, run.Cause, nil
				b.Registered, b.Rejected, b.Unprocessed = nil, nil, nil
			}
			out = append(out, barRun{file: b, run: run.Redrive, halt: h})
		}
	}
	return out
}

// queuedTracks gives each file the lowest thin track free when it was uploaded, so files queued at
// the same time are drawn one under the other instead of on top of each other.
func queuedTracks(files []FileReport, end time.Time) []int {
	order := make([]int, len(files))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return files[order[a]].UploadedAt.Before(files[order[b]].UploadedAt) })
	tracks := make([]int, len(files))
	var busyUntil []time.Time
	for _, i := range order {
		f := files[i]
		until := end
		if f.StartedAt != nil {
			until = *f.StartedAt
		}
		t := 0
		for t < len(busyUntil) && busyUntil[t].After(f.UploadedAt) {
			t++
		}
		if t == len(busyUntil) {
			busyUntil = append(busyUntil, time.Time{})
		}
		busyUntil[t] = until
		tracks[i] = t
	}
	return tracks
}

func gapRow(tenant string, gaps []float64, overall bool) htmlGapRow {
	st := svgchart.Summarize(gaps)
	row := htmlGapRow{Tenant: tenant, N: st.N, Overall: overall, Min: "-", Mean: "-", P95: "-", Max: "-"}
	if st.N > 0 {
		row.Min, row.Mean, row.P95, row.Max = fmt.Sprintf("%.3f s", st.Min), fmt.Sprintf("%.3f s", st.Mean), fmt.Sprintf("%.3f s", st.P95), fmt.Sprintf("%.3f s", st.Max)
	}
	return row
}

// barTitle is the hover text of a bar: every detail, one per line.
func barTitle(b htmlBar) string {
	f := b.File
	status := f.Status
	if f.Refusal != "" {
		status += ", " + f.Refusal
	}
	lines := []string{f.Key, "execution: " + orDash(f.ExecutionName), "status: " + status + " (" + b.Kind + ")",
		"queued: " + b.Queued + ", running: " + b.Running, "records: " + f.RecordsText(),
		"registered: " + CountText(f.Registered) + ", rejected: " + CountText(f.Rejected)}
	if positive(f.Unprocessed) {
		lines[5] += ", unprocessed: " + CountText(f.Unprocessed)
	}
	if b.Admission != "" {
		lines = append(lines, "admission wait: "+b.Admission+" (of the queued time)")
	}
	if f.RecordsCountedBy == "split" {
		lines[4] += " (Split's count)"
	}
	if b.Run > 0 {
		lines = append(lines, fmt.Sprintf("redrive %d", b.Run))
	} else if f.RedriveCount > 0 {
		lines = append(lines, fmt.Sprintf("redriven: %d time(s)", f.RedriveCount))
	}
	if f.Error != "" {
		lines = append(lines, "error: "+f.Error)
	}
	if b.Cause != "" {
		lines = append(lines, "cause: "+b.Cause)
	}
	return strings.Join(lines, "\n")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

// niceSeconds rounds x up to 1, 2 or 5 times a power of ten.
func niceSeconds(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// tickSeconds labels a tick with as many decimals as the step needs.
func tickSeconds(s, step float64) string {
	decimals := max(0, int(math.Ceil(-math.Log10(step)+1e-9)))
	return fmt.Sprintf("%.*f s", decimals, s)
}
