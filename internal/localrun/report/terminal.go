package report

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/termtable"
	"github.com/example/tenantpipeline/spec"
)

// Halt is the file a halt tenant stopped at: its failed execution holds the tenant until an
// operator redrives it or writes the skip marker (docs/controller.md).
type Halt struct {
	Key           string `json:"key"`
	ExecutionName string `json:"executionName"`
	Status        string `json:"status"`
	Error         string `json:"error"`
	Cause         string `json:"cause"`
	// ErrorType is the failure's Lambda error type (pipeline.FailureOf), not in report.json.
	ErrorType string `json:"-"`
}

// Commands are the exact pipectl commands that release the tenant, as pipectl's own hints give
// them (ops.FailedFileCommands): skip, and redrive unless the file failed validation.
func (h *Halt) Commands(tenant string) []string {
	return ops.FailedFileCommands(tenant, pipeline.OnFailureHalt, h.ExecutionName, h.ErrorType)
}

// WriteHalt prints a halt and the commands that release the tenant.
func WriteHalt(w io.Writer, tenant string, h *Halt) {
	fmt.Fprintf(w, "HALTED %s at %s (execution %s, %s): %s: %s\n", tenant, h.Key, h.ExecutionName, h.Status, h.Error, h.Cause)
	io.WriteString(w, ops.ReleaseText("  ", h.Commands(tenant)))
	fmt.Fprintf(w, "  (pipectl against a --serve run: docs/local-run.md; on AWS: docs/operations.md)\n")
}

// progressTenants is how many busy tenants the progress line and the heartbeat name, so that a
// line stays short with any number of tenants; the others are counted.
const progressTenants = 4

// ProgressLine is one line of live progress: the run's total (tenants, files done of those
// uploaded, running, waiting, failed and halted, records), then each tenant that is not idle
// (TenantReport.busy), at most progressTenants of them, in ids order.
func ProgressLine(rep *Report, ids []string) string {
	var all fileCounts
	var records int64
	tenants, idle, halted := 0, 0, 0
	var busy []string
	for _, id := range ids {
		tr := rep.Tenants[id]
		if tr == nil {
			continue
		}
		tenants++
		c := countFiles(tr)
		all.add(c)
		records += tr.records()
		if tr.Halted != nil {
			halted++
		}
		if !tr.busy() {
			idle++
			continue
		}
		s := fmt.Sprintf("%s %d/%d done%s", id, c.ended(), c.files, c.states())
		if tr.Halted != nil {
			s += " HALTED"
		}
		if q := tr.Sequence; q != nil && q.GapSince != nil {
			s += fmt.Sprintf(" (waits for %s)", q.Next)
		}
		busy = append(busy, fmt.Sprintf("%s, %d records%s", s, tr.records(), splitNote(tr)))
	}
	noun := "tenants"
	if tenants == 1 {
		noun = "tenant"
	}
	total := fmt.Sprintf("%d %s (%d idle): %d/%d files done%s", tenants, noun, idle, all.ended(), all.files, all.states())
	if halted > 0 {
		total += fmt.Sprintf(" %d HALTED", halted)
	}
	note := ""
	if rep.splitCounted() {
		note = " (Split's count)"
	}
	total += fmt.Sprintf(", %d records%s", records, note)
	return strings.Join(append([]string{total}, capped(busy)...), " | ")
}

// fileCounts are a tenant's (or the run's) files by state: a sequenced tenant's files may also be
// held ahead of their turn, or refused.
type fileCounts struct{ files, done, running, waiting, held, refused, failed int }

func countFiles(tr *TenantReport) fileCounts {
	c := fileCounts{files: len(tr.Files)}
	for _, f := range tr.Files {
		switch f.Status {
		case "SUCCEEDED":
			c.done++
		case "RUNNING":
			c.running++
		case "WAITING":
			c.waiting++
		case StatusHeld:
			c.held++
		case StatusRefused:
			c.refused++
		default:
			c.failed++
		}
	}
	return c
}

