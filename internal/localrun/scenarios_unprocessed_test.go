//go:build e2e || figures

package localrun

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/results"
)

const unprocessedTenants = `{"tenants": [
  {"id": "halter", "onFailure": "halt", "chunkSize": 7, "registerUrl": "https://core.example.com/records"},
  {"id": "strict", "chunkSize": 7, "registerUrl": "https://core.example.com/records"}
]}`

// TestScenarioFailedFileResults, in both tiers: a halt tenant's 50-record file fails permanently at
// record 23 (the core system answers 400). Its results are written although the state machine
// never reaches its results task: summary.json says FAILED with 22 registered and 28 unprocessed,
// unprocessed.csv is the header and exactly the records not registered, byte for byte, and the
// File Processed event carries those counts. Redriven once the core system is fixed, the file
// succeeds and its summary is replaced by the redrive's, with its own event. A failFile tenant's
// invalid file gets a summary naming the first invalid line, and nothing is registered.
func TestScenarioFailedFileResults(t *testing.T) {
	t.Parallel()
	bad := csv(20, false)
	bad = bytes.Replace(bad, []byte("13,name 13\n"), []byte("13\n"), 1) // record 13, line 14
	forEachTier(t, unprocessedTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		var fixed atomic.Bool
		r.Sink.SetFault(func(tenant, source string, n int64, _ int) int {
			if tenant == "halter" && strings.HasSuffix(source, "/big.csv") && n == 23 && !fixed.Load() {
				return 400 // permanent: the file fails, the tenant halts
			}
			return 0
		})
		body := csvOf(50)
		uploadAll(t, ctx, r, []upload{{"halter", "big.csv", body}, {"strict", "bad.csv", bad}})
		eventsOf := func(rep *report.Report, execution string) []results.Event {
			var out []results.Event
			for _, ev := range rep.FileEvents {
				if ev.Detail.Execution == execution {
					out = append(out, ev.Detail)
				}
			}
			return out
		}
		rep := waitFor(t, ctx, r, "big.csv and bad.csv failed and announced", func(rep *report.Report) bool {
			for _, f := range []*report.FileReport{maybeFile(rep, "halter", "big.csv"), maybeFile(rep, "strict", "bad.csv")} {
				if f == nil || f.Status != "FAILED" || len(eventsOf(rep, f.ExecutionName)) == 0 {
					return false
				}
			}
			return true
		})

		// The halted file: what was registered and what was not, exactly.
		big := fileOf(t, rep, "halter", "big.csv")
		var registered []int64
		for _, rec := range r.Sink.Registered("halter") {
			registered = append(registered, rec.RecordNumber)
		}
		sum := readSummary(t, ctx, r, "halter", big.ExecutionName)
		if sum.Status != "FAILED" || sum.RedriveCount != 0 || sum.Records != 50 || sum.Registered != 22 || sum.Rejected != 0 || sum.Unprocessed != 28 {
			t.Errorf("big.csv summary: got %s redrive %d, %d records, %d registered, %d rejected, %d unprocessed; want FAILED 0, 50, 22, 0, 28",
				sum.Status, sum.RedriveCount, sum.Records, sum.Registered, sum.Rejected, sum.Unprocessed)
		}
		if int64(len(registered)) != sum.Registered {
			t.Errorf("big.csv: the core system holds %d records, the summary says %d registered", len(registered), sum.Registered)
		}
		if sum.Failure == nil || sum.Failure.Type != "PermanentError" || !strings.Contains(sum.Failure.Message, "record 23") {
			t.Errorf("big.csv failure: got %+v, want a PermanentError naming record 23", sum.Failure)
		}
		if sum.Timings.Queued == nil || sum.Timings.Admitted == nil || sum.Timings.Started == nil || sum.Timings.Stopped == nil ||
			sum.Timings.Admitted.Before(*sum.Timings.Queued) || sum.Timings.Stopped.Before(*sum.Timings.Started) {
			t.Errorf("big.csv timings: got %+v, want queued ≤ admitted, started ≤ stopped, all four", sum.Timings)
		}
		wantURI := results.URI(r.Bucket, results.Key(r.Tenant("halter").Owner(), big.ExecutionName, results.UnprocessedCSV))
		if sum.Files.Unprocessed != wantURI {
			t.Errorf("big.csv unprocessed file: got %q, want %q", sum.Files.Unprocessed, wantURI)
		}
		unprocessed := readObject(t, ctx, r, results.Key(r.Tenant("halter").Owner(), big.ExecutionName, results.UnprocessedCSV))
		want := "id,name\n" + string(body[bytes.Index(body, []byte("\n23,"))+1:])
		if string(unprocessed) != want {
			t.Errorf("big.csv unprocessed.csv: got %q, want the header and records 23 to 50 as uploaded", unprocessed)
		}
		// Exactly the records not registered: together they are the file, and none is in both.
		var listed []int64
		for _, line := range strings.Split(strings.TrimSpace(string(unprocessed)), "\n")[1:] {
			n, _ := strconv.ParseInt(strings.SplitN(line, ",", 2)[0], 10, 64)
			listed = append(listed, n)
		}
		all := slices.Sorted(slices.Values(append(slices.Clone(registered), listed...)))
		if len(all) != 50 || slices.Compact(slices.Clone(all))[49] != 50 || len(slices.Compact(slices.Clone(all))) != 50 {
			t.Errorf("big.csv: registered %v and unprocessed %v are not the file's records 1 to 50 once each", registered, listed)
		}
		evs := eventsOf(rep, big.ExecutionName)
		if len(evs) != 1 || evs[0].Status != "FAILED" || evs[0].CountsFrom != results.CountsFromSummary ||
			evs[0].Records != 50 || evs[0].Registered != 22 || evs[0].Unprocessed != 28 || evs[0].EventID != big.ExecutionName+"/0" {
			t.Errorf("big.csv events: got %+v, want one FAILED event %s/0 counting 50, 22 registered, 28 unprocessed from the summary", evs, big.ExecutionName)
		}
		if big.Registered == nil || *big.Registered != 22 {
			t.Errorf("report.json big.csv registered: got %s, want 22", report.CountText(big.Registered))
		}

		// Where an operator looks: pipectl results by key prints the summary as stored and
		// downloads the files it names; pipectl files shows the counts.
		var got results.Summary
		if err := json.Unmarshal([]byte(pipectl(t, r, "results", "halter", big.Key, "--json", "--stack-prefix", opsPrefix)), &got); err != nil ||
			got.Execution != big.ExecutionName || got.Status != "FAILED" || got.Unprocessed != 28 {
			t.Errorf("pipectl results --json: got %+v (%v), want big.csv's FAILED summary with 28 unprocessed", got, err)
		}
		dir := t.TempDir()
		pipectl(t, r, "results", "halter", big.ExecutionName, "--out", dir, "--stack-prefix", opsPrefix)
		if b, err := os.ReadFile(filepath.Join(dir, results.UnprocessedCSV)); err != nil || string(b) != want {
			t.Errorf("pipectl results --out: got unprocessed.csv %q (%v), want what the pipeline wrote", b, err)
		}
		var files struct {
			Files []struct {
				ExecutionName string `json:"executionName"`
				Registered    *int64 `json:"registered"`
			} `json:"files"`
		}
		if err := json.Unmarshal([]byte(pipectl(t, r, "files", "halter", "--json", "--stack-prefix", opsPrefix)), &files); err != nil ||
			len(files.Files) != 1 || files.Files[0].Registered == nil || *files.Files[0].Registered != 22 {
			t.Errorf("pipectl files --json: got %+v (%v), want big.csv with 22 registered", files, err)
		}

		// The failFile tenant's invalid file: the summary names the first invalid line.
		badFile := fileOf(t, rep, "strict", "bad.csv")
		bs := readSummary(t, ctx, r, "strict", badFile.ExecutionName)
		if bs.Status != "FAILED" || bs.Failure == nil || bs.Failure.Type != "ValidationError" || bs.Failure.Line != 14 ||
			bs.Registered != 0 || bs.Files.Unprocessed != "" || bs.OnInvalidRecord != "failFile" {
			t.Errorf("bad.csv summary: got %+v (failure %+v), want FAILED, a ValidationError at line 14, nothing registered, no unprocessed file", bs, bs.Failure)
		}
		if n := len(r.Sink.Registered("strict")); n != 0 {
			t.Errorf("bad.csv: got %d records registered, want none", n)
		}
		if evs := eventsOf(rep, badFile.ExecutionName); len(evs) != 1 || evs[0].Failure == nil || evs[0].Failure.Line != 14 {
			t.Errorf("bad.csv events: got %+v, want one naming line 14", evs)
		}

		// Redriven after the fix: the redrive's own summary and event.
		fixed.Store(true)
		pipectl(t, r, "redrive", "halter", big.ExecutionName, "--reason", "core system fixed", "--stack-prefix", opsPrefix)
		rep = waitFor(t, ctx, r, "big.csv redriven and announced", func(rep *report.Report) bool {
			f := maybeFile(rep, "halter", "big.csv")
			return f != nil && f.Status == "SUCCEEDED" && len(eventsOf(rep, f.ExecutionName)) == 2
		})
		sum = readSummary(t, ctx, r, "halter", big.ExecutionName)
		if sum.Status != "SUCCEEDED" || sum.RedriveCount != 1 || sum.Registered != 50 || sum.Unprocessed != 0 || sum.Files.Unprocessed != "" {
			t.Errorf("big.csv after the redrive: got %s redrive %d, %d registered, %d unprocessed (%q); want SUCCEEDED 1, 50, 0, none",
				sum.Status, sum.RedriveCount, sum.Registered, sum.Unprocessed, sum.Files.Unprocessed)
		}
		if got := len(r.Sink.Registered("halter")); got != 50 {
			t.Errorf("big.csv after the redrive: the core system holds %d records, want 50", got)
		}
		evs = eventsOf(rep, big.ExecutionName)
		if evs[1].EventID != big.ExecutionName+"/1" || evs[1].Status != "SUCCEEDED" || evs[1].Registered != 50 {
			t.Errorf("big.csv redrive event: got %+v, want %s/1 SUCCEEDED with 50 registered", evs[1], big.ExecutionName)
		}
	})
}

// maybeFile is the report's file tenant/rel, nil while it has none.
func maybeFile(rep *report.Report, tenant, rel string) *report.FileReport {
	tr, ok := rep.Tenants[tenant]
	if !ok {
		return nil
	}
	for i := range tr.Files {
		if strings.HasSuffix(tr.Files[i].Key, "/"+rel) {
			return &tr.Files[i]
		}
	}
	return nil
}

func readObject(t *testing.T, ctx context.Context, r *Run, key string) []byte {
	t.Helper()
	out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readSummary(t *testing.T, ctx context.Context, r *Run, tenant, execution string) results.Summary {
	t.Helper()
	var s results.Summary
	if err := json.Unmarshal(readObject(t, ctx, r, results.Key(r.Tenant(tenant).Owner(), execution, results.SummaryFile)), &s); err != nil {
		t.Fatalf("%s/%s summary.json: %v", tenant, execution, err)
	}
	return s
}
