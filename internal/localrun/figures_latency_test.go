//go:build figures

package localrun

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report"
)

// fixedWaitEnv is the seed design's controller: no wake-up on status events, no in-process
// polling, and a look every 30 s at the running file (the first wait and every later one). The
// templates still route the status change events to the controller's wake-up handler, which
// announces a file's end: the fixed wait holds the tenant's next file, not the File Processed event.
var fixedWaitEnv = []string{"WAKE_EVENTS=false", "FIRST_WAIT_MILLIS=30000", "MAX_WAIT_SECONDS=30", "POLL_BUDGET_SECONDS=0"}

// The latency workload: a burst of one-chunk files across the scenario tenants, then one-chunk
// files one at a time, each after the run has drained and stayed idle for latencyIdle. The idle
// period is longer than the event source mapping's 20 s long poll (esm.go), so each file finds the
// mapping's pollers in a long poll begun while the queue was empty.
const (
	latencyBurstPerTenant = 5
	latencyIdleSamples    = 4
	latencyIdle           = 30 * time.Second
)

// latencyTenants get the burst; "wide" has one record per chunk, so its one-chunk files hold one
// record, the others' ten (under the default 100 per chunk).
var latencyTenants = []string{"cont", "halt", "ov", "wide"}

// fileLatency is one file's moments, from its upload (the object created in the ingest bucket).
type fileLatency struct {
	firstRecord time.Duration // to the core system's first registration of one of its records
	processed   time.Duration // to its File Processed event on the bus
	started     time.Duration // to its execution's start
	stopped     time.Duration // to its execution's end
}

// designLatency is one design's samples.
type designLatency struct {
	name        string
	burst, idle []fileLatency
}

