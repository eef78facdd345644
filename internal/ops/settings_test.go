package ops_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/example/tenantpipeline/spec"
	"reflect"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// A tenant's deployed settings are its silo controller's TENANT, or its row of its pool's
// settings file; whatever cannot be read is an error naming the tenant and what was read.
func TestTenantSettings(t *testing.T) {
	sjis := pipeline.Tenant{Tenant: spec.Tenant{Format: pipeline.FormatCSV, Encoding: "cp932", Delimiter: ";", ChunkSize: 3, MaxFieldBytes: 64, OnInvalidRecord: pipeline.OnInvalidSkipRecord, MaxInvalidRecords: 5}}
	acme := opsfake.Tenant("acme", pipeline.OnFailureHalt)
	pool := opsfake.Pool("default")
	// world: silo acme and pooled hooli with the settings above, pooled wayne with none.
	world := func() *opsfake.World {
		w := opsfake.New(coreNow)
		w.SettingsOf["acme"], w.SettingsOf["hooli"] = sjis, sjis
		w.AddTenant("TenantPipeline-Tenants-1", acme)
		w.AddPool("TenantPipeline-Pool-default", pool, map[string]string{"hooli": pipeline.OnFailureHalt, "wayne": pipeline.OnFailureContinue})
		return w
	}
	with := func(id, prefix string) pipeline.Tenant {
		s := sjis
		s.ID, s.Prefix = id, prefix
		return s
	}
	tests := []struct {
		name    string
		tenant  string
		edit    func(w *opsfake.World)
		want    pipeline.Tenant
		wantErr string // "" for want
	}{
		{"silo: its controller's TENANT", "acme", nil, with("acme", acme.Prefix), ""},
		{"pooled: its row of the settings file", "hooli", nil, with("hooli", pool.Prefix+"hooli/"), ""},
		{"pooled without settings of its own", "wayne", nil, pipeline.Tenant{Tenant: spec.Tenant{ID: "wayne", Prefix: pool.Prefix + "wayne/"}}, ""},
		{"not deployed", "nobody", nil, pipeline.Tenant{}, `tenant "nobody" not found; tenants: acme, hooli, wayne`},
		{"silo: GetFunction fails", "acme", func(w *opsfake.World) {
			delete(w.Env, acme.ControllerFunction)
		}, pipeline.Tenant{}, "tenant acme: get function acme-controller (its TENANT variable holds the tenant's settings): ResourceNotFoundException"},
		{"silo: no TENANT", "acme", func(w *opsfake.World) {
			w.Env[acme.ControllerFunction] = map[string]string{pipeline.EnvTenantPrefix: acme.Prefix}
		}, pipeline.Tenant{}, "tenant acme: function acme-controller has no TENANT variable"},
		{"silo: TENANT not JSON", "acme", func(w *opsfake.World) {
			w.Env[acme.ControllerFunction][pipeline.EnvTenant] = `{"id":"acme",`
		}, pipeline.Tenant{}, "tenant acme: TENANT of acme-controller is not a tenant's JSON"},
		{"silo: another tenant's TENANT", "acme", func(w *opsfake.World) {
			w.Env[acme.ControllerFunction][pipeline.EnvTenant] = `{"id":"globex"}`
		}, pipeline.Tenant{}, `tenant acme: TENANT of acme-controller holds the settings of tenant "globex"`},
		{"pooled: a row that does not decode", "hooli", func(w *opsfake.World) {
			w.Code[pool.ControllerFunction] = poolCode(t, pool, func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"encoding":"cp932"`), []byte(`"encodink":"cp932"`), 1)
			}, pipeline.PoolTenant{Settings: with("hooli", ""), Prefix: pool.Prefix + "hooli/", OnFailure: pipeline.OnFailureHalt})
		}, pipeline.Tenant{}, `pool default: code of pool-default-controller: pool settings: tenant "hooli": row: json: unknown field "encodink"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := world()
			if tt.edit != nil {
				tt.edit(w)
			}
			got, err := coreOps(w).TenantSettings(context.Background(), tt.tenant)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// An unknown tenant is a NotFoundError, as for the other commands.
func TestTenantSettingsNotFound(t *testing.T) {
	w := opsfake.New(coreNow)
	w.AddTenant("TenantPipeline-Tenants-1", opsfake.Tenant("acme", pipeline.OnFailureHalt))
	_, err := coreOps(w).TenantSettings(context.Background(), "nobody")
	var nf *ops.NotFoundError
	if !errors.As(err, &nf) || nf.Tenant != "nobody" {
		t.Errorf("got %v, want a NotFoundError for nobody", err)
	}
}
