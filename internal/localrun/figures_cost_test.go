//go:build figures

package localrun

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/cost"
)

// costTenants are the workloads of the cost figure: record mode (100 records per chunk; a file
// within the small-file bound, so on the small-file path, and the same file for "recfull", which
// has no small-file path), batch mode (1,000 per chunk), small files of one chunk each, in a silo
// and in a pool (whose tenant credentials and Contributor Insights rules only a pool has), and a
// realistic mix of small files of 1 to 5 chunks ("mix"), all registering into one core system, so
// that admission's DynamoDB calls are in the figure.
const costTenants = `{"coreSystems": {"core": {"maxRunningFiles": 4}}, "pools": {"shared": {}}, "tenants": [
  {"id": "psmall", "tier": "pool", "pool": "shared", "chunkSize": 100, "coreSystem": "core", "registerUrl": "https://core.example.com/records"},
  {"id": "rec", "chunkSize": 100, "coreSystem": "core", "registerUrl": "https://core.example.com/records"},
  {"id": "recfull", "chunkSize": 100, "smallFileBytes": -1, "coreSystem": "core", "registerUrl": "https://core.example.com/records"},
  {"id": "mix", "chunkSize": 100, "coreSystem": "core", "registerUrl": "https://core.example.com/records"},
  {"id": "bat", "chunkSize": 1000, "registerMode": "batch", "coreSystem": "core", "registerUrl": "https://core.example.com/records"},
  {"id": "small", "chunkSize": 100, "coreSystem": "core", "registerUrl": "https://core.example.com/records"}
]}`

// The workloads of the cost figure: one record-mode file, one batch-mode file (large, as batch mode
// is for: its cost per record is the file's fixed cost spread over its records) and small files
// uploaded at once. Every request of the sink is answered costLatency late.
const (
	costRecordFile  = 4000
	costBatchFile   = 100000
	costSmallFiles  = 20
	costSmallRecord = 10
	costMixFiles    = 40
	costLatency     = 20 * time.Millisecond
)

// mixRows is the records of file i of the realistic mix: 20 to 500, spread by a fixed stride.
func mixRows(i int) int { return 20 + i*373%481 }

// mixFile is a CSV file of rows records of mixRowBytes bytes each (an order line: id, customer,
// product, quantity, amount, note), so that 20 to 500 records make 1.2 to 29.5 KB.
func mixFile(rows int) []byte {
	var b strings.Builder
	b.WriteString("id,customer,product,quantity,amount,note\n")
	for n := 1; n <= rows; n++ {
		line := fmt.Sprintf("%d,C%06d,P%05d,%d,%.2f,", n, n*7919%1000000, n*104729%100000, 1+n%9, float64(n*7%10000)/100)
		b.WriteString(line + strings.Repeat("x", mixRowBytes-1-len(line)) + "\n")
	}
	return []byte(b.String())
}

const mixRowBytes = 59

// registerDesignKey is the CDK context key that selects Register's design: per-invocation (the
// default: one invocation registers many chunks) or per-chunk (one invocation per chunk, the design
// before it). An app that does not know the key ignores it.
const registerDesignKey = "registerDesign"

// costFigure is the priced usage of the workloads, scaled to their units.
type costFigure struct {
	record, batch, small, pooled                 cost.Usage // per 1M records, per 1M records, per 1,000 files (twice)
	recordBill, batchBill, smallBill, pooledBill cost.Bill
	smallTransitionsEach, latencyMillis          float64
	// full: record mode on the full path and the realistic mix, measured only when set.
	full                         bool
	recordFull, mix              cost.Usage // per 1M records, per 1,000 files
	recordFullBill, mixBill      cost.Bill
	mixTransitionsEach, mixFiles float64
}

func (c costFigure) line() string {
	full, mix := "", ""
	if c.full {
		full = fmt.Sprintf(", record (full path) $%.3f per 1M records (%s transitions)", c.recordFullBill.Total(), count(c.recordFull.StateTransitions))
		mix = fmt.Sprintf(", small files (realistic mix) $%.3f per 1,000 files (%s transitions each)", c.mixBill.Total(), count(c.mixTransitionsEach))
	}
	return fmt.Sprintf("cost: record $%.3f per 1M records (%s transitions)%s, batch $%.4f per 1M records (%s transitions), small files $%.3f per 1,000 files (%s transitions each)%s; us-east-1 list prices, %.0f ms core latency",
		c.recordBill.Total(), count(c.record.StateTransitions), full, c.batchBill.Total(), count(c.batch.StateTransitions),
		c.smallBill.Total(), count(c.smallTransitionsEach), mix, c.latencyMillis)
}

