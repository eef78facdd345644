//go:build figures

package localrun

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report"
)

func measureControllerCalls(t *testing.T, r *Run, rep *report.Report) controllerCalls {
	t.Helper()
	var c controllerCalls
	for _, id := range r.TenantIDs() {
		for _, f := range rep.Tenants[id].Files {
			if f.StartedAt != nil && f.StoppedAt != nil {
				c.runningHours += f.StoppedAt.Sub(*f.StartedAt).Hours()
			}
		}
		if fn := r.Function(controllerPkg, id); fn != nil {
			c.invocations += fn.Invocations()
		}
	}
	c.describes = rep.APICalls["stepfunctions"]["DescribeExecution"]
	if c.runningHours > 0 {
		c.describePerHour = float64(c.describes) / c.runningHours
		c.invocationsPerHour = float64(c.invocations) / c.runningHours
	}
	c.gapMean = rep.InterFileGapSecond.Mean
	return c
}

// TestFiguresControllerCalls measures the figures (make figures): files that register for at
// least 2 minutes each (240 records, the sink answering each in 0.5 s), queued behind each other,
// once with every status event delivered (the default 5-minute safety net), once with every status
// event dropped (the safety net shortened to figuresDroppedSafetyNet, said in the output), and once
// as before the wake-up on status events (no wake-up; polling), for comparison. The runs go side by side. It prints:
//
//	controller-calls: describe <n> per running file-hour, invocations <n> per running file-hour, gap mean <s> s (events on); gap mean <s> s (events dropped)
func TestFiguresControllerCalls(t *testing.T) {
	const files, records, perRecord = 3, 240, 500 * time.Millisecond
	const figuresDroppedSafetyNet = 60
	tenants := []string{"cont", "halt", "ov"}
	modes := []struct {
		name string
		cfg  Config
	}{
		{"events on", Config{EnvFor: map[string][]string{controllerPkg: {"SAFETY_NET_SECONDS=300", "MAX_WAIT_SECONDS=330"}}}},
		{"events dropped", Config{EventBridge: EventBridgeOptions{StatusEvents: StatusEvents{Drop: 1}}, EnvFor: map[string][]string{controllerPkg: {fmt.Sprintf("SAFETY_NET_SECONDS=%d", figuresDroppedSafetyNet), "MAX_WAIT_SECONDS=330"}}}},
		// Before the wake-up on status events: no wake-up, in-process polling for 10 s, then a backoff up to 30 s.
		{"polling", Config{EventBridge: EventBridgeOptions{StatusEvents: StatusEvents{Drop: 1}}, EnvFor: map[string][]string{controllerPkg: {"WAKE_EVENTS=false", "POLL_BUDGET_SECONDS=10", "MAX_WAIT_SECONDS=30"}}}},
	}
	// The app's ingest bucket carries the write Deny, so the construct lets the controllers release
	// on the recorded SUCCEEDED without a describe: the "events on" line measures that path.
	checkControlPrefixProtected(t, wakeAssembly(t, scenarioTenants), "true")
	results := make([]controllerCalls, len(modes))
	var wg sync.WaitGroup
	for i, mode := range modes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := startWakeScenario(t, mode.cfg)
			r.Sink.SetDelay(func(string, string, int64) time.Duration { return perRecord })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			var batch []upload
			for f := range files {
				for _, id := range tenants {
					batch = append(batch, upload{id, fmt.Sprintf("%02d.csv", f+1), csvOf(records)})
				}
			}
			for _, u := range batch {
				if _, err := r.Upload(ctx, u.tenant, u.rel, u.body); err != nil {
					t.Error(err)
					return
				}
			}
			if err := r.WaitDrained(ctx, nil, time.Second); err != nil {
				t.Errorf("%s: %v", mode.name, err)
			}
			rep, err := r.Snapshot(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			for _, v := range rep.Violations {
				t.Errorf("%s: invariant violated: %s", mode.name, v)
			}
			for _, id := range tenants {
				if got := rep.Tenants[id].RecordsRegistered; got != files*records {
					t.Errorf("%s %s: got %d records, want %d", mode.name, id, got, files*records)
				}
			}
			results[i] = measureControllerCalls(t, r, rep)
			t.Logf("%s: %+v; stepfunctions calls %v; status events %+v", mode.name, results[i], rep.APICalls["stepfunctions"], r.StatusEventCounts())
		}()
	}
	wg.Wait()
	on, dropped, before := results[0], results[1], results[2]
	line := fmt.Sprintf("controller-calls: describe %.1f per running file-hour, invocations %.1f per running file-hour, gap mean %.2f s (events on); gap mean %.2f s (events dropped)",
		on.describePerHour, on.invocationsPerHour, on.gapMean, dropped.gapMean)
	// Printed bare, so that make figures shows the line as it is.
	fmt.Println(line)
	fmt.Printf("(before, polling without events: describe %.1f per running file-hour, invocations %.1f per running file-hour, gap mean %.2f s)\n",
		before.describePerHour, before.invocationsPerHour, before.gapMean)
	fmt.Printf("(events on: a running file is described once per safety net, at most %d per running file-hour for a file longer than the 300 s safety net)\n", 3600/300)
	fmt.Printf("(%d tenants x %d files x %d records, each file registering for >= %s; events dropped: safety net shortened to %d s, default 300 s)\n",
		len(tenants), files, records, time.Duration(records)*perRecord, figuresDroppedSafetyNet)
	writeFigure(t, "controller-calls.svg", controllerCallsFigure(on, dropped, before, figuresDroppedSafetyNet).SVG())
	if out := os.Getenv("LOCALRUN_FIGURES_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}
