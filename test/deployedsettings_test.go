package test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// TestSplitAndRegisterKnowTheirDeployedSettings: each tier's Split and Register are deployed with
// the settings a request must agree with (internal/deployed), so that a direct invoke cannot
// point a tenant's records or secret anywhere else, nor act for a tenant they do not serve: a silo
// tenant's DEPLOYED_TENANT is its controller's TENANT, exactly; a pool's read the pool's settings
// file, as its controller does, and name no single tenant. The controllers of both tiers then
// leave the URLs and the secret out of executions' input.
func TestSplitAndRegisterKnowTheirDeployedSettings(t *testing.T) {
	t.Run("silo", func(t *testing.T) {
		sharedApp(t)
		var checked int
		for _, tenant := range []string{"acme", "globex"} {
			var controller map[string]any
			checks := map[string]map[string]any{}
			for id, f := range tenantResources(t, shared.template, "AWS::Lambda::Function", tenant) {
				vars, _ := get(t, props(f), "Environment", "Variables").(map[string]any)
				switch {
				case strings.Contains(id, "Controller"):
					controller = vars
				case strings.Contains(id, "Register"), strings.Contains(id, "Split"):
					checks[id] = vars
				}
			}
			if controller == nil || len(checks) != 2 {
				t.Fatalf("tenant %s: got a controller %v and %d of Split and Register, want both", tenant, controller != nil, len(checks))
			}
			if controller[pipeline.EnvInputWithoutURLs] != "true" {
				t.Errorf("tenant %s: controller's %s = %v, want true: executions' input leaves the URLs and the secret to the deployed settings",
					tenant, pipeline.EnvInputWithoutURLs, controller[pipeline.EnvInputWithoutURLs])
			}
			for id, vars := range checks {
				got, ok := vars[pipeline.EnvDeployedTenant].(string)
				if !ok || got != controller[pipeline.EnvTenant] {
					t.Errorf("%s: %s = %v, want the controller's %s %v", id, pipeline.EnvDeployedTenant, vars[pipeline.EnvDeployedTenant], pipeline.EnvTenant, controller[pipeline.EnvTenant])
					continue
				}
				var ts pipeline.Tenant
				if err := json.Unmarshal([]byte(got), &ts); err != nil || ts.ID != tenant {
					t.Errorf("%s: %s does not decode to the tenant's settings (%v): %s", id, pipeline.EnvDeployedTenant, err, got)
				}
				if ts.RegisterURL == "" && ts.DynamoDB == nil {
					t.Errorf("%s: deployed settings name no core system URL and no sink: %s", id, got)
				}
				if _, ok := vars[pipeline.EnvTenant]; ok {
					t.Errorf("%s: has %s; it takes the request's, checked against %s", id, pipeline.EnvTenant, pipeline.EnvDeployedTenant)
				}
				checked++
			}
		}
		if checked != 4 {
			t.Errorf("checked %d functions, want 4", checked)
		}
	})
	t.Run("pool", func(t *testing.T) {
		_, tpl := poolTemplate(t)
		var checked int
		for id, f := range byType(tpl, "AWS::Lambda::Function") {
			if !strings.Contains(id, "Register") && !strings.Contains(id, "Split") {
				continue
			}
			checked++
			vars, _ := get(t, props(f), "Environment", "Variables").(map[string]any)
			if vars[pipeline.EnvPoolSettings] != pipeline.PoolSettingsFile {
				t.Errorf("%s: %s = %v, want the bundled %s", id, pipeline.EnvPoolSettings, vars[pipeline.EnvPoolSettings], pipeline.PoolSettingsFile)
			}
			for _, k := range []string{pipeline.EnvDeployedTenant, pipeline.EnvTenant, pipeline.EnvPool} {
				if v, ok := vars[k]; ok {
					t.Errorf("%s: has %s=%v, want a pool's Split and Register to name no tenant and no pool", id, k, v)
				}
			}
		}
		if checked != 2 {
			t.Errorf("got %d of Split and Register, want 2", checked)
		}
		for id, f := range byType(tpl, "AWS::Lambda::Function") {
			if strings.HasPrefix(id, "PoolController") {
				if v := get(t, props(f), "Environment", "Variables").(map[string]any)[pipeline.EnvInputWithoutURLs]; v != "true" {
					t.Errorf("%s: %s = %v, want true", id, pipeline.EnvInputWithoutURLs, v)
				}
			}
		}
	})
}
