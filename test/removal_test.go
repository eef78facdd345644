package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/stacks"
)

// TestPoolRemovalNeedsConfirming: synth with a pooled tenant gone from the tenants file, or with
// its pool's prefix or intakeGroups changed, fails before anything is built, with the drain steps;
// the context keys removeTenants, moveTenants and regroupIntake confirm them, and the confirmed
// removal leaves the assignment.
func TestPoolRemovalNeedsConfirming(t *testing.T) {
	const assignment = `{"stacks": {}, "pools": {"hooli": "default", "gone": "default"}, "poolPrefixes": {"default": "pools/default/"}, "poolIntakeGroups": {"default": 0}}`
	const regrouped = `{"pools": {"default": {"intakeGroups": 4}}, "tenants": [{"id": "hooli", "tier": "pool"}, {"id": "gone", "tier": "pool"}]}`
	for _, tc := range []struct {
		name    string
		tenants string
		context map[string]any
		want    string // "": synth succeeds
	}{
		{"removed", `{"tenants": [{"id": "hooli", "tier": "pool"}]}`, nil,
			`tenant "gone" is removed from pool default (stack TenantPipeline-Pool-default)`},
		// A pooled tenant's prefix is "<pool prefix><id>/": it changes with its pool's prefix.
		{"re-prefixed", `{"pools": {"default": {"prefix": "in/default/"}}, "tenants": [{"id": "hooli", "tier": "pool"}, {"id": "gone", "tier": "pool"}]}`, nil,
			`pool default's prefix changes from "pools/default/" to "in/default/"`},
		{"removal confirmed", `{"tenants": [{"id": "hooli", "tier": "pool"}]}`, map[string]any{stacks.CtxRemoveTenants: "gone"}, ""},
		{"regrouped", regrouped, nil, `pool default's intakeGroups changes from one per tenant (intake "tenant") to 4`},
		{"regrouping confirmed", regrouped, map[string]any{stacks.CtxRegroupIntake: "default"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file, stacksFile := filepath.Join(dir, "tenants.json"), filepath.Join(dir, "tenants.stacks.json")
			if err := os.WriteFile(file, []byte(tc.tenants), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(stacksFile, []byte(assignment), 0o644); err != nil {
				t.Fatal(err)
			}
			// Not strict, whatever CI says: the confirmed removal writes the assignment file.
			ctx := map[string]any{stacks.CtxTenantsFile: file, stacks.CtxRegisterURL: "https://core.example.com/records", stacks.CtxStrictAssignment: "false"}
			for k, v := range tc.context {
				ctx[k] = v
			}
			app := testAppWithContext(t, ctx)
			o, err := stacks.OptionsFromContext(app)
			if err != nil {
				t.Fatal(err)
			}
			_, err = stacks.Build(app, o)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Drain ") || !strings.Contains(err.Error(), "synth and deploy with -c ") {
					t.Fatalf("got %v, want an error containing %q and the drain steps", err, tc.want)
				}
				if b, _ := os.ReadFile(stacksFile); string(b) != assignment {
					t.Errorf("got the assignment file changed to %s, want it untouched", b)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			b, _ := os.ReadFile(stacksFile)
			if tc.context[stacks.CtxRegroupIntake] != nil {
				if !strings.Contains(string(b), `"poolIntakeGroups": {`+"\n"+`    "default": 4`) {
					t.Errorf("got assignment file\n%s\nwant the new intakeGroups recorded, so the next synth needs no confirmation", b)
				}
				return
			}
			if strings.Contains(string(b), `"gone"`) || !strings.Contains(string(b), `"hooli": "default"`) {
				t.Errorf("got assignment file\n%s\nwant hooli kept and gone removed", b)
			}
		})
	}
}
