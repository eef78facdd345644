//go:build e2e || figures

package localrun

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/sequence"
)

// sequenceTenants: three sequenced tenants, their files named orders-<n>.csv. "ordered" gets its
// files shuffled, then two duplicates and a name the pattern refuses; "gap" misses its number 3
// (onGap hold) until the scenario uploads it; "skip" misses its number 3 too, and goes on after 2
// s (onGap skip), so that its 3, when it comes, is late.
const sequenceTenants = `{"tenants": [
  {"id": "ordered", "registerUrl": "https://core.example.com/records", "sequence": {"pattern": "^orders-(?P<seq>[0-9]+)\\.csv$"}},
  {"id": "gap", "registerUrl": "https://core.example.com/records", "sequence": {"pattern": "^orders-(?P<seq>[0-9]+)\\.csv$"}},
  {"id": "skip", "registerUrl": "https://core.example.com/records", "sequence": {"pattern": "^orders-(?P<seq>[0-9]+)\\.csv$", "onGap": "skip", "gapTimeout": "2s"}}
]}`

// sequenceFiles is how many numbered files each tenant has in the scenario (the figures run 40),
// missing the number that the gap and skip tenants miss.
const sequenceFiles, sequenceMissing = 8, 3

// Sequenced tenants in both tiers: files uploaded shuffled register in the sequence of their
// names, every record once; a missing number holds every later file (held in the bucket, none
// registered, the gap recorded) until it comes, and then all run in order; a duplicate (another
// name with the same number, and a re-upload of a number that ran), a name the pattern refuses
// and a late file are refused with their reasons in summary.json; under onGap "skip" the tenant
// goes on after its gapTimeout and refuses the missing file as late when it comes.
func TestScenarioSequence(t *testing.T) {
	forEachTier(t, sequenceTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		for _, id := range []string{"ordered", "gap", "skip"} {
			if _, ok := r.Tenant(id).SequenceRule(); !ok {
				t.Fatalf("tenant %s: the run reads no sequence in its settings %v", id, r.Tenant(id).Config)
			}
		}
		const records = 3
		prefix := func(tn string) string { return r.Tenant(tn).Prefix }

		// Phase 1: every file but the missing 3s, shuffled per tenant, and a name that does not match.
		files := append(shuffledSequence([]string{"ordered"}, sequenceFiles, 0, 7, records),
			shuffledSequence([]string{"gap", "skip"}, sequenceFiles, sequenceMissing, 7, records)...)
		files = slices.Insert(files, 2, upload{"ordered", "notes.txt", csvOf(records)})
		if n := outOfOrder(files); n == 0 {
			t.Fatalf("the shuffle left every tenant's files in order: the scenario proves nothing")
		}
		uploadAll(t, ctx, r, files)

		rep := waitFor(t, ctx, r, "ordered and skip finish, and gap holds every file after its missing 3", func(rep *report.Report) bool {
			q := rep.Tenants["gap"].Sequence
			return countStatus(rep, "ordered", "SUCCEEDED") == sequenceFiles && countStatus(rep, "skip", "SUCCEEDED") == sequenceFiles-1 &&
				countStatus(rep, "gap", "SUCCEEDED") == sequenceMissing-1 && q != nil && q.Held == sequenceFiles-sequenceMissing
		})
		st, held, err := r.Sequence(ctx, "gap", 20)
		if err != nil {
			t.Fatal(err)
		}
		var wantHeld []string
		for i := sequenceMissing + 1; i <= sequenceFiles; i++ {
			wantHeld = append(wantHeld, strconv.Itoa(i))
		}
		if held.Count != len(wantHeld) || !slices.Equal(held.Values, wantHeld) || st.GapSince == nil || st.Next != sequenceMissing {
			t.Errorf("gap, held: got %d %v, next %d, gapSince %v; want %d %v, next %d and a gapSince",
				held.Count, held.Values, st.Next, st.GapSince, len(wantHeld), wantHeld, sequenceMissing)
		}
		for _, key := range registeredOrder(r, "gap") {
			if v, _ := r.Tenant("gap").SequenceValue(key); v.Num > sequenceMissing {
				t.Errorf("gap: %s registered while %d was missing, want it held", key, sequenceMissing)
			}
		}
		for _, f := range rep.Tenants["gap"].Files {
			if v, _ := r.Tenant("gap").SequenceValue(f.Key); v.Num > sequenceMissing && f.Status != report.StatusHeld {
				t.Errorf("gap %s: got status %s while %d was missing, want %s", f.Key, f.Status, sequenceMissing, report.StatusHeld)
			}
		}
		if st, _, err := r.Sequence(ctx, "skip", 20); err != nil || !slices.ContainsFunc(st.Skipped, func(s sequence.Skip) bool { return s.From <= sequenceMissing && sequenceMissing <= s.To }) {
			t.Errorf("skip: got skips %+v (%v), want %d skipped after the gapTimeout", st.Skipped, err, sequenceMissing)
		}

		// Phase 2: the missing file of gap; duplicates of ordered (another name with the number 3,
		// and orders-5.csv again, a new version of a number that ran); the late 3 of skip.
		uploadAll(t, ctx, r, []upload{
			{"gap", orderName(sequenceMissing), csvOf(records)},
			{"ordered", "orders-003.csv", csvOf(records)},
			{"ordered", orderName(5), csvOf(records + 1)}, // another content: another object version
			{"skip", orderName(sequenceMissing), csvOf(records)},
		})
		rep = drain(t, ctx, r)
		assertInvariants(t, r, rep, nil, false)

		// Each tenant's files registered in the sequence of their numbers, every record once.
		for _, tc := range []struct {
			tenant string
			ran    []int
		}{
			{"ordered", []int{1, 2, 3, 4, 5, 6, 7, 8}},
			{"gap", []int{1, 2, 3, 4, 5, 6, 7, 8}},
			{"skip", []int{1, 2, 4, 5, 6, 7, 8}},
		} {
			var want []string
			for _, n := range tc.ran {
				want = append(want, prefix(tc.tenant)+orderName(n))
			}
			if got := registeredOrder(r, tc.tenant); !slices.Equal(got, want) {
				t.Errorf("%s: files registered in the order %v, want %v", tc.tenant, got, want)
			}
			if got, want := len(r.Sink.Registered(tc.tenant)), len(tc.ran)*records; got != want {
				t.Errorf("%s: got %d records registered, want %d (each once)", tc.tenant, got, want)
			}
			if q := rep.Tenants[tc.tenant].Sequence; q == nil || q.Held != 0 || q.GapSince != nil {
				t.Errorf("%s: got sequence %+v, want nothing held and no gap", tc.tenant, q)
			}
		}

		// The refused files, with their reasons from summary.json, and their File Processed events.
		for _, tc := range []struct {
			tenant, rel string
			upload      int
			refusal     string
		}{
			{"ordered", "notes.txt", 0, sequence.RefusedUnmatched},
			{"ordered", "orders-003.csv", 0, sequence.RefusedDuplicate},
			{"ordered", orderName(5), 1, sequence.RefusedDuplicate},
			{"skip", orderName(sequenceMissing), 0, sequence.RefusedLate},
		} {
			f := fileOf(t, rep, tc.tenant, tc.rel, tc.upload)
			if f.Status != results.StatusRefused || f.Refusal != tc.refusal || f.Records != 0 {
				t.Errorf("%s %s (upload %d): got %s %q with %d records, want REFUSED %q and none registered", tc.tenant, tc.rel, tc.upload, f.Status, f.Refusal, f.Records, tc.refusal)
			}
			var got []string
			for _, e := range rep.FileEvents {
				if e.Detail.Execution == f.ExecutionName {
					got = append(got, e.Detail.Status+" "+e.Detail.Refusal)
				}
			}
			if len(got) == 0 || slices.ContainsFunc(got, func(s string) bool { return s != results.StatusRefused+" "+tc.refusal }) {
				t.Errorf("%s %s: got File Processed events %q for execution %s, want REFUSED %q", tc.tenant, tc.rel, got, f.ExecutionName, tc.refusal)
			}
		}
		if got := countStatus(rep, "ordered", results.StatusRefused); got != 3 {
			t.Errorf("ordered: got %d files refused, want 3", got)
		}
	})
}
