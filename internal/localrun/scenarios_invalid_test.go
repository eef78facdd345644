//go:build e2e || figures

package localrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
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
			out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(results.PartKey(r.Tenant("skipper").Owner(), f.ExecutionName, results.SplitPart))})
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
			checkRejectedCSV(t, body, orders, nil, []string{"_line", "_record", "_error", "id", "name"}, []rejectedRow{{14, 13}, {48, 47}})
			// Record 31 has a stray quote: not CSV, so in rejected.jsonl beside it.
			notCSV := mustResult(t, ctx, r, "skipper", f.ExecutionName, results.RejectedJSONL)
			checkRejectedNotCSV(t, notCSV, orders, []rejectedRow{{32, 31}})
			// pipectl validate --out writes the same files (cmd/pipectl, TestValidateResultsFixtures).
			for _, c := range []struct {
				name string
				got  []byte
			}{{results.RejectedCSV, body}, {results.RejectedJSONL, notCSV}} {
				if w := resultsFixture(t, "orders.csv."+c.name); !bytes.Equal(c.got, w) {
					t.Errorf("skipper: got %s %q, want testdata/results/orders.csv.%s %q", c.name, c.got, c.name, w)
				}
			}
			checkSucceededSummary(t, ctx, r, rep, "skipper", f, results.Counts{Records: 60, Registered: 57, Rejected: 3}, pipeline.OnInvalidSkipRecord, results.RejectedCSV, results.RejectedJSONL)
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
		t.Run("validate", func(t *testing.T) { checkValidateDeployed(t, r, files) })
	})
}

// checkValidateDeployed runs pipectl validate on the scenario's files from a directory with no
// tenants.json, so it reads each tenant's deployed settings: skipRecord (skipper), CP932
// (sjis) and JSON Lines (lines), which the defaults (failFile, UTF-8 CSV) would refuse, accept
// their files, and failFile (failer) refuses orders.csv; --out writes the rejected file the
// pipeline wrote to results/ (testdata/results).
func checkValidateDeployed(t *testing.T, r *Run, files []upload) {
	dir := t.TempDir()
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.rel), f.body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		tenant, file string
		code         int
		verdict      string // the file's line
		golden       string // the rejected file --out writes
	}{
		{"skipper", "orders.csv", 0, "orders.csv: 60 records, 57 valid, 3 rejected: accepted: 3 rejected (skipRecord, at most 1000)", "orders.csv.rejected.csv"},
		{"failer", "orders.csv", 1, "orders.csv: 60 records, 57 valid, 3 rejected: rejected: line 14: ", "orders.csv.rejected.csv"},
		{"sjis", "cp932.csv", 0, "cp932.csv: 10 records, 7 valid, 3 rejected: accepted: 3 rejected (skipRecord, at most 1000)", "cp932.csv.rejected.csv"},
		{"lines", "orders.jsonl", 0, "orders.jsonl: 5 records, 3 valid, 2 rejected: accepted: 2 rejected (skipRecord, at most 1000)", "orders.jsonl.rejected.jsonl"},
	}
	for _, c := range cases {
		out := t.TempDir()
		code, stdout, stderr := pipectlIn(t, r, dir, "validate", c.tenant, c.file, "--stack-prefix", opsPrefix, "--out", out)
		if code != c.code || !strings.HasPrefix(stdout, c.verdict) {
			t.Errorf("validate %s %s: got exit %d, stdout %q (stderr %q); want exit %d and %q", c.tenant, c.file, code, stdout, stderr, c.code, c.verdict)
		}
		where := "silo, the " + pipeline.EnvTenant + " variable of function "
		if tn := r.Tenant(c.tenant); tn.Pooled() {
			where = "pool " + tn.Pool + ", its " + pipeline.PoolSettingsFile + " in the code of function "
		}
		if note := `validate: settings of tenant "` + c.tenant + `" as deployed (` + where; !strings.Contains(stderr, note) {
			t.Errorf("validate %s %s: got stderr %q, want the note %q…", c.tenant, c.file, stderr, note)
		}
		got, err := os.ReadFile(filepath.Join(out, c.golden))
		if want := resultsFixture(t, c.golden); err != nil || !bytes.Equal(got, want) {
			t.Errorf("validate %s %s --out: got %s %q (%v), want testdata/results/%s %q", c.tenant, c.file, c.golden, got, err, c.golden, want)
		}
	}
}
