package stacks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/tenants"
)

// A tenant that changes tier or pool since the assignment was written gets another queue: synth
// refuses it, naming the tenant, both places and the way to confirm, until it is confirmed.
func TestTierMoves(t *testing.T) {
	o := Options{StackPrefix: "TP"}
	stacks := map[string]string{"acme": "1", "keep": "1"}
	pools := map[string]string{"hooli": "default", "wayne": "big"}
	silo := func(id string) tenants.Tenant { return tenants.Tenant{ID: id, Tier: tenants.TierSilo} }
	pooled := func(id, pool string) tenants.Tenant {
		return tenants.Tenant{ID: id, Tier: tenants.TierPool, Pool: pool}
	}
	cases := []struct {
		name    string
		ts      []tenants.Tenant
		confirm []string
		want    []string // substrings of the error; none: no error
	}{
		{"nobody moves", []tenants.Tenant{silo("acme"), silo("keep"), pooled("hooli", "default"), pooled("wayne", "big"), pooled("new", "default")}, nil, nil},
		{"silo to pool", []tenants.Tenant{pooled("acme", "default")}, nil,
			[]string{`tenant "acme" moves from silo stack TP-Tenants-1 to pool default (stack TP-Pool-default)`, "Drain it first", "-c moveTenants=acme"}},
		{"pool to pool", []tenants.Tenant{pooled("hooli", "big")}, nil,
			[]string{`tenant "hooli" moves from pool default (stack TP-Pool-default) to pool big (stack TP-Pool-big)`}},
		{"pool to silo", []tenants.Tenant{silo("wayne")}, nil, []string{`tenant "wayne" moves from pool big (stack TP-Pool-big) to the silo tier`}},
		{"confirmed", []tenants.Tenant{pooled("acme", "default"), silo("wayne")}, []string{"acme", "wayne"}, nil},
		{"one of two confirmed", []tenants.Tenant{pooled("acme", "default"), silo("wayne")}, []string{"acme"}, []string{`tenant "wayne"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o.MoveTenants = tc.confirm
			err := tierMoves(tc.ts, stacks, pools, o)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.name == "one of two confirmed" && strings.Contains(err.Error(), `"acme"`) {
				t.Errorf("error %q names the confirmed tenant", err)
			}
		})
	}
}

// The assignment file records each silo tenant's stack and each pooled tenant's pool, and reads
// them back.
func TestAssignmentRecordsPools(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tenants.stacks.json")
	stacks := map[string]string{"acme": "1"}
	pools := map[string]string{"hooli": "default"}
	if err := saveAssignments(path, filepath.Join(dir, "tenants.json"), nil, stacks, nil, pools, false); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"pools": {`) || !strings.Contains(string(b), `"hooli": "default"`) {
		t.Errorf("assignment file:\n%s\nwant the pooled tenant's pool", b)
	}
	gotStacks, gotPools, err := loadAssignments(path)
	if err != nil {
		t.Fatal(err)
	}
	if gotStacks["acme"] != "1" || gotPools["hooli"] != "default" || len(gotStacks) != 1 || len(gotPools) != 1 {
		t.Errorf("read back stacks %v pools %v", gotStacks, gotPools)
	}
	// Strict (CI): a new pooled tenant is a change to commit, named as such.
	err = saveAssignments(path, filepath.Join(dir, "tenants.json"), stacks, stacks, pools, map[string]string{"hooli": "default", "new": "default"}, true)
	if err == nil || !strings.Contains(err.Error(), "new in pool default") {
		t.Errorf("strict save with a new pooled tenant: got %v", err)
	}
}