// counted is the second line: the terms counted beside the requests and the duration, per unit.
func (c costFigure) counted() string {
	term := func(u cost.Usage, b cost.Bill) string {
		line := fmt.Sprintf("DynamoDB %s (%s RRU, %s WRU), logs %s (%.1f MB), Contributor Insights %s (%s matched), STS %s (%s AssumeRole)",
			dollars(b.DynamoDB), count(u.DynamoDBReadUnits), count(u.DynamoDBWriteUnits), dollars(b.Logs), u.LogBytes/1e6,
			dollars(b.Insights), count(u.InsightMatches), dollars(b.STS), count(u.STSCalls))
		if u.APIGatewayRequests > 0 {
			line += fmt.Sprintf(", API Gateway %s (%s requests)", dollars(b.APIGateway), count(u.APIGatewayRequests))
		}
		return line
	}
	line := fmt.Sprintf("cost-counted: record %s per 1M records; batch %s per 1M records; small files %s per 1,000 files; pooled small files $%.3f per 1,000 files, of which %s",
		term(c.record, c.recordBill), term(c.batch, c.batchBill), term(c.small, c.smallBill), c.pooledBill.Total(), term(c.pooled, c.pooledBill))
	if c.full {
		line += fmt.Sprintf("; record (full path) %s per 1M records; small files (realistic mix) %s per 1,000 files",
			term(c.recordFull, c.recordFullBill), term(c.mix, c.mixBill))
	}
	return line
}

// dollars prints an amount with two significant digits, at least four decimals: a small term
// shows as what it is, not as $0.0000.
func dollars(v float64) string {
	if v == 0 {
		return "$0"
	}
	return fmt.Sprintf("$%.*f", max(4, 1-int(math.Floor(math.Log10(v)))), v)
}