func (c *fileCounts) add(o fileCounts) {
	c.files, c.done, c.running, c.waiting = c.files+o.files, c.done+o.done, c.running+o.running, c.waiting+o.waiting
	c.held, c.refused, c.failed = c.held+o.held, c.refused+o.refused, c.failed+o.failed
}

// ended counts the files that will not run again: succeeded, failed or refused.
func (c fileCounts) ended() int { return c.done + c.failed + c.refused }

// states are the counts above 0 of running, waiting, held, refused and failed files.
func (c fileCounts) states() string {
	var s string
	for _, n := range []struct {
		n    int
		what string
	}{{c.running, "running"}, {c.waiting, "waiting"}, {c.held, "held"}, {c.refused, "refused"}, {c.failed, "failed"}} {
		if n.n > 0 {
			s += fmt.Sprintf(" %d %s", n.n, n.what)
		}
	}
	return s
}

// busy reports whether the tenant is not idle: it has a file running or waiting, a message
// queued, or it is halted.
func (tr *TenantReport) busy() bool {
	if tr.Halted != nil || tr.Queued > 0 {
		return true
	}
	for _, f := range tr.Files {
		if f.Status == "RUNNING" || f.Status == "WAITING" || f.Status == StatusHeld {
			return true
		}
	}
	return false
}

// capped keeps the first progressTenants parts and counts the rest.
func capped(parts []string) []string {
	if len(parts) <= progressTenants {
		return parts
	}
	return append(parts[:progressTenants:progressTenants], fmt.Sprintf("%d more busy", len(parts)-progressTenants))
}

// splitNote marks a tenant's record count as Split's when the harness could not see its files
// registered (an external endpoint).
func splitNote(tr *TenantReport) string {
	for _, f := range tr.Files {
		if f.RecordsCountedBy != "" {
			return " (Split's count)"
		}
	}
	return ""
}

// Idle reports whether no tenant has a message queued, a file running or held, or a halt.
func Idle(rep *Report) bool {
	for _, tr := range rep.Tenants {
		if tr.Halted != nil || tr.Queued > 0 {
			return false
		}
		for _, f := range tr.Files {
			if f.Status == "RUNNING" || f.Status == StatusHeld {
				return false
			}
		}
	}
	return true
}

// WaitingOn says what each busy tenant waits on (at most progressTenants of them, in ids order):
// its running file, an operator (halted), the controller (messages queued, nothing running), or
// the events of files uploaded but not yet queued; then how many tenants are idle.
func WaitingOn(rep *Report, ids []string) string {
	var parts []string
	idle := 0
	for _, id := range ids {
		tr := rep.Tenants[id]
		if tr == nil {
			continue
		}
		var running *FileReport
		for i := range tr.Files {
			if tr.Files[i].Status == "RUNNING" {
				running = &tr.Files[i]
			}
		}
		switch {
		case tr.Halted != nil:
			parts = append(parts, fmt.Sprintf("%s an operator (halted at %s)", id, tr.Halted.Key))
		case running == nil && tr.Sequence != nil && tr.Sequence.GapSince != nil:
			parts = append(parts, fmt.Sprintf("%s its missing number %s (%s; onGap %s)", id, tr.Sequence.Next, tr.Sequence.heldText(), tr.Sequence.OnGap))
		case running != nil:
			parts = append(parts, fmt.Sprintf("%s %s, running %.0fs", id, running.Key, time.Since(*running.StartedAt).Seconds()))
		case tr.Queued > 0:
			parts = append(parts, fmt.Sprintf("%s the controller (%d queued, none running)", id, tr.Queued))
		case tr.busy():
			parts = append(parts, fmt.Sprintf("%s the upload events of its waiting files", id))
		default:
			idle++
		}
	}
	parts = capped(parts)
	if idle > 0 {
		parts = append(parts, fmt.Sprintf("%d idle", idle))
	}
	return strings.Join(parts, " | ")
}

