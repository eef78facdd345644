package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/ops"
)

// noAWS fails any command that would reach AWS: validate must not.
func noAWS(t *testing.T) newOpsFunc {
	return func(context.Context, string) (*ops.Ops, error) {
		t.Error("validate asked for AWS clients")
		return nil, os.ErrPermission
	}
}

func runValidateCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"validate"}, args...), &out, &errOut, noAWS(t))
	return code, out.String(), errOut.String()
}

func TestValidate(t *testing.T) {
	const td = "testdata/validate/"
	tenantsFile := td + "tenants.json"
	cases := []struct {
		name     string
		args     []string
		code     int
		stdout   []string // each must appear
		stderr   string   // must appear; "" means empty
		notShown []string
	}{
		{"skipRecord accepts 3 malformed rows", []string{"skip", td + "orders.csv", "--tenants", tenantsFile}, 0,
			[]string{"orders.csv: 60 records, 57 valid, 3 rejected: accepted: 3 rejected (skipRecord, at most 1000)",
				"  line 14, record 13: record has 2 fields, the header has 3",
				"  line 32, record 31: a quoted field has a stray or missing '\"'",
				"  line 48, record 47: record has 4 fields, the header has 3"}, "", nil},
		{"failFile refuses and names the first line", []string{"fail", td + "orders.csv", "--tenants", tenantsFile}, 1,
			[]string{"orders.csv: 60 records, 57 valid, 3 rejected: rejected: line 14: record has 2 fields, the header has 3"},
			"pipectl: a file would not be accepted", nil},
		{"over maxInvalidRecords", []string{"strict", td + "orders.csv", "--tenants", tenantsFile}, 1,
			[]string{"rejected: 3 invalid records, more than maxInvalidRecords 2; first at line 14"}, "pipectl: a file would not be accepted", nil},
		{"one refused file of two fails", []string{"fail", td + "orders.csv", td + "cp932.csv", "--tenants", tenantsFile}, 1, nil, "would not be accepted", nil},
		{"unknown tenant", []string{"nobody", td + "orders.csv", "--tenants", tenantsFile}, 1, nil, `tenant "nobody" is not in`, nil},
		{"no file is bad usage", []string{"skip", "--tenants", tenantsFile}, 2, nil, "usage: pipectl validate", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runValidateCLI(t, c.args...)
			if code != c.code {
				t.Errorf("got exit %d, want %d (stdout %q, stderr %q)", code, c.code, out, errOut)
			}
			for _, w := range c.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("got stdout\n%s\nwant it to contain %q", out, w)
				}
			}
			if c.stderr == "" && errOut != "" || !strings.Contains(errOut, c.stderr) {
				t.Errorf("got stderr %q, want %q", errOut, c.stderr)
			}
		})
	}
}

// The rejected rows come back byte for byte in the file's encoding, as results/ holds them.
func TestValidateWritesRejectedCP932(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runValidateCLI(t, "sjis", "testdata/validate/cp932.csv", "--tenants", "testdata/validate/tenants.json", "--out", dir)
	if code != 0 {
		t.Fatalf("got exit %d, want 0 (stdout %q, stderr %q)", code, out, errOut)
	}
	enc := func(s string) []byte {
		b, err := japanese.ShiftJIS.NewEncoder().Bytes([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	want := append(enc("名前,値,_line,_record,_error\n"), enc("ソ,ポ,余,3,2,\"record has 3 fields, the header has 2\"\n")...)
	for _, name := range []string{"cp932.csv.rejected.csv", "rejected.csv"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
}

// TestValidateResultsFixtures: on the fixtures of the local-run scenarios (testdata/results, whose
// tenants file they run), validate gives Split's verdict and --out writes the rejected file the
// pipeline wrote to results/ for the same file and tenant, byte for byte: the scenarios compare
// the pipeline's with the same golden files (<file>.rejected.csv or .rejected.jsonl).
func TestValidateResultsFixtures(t *testing.T) {
	const td = "../../testdata/results/"
	cases := []struct {
		name, tenant, file string
		code               int
		stdout             []string // each must appear
		rejected, golden   string
	}{
		{"skipRecord accepts 3 malformed rows", "skipper", "orders.csv", 0,
			[]string{"orders.csv: 60 records, 57 valid, 3 rejected: accepted: 3 rejected (skipRecord, at most 1000)",
				"  line 14, record 13: ", "  line 32, record 31: ", "  line 48, record 47: "},
			"rejected.csv", "orders.csv.rejected.csv"},
		// failFile still lists every invalid record, so --out holds what skipRecord rejects.
		{"failFile refuses and names line 14", "failer", "orders.csv", 1,
			[]string{"orders.csv: 60 records, 57 valid, 3 rejected: rejected: line 14: "}, "rejected.csv", "orders.csv.rejected.csv"},
		{"cp932 rows come back in CP932", "sjis", "cp932.csv", 0,
			[]string{"cp932.csv: 10 records, 7 valid, 3 rejected: accepted", "  line 5, record 4: ", "  line 7, record 6: ", "  line 9, record 8: "},
			"rejected.csv", "cp932.csv.rejected.csv"},
		{"jsonl", "lines", "orders.jsonl", 0,
			[]string{"orders.jsonl: 5 records, 3 valid, 2 rejected: accepted", "  line 2, record 2: line is not valid JSON", "  line 5, record 4: line is valid JSON but not an object"},
			"rejected.jsonl", "orders.jsonl.rejected.jsonl"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			code, out, errOut := runValidateCLI(t, c.tenant, td+c.file, "--tenants", td+"tenants.json", "--out", dir)
			if code != c.code {
				t.Errorf("got exit %d, want %d (stdout %q, stderr %q)", code, c.code, out, errOut)
			}
			for _, w := range c.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("got stdout\n%s\nwant it to contain %q", out, w)
				}
			}
			want, err := os.ReadFile(td + c.golden)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{c.golden, c.rejected} {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: got %q, want %s %q", name, got, c.golden, want)
				}
			}
		})
	}
}
