package test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
	"github.com/example/tenantpipeline/internal/stacks"
	"github.com/example/tenantpipeline/spec"
)

// A keyed tenant's settings reach its executions from tenants.json in both tiers: a silo
// controller's TENANT variable and a pool's settings row carry recordOrder, keyColumns and
// maxRecordsInFlight (defaulted to 8), and their core system its maxRequestsInFlight, so each file
// of either keeps min(maxRecordsInFlight, 40/4) requests in flight, and its maintenance windows,
// which the controller's admission and Register read.
func TestKeyOrderSettingsInBothTiers(t *testing.T) {
	_, built := synthApp(t, "keyorder.json", stacks.Options{})
	if len(built.TenantStacks) != 1 || len(built.PoolStacks) != 1 {
		t.Fatalf("got %d tenant stacks and %d pool stacks, want 1 and 1", len(built.TenantStacks), len(built.PoolStacks))
	}
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
	ledger := pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 4, MaxRequestsInFlight: 40,
		Maintenance: []spec.MaintenanceWindow{{Cron: "0 2 * * SUN", Duration: "1h"}}}
	for _, c := range []struct {
		tier                   string
		got                    pipeline.Tenant
		cols                   []string
		inFlight, recsInFlight int
	}{
		{"silo", silo, []string{"customer", "region"}, 8, 8},
		// Not capped at the static share 40/4: the shares bound it while it runs.
		{"pool", pooled.Settings, []string{"customer"}, 16, 16},
	} {
		s := c.got
		if s.RecordOrder != pipeline.RecordOrderKey || !slices.Equal(s.KeyColumns, c.cols) || s.MaxRecordsInFlight != c.inFlight {
			t.Errorf("%s: got recordOrder %q, keyColumns %v, maxRecordsInFlight %d; want %q, %v, %d",
				c.tier, s.RecordOrder, s.KeyColumns, s.MaxRecordsInFlight, pipeline.RecordOrderKey, c.cols, c.inFlight)
		}
		if s.CoreSystem == nil || !reflect.DeepEqual(*s.CoreSystem, ledger) {
			t.Errorf("%s: got core system %+v, want %+v (no table)", c.tier, s.CoreSystem, ledger)
		}
		if got := s.RecordsInFlight(); got != c.recsInFlight {
			t.Errorf("%s: got %d records in flight, want %d", c.tier, got, c.recsInFlight)
		}
	}
}
