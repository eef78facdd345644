package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
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
		{"a bad header fails the file with no record counted", []string{"fail", td + "badheader.csv", "--tenants", tenantsFile}, 1,
			[]string{"badheader.csv: 0 records, 0 valid, 0 rejected: rejected: line 1: header columns 1 and 2 have the same name"},
			"pipectl: a file would not be accepted", []string{"-1", "record 0"}},
		{"a bad header fails the file under skipRecord too", []string{"skip", td + "badheader.csv", "--tenants", tenantsFile}, 1,
			[]string{"badheader.csv: 0 records, 0 valid, 0 rejected: rejected: line 1: header columns 1 and 2 have the same name"},
			"pipectl: a file would not be accepted", []string{"-1", "record 0"}},
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
			for _, n := range c.notShown {
				if strings.Contains(out, n) {
					t.Errorf("got stdout\n%s\nwant no %q in it", out, n)
				}
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
	want := append(enc("_line,_record,_error,名前,値\n"), enc("3,2,\"record has 3 fields, the header has 2\",ソ,ポ,余\n")...)
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
		notCSV             bool // the fixture has rows that are not valid CSV: <file>.rejected.jsonl too
	}{
		{"skipRecord accepts 3 malformed rows", "skipper", "orders.csv", 0,
			[]string{"orders.csv: 60 records, 57 valid, 3 rejected: accepted: 3 rejected (skipRecord, at most 1000)",
				"  line 14, record 13: ", "  line 32, record 31: ", "  line 48, record 47: "},
			"rejected.csv", "orders.csv.rejected.csv", true},
		// failFile still lists every invalid record, so --out holds what skipRecord rejects.
		{"failFile refuses and names line 14", "failer", "orders.csv", 1,
			[]string{"orders.csv: 60 records, 57 valid, 3 rejected: rejected: line 14: "}, "rejected.csv", "orders.csv.rejected.csv", true},
		{"cp932 rows come back in CP932", "sjis", "cp932.csv", 0,
			[]string{"cp932.csv: 10 records, 7 valid, 3 rejected: accepted", "  line 5, record 4: ", "  line 7, record 6: ", "  line 9, record 8: "},
			"rejected.csv", "cp932.csv.rejected.csv", true},
		{"jsonl", "lines", "orders.jsonl", 0,
			[]string{"orders.jsonl: 5 records, 3 valid, 2 rejected: accepted", "  line 2, record 2: line is not valid JSON", "  line 5, record 4: line is valid JSON but not an object"},
			"rejected.jsonl", "orders.jsonl.rejected.jsonl", false},
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
			goldens := [][3]string{{c.golden, c.rejected, c.golden}}
			if c.notCSV {
				golden := c.file + "." + results.RejectedJSONL
				goldens = append(goldens, [3]string{golden, results.RejectedJSONL, golden})
			}
			for _, g := range goldens {
				want, err := os.ReadFile(td + g[2])
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range g[:2] {
					got, err := os.ReadFile(filepath.Join(dir, name))
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Errorf("%s: got %q, want %s %q", name, got, g[2], want)
					}
				}
			}
		})
	}
}

