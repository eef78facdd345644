package localrun

import (
	"context"
	"fmt"
	"io"
	"sort"
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
// and the queue still holds messages (the head's, held by the controller, and any behind it).
func halted(t *Tenant, tr *report.TenantReport) *report.Halt {
	if t.Policy() != pipeline.OnFailureHalt || tr.Queued == 0 {
		return nil
	}
	var last *report.FileReport
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
		return &report.Halt{Key: last.Key, ExecutionName: last.ExecutionName, Status: last.Status, Error: last.Error, Cause: report.ReadableCause(last.Cause),
			ErrorType: report.CauseType(last.Error, last.Cause)}
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
		var rep *report.Report
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
