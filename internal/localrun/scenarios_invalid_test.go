package localrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/results"
)

const invalidTenants = `{"tenants": [
  {"id": "skipper", "onInvalidRecord": "skipRecord", "chunkSize": 7, "registerUrl": "https://core.example.com/records"},
  {"id": "failer", "chunkSize": 7, "registerUrl": "https://core.example.com/records"}
]}`

// TestScenarioInvalidRecords: a 60-record CSV whose records 13, 31 and 47 (lines 14, 32 and 48)
// are malformed, in both tiers. Under skipRecord the file succeeds, the 57 others are registered
// in order with their own record numbers, and parts/split.jsonl names the three lines; under
// failFile nothing is registered and the failure names line 14.
func TestScenarioInvalidRecords(t *testing.T) {
	t.Parallel()
	bad := map[int]string{13: "13", 31: `31,"x"y`, 47: "47,a,b"}
	var b strings.Builder
	b.WriteString("id,name\n")
	var want []int64
	for i := 1; i <= 60; i++ {
		if row, ok := bad[i]; ok {
			b.WriteString(row + "\n")
			continue
		}
		fmt.Fprintf(&b, "%d,name %d\n", i, i)
		want = append(want, int64(i))
	}
	body := []byte(b.String())
	forEachTier(t, invalidTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{{"skipper", "orders.csv", body}, {"failer", "orders.csv", body}})
		rep := drain(t, ctx, r)

		f := fileOf(t, rep, "skipper", "orders.csv")
		if f.Status != "SUCCEEDED" {
			t.Errorf("skipper: got %s (%s %s), want SUCCEEDED", f.Status, f.Error, f.Cause)
		}
		var got []int64
		for _, rec := range r.Sink.Registered("skipper") {
			got = append(got, rec.RecordNumber)
		}
		if !reflect.DeepEqual(got, want) {
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

		f = fileOf(t, rep, "failer", "orders.csv")
		if f.Status != "FAILED" || !strings.Contains(f.Cause, "line 14") {
			t.Errorf("failer: got %s (%s %s), want FAILED naming line 14", f.Status, f.Error, f.Cause)
		}
		if n := len(r.Sink.Registered("failer")); n != 0 {
			t.Errorf("failer: got %d records registered, want none", n)
		}
	})
}
