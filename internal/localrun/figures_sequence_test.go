//go:build figures

package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report"
)

// The sequence workload: in each tier, sequenceFigureTenants tenants with a sequence and as many
// without, each with sequenceFigureFiles files orders-1.csv … whose arrivals are shuffled (the
// same order for a tenant and its twin without a sequence), and number sequenceFigureMissing
// withheld until every other file has arrived and been decided.
const (
	sequenceFigureTenants = 10
	sequenceFigureFiles   = 40
	sequenceFigureMissing = 5
	sequenceFigureSeed    = 7
)

// sequenceFigureTenantsJSON is the tenants file of one tier: s00… with a sequence (onGap hold),
// a00… without.
func sequenceFigureTenantsJSON(tier string) string {
	var tenants []map[string]any
	for i := range sequenceFigureTenants {
		tenants = append(tenants,
			map[string]any{"id": fmt.Sprintf("s%02d", i), "tier": tier, "registerUrl": "https://core.example.com/records",
				"sequence": map[string]any{"pattern": `^orders-(?P<seq>[0-9]+)\.csv$`}},
			map[string]any{"id": fmt.Sprintf("a%02d", i), "tier": tier, "registerUrl": "https://core.example.com/records"})
	}
	b, _ := json.Marshal(map[string]any{"tenants": tenants})
	return string(b)
}

// sequenceTier is what one tier measured.
type sequenceTier struct {
	tier string
	// heldAtOnce is every tenant's held files summed, the most at once: held files only grow while
	// the missing numbers are out, so it is their count just before those arrive. heldPerTenant is
	// one tenant's.
	heldAtOnce, heldPerTenant int
	// release is, per sequenced tenant, from its missing file's upload to the first record of its
	// first held file (the number after the missing one).
	release []time.Duration
	// outOfSequence counts the files registered after a file with a higher number of their tenant,
	// with a sequence and in arrival order; files is how many ran of each kind.
	outOfSequence, outOfArrival, files int
}

