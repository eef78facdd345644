//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
)

// The breaker's outage: a core system refuses connections for longer than a file's retries, in
// the middle of a burst. The retries are scaled (breakerRetryScale: the Register task's 8
// attempts, about two minutes on average unscaled, take about 12 s, at most about 24 s), and the
// outage outlasts them (breakerOutage), so that what the run shows is the breaker, not the retry
// budget; at scale 1 the same run needs an outage of over 4 minutes per tier.
const (
	breakerContinue   = 40 // tenants under "continue"
	breakerHalt       = 10 // tenants under "halt"
	breakerFiles      = 2  // files per tenant
	breakerRecords    = 10 // records per file
	breakerSlots      = 5  // the core system's maxRunningFiles
	breakerRetryScale = 0.1
	breakerRecordWait = 40 * time.Millisecond // the core system's latency per record
)

// breakerOutage starts 3 s after the core system's first request and lasts 40 s.
var breakerOutage = emulate.Outage{At: 3 * time.Second, For: 40 * time.Second}

// breakerTenantsJSON is a tenants file of breakerContinue tenants under "continue" and breakerHalt
// under "halt", all naming the core system "ledger" with breaker as its breaker (nil: defaults).
func breakerTenantsJSON(breaker map[string]any) string {
	ledger := map[string]any{"maxRunningFiles": breakerSlots}
	if breaker != nil {
		ledger["breaker"] = breaker
	}
	var ts []map[string]any
	for i := range breakerContinue + breakerHalt {
		policy, id := "continue", fmt.Sprintf("c%02d", i)
		if i >= breakerContinue {
			policy, id = "halt", fmt.Sprintf("h%02d", i-breakerContinue)
		}
		ts = append(ts, map[string]any{"id": id, "onFailure": policy, "coreSystem": "ledger", "registerUrl": "https://core.example.com/records"})
	}
	b, err := json.Marshal(map[string]any{"coreSystems": map[string]any{"ledger": ledger}, "tenants": ts})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// breakerOutcome is what the outage left: files not SUCCEEDED, halted tenants, and files whose
// records did not all arrive before a later file of their tenant began to.
type breakerOutcome struct {
	failed, halted, outOfOrder, files int
	breaker                           report.CoreSystemBreaker
	recovery                          time.Duration // from the breaker's last close to the next record registered
}

func (o breakerOutcome) String() string {
	return fmt.Sprintf("%d of %d files failed, %d tenants halted, %d files out of order", o.failed, o.files, o.halted, o.outOfOrder)
}

// runBreakerOutage runs the outage workload on a run of the tenants (their tier set) and drains it.
func runBreakerOutage(t *testing.T, tenants string) (*Run, *report.Report, []upload) {
	t.Helper()
	r := startScenario(t, tenants, Config{StepFunctions: StepFunctionsOptions{RetryIntervalScale: breakerRetryScale}, Core: CoreOptions{Outages: []emulate.Outage{breakerOutage}}})
	r.Sink.SetDelay(func(string, string, int64) time.Duration { return breakerRecordWait })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	burst := burstFiles(r, breakerFiles, breakerRecords)
	uploadAll(t, ctx, r, burst)
	// A tenant under "halt" that halts keeps its queue: the wait ends once every tenant drained
	// or halted (a *HaltedError then, which outcomeOf counts).
	var he *HaltedError
	if err := r.Wait(ctx, nil, WaitOptions{Interval: 250 * time.Millisecond, StopWhenHalted: true}); err != nil && !errors.As(err, &he) {
		t.Errorf("waiting for the run: %v", err)
	}
	rep, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r, rep, burst
}

// outcomeOf counts the outage's damage from the report and the sink's ground truth.
func outcomeOf(r *Run, rep *report.Report) breakerOutcome {
	var o breakerOutcome
	for _, id := range r.TenantIDs() {
		tr := rep.Tenants[id]
		if tr.Halted != nil {
			o.halted++
		}
		for _, f := range tr.Files {
			o.files++
			if f.Status != "SUCCEEDED" {
				o.failed++
			}
		}
		o.outOfOrder += outOfOrderFiles(r.Sink.Registered(id), breakerRecords)
	}
	o.breaker = rep.CoreSystemBreakers["ledger"]
	if c := o.breaker.LastClosedAt; c != nil {
		next := time.Time{}
		for _, id := range r.TenantIDs() {
			for _, rec := range r.Sink.Registered(id) {
				if rec.At.After(*c) && (next.IsZero() || rec.At.Before(next)) {
					next = rec.At
				}
			}
		}
		if !next.IsZero() {
			o.recovery = next.Sub(*c)
		}
	}
	return o
}

// outOfOrderFiles counts a tenant's files (named f-NN.csv, in upload order) that broke its order:
// a file with fewer than records records registered while a later file has some, or one with a
// record registered after a record of a later file.
func outOfOrderFiles(recs []emulate.SinkRecord, records int) int {
	index := func(src string) int {
		var n int
		base := src[strings.LastIndex(src, "/")+1:]
		if _, err := fmt.Sscanf(base, "f-%02d.csv", &n); err != nil {
			return -1
		}
		return n
	}
	count := map[int]int{}
	bad := map[int]bool{}
	latest := -1
	for _, rec := range recs {
		i := index(rec.Source)
		if i < latest {
			bad[i] = true
		}
		latest = max(latest, i)
		count[i]++
	}
	for i := range latest {
		if count[i] < records {
			bad[i] = true
		}
	}
	return len(bad)
}

// A core system down for longer than a file's retries, in the middle of a burst of 50 tenants (40
// under "continue", 10 under "halt") on one core system, in both tiers: its breaker opens, holds
// every running file at its cursor and admits none, probes, and closes when the core system is
// back. No file fails, no tenant halts, every record arrives once, every tenant's files in order;
// held files and waiting ones are running again after the close (recorded records after it).
func TestScenarioBreakerOutage(t *testing.T) {
	t.Parallel()
	forEachTier(t, breakerTenantsJSON(nil), func(t *testing.T, tenants string) {
		r, rep, burst := runBreakerOutage(t, tenants)
		assertInvariants(t, r, rep, nil, true)
		assertAllSucceeded(t, rep, burst)
		o := outcomeOf(r, rep)
		b := o.breaker
		t.Logf("breaker: %s; opened %d, probed %d (%d failed), closed %d; first record %s after the close", o, b.Opens, b.Probes, b.ProbeFailures, b.Closes, o.recovery)
		if o.failed != 0 || o.halted != 0 || o.outOfOrder != 0 {
			t.Errorf("got %s, want none", o)
		}
		if b.Opens < 1 || b.Probes < 1 || b.Closes < 1 || b.State != "closed" {
			t.Errorf("breaker: got %d opens, %d probes, %d closes, ending %s; want it opened, probed and closed", b.Opens, b.Probes, b.Closes, b.State)
		}
		if b.Reason == "" || strings.Contains(b.Reason, "row ") {
			t.Errorf("breaker reason: got %q, want the failure in one line, without record data", b.Reason)
		}
		// After the last close, the core system's files run again: held files resume and waiting
		// ones are admitted (records registered after it).
		var after int
		for _, id := range r.TenantIDs() {
			for _, rec := range r.Sink.Registered(id) {
				if b.LastClosedAt != nil && rec.At.After(*b.LastClosedAt) {
					after++
				}
			}
		}
		if after == 0 {
			t.Errorf("got no record registered after the breaker closed, want the held and waiting files to go on")
		}
		out := pipectl(t, r, "status", "--json", "--stack-prefix", opsPrefix)
		var st struct {
			CoreSystems []map[string]any `json:"coreSystems"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		if len(st.CoreSystems) != 1 || st.CoreSystems[0]["breaker"] != "closed" || st.CoreSystems[0]["breakerOpens"].(float64) < 1 {
			t.Errorf("status coreSystems: got %v, want ledger's breaker closed after at least one opening", st.CoreSystems)
		}
	})
}
