package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/termtable"
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
	fmt.Fprintf(w, "  the tenant waits for an operator; nothing of it runs until one of:\n")
	for _, c := range h.Commands(tenant) {
		fmt.Fprintf(w, "    %s\n", c)
	}
	fmt.Fprintf(w, "  (pipectl against a --serve run: docs/local-run.md; on AWS: docs/operations.md)\n")
}

// ProgressLine is one line of live progress: per tenant, files done/total, waiting, and records.
func ProgressLine(rep *Report, ids []string) string {
	var parts []string
	for _, id := range ids {
		tr := rep.Tenants[id]
		if tr == nil || len(tr.Files) == 0 {
			continue
		}
		done, waiting, running, failed := 0, 0, 0, 0
		for _, f := range tr.Files {
			switch f.Status {
			case "SUCCEEDED":
				done++
			case "RUNNING":
				running++
			case "WAITING":
				waiting++
			default:
				failed++
			}
		}
		s := fmt.Sprintf("%s %d/%d done", id, done+failed, len(tr.Files))
		if running > 0 {
			s += fmt.Sprintf(" %d running", running)
		}
		if waiting > 0 {
			s += fmt.Sprintf(" %d waiting", waiting)
		}
		if failed > 0 {
			s += fmt.Sprintf(" %d failed", failed)
		}
		if tr.Halted != nil {
			s += " HALTED"
		}
		parts = append(parts, fmt.Sprintf("%s, %d records%s", s, tr.records(), splitNote(tr)))
	}
	return strings.Join(parts, " | ")
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

// idle reports whether no tenant has a message queued, a file running or a halt.
func Idle(rep *Report) bool {
	for _, tr := range rep.Tenants {
		if tr.Halted != nil || tr.Queued > 0 {
			return false
		}
		for _, f := range tr.Files {
			if f.Status == "RUNNING" {
				return false
			}
		}
	}
	return true
}

// WaitingOn says, per tenant, what it waits on: its running file, an operator (halted), the
// controller (messages queued, nothing running), or nothing.
func WaitingOn(rep *Report, ids []string) string {
	var parts []string
	for _, id := range ids {
		tr := rep.Tenants[id]
		if tr == nil {
			continue
		}
		var s string
		var running *FileReport
		for i := range tr.Files {
			if tr.Files[i].Status == "RUNNING" {
				running = &tr.Files[i]
			}
		}
		switch {
		case tr.Halted != nil:
			s = fmt.Sprintf("an operator (halted at %s)", tr.Halted.Key)
		case running != nil:
			s = fmt.Sprintf("%s, running %.0fs", running.Key, time.Since(*running.StartedAt).Seconds())
		case tr.Queued > 0:
			s = fmt.Sprintf("the controller (%d queued, none running)", tr.Queued)
		default:
			s = "nothing (idle)"
		}
		parts = append(parts, id+" "+s)
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
		for _, f := range tr.Files {
			secs := "-"
			if f.StartedAt != nil && f.StoppedAt != nil {
				secs = fmt.Sprintf("%.2f", f.StoppedAt.Sub(*f.StartedAt).Seconds())
			}
			hist := fmt.Sprint(f.HistoryEvents)
			if f.SegmentExecutions > 0 {
				hist += fmt.Sprintf(" (+%d×≤%d)", f.SegmentExecutions, f.SegmentHistoryEventsMax)
			}
			rows = append(rows, []string{id, f.Key, f.Status, f.RecordsText(), hist, fmt.Sprint(f.MaxPayloadBytes), secs, f.Error})
		}
	}
	io.WriteString(w, termtable.Render(rows))
	fmt.Fprintln(w, "HISTORY: events in the file execution's history (+N×≤M: N segment executions, the largest with M events); each execution may hold 25,000.")
	if rep.splitCounted() {
		fmt.Fprintln(w, "RECORDS: the records Split counted in each file (–: no count, the file did not succeed): the run registered to an external endpoint, which the harness cannot see.")
	}
	// Causes name the file and line, never record contents, so they are safe to show.
	for _, id := range ids {
		if tr := rep.Tenants[id]; tr != nil {
			for _, f := range tr.Files {
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
	perSecond := ""
	if rep.splitCounted() {
		perSecond = " (Split's count)"
	}
	fmt.Fprintf(w, "\ninter-file gap: mean %.2fs p95 %.2fs max %.2fs (n=%d); wall %.1fs; %.0f records/s%s\n",
		rep.InterFileGapSecond.Mean, rep.InterFileGapSecond.P95, rep.InterFileGapSecond.Max, rep.InterFileGapSecond.N, rep.WallSeconds, rep.RecordsPerSecond, perSecond)
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
