package test

import (
	"reflect"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
	"github.com/example/tenantpipeline/internal/stacks"
)

// A core system's idempotencyRetention, lookupUrl and completeUrl reach its tenants' executions
// from tenants.json in both tiers: Register reads them from the execution's settings.
func TestCoreSystemHorizonSettingsInBothTiers(t *testing.T) {
	_, built := synthApp(t, "horizon.json", stacks.Options{})
	var silo pipeline.Tenant
	flattenJSON(t, env(t, stackTemplate(t, built.TenantStacks[0]), "TenantacmeController")[pipeline.EnvTenant], &silo)
	rows, err := poolsettings.Parse(built.Pools["default"].SettingsFile)
	if err != nil {
		t.Fatalf("pool default's SettingsFile: %v", err)
	}
	pooled, err := rows.Tenant("hooli")
	if err != nil {
		t.Fatalf("hooli's row: %v", err)
	}
	want := pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 4, IdempotencyRetention: "24h0m0s",
		LookupURL: "https://core.example.com/registrations/{key}", CompleteURL: "https://core.example.com/files"}
	for tier, got := range map[string]pipeline.Tenant{"silo": silo, "pool": pooled.Settings} {
		if got.CoreSystem == nil || !reflect.DeepEqual(*got.CoreSystem, want) {
			t.Errorf("%s: got core system %+v, want %+v", tier, got.CoreSystem, want)
		}
	}
}
