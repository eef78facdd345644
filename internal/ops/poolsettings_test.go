package ops_test

import (
	"archive/zip"
	"bytes"
	"context"
	"github.com/example/tenantpipeline/spec"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
)

// poolCode is a controller's package whose settings file has the rows of tenants, each edited by
// edit (the file's bytes) before it is zipped.
func poolCode(t *testing.T, p pipeline.PoolOutput, edit func([]byte) []byte, tenants ...pipeline.PoolTenant) []byte {
	t.Helper()
	s := pipeline.PoolSettings{Pool: p.Pool, Prefix: p.Prefix, Tenants: tenants}
	b, err := poolsettings.Encode(&s)
	if err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	f, _ := zw.Create(pipeline.PoolSettingsFile)
	f.Write(edit(b))
	zw.Close()
	return zb.Bytes()
}

// pipectl reads the pool's tenants from the index in the controller's package; it refuses to act
// on a pool whose settings it cannot read, naming the problem: a tenant whose row does not decode,
// or a file of another version.
func TestPoolSettingsFromCode(t *testing.T) {
	pool := opsfake.Pool("default")
	row := func(id, format string) pipeline.PoolTenant {
		return pipeline.PoolTenant{Settings: pipeline.Tenant{Tenant: spec.Tenant{ID: id, Format: format}}, Prefix: pool.Prefix + id + "/", OnFailure: pipeline.OnFailureHalt}
	}
	keep := func(b []byte) []byte { return b }
	tests := []struct {
		name    string
		edit    func([]byte) []byte
		wantErr string // "" for the tenants listed
	}{
		{"indexed", keep, ""},
		{"a bad row", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"format":"BAD"`), []byte(`"fxrmat":"BAD"`), 1)
		}, `tenant "bad": row: json: unknown field "fxrmat"`},
		{"version 1", func([]byte) []byte {
			return []byte(`{"version":1,"pool":"default","prefix":"pool/default/","tenants":[]}`)
		}, "not a version 2 settings file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := opsfake.New(coreNow)
			w.AddPool("TenantPipeline-Pool-default", pool, map[string]string{"hooli": pipeline.OnFailureHalt})
			w.Code[pool.ControllerFunction] = poolCode(t, pool, tt.edit, row("hooli", "csv"), row("bad", "BAD"), row("wayne", "csv"))
			rep, err := coreOps(w).Status(context.Background(), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, tn := range rep.Tenants {
				ids = append(ids, tn.ID+":"+tn.Policy)
			}
			if got, want := strings.Join(ids, ","), "bad:halt,hooli:halt,wayne:halt"; got != want {
				t.Errorf("got tenants %s, want %s", got, want)
			}
		})
	}
}
