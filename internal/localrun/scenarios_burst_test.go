package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
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
		Config{LambdaConcurrency: 40, SinkMaxInFlight: limit})
	if n := len(r.TenantIDs()); n != pooled+silo || 40 >= n {
		t.Fatalf("got %d tenants, want %d, more than the Lambda concurrency", n, pooled+silo)
	}
	r.Sink.SetDelay(func(string, string, int64) time.Duration { return 20 * time.Millisecond })
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
}

// assertFairAdmission: no tenant gets its first record registered after 90 % of the tenants have
// finished (their last file stopped).
func assertFairAdmission(t *testing.T, r *Run, rep *Report) {
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