// Where validate finds the tenant's settings: --tenants FILE only, when given, with no AWS
// access; else ./tenants.json when it names the tenant, with none either; else the deployed
// tenant's, found as the other commands find it. orders.csv has 3 malformed rows: skipRecord
// accepts it, failFile refuses it, so the exit status tells which settings were used.
func TestValidateSettingsPrecedence(t *testing.T) {
	orders, err := filepath.Abs("testdata/validate/orders.csv")
	if err != nil {
		t.Fatal(err)
	}
	tenantsFlag, err := filepath.Abs("testdata/validate/tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	const (
		skipJSON = `{"tenants":[{"id":"skip","onInvalidRecord":"skipRecord"}]}`
		failJSON = `{"tenants":[{"id":"skip"}]}`
		other    = `{"tenants":[{"id":"someone"}]}`
	)
	// As tenants.json's defaults deploy them.
	failFile := pipeline.Tenant{Format: pipeline.FormatCSV, Encoding: pipeline.EncodingUTF8, ChunkSize: 100}
	skipRecord := failFile
	skipRecord.OnInvalidRecord = pipeline.OnInvalidSkipRecord
	// The deployment: silo skip (skipRecord), silo fail (failFile), pooled pooled (skipRecord) in
	// pool shared, and silo zeta (skipRecord) in a stack of another prefix.
	deployed := func() *opsfake.World {
		w := opsfake.New(now)
		w.SettingsOf["skip"], w.SettingsOf["pooled"], w.SettingsOf["zeta"] = skipRecord, skipRecord, skipRecord
		w.SettingsOf["fail"] = failFile
		w.AddTenant("TenantPipeline-Tenants-1", opsfake.Tenant("skip", pipeline.OnFailureHalt))
		w.AddTenant("TenantPipeline-Tenants-1", opsfake.Tenant("fail", pipeline.OnFailureHalt))
		w.AddPool("TenantPipeline-Pool-shared", opsfake.Pool("shared"), map[string]string{"pooled": pipeline.OnFailureContinue})
		w.AddTenant("Other-Tenants-1", zeta)
		return w
	}
	const accepted, refused = ": 60 records, 57 valid, 3 rejected: accepted: 3 rejected (skipRecord, at most 1000)\n",
		": 60 records, 57 valid, 3 rejected: rejected: line 14: record has 2 fields, the header has 3\n"
	cases := []struct {
		name        string
		tenantsJSON string // ./tenants.json; "" for none
		args        []string
		opsErr      error // what building the AWS clients fails with
		code        int
		stdout      string // the first line, after the file's name
		stderr      string // must appear; "" means empty
		aws         bool   // whether the AWS clients are built
	}{
		{"--tenants: that file, though ./tenants.json and the deployment differ", failJSON, []string{"skip", orders, "--tenants", tenantsFlag}, nil,
			0, accepted, "", false},
		{"--tenants without the tenant: an error, though it is deployed", skipJSON, []string{"zeta", orders, "--tenants", tenantsFlag}, nil,
			1, "", `pipectl: tenant "zeta" is not in ` + tenantsFlag, false},
		{"./tenants.json names it: that file, though the deployment differs", failJSON, []string{"skip", orders}, nil,
			1, refused, `validate: settings of tenant "skip" from ./tenants.json`, false},
		{"./tenants.json names it: no AWS needed", skipJSON, []string{"skip", orders}, errors.New("no credentials"),
			0, accepted, `validate: settings of tenant "skip" from ./tenants.json`, false},
		{"./tenants.json without the tenant: the deployed settings", other, []string{"skip", orders}, nil,
			0, accepted, `validate: settings of tenant "skip" as deployed (silo, the TENANT variable of function skip-controller)`, true},
		{"no ./tenants.json: a silo tenant's deployed settings", "", []string{"fail", orders}, nil,
			1, refused, `validate: settings of tenant "fail" as deployed (silo, the TENANT variable of function fail-controller)`, true},
		{"no ./tenants.json: a pooled tenant's deployed settings", "", []string{"pooled", orders}, nil,
			0, accepted, `validate: settings of tenant "pooled" as deployed (pool shared, its pool-tenants.json in the code of function pool-shared-controller)`, true},
		{"--stack-prefix selects the stacks", "", []string{"zeta", orders, "--stack-prefix", "Other"}, nil,
			0, accepted, `validate: settings of tenant "zeta" as deployed (silo, the TENANT variable of function zeta-controller)`, true},
		{"not deployed", other, []string{"nobody", orders}, nil, 1, "",
			`pipectl: read the deployed settings of tenant "nobody" (./tenants.json does not name it; --tenants FILE reads a tenants file instead, without AWS): ` +
				`tenant "nobody" not found; tenants: fail, pooled, skip`, true},
		{"no AWS access", "", []string{"skip", orders}, errors.New("no AWS credentials found"), 1, "",
			`pipectl: read the deployed settings of tenant "skip" (no ./tenants.json; --tenants FILE reads a tenants file instead, without AWS): no AWS credentials found`, true},
		{"a broken ./tenants.json: an error, not the deployment", `{"tenants":[{"id":"skip",}]}`, []string{"skip", orders}, nil, 1, "",
			"pipectl: tenants file tenants.json: ", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.tenantsJSON != "" {
				if err := os.WriteFile(filepath.Join(dir, "tenants.json"), []byte(c.tenantsJSON), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(dir)
			w, asked := deployed(), false
			newOps := func(_ context.Context, prefix string) (*ops.Ops, error) {
				asked = true
				if c.opsErr != nil {
					return nil, c.opsErr
				}
				o := ops.New(w.Clients(), prefix)
				o.HTTP = w.HTTPClient()
				return o, nil
			}
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"validate"}, c.args...), &out, &errOut, newOps)
			if code != c.code {
				t.Errorf("got exit %d, want %d (stdout %q, stderr %q)", code, c.code, out.String(), errOut.String())
			}
			if first, _, _ := strings.Cut(out.String(), "\n"); c.stdout != "" && first+"\n" != orders+c.stdout || c.stdout == "" && out.Len() > 0 {
				t.Errorf("got stdout %q, want its first line %q", out.String(), orders+c.stdout)
			}
			if c.stderr == "" && errOut.Len() > 0 || !strings.Contains(errOut.String(), c.stderr) {
				t.Errorf("got stderr %q, want %q", errOut.String(), c.stderr)
			}
			if asked != c.aws {
				t.Errorf("got AWS clients built %v, want %v", asked, c.aws)
			}
		})
	}
}
