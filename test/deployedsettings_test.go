package test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// TestRegisterKnowsItsDeployedSettings: each tier's Register is deployed with the settings a
// request must agree with (register.Deployed), so that a direct invoke cannot point a tenant's
// records or secret anywhere else: a silo Register's DEPLOYED_TENANT is its controller's TENANT,
// exactly; a pool's Register reads the pool's settings file, as its controller does, and names no
// single tenant.
func TestRegisterKnowsItsDeployedSettings(t *testing.T) {
	t.Run("silo", func(t *testing.T) {
		sharedApp(t)
		var checked int
		for _, tenant := range []string{"acme", "globex"} {
			fns := tenantResources(t, shared.template, "AWS::Lambda::Function", tenant)
			var controller, register map[string]any
			for id, f := range fns {
				vars, _ := get(t, props(f), "Environment", "Variables").(map[string]any)
				switch {
				case strings.Contains(id, "Controller"):
					controller = vars
				case strings.Contains(id, "Register"):
					register = vars
				}
			}
			if controller == nil || register == nil {
				t.Fatalf("tenant %s: no controller or Register among %d functions", tenant, len(fns))
			}
			got, ok := register[pipeline.EnvDeployedTenant].(string)
			if !ok || got != controller[pipeline.EnvTenant] {
				t.Errorf("tenant %s: Register's %s = %v, want the controller's %s %v", tenant, pipeline.EnvDeployedTenant, register[pipeline.EnvDeployedTenant], pipeline.EnvTenant, controller[pipeline.EnvTenant])
				continue
			}
			var ts pipeline.Tenant
			if err := json.Unmarshal([]byte(got), &ts); err != nil || ts.ID != tenant {
				t.Errorf("tenant %s: %s does not decode to its settings (%v): %s", tenant, pipeline.EnvDeployedTenant, err, got)
			}
			if ts.RegisterURL == "" && ts.DynamoDB == nil {
				t.Errorf("tenant %s: deployed settings name no core system URL and no sink: %s", tenant, got)
			}
			if _, ok := register[pipeline.EnvTenant]; ok {
				t.Errorf("tenant %s: Register has %s; it takes the request's, checked against %s", tenant, pipeline.EnvTenant, pipeline.EnvDeployedTenant)
			}
			checked++
		}
		if checked != 2 {
			t.Errorf("checked %d tenants, want 2", checked)
		}
	})
	t.Run("pool", func(t *testing.T) {
		_, tpl := poolTemplate(t)
		var registers int
		for id, f := range byType(tpl, "AWS::Lambda::Function") {
			if !strings.Contains(id, "Register") {
				continue
			}
			registers++
			vars, _ := get(t, props(f), "Environment", "Variables").(map[string]any)
			if vars[pipeline.EnvPoolSettings] != pipeline.PoolSettingsFile {
				t.Errorf("%s: %s = %v, want the bundled %s", id, pipeline.EnvPoolSettings, vars[pipeline.EnvPoolSettings], pipeline.PoolSettingsFile)
			}
			for _, k := range []string{pipeline.EnvDeployedTenant, pipeline.EnvTenant, pipeline.EnvPool} {
				if v, ok := vars[k]; ok {
					t.Errorf("%s: has %s=%v, want a pool's Register to name no tenant and no pool", id, k, v)
				}
			}
		}
		if registers != 1 {
			t.Errorf("got %d Register functions, want 1", registers)
		}
	})
}
