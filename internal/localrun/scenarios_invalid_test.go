package localrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// TestScenarioInvalidRecords: files with malformed records, in both tiers, one run per tier for
// the tenants of testdata/results/tenants.json. orders.csv has 60 records, of which 13, 31 and 47
// (lines 14, 32 and 48) are malformed. Under skipRecord the file succeeds, the 57 others are
// registered in order with their own record numbers, parts/split.jsonl names the three lines, and
// rejected.csv and summary.json say so; under failFile nothing is registered and the failure names
// line 14. A CP932 file and a JSON Lines file with malformed records get their rejected files in
// their own form (checkResultsCP932, checkResultsJSONL), and every file's end is announced once
// with the summary's counts.
func TestScenarioInvalidRecords(t *testing.T) {
	t.Parallel()
	orders := resultsFixture(t, "orders.csv")
	kana, lines := resultsFixture(t, "cp932.csv"), resultsFixture(t, "orders.jsonl")
	bad := map[int64]string{13: "13", 31: `31,"x"y`, 47: "47,a,b"}
	var want []int64
	for i := int64(1); i <= 60; i++ {
		if _, ok := bad[i]; !ok {
			want = append(want, i)
		}
	}
	forEachTier(t, string(resultsFixture(t, "tenants.json")), func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		r.Sink.SetKeepRecords(true)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		files := []upload{{"skipper", "orders.csv", orders}, {"failer", "orders.csv", orders}, {"sjis", "cp932.csv", kana}, {"lines", "orders.jsonl", lines}}
		uploadAll(t, ctx, r, files)
		rep := drain(t, ctx, r)

		t.Run("skipRecord", func(t *testing.T) {
			f := fileOf(t, rep, "skipper", "orders.csv")
			if f.Status != pipeline.StatusSucceeded {
				t.Fatalf("skipper: got %s (%s %s), want SUCCEEDED", f.Status, f.Error, f.Cause)
			}
			if got := recordNumbers(registeredOf(r, "skipper", f.Key)); !reflect.DeepEqual(got, want) {
				t.Errorf("skipper: got records %v, want %v", got, want)
			}
			out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(results.PartKey("skipper", f.ExecutionName, results.SplitPart))})
			if err != nil {
				t.Fatalf("skipper: reading %s: %v", results.SplitPart, err)
			}
			part, _ := io.ReadAll(out.Body)
			out.Body.Close()
			var lines []int64
			var raw []string
			sc := bufio.NewScanner(bytes.NewReader(part))
			for sc.Scan() {
				var rj results.Rejection
				if err := json.Unmarshal(sc.Bytes(), &rj); err != nil {
					t.Fatalf("part line %q: %v", sc.Text(), err)
				}
				lines, raw = append(lines, rj.Line), append(raw, string(rj.Raw))
			}
			if w := []int64{14, 32, 48}; !reflect.DeepEqual(lines, w) {
				t.Errorf("skipper: got rejected lines %v, want %v", lines, w)
			}
			if w := []string{bad[13], bad[31], bad[47]}; !reflect.DeepEqual(raw, w) {
				t.Errorf("skipper: got rejected rows %q, want %q", raw, w)
			}

			body := mustResult(t, ctx, r, "skipper", f.ExecutionName, results.RejectedCSV)
			checkRejectedCSV(t, body, orders, nil, []string{"id", "name", "_line", "_record", "_error"}, []rejectedRow{{14, 13}, {32, 31}, {48, 47}})
			// pipectl validate --out writes the same file (cmd/pipectl, TestValidateResultsFixtures).
			if w := resultsFixture(t, "orders.csv.rejected.csv"); !bytes.Equal(body, w) {
				t.Errorf("skipper: got rejected.csv %q, want testdata/results/orders.csv.rejected.csv %q", body, w)
			}
			checkSucceededSummary(t, ctx, r, rep, "skipper", f, results.Counts{Records: 60, Registered: 57, Rejected: 3}, pipeline.OnInvalidSkipRecord, results.RejectedCSV)
		})

		t.Run("failFile", func(t *testing.T) {
			f := fileOf(t, rep, "failer", "orders.csv")
			if f.Status != pipeline.StatusFailed || !strings.Contains(f.Cause, "line 14") {
				t.Errorf("failer: got %s (%s %s), want FAILED naming line 14", f.Status, f.Error, f.Cause)
			}
			if n := len(r.Sink.Registered("failer")); n != 0 {
				t.Errorf("failer: got %d records registered, want none", n)
			}
		})

		t.Run("cp932", func(t *testing.T) { checkResultsCP932(t, ctx, r, rep, "sjis", "cp932.csv", kana) })
		t.Run("jsonl", func(t *testing.T) { checkResultsJSONL(t, ctx, r, rep, "lines", "orders.jsonl", lines) })
		t.Run("events", func(t *testing.T) { checkFileEvents(t, ctx, r, rep, files) })
	})
}