// WriteSummary prints the summary table of a report.
func WriteSummary(w io.Writer, rep *Report, ids []string) {
	rows := [][]string{{"TENANT", "FILE", "STATUS", "RECORDS", "HISTORY", "PAYLOAD B", "SECONDS", "ERROR"}}
	for _, id := range ids {
		tr := rep.Tenants[id]
		if tr == nil {
			continue
		}
		for _, f := range append(append([]FileReport(nil), tr.Files...), tr.Replays...) {
			rows = append(rows, summaryRows(id, f)...)
		}
	}
	io.WriteString(w, termtable.Render(rows))
	fmt.Fprintln(w, "HISTORY: events in the file execution's history (+N×≤M: N segment executions, the largest with M events); each execution may hold 25,000.")
	if rep.operatorRuns() {
		fmt.Fprintln(w, "RUNS: a redriven file has a row per run, its own then each redrive's, with the records registered and the seconds of that run alone (–: not known per run); a replay is a run of its own, after the tenant's files.")
	}
	if rep.splitCounted() {
		fmt.Fprintln(w, "RECORDS: the records Split counted in each file (–: no count, the file did not succeed): the run registered to an external endpoint, which the harness cannot see.")
	}
	// Causes name the file and line, never record contents, so they are safe to show.
	for _, id := range ids {
		if tr := rep.Tenants[id]; tr != nil {
			for _, f := range append(append([]FileReport(nil), tr.Files...), tr.Replays...) {
				if f.Cause != "" {
					fmt.Fprintf(w, "%s %s: %s: %s\n", id, f.Key, f.Error, ReadableCause(f.Cause))
				}
			}
		}
	}
	for _, id := range ids {
		if tr := rep.Tenants[id]; tr != nil && tr.Halted != nil {
			WriteHalt(w, id, tr.Halted)
		}
	}
	for _, id := range ids {
		if tr := rep.Tenants[id]; tr != nil && tr.Sequence != nil {
			writeSequence(w, id, tr)
		}
	}
	perSecond := ""
	if rep.splitCounted() {
		perSecond = " (Split's count)"
	}
	// The gap in its two parts: a long admission wait is the core system's limit at work, not a
	// slow wake-up, and one mean over both would read as the latter.
	wake, adm := rep.InterFileGapWakeUpSecond, rep.InterFileGapAdmissionSecond
	fmt.Fprintf(w, "\ninter-file gap (n=%d): wake-up mean %.2fs p95 %.2fs max %.2fs; admission wait mean %.2fs p95 %.2fs max %.2fs; wall %.1fs; %.0f records/s%s\n",
		wake.N, wake.Mean, wake.P95, wake.Max, adm.Mean, adm.P95, adm.Max, rep.WallSeconds, rep.RecordsPerSecond, perSecond)
	if len(rep.APICallsPer1000) > 0 {
		fmt.Fprintf(w, "API calls per 1,000 records:")
		for _, svc := range slices.Sorted(maps.Keys(rep.APICallsPer1000)) {
			fmt.Fprintf(w, " %s %.1f", svc, rep.APICallsPer1000[svc])
		}
		fmt.Fprintln(w)
	}
	if len(rep.LambdaThrottles) > 0 {
		fmt.Fprintf(w, "lambda throttles (TooManyRequestsException):")
		for _, fn := range slices.Sorted(maps.Keys(rep.LambdaThrottles)) {
			fmt.Fprintf(w, " %s %d", fn, rep.LambdaThrottles[fn])
		}
		fmt.Fprintln(w)
	}
	if rep.SinkMaxInFlight > 0 || rep.Sink429 > 0 {
		fmt.Fprintf(w, "sink: at most %d requests in flight, %d answered 429\n", rep.SinkMaxInFlight, rep.Sink429)
	}
	switch {
	case len(rep.Violations) > 0:
		fmt.Fprintf(w, "invariants: %d VIOLATED\n", len(rep.Violations))
		for _, v := range rep.Violations {
			fmt.Fprintln(w, "  - "+v)
		}
	case rep.ExternalEndpoint:
		fmt.Fprintln(w, "invariants: OK (file order, one execution at a time); record checks skipped: external endpoint")
	default:
		fmt.Fprintln(w, "invariants: OK (file order, record order, exactly once by idempotency key, one file registering at a time)")
	}
}