// count prints a count whole when it is, with one decimal otherwise.
func count(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// TestFiguresCost measures the cost figure (make figures): the pipeline's billed usage, counted on
// the local run (state transitions, Lambda requests and GB-seconds, S3, SQS and API Gateway
// requests, File Processed events, DynamoDB request units, log bytes, Contributor Insights
// matches, AssumeRole calls), scaled to 1M records or 1,000 files and priced at us-east-1 list prices (internal/cost).
// It prints two lines for the default Register design (the totals, then the terms counted beside
// the requests and duration) and two, prefixed, for the per-chunk design before it, which has no
// small-file path and so neither record mode on the full path nor the realistic mix apart.
func TestFiguresCost(t *testing.T) {
	now := measureCost(t, nil, true)
	before := measureCost(t, map[string]string{registerDesignKey: "per-chunk"}, false)
	// Printed as plain lines, so make figures shows them as they are.
	fmt.Println(now.line())
	fmt.Println(now.counted())
	fmt.Println("(before, per-chunk Register: " + before.line() + ")")
	fmt.Println("(before, per-chunk Register: " + before.counted() + ")")
	for _, g := range []struct {
		what  string
		bill  cost.Bill
		goal  float64
		units string
	}{
		{"record", now.recordBill, 0.08, "1M records"},
		{"batch", now.batchBill, 0.01, "1M records"},
		{"small files", now.smallBill, 0.10, "1,000 files"},
		{"record (full path)", now.recordFullBill, 0.08, "1M records"},
		{"small files (realistic mix)", now.mixBill, 0.10, "1,000 files"},
	} {
		verdict := "meets"
		if g.bill.Total() > g.goal {
			verdict = "misses"
		}
		t.Logf("%s: $%.4f per %s %s the goal of $%.2f; largest term %s $%.4f", g.what, g.bill.Total(), g.units, verdict, g.goal, g.bill.Terms()[0].Name, g.bill.Terms()[0].Dollars)
	}
	verdict := "meets"
	if now.mixTransitionsEach != 2 {
		verdict = "misses"
	}
	t.Logf("small files (realistic mix): %s transitions per file %s the goal of 2 (%.0f files of 20 to 500 records, 1 to 30 KB)", count(now.mixTransitionsEach), verdict, now.mixFiles)
}

// measureCost runs the three workloads one after another on the app synthesized with extra
// context, and prices each workload's own usage: the difference of its tenant's usage across its
// phase (an idle tenant's event source mapping keeps polling its queue).
// With full it also runs record mode on the full path and the realistic mix of small files.
func measureCost(t *testing.T, extra map[string]string, full bool) costFigure {
	t.Helper()
	r := startScenarioWith(t, costTenants, extra, Config{Core: CoreOptions{Latency: costLatency}})
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
		if used.StateTransitions <= 0 || used.LambdaGBSeconds <= 0 || used.SQSRequests <= 0 || used.S3Tier1Requests <= 0 || used.S3Tier2Requests <= 0 ||
			used.DynamoDBReadUnits <= 0 || used.DynamoDBWriteUnits <= 0 || used.LogBytes <= 0 {
			t.Fatalf("%s: got usage %+v, want every term counted", tenant, used)
		}
		t.Logf("%s %v: measured %+v", tenant, extra, used)
		return used
	}
	smallFiles := func(tenant string) []upload {
		var files []upload
		for i := range costSmallFiles {
			files = append(files, upload{tenant, fmt.Sprintf("%02d.csv", i+1), csvOf(costSmallRecord)})
		}
		return files
	}
	smallUsed := phase("small", smallFiles("small"))
	pooledUsed := phase("psmall", smallFiles("psmall"))
	if pooledUsed.STSCalls <= 0 {
		t.Errorf("psmall: got %v AssumeRole calls, want the pool's tenant sessions counted", pooledUsed.STSCalls)
	}
	// The pool's per-tenant intake: one API Gateway request per file's event.
	if pooledUsed.APIGatewayRequests != costSmallFiles {
		t.Errorf("psmall: got %v API Gateway requests, want %d (one per file)", pooledUsed.APIGatewayRequests, costSmallFiles)
	}
	batchUsed := phase("bat", []upload{{"bat", "big.csv", csvOf(costBatchFile)}})
	recordUsed := phase("rec", []upload{{"rec", "file.csv", csvOf(costRecordFile)}})
	registered := map[string]int64{"rec": costRecordFile, "bat": costBatchFile, "small": costSmallFiles * costSmallRecord, "psmall": costSmallFiles * costSmallRecord}
	var recordFullUsed, mixUsed cost.Usage
	if full {
		recordFullUsed = phase("recfull", []upload{{"recfull", "file.csv", csvOf(costRecordFile)}})
		var mix []upload
		var rows int64
		for i := range costMixFiles {
			body := mixFile(mixRows(i))
			if len(body) < 1000 || len(body) > 30000 {
				t.Fatalf("mix file %d: %d bytes, want 1 to 30 KB", i, len(body))
			}
			mix = append(mix, upload{"mix", fmt.Sprintf("%02d.csv", i+1), body})
			rows += int64(mixRows(i))
		}
		mixUsed = phase("mix", mix)
		registered["recfull"], registered["mix"] = costRecordFile, rows
	}
	rep, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertInvariants(t, r, rep, nil, false)
	for id, want := range registered {
		if got := rep.Tenants[id].RecordsRegistered; got != want {
			t.Errorf("%s: got %d records registered, want %d", id, got, want)
		}
	}

	c := costFigure{
		record:               cost.Per(recordUsed, costRecordFile, 1e6),
		batch:                cost.Per(batchUsed, costBatchFile, 1e6),
		small:                cost.Per(smallUsed, costSmallFiles, 1000),
		pooled:               cost.Per(pooledUsed, costSmallFiles, 1000),
		smallTransitionsEach: smallUsed.StateTransitions / costSmallFiles,
		latencyMillis:        float64(costLatency.Milliseconds()),
	}
	c.recordBill, c.batchBill, c.smallBill, c.pooledBill = cost.USEast1.Price(c.record), cost.USEast1.Price(c.batch), cost.USEast1.Price(c.small), cost.USEast1.Price(c.pooled)
	bills := []struct {
		what string
		b    cost.Bill
	}{{"record per 1M records", c.recordBill}, {"batch per 1M records", c.batchBill}, {"small files per 1,000 files", c.smallBill}, {"pooled small files per 1,000 files", c.pooledBill}}
	if full {
		c.full, c.mixFiles = true, costMixFiles
		c.recordFull, c.mix = cost.Per(recordFullUsed, costRecordFile, 1e6), cost.Per(mixUsed, costMixFiles, 1000)
		c.recordFullBill, c.mixBill = cost.USEast1.Price(c.recordFull), cost.USEast1.Price(c.mix)
		c.mixTransitionsEach = mixUsed.StateTransitions / costMixFiles
		bills = append(bills, bills[0], bills[0])
		bills[4].what, bills[4].b = "record (full path) per 1M records", c.recordFullBill
		bills[5].what, bills[5].b = "small files (realistic mix) per 1,000 files", c.mixBill
	}
	for _, m := range bills {
		var terms []string
		for _, term := range m.b.Terms() {
			terms = append(terms, fmt.Sprintf("%s $%.4f", term.Name, term.Dollars))
		}
		t.Logf("%v %s: %s", extra, m.what, strings.Join(terms, ", "))
	}
	return c
}
