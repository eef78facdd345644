package records

import (
	"errors"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// keyedFormat is the Format of a keyed tenant (record mode, key order) with keyColumns cols.
func keyedFormat(t *testing.T, kind string, cols ...string) Format {
	t.Helper()
	f, err := FormatOf(pipeline.Tenant{Tenant: spec.Tenant{Format: kind, Encoding: "utf-8", RecordOrder: pipeline.RecordOrderKey, KeyColumns: cols}})
	if err != nil {
		t.Fatalf("FormatOf: %v", err)
	}
	return f
}

// FormatOf gives a Format keys only under key order in record mode.
func TestFormatOfKeys(t *testing.T) {
	cols := []string{"customer"}
	for _, tc := range []struct {
		name   string
		tenant pipeline.Tenant
		want   int
	}{
		{"key order", pipeline.Tenant{Tenant: spec.Tenant{RecordOrder: "key", KeyColumns: cols}}, 1},
		{"file order", pipeline.Tenant{Tenant: spec.Tenant{KeyColumns: cols}}, 0},
		{"key order in batch mode", pipeline.Tenant{Tenant: spec.Tenant{RecordOrder: "key", KeyColumns: cols, RegisterMode: "batch"}}, 0},
		{"key order with the dynamodb sink", pipeline.Tenant{Tenant: spec.Tenant{RecordOrder: "key", KeyColumns: cols, DynamoDB: &pipeline.DynamoDBSink{Key: []string{"id"}}}}, 0},
	} {
		tc.tenant.Format, tc.tenant.Encoding = "csv", "utf-8"
		f, err := FormatOf(tc.tenant)
		if err != nil || len(f.Keys) != tc.want {
			t.Errorf("%s: got %d keys, %v; want %d", tc.name, len(f.Keys), err, tc.want)
		}
	}
}

// A keyed file's scan fails at a header without a key column, and treats a record with an empty
// key as invalid: the file fails under failFile, the record is rejected under skipRecord; and
// Register's parse skips exactly the records Split rejected.
func TestScanKeys(t *testing.T) {
	const csvFile = "id,customer,region\n1,acme,eu\n2,,\n3,globex,us\n"
	const jsonlFile = `{"id":1,"customer":"acme"}` + "\n" + `{"id":2}` + "\n" + `{"id":3,"customer":{"x":1}}` + "\n" + `{"id":4,"customer":7}` + "\n"
	for _, tc := range []struct {
		name     string
		f        Format
		file     string
		failFile string   // the failFile error
		rejected []string // under skipRecord: each rejection, "<line> <record> <reason>"
		valid    []int64  // the records Register's parse returns under skipRecord
	}{
		{"csv, one column", keyedFormat(t, "csv", "customer"), csvFile,
			`line 3: record 2 has an empty key (keyColumns "customer")`,
			[]string{`3 2 record 2 has an empty key (keyColumns "customer")`}, []int64{1, 3}},
		{"csv, two columns, one empty is a key", keyedFormat(t, "csv", "region", "customer"), "id,customer,region\n1,acme,\n2,,\n", "line 3: record 2 has an empty key",
			[]string{`3 2 record 2 has an empty key (keyColumns "region", "customer")`}, []int64{1}},
		{"jsonl", keyedFormat(t, "jsonl", "customer"), jsonlFile,
			`line 2: record 2 has an empty key (keyColumns "customer")`,
			[]string{`2 2 record 2 has an empty key (keyColumns "customer")`, `3 3 record 3: keyColumns field "customer" is an object or array, not a string, number or boolean`}, []int64{1, 4}},
		{"file order: no key check", mustFormat(t, "csv", "utf-8", "", 0), csvFile, "", nil, []int64{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Scan(strings.NewReader(tc.file), tc.f, Cut{Records: 10}, Policy{}, func(pipeline.Boundary) error { return nil })
			var fe *Error
			switch {
			case tc.failFile == "" && err != nil:
				t.Errorf("failFile: got %v, want no error", err)
			case tc.failFile != "" && (!errors.As(err, &fe) || !strings.HasPrefix(fe.Error(), tc.failFile)):
				t.Errorf("failFile: got %v, want an *Error starting %q", err, tc.failFile)
			}

			var bounds []pipeline.Boundary
			sum, invalid, err := Scan(strings.NewReader(tc.file), tc.f, Cut{Records: 10}, Policy{Skip: true, Max: 10}, func(b pipeline.Boundary) error {
				bounds = append(bounds, b)
				return nil
			})
			if err != nil {
				t.Fatalf("skipRecord: %v", err)
			}
			var got []string
			for _, v := range invalid {
				got = append(got, fmt.Sprintf("%d %d %s", v.Line, v.Record, v.Reason))
			}
			if strings.Join(got, "\n") != strings.Join(tc.rejected, "\n") {
				t.Errorf("skipRecord: got rejections\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.rejected, "\n"))
			}
			if sum.Invalid != int64(len(tc.rejected)) {
				t.Errorf("skipRecord: got %d invalid, want %d", sum.Invalid, len(tc.rejected))
			}

			// Register's parse of the one chunk: the same records skipped.
			chunk := tc.file[bounds[0].Offset:bounds[1].Offset]
			var skipped int
			recs, err := ParseRangeSkip(strings.NewReader(chunk), tc.f, sum.Header, 1, sum.Records, func(Invalid) error { skipped++; return nil })
			if err != nil {
				t.Fatalf("ParseRangeSkip: %v", err)
			}
			var nums []int64
			for _, r := range recs {
				nums = append(nums, r.Number)
			}
			if fmt.Sprint(nums) != fmt.Sprint(tc.valid) || skipped != len(tc.rejected) {
				t.Errorf("ParseRangeSkip: got records %v and %d skipped, want %v and %d", nums, skipped, tc.valid, len(tc.rejected))
			}
		})
	}
}

// A header without a key column fails the file at its header line, in both policies, naming
// keyColumns.
func TestScanKeyColumnNotInHeader(t *testing.T) {
	f := keyedFormat(t, "csv", "customer", "shop")
	for _, p := range []Policy{{}, {Skip: true, Max: 10}} {
		_, _, err := Scan(strings.NewReader("id,customer\n1,acme\n"), f, Cut{Records: 10}, p, func(pipeline.Boundary) error { return nil })
		var fe *Error
		want := `line 1: keyColumns: column "shop" is not in the file's header ("id", "customer")`
		if !errors.As(err, &fe) || fe.Error() != want {
			t.Errorf("skip %v: got %v, want %q", p.Skip, err, want)
		}
	}
}
