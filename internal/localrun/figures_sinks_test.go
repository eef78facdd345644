//go:build figures

package localrun

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dyntypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// keyedFigureKeys is how many distinct keys the keyed figure's file cycles through.
const keyedFigureKeys = 1000

// figureTenants are the three sinks side by side: record mode with 100 records per
// chunk, batch mode with 1,000, and the DynamoDB sink with 1,000 (16 writes at once, the default);
// and record mode in key order with 8 requests in flight (the default), once over 1,000 distinct
// keys and once with every record under one key.
const figureTenants = `{"tenants": [
  {"id": "rec", "chunkSize": 100, "registerUrl": "https://core.example.com/records"},
  {"id": "key", "chunkSize": 100, "recordOrder": "key", "keyColumns": ["customer"], "registerUrl": "https://core.example.com/records"},
  {"id": "key1", "chunkSize": 100, "recordOrder": "key", "keyColumns": ["customer"], "registerUrl": "https://core.example.com/records"},
  {"id": "bat", "chunkSize": 1000, "registerMode": "batch", "registerUrl": "https://core.example.com/records"},
  {"id": "ddb", "chunkSize": 1000, "dynamodb": {"key": ["id"], "table": "ddb-items"}}
]}`

// TestFiguresRegisterThroughput measures the figures (make figures): the same files through
// each sink in one run, every request of the embedded sink and of DynamoDB answered 10 ms late.
// A sink's rate is its records over the summed time its file executions ran (start to stop:
// Split, every chunk, the workflow's own steps), which is what the workflow timeout bounds.
func TestFiguresRegisterThroughput(t *testing.T) {
	const (
		latency = 10 * time.Millisecond
		files   = 2
		records = 6000
	)
	r := startScenario(t, figureTenants, Config{Core: CoreOptions{Latency: latency}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var batch []upload
	for i := range files {
		for _, id := range []string{"rec", "bat", "ddb"} {
			batch = append(batch, upload{id, fmt.Sprintf("%02d.csv", i+1), csvOf(records)})
		}
		batch = append(batch, upload{"key", fmt.Sprintf("%02d.csv", i+1), csvKeyed(records, keyedFigureKeys)},
			upload{"key1", fmt.Sprintf("%02d.csv", i+1), csvKeyed(records, 1)})
	}
	uploadAll(t, ctx, r, batch)
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)

	rate := map[string]float64{}
	for _, id := range []string{"rec", "bat", "ddb", "key", "key1"} {
		var busy time.Duration
		for _, f := range rep.Tenants[id].Files {
			if f.Status != "SUCCEEDED" || f.StartedAt == nil || f.StoppedAt == nil {
				t.Fatalf("%s %s: got %s, want SUCCEEDED", id, f.Key, f.Status)
			}
			busy += f.StoppedAt.Sub(*f.StartedAt)
		}
		rate[id] = files * records / busy.Seconds()
	}
	for _, id := range []string{"rec", "bat", "key", "key1"} {
		if got := rep.Tenants[id].RecordsRegistered; got != files*records {
			t.Errorf("%s: got %d records registered, want %d", id, got, files*records)
		}
	}
	var items int32
	for p := dynamodb.NewScanPaginator(r.DynamoDB(), &dynamodb.ScanInput{TableName: aws.String("ddb-items"), Select: dyntypes.SelectCount}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		items += page.Count
	}
	// The files repeat ids 1..records, so the table holds one item per id.
	if items != records {
		t.Errorf("ddb-items: got %d items, want %d", items, records)
	}
	if got, want := rep.APICalls["dynamodb"]["PutItem"], int64(files*records); got != want {
		t.Errorf("DynamoDB PutItem calls: got %d, want %d", got, want)
	}

	ms := latency.Seconds() * 1000
	line := fmt.Sprintf("register-throughput: record %.0f rec/s, record-keyed %.0f rec/s (%d keys, %d in flight), batch %.0f rec/s, dynamodb %.0f rec/s at %.0f ms core latency; record-keyed/record %.1f, batch/record %.1f, dynamodb/record %.1f",
		rate["rec"], rate["key"], keyedFigureKeys, pipeline.DefaultMaxRecordsInFlight, rate["bat"], rate["ddb"], ms, rate["key"]/rate["rec"], rate["bat"]/rate["rec"], rate["ddb"]/rate["rec"])
	oneKey := fmt.Sprintf("register-throughput-one-key: record-keyed %.0f rec/s with every record under one key, record %.0f rec/s, at %.0f ms core latency; one-key/record %.2f",
		rate["key1"], rate["rec"], ms, rate["key1"]/rate["rec"])
	peak, peak1 := r.Sink.PeakInFlight("key"), r.Sink.PeakInFlight("key1")

	// The limits arithmetic: each sink's time per record is latency plus a fixed overhead, per
	// record (record mode), per chunk of 1,000 (batch), or per write with 16 at once (DynamoDB);
	// the overheads are fitted to this run, and the largest file is what one workflow timeout (24 h,
	// the construct's default) registers at 5, 20 and 50 ms.
	perRecord := 1/rate["rec"] - latency.Seconds()
	perChunk := 1000/rate["bat"] - latency.Seconds()
	perWrite := 16/rate["ddb"] - latency.Seconds()
	day := (24 * time.Hour).Seconds()
	var limits strings.Builder
	limits.WriteString("largest file in the 24 h workflow timeout (records; fitted overheads: ")
	fmt.Fprintf(&limits, "record %.2f ms/record, batch %.1f ms/chunk, dynamodb %.2f ms/write at 16 at once):", perRecord*1000, perChunk*1000, perWrite*1000)
	for _, l := range []float64{0.005, 0.020, 0.050} {
		fmt.Fprintf(&limits, " at %.0f ms: record %.1f M, batch %.0f M, dynamodb %.1f M;", l*1000,
			day/(l+perRecord)/1e6, day*1000/(l+perChunk)/1e6, day*16/(l+perWrite)/1e6)
	}
	// Printed as plain lines, so make figures shows them as they are.
	fmt.Println(line)
	fmt.Println(oneKey)
	fmt.Println(strings.TrimSuffix(limits.String(), ";"))
	writeFigure(t, "register-throughput.svg", throughputFigure(rate["rec"], rate["key"], rate["bat"], rate["ddb"], ms).SVG())

	// Invariants, not timing: the keyed tenant kept several requests in flight and never more than
	// its window; with one key, never two (the sink's own check flags two of one key at once).
	if peak < 2 || peak > pipeline.DefaultMaxRecordsInFlight || peak1 != 1 {
		t.Errorf("requests in flight at once: got %d for %d keys and %d for one key, want 2..%d and 1", peak, keyedFigureKeys, peak1, pipeline.DefaultMaxRecordsInFlight)
	}
	if got := rate["bat"] / rate["rec"]; got < 20 {
		t.Errorf("batch/record: got %.1f, want >= 20", got)
	}
	if got := rate["ddb"] / rate["rec"]; got < 5 {
		t.Errorf("dynamodb/record: got %.1f, want >= 5", got)
	}
}
