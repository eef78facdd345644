package localrun

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/cost"
)

// costTenants are the three workloads of the cost figure: record mode (100 records per chunk),
// batch mode (1,000 per chunk), and small files of one chunk each.
const costTenants = `{"tenants": [
  {"id": "rec", "chunkSize": 100, "registerUrl": "https://core.example.com/records"},
  {"id": "bat", "chunkSize": 1000, "registerMode": "batch", "registerUrl": "https://core.example.com/records"},
  {"id": "small", "chunkSize": 100, "registerUrl": "https://core.example.com/records"}
]}`

// The workloads of the cost figure: one record-mode file, one batch-mode file (large, as batch mode
// is for: its cost per record is the file's fixed cost spread over its records) and small files
// uploaded at once. Every request of the sink is answered costLatency late.
const (
	costRecordFile  = 4000
	costBatchFile   = 100000
	costSmallFiles  = 20
	costSmallRecord = 10
	costLatency     = 20 * time.Millisecond
)

// registerDesignKey is the CDK context key that selects Register's design: per-invocation (the
// default: one invocation registers many chunks) or per-chunk (one invocation per chunk, the design
// before it). An app that does not know the key ignores it.
const registerDesignKey = "registerDesign"

// costFigure is the priced usage of the three workloads, scaled to their units.
type costFigure struct {
	record, batch, small                cost.Usage // per 1M records, per 1M records, per 1,000 files
	recordBill, batchBill, smallBill    cost.Bill
	smallTransitionsEach, latencyMillis float64
}

func (c costFigure) line() string {
	return fmt.Sprintf("cost: record $%.3f per 1M records (%s transitions), batch $%.4f per 1M records (%s transitions), small files $%.3f per 1,000 files (%s transitions each); us-east-1 list prices, %.0f ms core latency",
		c.recordBill.Total(), count(c.record.StateTransitions), c.batchBill.Total(), count(c.batch.StateTransitions),
		c.smallBill.Total(), count(c.smallTransitionsEach), c.latencyMillis)
}

// count prints a count whole when it is, with one decimal otherwise.
func count(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// TestFiguresCost measures the cost figure (make figures): the pipeline's billed usage, counted on
// the local run (state transitions, Lambda requests and GB-seconds, S3 and SQS requests), scaled to
// 1M records or 1,000 files and priced at us-east-1 list prices (internal/cost). It prints one
// line for the default Register design and one, prefixed, for the per-chunk design before it.
func TestFiguresCost(t *testing.T) {
	if os.Getenv("LOCALRUN_FIGURES") == "" {
		t.Skip("set LOCALRUN_FIGURES=1 to measure the figures (takes minutes)")
	}
	now := measureCost(t, nil)
	before := measureCost(t, map[string]string{registerDesignKey: "per-chunk"})
	// Printed as plain lines, so make figures shows them as they are.
	fmt.Println(now.line())
	fmt.Println("(before, per-chunk Register: " + before.line() + ")")
	for _, g := range []struct {
		what  string
		bill  cost.Bill
		goal  float64
		units string
	}{
		{"record", now.recordBill, 0.10, "1M records"},
		{"batch", now.batchBill, 0.01, "1M records"},
		{"small files", now.smallBill, 0.10, "1,000 files"},
	} {
		verdict := "meets"
		if g.bill.Total() > g.goal {
			verdict = "misses"
		}
		t.Logf("%s: $%.4f per %s %s the goal of $%.2f; largest term %s $%.4f", g.what, g.bill.Total(), g.units, verdict, g.goal, g.bill.Terms()[0].Name, g.bill.Terms()[0].Dollars)
	}
}

// measureCost runs the three workloads one after another on the app synthesized with extra
// context, and prices each workload's own usage: the difference of its tenant's usage across its
// phase (an idle tenant's event source mapping keeps polling its queue).
func measureCost(t *testing.T, extra map[string]string) costFigure {
	t.Helper()
	r := startScenarioWith(t, costTenants, extra, Config{SinkLatency: costLatency})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	phase := func(tenant string, files []upload) cost.Usage {
		t.Helper()
		start, err := r.Usage(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		uploadAll(t, ctx, r, files)
		rep := drain(t, ctx, r)
		// The controller's wake-up on the last execution's end is an asynchronous invocation that
		// the drained run does not wait for.
		time.Sleep(2 * time.Second)
		for _, f := range rep.Tenants[tenant].Files {
			if f.Status != "SUCCEEDED" {
				t.Fatalf("%s %s: got %s, want SUCCEEDED", tenant, f.Key, f.Status)
			}
		}
		end, err := r.Usage(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		used := end.Add(start.Scale(-1))
		if used.StateTransitions <= 0 || used.LambdaGBSeconds <= 0 || used.SQSRequests <= 0 || used.S3Tier1Requests <= 0 || used.S3Tier2Requests <= 0 {
			t.Fatalf("%s: got usage %+v, want every term counted", tenant, used)
		}
		t.Logf("%s %v: measured %+v", tenant, extra, used)
		return used
	}
	var small []upload
	for i := range costSmallFiles {
		small = append(small, upload{"small", fmt.Sprintf("%02d.csv", i+1), csvOf(costSmallRecord)})
	}
	smallUsed := phase("small", small)
	batchUsed := phase("bat", []upload{{"bat", "big.csv", csvOf(costBatchFile)}})
	recordUsed := phase("rec", []upload{{"rec", "file.csv", csvOf(costRecordFile)}})
	rep, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertInvariants(t, r, rep, nil, false)
	for id, want := range map[string]int64{"rec": costRecordFile, "bat": costBatchFile, "small": costSmallFiles * costSmallRecord} {
		if got := rep.Tenants[id].RecordsRegistered; got != want {
			t.Errorf("%s: got %d records registered, want %d", id, got, want)
		}
	}

	c := costFigure{
		record:               cost.Per(recordUsed, costRecordFile, 1e6),
		batch:                cost.Per(batchUsed, costBatchFile, 1e6),
		small:                cost.Per(smallUsed, costSmallFiles, 1000),
		smallTransitionsEach: smallUsed.StateTransitions / costSmallFiles,
		latencyMillis:        float64(costLatency.Milliseconds()),
	}
	c.recordBill, c.batchBill, c.smallBill = cost.USEast1.Price(c.record), cost.USEast1.Price(c.batch), cost.USEast1.Price(c.small)
	for _, m := range []struct {
		what string
		b    cost.Bill
	}{{"record per 1M records", c.recordBill}, {"batch per 1M records", c.batchBill}, {"small files per 1,000 files", c.smallBill}} {
		var terms []string
		for _, term := range m.b.Terms() {
			terms = append(terms, fmt.Sprintf("%s $%.4f", term.Name, term.Dollars))
		}
		t.Logf("%v %s: %s", extra, m.what, strings.Join(terms, ", "))
	}
	return c
}
