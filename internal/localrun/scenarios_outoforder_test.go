//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/results"
)

// outOfOrderTenants: a key-ordered tenant that chose continue (the default of a key-ordered tenant
// is halt).
const outOfOrderTenants = `{"tenants": [
  {"id": "keyed", "onFailure": "continue", "chunkSize": 10, "recordOrder": "key", "keyColumns": ["customer"], "maxRecordsInFlight": 4, "registerUrl": "https://core.example.com/records"}
]}`

// The new user's steps, in both tiers: a key-ordered continue tenant's first file is refused at
// record 9 by the core system (a 400 for that one record), so it fails; the tenant's next file
// registers; the core system is fixed. pipectl redrive of the first file is refused, naming the
// later file, and does nothing; with --out-of-order --reason it runs, once, and the first file's
// results say it ran out of order, with the reason.
func TestScenarioOutOfOrderRedrive(t *testing.T) {
	t.Parallel()
	forEachTier(t, outOfOrderTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		const failAt, records, keys = 9, 40, 5
		var fixed atomic.Bool
		r.Sink.SetFault(func(tenant, source string, n int64, _ int) int {
			if tenant == "keyed" && strings.HasSuffix(source, "/first.csv") && n == failAt && !fixed.Load() {
				return 400 // the core system refuses one order: the file fails
			}
			return 0
		})
		body := csvKeyed(records, keys)
		uploadAll(t, ctx, r, []upload{{"keyed", "first.csv", body}})
		waitFor(t, ctx, r, "first.csv failed", func(rep *report.Report) bool {
			f := maybeFile(rep, "keyed", "first.csv")
			return f != nil && f.Status == "FAILED"
		})
		uploadAll(t, ctx, r, []upload{{"keyed", "second.csv", body}})
		rep := waitFor(t, ctx, r, "second.csv registered", func(rep *report.Report) bool {
			f := maybeFile(rep, "keyed", "second.csv")
			return f != nil && f.Status == "SUCCEEDED"
		})
		first, second := fileOf(t, rep, "keyed", "first.csv"), fileOf(t, rep, "keyed", "second.csv")
		fixed.Store(true)

		// Refused, naming the later file and its execution; nothing is redriven.
		code, stdout, stderr := pipectlIn(t, r, "", "redrive", "keyed", first.ExecutionName, "--reason", "core system fixed", "--stack-prefix", opsPrefix)
		if code != 1 || !strings.Contains(stderr, "redrive of "+first.ExecutionName+" refused") ||
			!strings.Contains(stderr, second.Key+" ("+second.ExecutionName+", SUCCEEDED)") || !strings.Contains(stderr, "--out-of-order") {
			t.Fatalf("redrive without --out-of-order: got exit %d, %q %q; want 1 and a refusal naming %s (%s)", code, stdout, stderr, second.Key, second.ExecutionName)
		}

		// With --out-of-order and a reason it runs, once.
		const reason = "order 7 re-sent by the ERP team"
		out := pipectl(t, r, "redrive", "keyed", first.ExecutionName, "--out-of-order", "--reason", reason, "--stack-prefix", opsPrefix)
		if !strings.Contains(out, "OUT OF ORDER") {
			t.Errorf("redrive --out-of-order: got %q, want it to say OUT OF ORDER", out)
		}
		rep = waitFor(t, ctx, r, "first.csv redriven", func(rep *report.Report) bool {
			f := maybeFile(rep, "keyed", "first.csv")
			return f != nil && f.Status == "SUCCEEDED"
		})
		if f := fileOf(t, rep, "keyed", "first.csv"); f.RedriveCount != 1 || f.OutOfOrder != reason {
			t.Errorf("first.csv: got redrive count %d, out of order %q; want 1 (the refused redrive did nothing) and the reason %q in the report", f.RedriveCount, f.OutOfOrder, reason)
		}
		if f := fileOf(t, rep, "keyed", "second.csv"); f.OutOfOrder != "" {
			t.Errorf("second.csv: got out of order %q in the report, want none", f.OutOfOrder)
		}
		n := map[string]int{}
		for _, rec := range r.Sink.Registered("keyed") {
			n[rec.Source[strings.LastIndexByte(rec.Source, '/')+1:]]++
		}
		if n["first.csv"] != records || n["second.csv"] != records {
			t.Errorf("the core system holds %v records, want %d of each file, once", n, records)
		}

		// The file's results say it ran out of order, with the reason and the later file.
		var audit results.OutOfOrder
		if err := json.Unmarshal(readObject(t, ctx, r, results.Key(r.Tenant("keyed").Owner(), first.ExecutionName, results.OutOfOrderFile)), &audit); err != nil {
			t.Fatal(err)
		}
		if !audit.OutOfOrder || audit.Reason != reason || audit.LaterCount != 1 || audit.Later[0].Execution != second.ExecutionName || audit.RequestedBy == "" {
			t.Errorf("out-of-order.json: got %+v, want out of order, the reason %q and %s as the later file", audit, reason, second.ExecutionName)
		}
		res := pipectl(t, r, "results", "keyed", first.ExecutionName, "--stack-prefix", opsPrefix)
		if !strings.Contains(res, "out of order") || !strings.Contains(res, reason) {
			t.Errorf("pipectl results: got %q, want an out of order row with the reason", res)
		}
	})
}

