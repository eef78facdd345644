package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
)

// TestDiscoveryFindsTheConstructsOutputsInAnyStack: an app of one's own names its stacks as it
// likes; pipectl finds its tenants by the outputs the constructs write. The default prefix's
// stacks win when they describe tenants; an explicit --stack-prefix never falls back; --stack
// narrows to one stack.
func TestDiscoveryFindsTheConstructsOutputsInAnyStack(t *testing.T) {
	own := func() *opsfake.World {
		w := opsfake.New(now)
		w.Stacks = append(w.Stacks, opsfakeStack("Unrelated"))
		w.AddTenant("MyPipeline", acme)
		w.AddTenant("MyPipeline", globex)
		w.AddTenant("MyOtherPipeline", zeta)
		return w
	}
	for _, tc := range []struct {
		name     string
		world    func() *opsfake.World
		args     []string
		wantCode int
		wantIDs  []string
	}{
		{"no stack of the default prefix: every stack", own, []string{"status", "--json"}, 0, []string{"acme", "globex", "zeta"}},
		{"--stack narrows to one stack", own, []string{"--stack", "MyPipeline", "status", "--json"}, 0, []string{"acme", "globex"}},
		{"--stack after the command", own, []string{"status", "--json", "--stack=MyOtherPipeline"}, 0, []string{"zeta"}},
		{"--stack of no tenant", own, []string{"status", "--json", "--stack", "Unrelated"}, 1, nil},
		{"an explicit --stack-prefix does not fall back", own, []string{"--stack-prefix", "TenantPipeline", "status", "--json"}, 1, nil},
		{"the default prefix's stacks win", world, []string{"status", "--json"}, 0, []string{"acme", "globex"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runIn(t, tc.world(), tc.args...)
			if code != tc.wantCode {
				t.Fatalf("got exit %d (%s), want %d", code, stderr, tc.wantCode)
			}
			if code != 0 {
				return
			}
			var rep ops.StatusReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout)
			}
			var ids []string
			for _, r := range rep.Tenants {
				ids = append(ids, r.ID)
			}
			if !slices.Equal(ids, tc.wantIDs) {
				t.Errorf("got tenants %v, want %v", ids, tc.wantIDs)
			}
		})
	}
}
