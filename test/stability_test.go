package test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"

	"github.com/example/tenantpipeline/internal/stacks"
)

// placement is where a tenant's stateful resources are: its stack and their logical ids.
type placement struct {
	stack string
	ids   []string // logical ids of its queue and log groups
}

// synthPlacements synthesizes tenants (ids in file order) from dir/tenants.json, next to whatever
// assignment file dir holds, two tenants per stack.
func synthPlacements(t *testing.T, dir string, ids []string) map[string]placement {
	t.Helper()
	var entries []string
	for _, id := range ids {
		entries = append(entries, fmt.Sprintf(`{"id": %q}`, id))
	}
	file := filepath.Join(dir, "tenants.json")
	if err := os.WriteFile(file, []byte(`{"tenants": [`+strings.Join(entries, ", ")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	app := testApp(t)
	built, err := stacks.Build(app, stacks.Options{TenantsFile: file, TenantsPerStack: 2, RegisterURL: "https://core.example.com/records"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]placement{}
	templates := map[string]map[string]any{}
	for _, s := range built.TenantStacks {
		templates[*s.StackName()] = templateJSON(assertions.Template_FromStack(s, nil))
	}
	for _, id := range ids {
		p := placement{stack: built.StackOf[id]}
		for _, typ := range []string{"AWS::SQS::Queue", "AWS::Logs::LogGroup"} {
			for lid := range tenantResources(t, templates[p.stack], typ, id) {
				p.ids = append(p.ids, lid)
			}
		}
		slices.Sort(p.ids)
		out[id] = p
	}
	return out
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTenantEditsKeepStacksAndLogicalIDs: inserting, removing and reordering tenants leaves every
// other tenant in its stack with the same logical ids for its queue and log groups, so
// CloudFormation replaces none of them (a replaced queue loses the files it holds).
func TestTenantEditsKeepStacksAndLogicalIDs(t *testing.T) {
	base := []string{"alpha", "bravo", "charlie", "delta", "echo"}
	baseDir := t.TempDir()
	before := synthPlacements(t, baseDir, base)
	// Known answer: with no assignment yet, tenants are grouped by position, two per stack.
	for id, want := range map[string]string{"alpha": "1", "bravo": "1", "charlie": "2", "delta": "2", "echo": "3"} {
		if got := before[id].stack; got != "TenantPipeline-Tenants-"+want {
			t.Errorf("first synth: tenant %s in %s, want TenantPipeline-Tenants-%s", id, got, want)
		}
		if ids := strings.Join(before[id].ids, " "); !strings.Contains(ids, "Queue") || !strings.Contains(ids, "Logs") {
			t.Errorf("tenant %s: got stateful ids %v, want its queue and log groups", id, before[id].ids)
		}
	}
	reversed := slices.Clone(base)
	slices.Reverse(reversed)
	for _, tc := range []struct {
		name string
		ids  []string
	}{
		{"insert at the front", append([]string{"foxtrot"}, base...)},
		{"insert in the middle", []string{"alpha", "bravo", "foxtrot", "charlie", "delta", "echo"}},
		{"remove from the front", base[1:]},
		{"remove from the middle", []string{"alpha", "bravo", "delta", "echo"}},
		{"reorder", reversed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyFile(t, filepath.Join(baseDir, "tenants.stacks.json"), filepath.Join(dir, "tenants.stacks.json"))
			after := synthPlacements(t, dir, tc.ids)
			for _, id := range tc.ids {
				b, existed := before[id]
				if !existed {
					continue
				}
				if a := after[id]; a.stack != b.stack || !slices.Equal(a.ids, b.ids) {
					t.Errorf("tenant %s: got %s %v, want %s %v", id, a.stack, a.ids, b.stack, b.ids)
				}
			}
		})
	}
}