// TestFiguresLatency is make figures' "latency:" line: what a tenant waits for, from the upload of
// a file to its first record registered and to its File Processed event, p50 and p95, for a burst
// of one-chunk files and for one-chunk files that arrive after an idle period, this design (the
// templates' controller, woken by status events) beside the seed design's fixed 30 s wait, both
// designs side by side in one process. It asserts invariants (every file SUCCEEDED, registered
// before its File Processed event, which announces one end), never a time.
func TestFiguresLatency(t *testing.T) {
	designs := []struct {
		name string
		cfg  Config
	}{
		{"this design", Config{}},
		{"fixed 30 s wait", Config{EnvFor: map[string][]string{controllerPkg: fixedWaitEnv}}},
	}
	// The runs start here, where a failed start may end the test, and are measured side by side.
	runs := make([]*Run, len(designs))
	for i, d := range designs {
		runs[i] = startScenario(t, scenarioTenants, d.cfg)
	}
	results := make([]designLatency, len(designs))
	var wg sync.WaitGroup
	for i, d := range designs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer runs[i].Close()
			results[i] = measureLatency(t, d.name, runs[i])
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	this, fixed := results[0], results[1]
	idle := fmt.Sprintf("one-chunk file after %.0f s idle (n=%d)", latencyIdle.Seconds(), latencyIdleSamples)
	line := fmt.Sprintf("latency: burst of %d one-chunk files (%d tenants × %d) p50/p95 first record %s, processed %s; %s p50/p95 first record %s, processed %s; "+
		"fixed 30 s wait: burst first record %s, processed %s; idle first record %s, processed %s; "+
		"ratio fixed/this p50 processed: burst %.1fx, idle %.1fx",
		len(this.burst), len(latencyTenants), latencyBurstPerTenant,
		p50p95(this.burst, firstRecordOf), p50p95(this.burst, processedOf), idle, p50p95(this.idle, firstRecordOf), p50p95(this.idle, processedOf),
		p50p95(fixed.burst, firstRecordOf), p50p95(fixed.burst, processedOf), p50p95(fixed.idle, firstRecordOf), p50p95(fixed.idle, processedOf),
		ratio(fixed.burst, this.burst), ratio(fixed.idle, this.idle))
	// Printed bare, so that make figures shows the line as it is.
	fmt.Println(line)
	for _, d := range results {
		fmt.Printf("(latency, %s, idle files' p50: upload → execution start %s, → first record %s, → execution end %s, → File Processed %s)\n", d.name,
			seconds(percentile(d.idle, startedOf, 50)), seconds(percentile(d.idle, firstRecordOf, 50)),
			seconds(percentile(d.idle, stoppedOf, 50)), seconds(percentile(d.idle, processedOf, 50)))
	}
	if out := os.Getenv("LOCALRUN_FIGURES_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}

// measureLatency runs the latency workload against one design's run. It may run beside another
// test goroutine, so it reports failures with t.Errorf and returns.
func measureLatency(t *testing.T, name string, r *Run) designLatency {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	out := designLatency{name: name}

	var burst []upload
	for _, id := range latencyTenants {
		for f := range latencyBurstPerTenant {
			burst = append(burst, upload{id, fmt.Sprintf("burst-%02d.csv", f), oneChunkFile(r, id)})
		}
	}
	var ups []*Upload
	for _, u := range burst {
		up, err := r.Upload(ctx, u.tenant, u.rel, u.body)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return out
		}
		ups = append(ups, up)
	}
	out.burst = fileLatencies(t, ctx, r, name, ups)

	for i := range latencyIdleSamples {
		// The run has drained (fileLatencies waited for it); the idle period is the point.
		sleep(ctx, latencyIdle)
		up, err := r.Upload(ctx, "cont", fmt.Sprintf("idle-%02d.csv", i), oneChunkFile(r, "cont"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return out
		}
		out.idle = append(out.idle, fileLatencies(t, ctx, r, name, []*Upload{up})...)
	}
	return out
}

// oneChunkFile is a file of one chunk for the tenant: one record for "wide" (one per chunk),
// ten for the others.
func oneChunkFile(r *Run, tenant string) []byte {
	if n, ok := r.Tenant(tenant).Config["chunkSize"].(float64); ok && n < 10 {
		return csvOf(int(n))
	}
	return csvOf(10)
}

// fileLatencies waits until the run has drained and each upload has its File Processed event, checks
// the invariants, and returns the uploads' latencies.
func fileLatencies(t *testing.T, ctx context.Context, r *Run, name string, ups []*Upload) []fileLatency {
	t.Helper()
	if err := r.WaitDrained(ctx, nil, 100*time.Millisecond); err != nil {
		t.Errorf("%s: %v", name, err)
		return nil
	}
	events := func() map[string][]report.FileEvent {
		by := map[string][]report.FileEvent{}
		for _, e := range r.FileEvents() {
			k := e.Detail.Source.Key + "\x00" + e.Detail.Source.Version
			by[k] = append(by[k], e)
		}
		return by
	}
	// Drained says no message is left; the File Processed event is put before the controller
	// deletes its file's message, so it is there, but wait for it rather than rely on that.
	var byFile map[string][]report.FileEvent
	for {
		byFile = events()
		missing := slices.ContainsFunc(ups, func(u *Upload) bool { return len(byFile[u.Key+"\x00"+u.VersionID]) == 0 })
		if !missing {
			break
		}
		select {
		case <-ctx.Done():
			t.Errorf("%s: waiting for every File Processed event: %v", name, ctx.Err())
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	rep, err := r.Snapshot(ctx)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return nil
	}
	for _, v := range rep.Violations {
		t.Errorf("%s: invariant violated: %s", name, v)
	}
	var out []fileLatency
	for _, u := range ups {
		var fr *report.FileReport
		for i, f := range rep.Tenants[u.Tenant].Files {
			if f.Key == u.Key && f.VersionID == u.VersionID {
				fr = &rep.Tenants[u.Tenant].Files[i]
			}
		}
		if fr == nil || fr.Status != "SUCCEEDED" || fr.Executions != 1 || fr.StartedAt == nil || fr.StoppedAt == nil {
			t.Errorf("%s %s: got %+v, want SUCCEEDED with 1 execution", name, u.Key, fr)
			continue
		}
		var first time.Time
		for _, rec := range r.Sink.Registered(u.Tenant) {
			if rec.Source == u.Key && rec.VersionID == u.VersionID && (first.IsZero() || rec.At.Before(first)) {
				first = rec.At
			}
		}
		// A File Processed event may be put twice for one end (at least once, under one eventId).
		evs := byFile[u.Key+"\x00"+u.VersionID]
		if slices.ContainsFunc(evs, func(e report.FileEvent) bool {
			return e.Detail.Status != "SUCCEEDED" || e.Detail.EventID != evs[0].Detail.EventID
		}) {
			t.Errorf("%s %s: got File Processed events %+v, want one end, SUCCEEDED", name, u.Key, evs)
			continue
		}
		l := fileLatency{firstRecord: first.Sub(u.At), processed: evs[0].Time.Sub(u.At), started: fr.StartedAt.Sub(u.At), stopped: fr.StoppedAt.Sub(u.At)}
		if first.IsZero() || l.firstRecord <= 0 || l.firstRecord > l.processed || l.stopped > l.processed {
			t.Errorf("%s %s: got first record at %s and File Processed at %s after the upload (execution end %s), want 0 < first record ≤ end ≤ processed",
				name, u.Key, l.firstRecord, l.processed, l.stopped)
			continue
		}
		t.Logf("%s %s: upload %s, started +%s, first record +%s, stopped +%s, File Processed +%s", name, u.Key,
			u.At.Format("15:04:05.000"), l.started, l.firstRecord, l.stopped, l.processed)
		out = append(out, l)
	}
	return out
}

func firstRecordOf(l fileLatency) time.Duration { return l.firstRecord }
func processedOf(l fileLatency) time.Duration   { return l.processed }
func startedOf(l fileLatency) time.Duration     { return l.started }
func stoppedOf(l fileLatency) time.Duration     { return l.stopped }

// percentile is the nearest-rank p-th percentile of one latency of the samples, as
// svgchart.Summarize ranks its p95.
func percentile(ls []fileLatency, of func(fileLatency) time.Duration, p float64) time.Duration {
	if len(ls) == 0 {
		return 0
	}
	ds := make([]time.Duration, len(ls))
	for i, l := range ls {
		ds[i] = of(l)
	}
	slices.Sort(ds)
	return ds[max(0, int(math.Ceil(p/100*float64(len(ds))))-1)]
}

// seconds renders a latency in seconds, to the 10 ms: the local run ends an idle file in tens of them.
func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// p50p95 renders "p50/p95 s".
func p50p95(ls []fileLatency, of func(fileLatency) time.Duration) string {
	return strings.TrimSuffix(seconds(percentile(ls, of, 50)), " s") + "/" + seconds(percentile(ls, of, 95))
}

// ratio is the p50 upload → File Processed of a over that of b.
func ratio(a, b []fileLatency) float64 {
	return percentile(a, processedOf, 50).Seconds() / percentile(b, processedOf, 50).Seconds()
}
