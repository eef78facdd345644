package localrun

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
)

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
// and the queue still holds messages (the head's, held by the controller, and any behind it). The
// latest started is the last upload started, or for a sequenced tenant, whose files start in the
// order of their names, the last start.
func halted(t *Tenant, tr *report.TenantReport) *report.Halt {
	if t.Policy() != pipeline.OnFailureHalt || tr.Queued == 0 {
		return nil
	}
	var last *report.FileReport
	for i := range tr.Files {
		if s := tr.Files[i].StartedAt; s != nil && (last == nil || !s.Before(*last.StartedAt)) {
			last = &tr.Files[i]
		}
	}
	if last == nil {
		return nil
	}
	switch last.Status {
	case "FAILED", "TIMED_OUT", "ABORTED":
		return &report.Halt{Key: last.Key, ExecutionName: last.ExecutionName, Status: last.Status, Error: last.Error, Cause: report.ReadableCause(last.Cause),
			ErrorType: report.CauseType(last.Error, last.Cause)}
	}
	return nil
}

// HaltedError ends a wait in which every tenant drained, halted or holds files for a missing
// number (TenantReport.Holding), and at least one halted or holds: each waits for an operator (or,
// for a held tenant, its missing file).
type HaltedError struct {
	Tenants []string
	Holding []string
}

func (e *HaltedError) Error() string {
	var parts []string
	if len(e.Tenants) > 0 {
		parts = append(parts, "halted: "+strings.Join(e.Tenants, ", "))
	}
	if len(e.Holding) > 0 {
		parts = append(parts, "holding files for a missing sequence number: "+strings.Join(e.Holding, ", "))
	}
	return strings.Join(parts, "; ") + " (every other tenant drained)"
}

// WaitOptions configure Wait.
type WaitOptions struct {
	// Interval between checks.
	Interval time.Duration
	// Heartbeat prints the progress line with what each tenant waits on at least this often, even
	// when nothing changed (0: only when the line changes).
	Heartbeat time.Duration
	// StopWhenHalted ends the wait when every tenant has drained, halted or holds files for a
	// missing number, with a *HaltedError when one has halted or holds.
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
		var rep *report.Report
		if w != nil || o.StopWhenHalted {
			rep, _ = r.Snapshot(ctx)
		}
		haltedIDs, holding := map[string]bool{}, map[string]bool{}
		if rep != nil {
			for _, id := range r.TenantIDs() {
				if rep.Tenants[id].Holding() {
					holding[id] = true
				}
				if h := rep.Tenants[id].Halted; h != nil {
					haltedIDs[id] = true
					if w != nil && !announced[id+"\x00"+h.ExecutionName] {
						announced[id+"\x00"+h.ExecutionName] = true
						report.WriteHalt(w, id, h)
					}
				}
			}
		}
		if w != nil && rep != nil {
			line := report.ProgressLine(rep, r.TenantIDs())
			switch {
			case line != last:
				fmt.Fprintf(w, "[%6.1fs] %s\n", time.Since(r.started).Seconds(), line)
				last, lastAt = line, time.Now()
			case o.Heartbeat > 0 && time.Since(lastAt) >= o.Heartbeat:
				if !report.Idle(rep) {
					fmt.Fprintf(w, "[%6.1fs] still working; waiting on: %s\n", time.Since(r.started).Seconds(), report.WaitingOn(rep, r.TenantIDs()))
				} else {
					fmt.Fprintf(w, "[%6.1fs] idle: every tenant drained; waiting for files\n", time.Since(r.started).Seconds())
				}
				lastAt = time.Now()
			}
		}
		var ok bool
		var err error
		if o.StopWhenHalted {
			waiting := maps.Clone(haltedIDs)
			maps.Copy(waiting, holding)
			ok, err = r.drained(ctx, waiting)
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
				if o.StopWhenHalted && len(haltedIDs)+len(holding) > 0 {
					return &HaltedError{Tenants: slices.Sorted(maps.Keys(haltedIDs)), Holding: slices.Sorted(maps.Keys(holding))}
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
