package localrun

import (
	"encoding/json"
	"testing"
)

// TestTenantCoreSystemName reads the core system's name from a tenant's settings as the TENANT
// variable and a pool's settings file carry them (pipeline.Tenant's "coreSystem" object).
func TestTenantCoreSystemName(t *testing.T) {
	for _, c := range []struct {
		name, config, want string
	}{
		{"named", `{"id": "a", "coreSystem": {"name": "ledger", "maxRunningFiles": 3}}`, "ledger"},
		{"none", `{"id": "a"}`, ""},
		{"not an object", `{"id": "a", "coreSystem": "ledger"}`, ""},
		{"no name", `{"id": "a", "coreSystem": {"maxRunningFiles": 3}}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cfg map[string]any
			if err := json.Unmarshal([]byte(c.config), &cfg); err != nil {
				t.Fatal(err)
			}
			if got := (&Tenant{Config: cfg}).CoreSystemName(); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
