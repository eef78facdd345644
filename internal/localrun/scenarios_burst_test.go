//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// burstTenantsJSON is a tenants file of pooled pooled tenants and silo silo tenants, every one
// naming the core system "ledger" with the given settings.
func burstTenantsJSON(pooled, silo int, ledger map[string]any) string {
	f := map[string]any{"coreSystems": map[string]any{"ledger": ledger}}
	var ts []map[string]any
	for i := range silo {
		ts = append(ts, map[string]any{"id": fmt.Sprintf("silo-%02d", i), "tier": "silo", "coreSystem": "ledger", "registerUrl": "https://core.example.com/records"})
	}
	for i := range pooled {
		ts = append(ts, map[string]any{"id": fmt.Sprintf("p%03d", i), "tier": "pool", "coreSystem": "ledger", "registerUrl": "https://core.example.com/records"})
	}
	f["tenants"] = ts
	b, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// burstFiles are files files of records records for each tenant, in one burst: each tenant's
// files one after the other, tenant after tenant, as senders drop them.
func burstFiles(r *Run, files, records int) []upload {
	var out []upload
	for _, id := range r.TenantIDs() {
		for f := range files {
			var b strings.Builder
			b.WriteString("id,name\n")
			for i := range records {
				fmt.Fprintf(&b, "%s-%d-%d,row %d\n", id, f, i, i)
			}
			out = append(out, upload{id, fmt.Sprintf("f-%02d.csv", f), []byte(b.String())})
		}
	}
	return out
}

// A night's burst into one protected core system: 100 pooled tenants and 3 silo tenants, all naming
// the core system "ledger" with maxRunningFiles 6, each dropping 2 files at once, with the account's
// Lambda concurrency below the number of tenants and a core system that answers 429 above 6
// requests in flight. Admission keeps every file of both tiers inside the 6 slots, so no file fails,
// every record arrives once and in order, and the core system never sees more than 6 requests nor
// answers a 429; waiting tenants are admitted fairly, so no tenant's first record comes after 90 %
// of the tenants have finished.
func TestScenarioBurstCoreSystem(t *testing.T) {
	t.Parallel()
	const pooled, silo, files, records, limit = 100, 3, 2, 5, 6
	r := startScenario(t, burstTenantsJSON(pooled, silo, map[string]any{"maxRunningFiles": limit}),
		Config{Lambda: LambdaOptions{Concurrency: 40}, Core: CoreOptions{MaxInFlight: limit}})
	if n := len(r.TenantIDs()); n != pooled+silo || 40 >= n {
		t.Fatalf("got %d tenants, want %d, more than the Lambda concurrency", n, pooled+silo)
	}
	// 50 ms a record, a core system's usual latency: a small file runs as one SmallFile task, so its
	// time at the core system must outweigh the handover between files for the slots' share to
	// measure admission rather than the machine's load.
	r.Sink.SetDelay(func(string, string, int64) time.Duration { return 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	burst := burstFiles(r, files, records)
	uploadAll(t, ctx, r, burst)
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, true)
	assertAllSucceeded(t, rep, burst)
	t.Logf("sink: at most %d in flight, %d answered 429; Lambda throttles %v; %.1f s", rep.SinkMaxInFlight, rep.Sink429, rep.LambdaThrottles, rep.WallSeconds)
	if rep.SinkMaxInFlight > limit || rep.Sink429 != 0 {
		t.Errorf("core system: got %d requests in flight at most and %d answers of 429, want at most %d and none", rep.SinkMaxInFlight, rep.Sink429, limit)
	}
	if rep.SinkMaxInFlight < 2 {
		t.Errorf("core system: got at most %d request in flight, want files of several tenants at once (else the bound proves nothing)", rep.SinkMaxInFlight)
	}
	assertFairAdmission(t, r, rep)
	assertSlotsBusyWhileWaiting(t, rep, limit, 0.2)
}

// assertSlotsBusyWhileWaiting: from the burst's first upload to the last file's start (while files
// waited for a slot), the files' running time filled at least share of the core system's slots.
// Generous on purpose: a loaded machine stretches every step, but a freed slot that waits for a
// poller's timer leaves far less.
func assertSlotsBusyWhileWaiting(t *testing.T, rep *report.Report, slots int, share float64) {
	t.Helper()
	first, lastStart, _ := burstWindow(rep)
	u := slotUtilization(rep, slots, first, lastStart)
	t.Logf("core system: slots busy %.0f %% while files waited (%s)", 100*u, lastStart.Sub(first).Round(time.Millisecond))
	if u < share {
		t.Errorf("core system: slots busy %.0f %% of the time files waited, want at least %.0f %%", 100*u, 100*share)
	}
}

// assertFairAdmission: no tenant gets its first record registered after 90 % of the tenants have
// finished (their last file stopped).
func assertFairAdmission(t *testing.T, r *Run, rep *report.Report) {
	t.Helper()
	var finished []time.Time
	first := map[string]time.Time{}
	for _, id := range r.TenantIDs() {
		var last time.Time
		for _, f := range rep.Tenants[id].Files {
			if f.StoppedAt != nil && f.StoppedAt.After(last) {
				last = *f.StoppedAt
			}
		}
		finished = append(finished, last)
		recs := r.Sink.Registered(id)
		if len(recs) == 0 {
			t.Errorf("%s: no record registered", id)
			continue
		}
		first[id] = recs[0].At
		for _, rec := range recs {
			if rec.At.Before(first[id]) {
				first[id] = rec.At
			}
		}
	}
	slices.SortFunc(finished, func(a, b time.Time) int { return a.Compare(b) })
	p90 := finished[(len(finished)*9+9)/10-1]
	late := 0
	for id, at := range first {
		if at.After(p90) {
			late++
			t.Errorf("%s: first record registered %s after 90 %% of the tenants had finished", id, at.Sub(p90).Round(time.Millisecond))
		}
	}
	t.Logf("90 %% of the tenants finished %s after the first did; %d tenants started later", p90.Sub(finished[0]).Round(time.Millisecond), late)
}

// A core system declared at 12 running files that takes only 4 requests at once: 30 pooled and 2
// silo tenants, each dropping 2 files of 10 records, into the core system "ledger" with
// maxRunningFiles 12 and an adaptive limit, and a sink that takes 200 ms a request and answers 429
// with Retry-After: 1 above 4 in flight. The first 429s halve the limit admission applies, so no
// file fails, every record arrives once and in order, at most 10 % of the requests are answered
// 429, and the core system's limit item shows the limit fell. (The same run with "adaptive": false
// keeps 12 files sending into 4 places, and about a quarter of its requests are answered 429.)
func TestScenarioBurstAdaptive(t *testing.T) {
	t.Parallel()
	const pooled, silo, files, records, declared, takes = 30, 2, 2, 10, 12, 4
	r := startScenario(t, burstTenantsJSON(pooled, silo, map[string]any{"maxRunningFiles": declared, "adaptive": true}),
		Config{Core: CoreOptions{MaxInFlight: takes}})
	r.Sink.SetDelay(func(string, string, int64) time.Duration { return 200 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	burst := burstFiles(r, files, records)
	uploadAll(t, ctx, r, burst)
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, true)
	assertAllSucceeded(t, rep, burst)
	requests, _, _, _ := r.Sink.Stats()
	t.Logf("sink: %d requests, %d answered 429 (%.1f %%), at most %d in flight; %.1f s", requests, rep.Sink429, 100*float64(rep.Sink429)/float64(max(1, requests)), rep.SinkMaxInFlight, rep.WallSeconds)
	if rep.Sink429*10 > requests {
		t.Errorf("core system: got %d of %d requests answered 429, want at most 10 %%", rep.Sink429, requests)
	}
	// Only a decrease writes the limit item (an increase needs one stored), so an item changed
	// during the run is the adaptive limit having fallen; without AIMD there is none.
	lim, err := (&admission.LimitStore{API: r.dynamo.admin}).Read(ctx, coreSystemOf(t, r))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("adaptive limit item: stored %v, limit %d, last changed %s after the run began", lim.Stored, lim.Value, lim.UpdatedAt.Sub(r.created).Round(time.Second))
	if !lim.Stored || lim.UpdatedAt.Before(r.created) {
		t.Errorf("adaptive limit: got stored %v, changed at %s, want a decrease written during the run", lim.Stored, lim.UpdatedAt)
	}
	// Measured against the slots the core system takes (the limit falls towards them).
	assertSlotsBusyWhileWaiting(t, rep, takes, 0.3)
}

// coreSystemOf is the core system of the run's tenants, as a controller reads it: the tenant's
// settings, and its admission table from the controller's CORE_SYSTEM_TABLES.
func coreSystemOf(t *testing.T, r *Run) pipeline.CoreSystem {
	t.Helper()
	for _, tn := range r.Tenants {
		b, err := json.Marshal(tn.Config)
		if err != nil {
			t.Fatal(err)
		}
		var tenant pipeline.Tenant
		if err := json.Unmarshal(b, &tenant); err != nil {
			t.Fatalf("tenant %s: %v", tn.ID, err)
		}
		c := tenant.CoreSystem
		if c == nil || tn.Controller == nil {
			continue
		}
		for _, kv := range tn.Controller.Env {
			v, ok := strings.CutPrefix(kv, pipeline.EnvCoreSystemTables+"=")
			if !ok {
				continue
			}
			var tables map[string]string
			if err := json.Unmarshal([]byte(v), &tables); err != nil {
				t.Fatalf("%s of %s: %v", pipeline.EnvCoreSystemTables, tn.Controller.Name, err)
			}
			if c.Table = tables[c.Name]; c.Table != "" {
				return *c
			}
		}
	}
	t.Fatal("no controller names the core system's admission table")
	return pipeline.CoreSystem{}
}

// A replay and a redrive during a burst take running-file slots like any file: 20 pooled tenants
// and 2 silo tenants name the core system "ledger" with maxRunningFiles 2, and while their burst
// fills both slots an operator redrives a pooled tenant's failed file and replays a silo tenant's
// processed one. Both wait for a slot: the core system never sees more than 2 requests at once,
// the redrive resumes at its failed record, the replay registers its file again, and every other
// file arrives once and in order.
func TestScenarioBurstReplayAndRedrive(t *testing.T) {
	t.Parallel()
	const pooled, silo, limit = 20, 2, 2
	r := startScenario(t, burstTenantsJSON(pooled, silo, map[string]any{"maxRunningFiles": limit}), Config{Core: CoreOptions{MaxInFlight: limit}})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var fixed atomic.Bool
	r.Sink.SetFault(func(tenant, source string, n int64, _ int) int {
		if tenant == "p000" && strings.HasSuffix(source, "/bad.csv") && n == 3 && !fixed.Load() {
			return 400 // permanent: the file fails, its tenant (continue) moves on
		}
		return 0
	})
	uploadAll(t, ctx, r, []upload{{"p000", "bad.csv", csvOf(8)}, {"silo-00", "x.csv", csvOf(6)}})
	rep := waitFor(t, ctx, r, "bad.csv failed and x.csv succeeded", func(rep *report.Report) bool {
		return len(rep.Tenants["p000"].Files) == 1 && fileOf(t, rep, "p000", "bad.csv").Status == "FAILED" &&
			len(rep.Tenants["silo-00"].Files) == 1 && fileOf(t, rep, "silo-00", "x.csv").Status == "SUCCEEDED"
	})
	bad := fileOf(t, rep, "p000", "bad.csv")
	// The failed file leaves its tenant's queued count when the controller hands the tenant on,
	// a moment after the execution fails; until then pipectl rightly refuses the redrive as
	// queued behind a file of the tenant. An operator redrives a tenant that has moved on.
	waitFor(t, ctx, r, "p000's failed file left its queue", func(*report.Report) bool {
		st := pipectlStatusParked(t, r, "p000")
		return (st.QueuedFiles == nil || *st.QueuedFiles == 0) && (st.Parked == nil || *st.Parked == 0)
	})
	fixed.Store(true)
	r.Sink.SetDelay(func(string, string, int64) time.Duration { return 30 * time.Millisecond })
	var burst []upload
	for _, u := range burstFiles(r, 2, 5) {
		if u.tenant != "p000" && u.tenant != "silo-00" {
			burst = append(burst, u)
		}
	}
	uploadAll(t, ctx, r, burst)
	pipectl(t, r, "redrive", "p000", bad.ExecutionName, "--reason", "core system fixed", "--stack-prefix", opsPrefix)
	pipectl(t, r, "replay", "silo-00", r.Tenant("silo-00").Prefix+"x.csv", "--reason", "core system lost them", "--stack-prefix", opsPrefix)
	rep = waitFor(t, ctx, r, "the redrive and the replay registered", func(*report.Report) bool {
		return len(r.Sink.Registered("p000")) >= 8 && len(r.Sink.Registered("silo-00")) >= 12
	})
	rep = drain(t, ctx, r)
	noViolations(t, rep)
	t.Logf("sink: at most %d in flight, %d answered 429; %.1f s", rep.SinkMaxInFlight, rep.Sink429, rep.WallSeconds)
	if rep.SinkMaxInFlight > limit {
		t.Errorf("core system: got %d requests in flight at most, want at most %d: a replay or redrive ran without a slot", rep.SinkMaxInFlight, limit)
	}
	if f := fileOf(t, rep, "p000", "bad.csv"); f.Status != "SUCCEEDED" || f.RedriveCount != 1 {
		t.Errorf("bad.csv: got %s, redrive count %d, want SUCCEEDED after one redrive", f.Status, f.RedriveCount)
	}
	// The replay registers x.csv again, after the original, in file order.
	var got []int64
	for _, rec := range r.Sink.Registered("silo-00") {
		got = append(got, rec.RecordNumber)
	}
	if want := []int64{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("silo-00: got records %v registered, want %v (the file, then its replay)", got, want)
	}
	assertOrderedOnce(t, r, "p000", []string{r.Tenant("p000").Prefix + "bad.csv"}, map[string]int64{r.Tenant("p000").Prefix + "bad.csv": 8})
}

// slotUtilization is the running time of the files within [from, to] over slots × (to − from).
func slotUtilization(rep *report.Report, slots int, from, to time.Time) float64 {
	if !to.After(from) {
		return 0
	}
	var busy time.Duration
	for _, tr := range rep.Tenants {
		for _, f := range tr.Files {
			if f.StartedAt == nil || f.StoppedAt == nil {
				continue
			}
			s, e := f.StartedAt.Add(0), *f.StoppedAt
			if s.Before(from) {
				s = from
			}
			if e.After(to) {
				e = to
			}
			if e.After(s) {
				busy += e.Sub(s)
			}
		}
	}
	return float64(busy) / float64(time.Duration(slots)*to.Sub(from))
}

// burstWindow is from the first upload to the last start (while files waited) and the last stop.
func burstWindow(rep *report.Report) (first, lastStart, lastStop time.Time) {
	for _, tr := range rep.Tenants {
		for _, f := range tr.Files {
			if first.IsZero() || f.UploadedAt.Before(first) {
				first = f.UploadedAt
			}
			if f.StartedAt != nil && f.StartedAt.After(lastStart) {
				lastStart = *f.StartedAt
			}
			if f.StoppedAt != nil && f.StoppedAt.After(lastStop) {
				lastStop = *f.StoppedAt
			}
		}
	}
	return first, lastStart, lastStop
}
