package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validate reports a keyed tenant's keys: how many, and the longest run of one; a file-order
// tenant's report is as before.
func TestValidateKeys(t *testing.T) {
	dir := t.TempDir()
	tenantsFile := filepath.Join(dir, "tenants.json")
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("tenants.json", `{"tenants": [
		{"id": "keyed", "chunkSize": 7, "recordOrder": "key", "keyColumns": ["customer"]},
		{"id": "keyed2", "recordOrder": "key", "keyColumns": ["region", "customer"], "onInvalidRecord": "skipRecord"},
		{"id": "jsonl", "format": "jsonl", "recordOrder": "key", "keyColumns": ["customer"]},
		{"id": "plain"}]}`)
	// 1,000 customers, each twice in a row but c0006 three times across a chunk boundary (chunks of 7
	// records), and one run of 1 at the end.
	var b strings.Builder
	b.WriteString("id,customer,region\n")
	n := 0
	row := func(c string) { n++; fmt.Fprintf(&b, "%d,%s,eu\n", n, c) }
	for i := range 1000 {
		c := fmt.Sprintf("c%04d", i)
		row(c)
		row(c)
		if i == 6 {
			row(c)
		}
	}
	row("c0001")
	big := write("big.csv", b.String())
	small := write("small.csv", "id,customer,region\n1,acme,eu\n2,acme,\n3,,\n4,globex,eu\n")
	jsonl := write("orders.jsonl", `{"customer":"acme"}`+"\n"+`{"customer":"acme"}`+"\n"+`{"customer":7}`+"\n")
	for _, c := range []struct {
		name, tenant, file string
		code               int
		want               string // the keys line; "" for none
	}{
		{"runs across chunks", "keyed", big, 0, `  keys: 1,000 distinct, longest run 3 records (key "c0006")`},
		{"two columns, a rejected record skipped", "keyed2", small, 0, `  keys: 3 distinct, longest run 1 record (key "eu","acme")`},
		{"jsonl", "jsonl", jsonl, 0, `  keys: 2 distinct, longest run 2 records (key "acme")`},
		{"file order: nothing new", "plain", small, 0, ""},
		{"a refused keyed file: no keys line", "keyed", small, 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runValidateCLI(t, c.tenant, c.file, "--tenants", tenantsFile)
			if code != c.code {
				t.Fatalf("got exit %d, want %d (stdout %q, stderr %q)", code, c.code, out, errOut)
			}
			var keys []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "  keys:") {
					keys = append(keys, l)
				}
			}
			if got := strings.Join(keys, "\n"); got != c.want {
				t.Errorf("got keys line %q, want %q (stdout %q)", got, c.want, out)
			}
		})
	}

	// The JSON report carries the same figures.
	code, out, _ := runValidateCLI(t, "keyed", big, "--tenants", tenantsFile, "--json")
	var vs []fileVerdict
	if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 0 || len(vs) != 1 || vs[0].Keys == nil {
		t.Fatalf("--json: got exit %d, %q (%v), want one verdict with keys", code, out, err)
	}
	if got, want := *vs[0].Keys, (keyStats{Distinct: 1000, LongestRun: 3, RunKey: `"c0006"`}); got != want {
		t.Errorf("--json: got keys %+v, want %+v", got, want)
	}
}