// summaryRows are a file's rows of the summary table: one, or for a redriven file one per run,
// each with its own status, records, seconds and error. The execution's history and payload are
// the file's row's: a redrive goes on in the same execution.
func summaryRows(tenant string, f FileReport) [][]string {
	hist := fmt.Sprint(f.HistoryEvents)
	if f.SegmentExecutions > 0 {
		hist += fmt.Sprintf(" (+%d×≤%d)", f.SegmentExecutions, f.SegmentHistoryEventsMax)
	}
	key := f.Key
	if f.Replay {
		key += " (replay)"
	}
	if len(f.Runs) == 0 {
		secs := "-"
		if f.StartedAt != nil && f.StoppedAt != nil {
			secs = fmt.Sprintf("%.2f", f.StoppedAt.Sub(*f.StartedAt).Seconds())
		}
		errText := f.Error
		if f.Refusal != "" {
			errText = "refused: " + f.Refusal
		}
		return [][]string{{tenant, key, f.Status, f.RecordsText(), hist, fmt.Sprint(f.MaxPayloadBytes), secs, errText}}
	}
	known := false
	for _, run := range f.Runs {
		known = known || run.Records != nil
	}
	var rows [][]string
	for i, run := range f.Runs {
		secs := "-"
		if run.StoppedAt != nil {
			secs = fmt.Sprintf("%.2f", run.StoppedAt.Sub(run.StartedAt).Seconds())
		}
		records := CountText(run.Records)
		if !known && i == 0 {
			records = f.RecordsText() // the file's, as no run's own is known
		}
		if i == 0 {
			rows = append(rows, []string{tenant, key, run.Status, records, hist, fmt.Sprint(f.MaxPayloadBytes), secs, run.Error})
			continue
		}
		rows = append(rows, []string{tenant, fmt.Sprintf("%s (redrive %d)", key, run.Redrive), run.Status, records, "-", "-", secs, run.Error})
	}
	return rows
}

// operatorRuns reports whether some file was redriven or replayed.
func (rep *Report) operatorRuns() bool {
	for _, tr := range rep.Tenants {
		if len(tr.Replays) > 0 {
			return true
		}
		for _, f := range tr.Files {
			if len(f.Runs) > 0 {
				return true
			}
		}
	}
	return false
}

// heldText is "N held from V", or "none held".
func (q *SequenceReport) heldText() string {
	if q.Held == 0 {
		return "none held"
	}
	return fmt.Sprintf("%d held from %s", q.Held, q.HeldFirst)
}

// writeSequence prints a sequenced tenant's place: the next value, its held files and its gap,
// and with onGap "hold" how the gap ends.
func writeSequence(w io.Writer, tenant string, tr *TenantReport) {
	q := tr.Sequence
	next := "next " + q.Next
	if q.Kind != spec.SequenceNumber {
		next = "last name " + cmp.Or(q.Next, "(none yet)")
	}
	refused := countFiles(tr).refused
	fmt.Fprintf(w, "sequence %s: %s, %s, %d refused", tenant, next, q.heldText(), refused)
	if q.GapSince != nil {
		fmt.Fprintf(w, "; waiting for %s since %s (onGap %s)", q.Next, q.GapSince.UTC().Format("15:04:05"), q.OnGap)
	}
	fmt.Fprintln(w)
	if q.GapSince != nil && q.OnGap == spec.OnGapHold {
		fmt.Fprintf(w, "  the held files run once %s arrives, or after: pipectl sequence skip %s %s --reason \"<why it will not come>\"\n", q.Next, tenant, q.Next)
	}
}