// TestFiguresSequence is make figures' "sequence:" line: in both tiers, a sequenced tenant's files
// uploaded shuffled with one number withheld: how many files were held at most at once, and from
// the missing file's upload to the first held file's first record, p50 and p95; beside tenants
// without a sequence given the same shuffled input, the files registered out of sequence (with a
// sequence: none, which it asserts, with the invariants).
func TestFiguresSequence(t *testing.T) {
	var tiers []sequenceTier
	for _, tier := range []string{"silo", "pool"} {
		tiers = append(tiers, measureSequence(t, tier))
		if t.Failed() {
			return
		}
	}
	var parts []string
	for _, m := range tiers {
		parts = append(parts, fmt.Sprintf("%s: held at most at once %d (%d per tenant), missing file's upload → first held file's first record p50/p95 %s/%s; "+
			"registered out of sequence: with a sequence %d of %d files, arrival order %d of %d",
			m.tier, m.heldAtOnce, m.heldPerTenant, strings.TrimSuffix(seconds(durationPercentile(m.release, 50)), " s"), seconds(durationPercentile(m.release, 95)),
			m.outOfSequence, m.files, m.outOfArrival, m.files))
	}
	line := fmt.Sprintf("sequence: %d tenants × %d files a tier, each tenant's arrivals shuffled, number %d withheld then uploaded; %s",
		sequenceFigureTenants, sequenceFigureFiles, sequenceFigureMissing, strings.Join(parts, "; "))
	// Printed bare, so that make figures shows the line as it is.
	fmt.Println(line)
	if out := os.Getenv("LOCALRUN_FIGURES_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}

// measureSequence runs the sequence workload in one tier.
func measureSequence(t *testing.T, tier string) sequenceTier {
	t.Helper()
	r := startScenario(t, sequenceFigureTenantsJSON(tier), Config{})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	const records = 3
	var seqIDs, arrivalIDs []string
	for i := range sequenceFigureTenants {
		seqIDs, arrivalIDs = append(seqIDs, fmt.Sprintf("s%02d", i)), append(arrivalIDs, fmt.Sprintf("a%02d", i))
	}
	// Each sequenced tenant's shuffle, and the same order for its twin in arrival order.
	seqFiles := shuffledSequence(seqIDs, sequenceFigureFiles, sequenceFigureMissing, sequenceFigureSeed, records)
	var batch []upload
	for _, f := range seqFiles {
		twin := f
		twin.tenant = "a" + strings.TrimPrefix(f.tenant, "s")
		batch = append(batch, f, twin)
	}
	uploadAll(t, ctx, r, batch)
	held := sequenceFigureFiles - sequenceFigureMissing
	rep := waitFor(t, ctx, r, "every sequenced tenant holds the files after its missing number", func(rep *report.Report) bool {
		for i := range seqIDs {
			q := rep.Tenants[seqIDs[i]].Sequence
			if q == nil || q.Held != held || countStatus(rep, seqIDs[i], "SUCCEEDED") != sequenceFigureMissing-1 ||
				countStatus(rep, arrivalIDs[i], "SUCCEEDED") != sequenceFigureFiles-1 {
				return false
			}
		}
		return true
	})
	m := sequenceTier{tier: tier, heldPerTenant: held}
	for _, id := range seqIDs {
		m.heldAtOnce += rep.Tenants[id].Sequence.Held
	}

	missing := map[string]*Upload{}
	for _, id := range append(slices.Clone(seqIDs), arrivalIDs...) {
		u, err := r.Upload(ctx, id, orderName(sequenceFigureMissing), csvOf(records))
		if err != nil {
			t.Fatal(err)
		}
		missing[id] = u
	}
	rep = drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	for _, id := range seqIDs {
		first := r.Tenant(id).Prefix + orderName(sequenceFigureMissing+1)
		var at time.Time
		for _, rec := range r.Sink.Registered(id) {
			if rec.Source == first && (at.IsZero() || rec.At.Before(at)) {
				at = rec.At
			}
		}
		if at.IsZero() || !at.After(missing[id].At) {
			t.Errorf("%s %s: first record at %v, want one after its missing file's upload at %v", tier, first, at, missing[id].At)
			continue
		}
		m.release = append(m.release, at.Sub(missing[id].At))
	}
	for i := range seqIDs {
		m.outOfSequence += outOfSequenceRegistered(r, seqIDs[i])
		m.outOfArrival += outOfSequenceRegistered(r, arrivalIDs[i])
		m.files += len(registeredOrder(r, seqIDs[i]))
	}
	if m.outOfSequence != 0 {
		t.Errorf("%s: %d files of sequenced tenants registered out of sequence, want 0", tier, m.outOfSequence)
	}
	if m.outOfArrival == 0 {
		t.Errorf("%s: arrival order registered every file in sequence: the shuffle proves nothing", tier)
	}
	if want := sequenceFigureTenants * sequenceFigureFiles; m.files != want {
		t.Errorf("%s: got %d files of sequenced tenants registered, want %d", tier, m.files, want)
	}
	return m
}

// outOfSequenceRegistered counts the tenant's files whose first record was registered after a
// file with a higher number.
func outOfSequenceRegistered(r *Run, tenant string) int {
	n, highest := 0, int64(0)
	for _, key := range registeredOrder(r, tenant) {
		var num int64
		if _, err := fmt.Sscanf(strings.TrimPrefix(key, r.Tenant(tenant).Prefix), "orders-%d.csv", &num); err != nil {
			continue
		}
		if num < highest {
			n++
		}
		highest = max(highest, num)
	}
	return n
}

// durationPercentile is the nearest-rank p-th percentile of ds.
func durationPercentile(ds []time.Duration, p float64) time.Duration {
	ls := make([]fileLatency, len(ds))
	for i, d := range ds {
		ls[i].firstRecord = d
	}
	return percentile(ls, firstRecordOf, p)
}
