package localrun

import (
	"context"
	"fmt"
	"io"
	"sort"
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
	// errorType is the failure's Lambda error type (pipeline.FailureOf).
	errorType string
}

// Commands are the exact pipectl commands that release the tenant, as pipectl's own hints give
// them (ops.FailedFileCommands): skip, and redrive unless the file failed validation.
func (h *Halt) Commands(tenant string) []string {
	return ops.FailedFileCommands(tenant, pipeline.OnFailureHalt, h.ExecutionName, h.errorType)
}

// Policy is the tenant's onFailure: the controller's ON_FAILURE, else the TENANT variable's, else
// continue.
func (t *Tenant) Policy() string {
	if t.Controller != nil {
		for _, kv := range t.Controller.Env {
			if v, ok := strings.CutPrefix(kv, pipeline.EnvOnFailure+"="); ok && v != "" {
				return v
			}
		}
	}
	if p, _ := t.Config["onFailure"].(string); p != "" {
		return p
	}
	return pipeline.OnFailureContinue
}

// halted reports the file a halt tenant is stopped at: its latest started file ended in failure
// and the queue still holds messages (the head's, held by the controller, and any behind it).
func halted(t *Tenant, tr *TenantReport) *Halt {
	if t.Policy() != pipeline.OnFailureHalt || tr.Queued == 0 {
		return nil
	}
	var last *FileReport
	for i := range tr.Files {
		if tr.Files[i].StartedAt != nil {
			last = &tr.Files[i]
		}
	}
	if last == nil {
		return nil
	}
	switch last.Status {
	case "FAILED", "TIMED_OUT", "ABORTED":
		return &Halt{Key: last.Key, ExecutionName: last.ExecutionName, Status: last.Status, Error: last.Error, Cause: readableCause(last.Cause),
			errorType: causeType(last.Error, last.Cause)}
	}
	return nil
}

// HaltedError ends a wait in which every tenant drained or halted, and at least one halted.
type HaltedError struct{ Tenants []string }

func (e *HaltedError) Error() string {
	return "halted: " + strings.Join(e.Tenants, ", ") + " (every other tenant drained)"
}

// WaitOptions configure Wait.
type WaitOptions struct {
	// Interval between checks.
	Interval time.Duration
	// Heartbeat prints the progress line with what each tenant waits on at least this often, even
	// when nothing changed (0: only when the line changes).
	Heartbeat time.Duration
	// StopWhenHalted ends the wait when every tenant has drained or halted, with a *HaltedError
	// when one has halted.
	StopWhenHalted bool
	// UntilInterrupted keeps waiting (and printing) after the run drained, until ctx ends (--serve).
	UntilInterrupted bool
}

// WaitDrained waits until Drained holds twice in a row, printing progress to w every interval.
func (r *Run) WaitDrained(ctx context.Context, w io.Writer, interval time.Duration) error {
	return r.Wait(ctx, w, WaitOptions{Interval: interval})
}

// Wait waits until the run has drained (or, with StopWhenHalted, until every tenant drained or
// halted), as seen twice in a row. To w it prints the progress line when it changes and at each
// heartbeat, and each halt once, at once, with the pipectl commands that release it.
func (r *Run) Wait(ctx context.Context, w io.Writer, o WaitOptions) error {
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	streak := 0
	last, lastAt := "", time.Now()
	announced := map[string]bool{}
	for {
		var rep *Report
		if w != nil || o.StopWhenHalted {
			rep, _ = r.Snapshot(ctx)
		}
		haltedIDs := map[string]bool{}
		if rep != nil {
			for _, id := range r.TenantIDs() {
				if h := rep.Tenants[id].Halted; h != nil {
					haltedIDs[id] = true
					if w != nil && !announced[id+"\x00"+h.ExecutionName] {
						announced[id+"\x00"+h.ExecutionName] = true
						WriteHalt(w, id, h)
					}
				}
			}
		}
		if w != nil && rep != nil {
			line := ProgressLine(rep, r.TenantIDs())
			switch {
			case line != last:
				fmt.Fprintf(w, "[%6.1fs] %s\n", time.Since(r.started).Seconds(), line)
				last, lastAt = line, time.Now()
			case o.Heartbeat > 0 && time.Since(lastAt) >= o.Heartbeat:
				if !idle(rep) {
					fmt.Fprintf(w, "[%6.1fs] still working; waiting on: %s\n", time.Since(r.started).Seconds(), WaitingOn(rep, r.TenantIDs()))
				} else {
					fmt.Fprintf(w, "[%6.1fs] idle: every tenant drained; waiting for files\n", time.Since(r.started).Seconds())
				}
				lastAt = time.Now()
			}
		}
		var ok bool
		var err error
		if o.StopWhenHalted {
			ok, err = r.drained(ctx, haltedIDs)
		} else {
			ok, err = r.Drained(ctx)
		}
		if err != nil && ctx.Err() == nil {
			return err
		}
		if ok {
			if streak == 0 {
				r.mu.Lock()
				r.drainedAt = time.Now()
				r.mu.Unlock()
			}
			streak++
			if streak >= 2 && !o.UntilInterrupted {
				if len(haltedIDs) > 0 {
					ids := make([]string, 0, len(haltedIDs))
					for id := range haltedIDs {
						ids = append(ids, id)
					}
					sort.Strings(ids)
					return &HaltedError{Tenants: ids}
				}
				return nil
			}
		} else {
			streak = 0
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not drained: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// WriteHalt prints a halt and the commands that release the tenant.
func WriteHalt(w io.Writer, tenant string, h *Halt) {
	fmt.Fprintf(w, "HALTED %s at %s (execution %s, %s): %s: %s\n", tenant, h.Key, h.ExecutionName, h.Status, h.Error, h.Cause)
	io.WriteString(w, ops.ReleaseText("  ", h.Commands(tenant)))
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
func idle(rep *Report) bool {
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
					fmt.Fprintf(w, "%s %s: %s: %s\n", id, f.Key, f.Error, readableCause(f.Cause))
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
		for _, svc := range sortedKeys(rep.APICallsPer1000) {
			fmt.Fprintf(w, " %s %.1f", svc, rep.APICallsPer1000[svc])
		}
		fmt.Fprintln(w)
	}
	if len(rep.LambdaThrottles) > 0 {
		fmt.Fprintf(w, "lambda throttles (TooManyRequestsException):")
		for _, fn := range sortedKeys(rep.LambdaThrottles) {
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