// bulkTenants: three halt tenants.
const bulkTenants = `{"tenants": [
  {"id": "h1", "onFailure": "halt", "registerUrl": "https://core.example.com/records"},
  {"id": "h2", "onFailure": "halt", "registerUrl": "https://core.example.com/records"},
  {"id": "h3", "onFailure": "halt", "registerUrl": "https://core.example.com/records"}
]}`

// TestScenarioBulkRedrive, in both tiers: three halt tenants halt at a file the core system
// refused; pipectl redrive --all-halted --dry-run lists them and does nothing, refuses without a
// terminal and without --yes, and with --yes redrives each once, after which every tenant's files
// are registered once, in order.
func TestScenarioBulkRedrive(t *testing.T) {
	t.Parallel()
	forEachTier(t, bulkTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{EnvFor: map[string][]string{controllerPkg: {"HALT_WAIT_SECONDS=1"}}})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		ids := []string{"h1", "h2", "h3"}
		var fixed atomic.Bool
		r.Sink.SetFault(func(_, source string, n int64, _ int) int {
			if strings.HasSuffix(source, "/1.csv") && n == 3 && !fixed.Load() {
				return 400
			}
			return 0
		})
		var files []upload
		for _, id := range ids {
			files = append(files, upload{id, "1.csv", csvOf(10)}, upload{id, "2.csv", csvOf(5)})
		}
		uploadAll(t, ctx, r, files)
		waitFor(t, ctx, r, "every tenant halted", func(rep *report.Report) bool {
			for _, id := range ids {
				if rep.Tenants[id].Halted == nil {
					return false
				}
			}
			return true
		})

		// A dry run lists the three and does nothing.
		out := pipectl(t, r, "redrive", "--all-halted", "--dry-run", "--stack-prefix", opsPrefix)
		for _, id := range ids {
			if !strings.Contains(out, id) {
				t.Errorf("dry run: got %q, want %s listed", out, id)
			}
		}
		if !strings.Contains(out, "dry run, nothing done): 3 of 3 tenants selected: 3 planned") {
			t.Errorf("dry run: got %q, want 3 planned", out)
		}
		// Without a terminal and without --yes: refused.
		if code, _, stderr := pipectlIn(t, r, "", "redrive", "--all-halted", "--stack-prefix", opsPrefix); code != 2 || !strings.Contains(stderr, "pass --yes") {
			t.Errorf("without --yes: got exit %d, %q; want 2 and a message naming --yes", code, stderr)
		}
		rep, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if f := fileOf(t, rep, id, "1.csv"); f.Status != "FAILED" || f.RedriveCount != 0 || rep.Tenants[id].Halted == nil {
				t.Errorf("%s after the dry run: got 1.csv %s, redrive count %d; want FAILED, 0, still halted", id, f.Status, f.RedriveCount)
			}
		}

		fixed.Store(true)
		var bulk ops.BulkReport
		if err := json.Unmarshal([]byte(pipectl(t, r, "redrive", "--all-halted", "--yes", "--json", "--reason", "core system fixed", "--stack-prefix", opsPrefix)), &bulk); err != nil {
			t.Fatal(err)
		}
		if bulk.Selected != 3 || bulk.Done != 3 || bulk.Failed != 0 {
			t.Errorf("bulk redrive: got %+v, want 3 selected, 3 done", bulk)
		}
		rep = drain(t, ctx, r)
		for _, id := range ids {
			if f := fileOf(t, rep, id, "1.csv"); f.Status != "SUCCEEDED" || f.RedriveCount != 1 {
				t.Errorf("%s: got 1.csv %s, redrive count %d; want SUCCEEDED after one redrive", id, f.Status, f.RedriveCount)
			}
			in := r.Tenant(id).Prefix
			assertOrderedOnce(t, r, id, []string{in + "1.csv", in + "2.csv"}, map[string]int64{in + "1.csv": 10, in + "2.csv": 5})
		}
		noViolations(t, rep)
	})
}
