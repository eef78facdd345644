package stacks

import (
	"github.com/example/tenantpipeline/spec"

	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/tenants"
)

// A pool's Register writes every table under its tablePrefix: a prefix that could cover the
// app's admission tables (generated names "<stackPrefix>-…") is refused.
func TestTablePrefixMissesAdmissionTables(t *testing.T) {
	o := Options{StackPrefix: "TenantPipeline"}
	for _, tc := range []struct {
		prefix string
		want   string // substring of the error; none: no error
	}{
		{"pool-", ""},
		{"TenantPipelineRecords-", ""},
		{"Tenant", `pools.default.tablePrefix "Tenant" overlaps "TenantPipeline-"`},
		{"TenantPipeline-", `overlaps "TenantPipeline-"`},
		{"TenantPipeline-Pool-default-", `overlaps "TenantPipeline-"`},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			f := &tenants.File{
				Pools:   map[string]*tenants.PoolConfig{"default": {TablePrefix: tc.prefix}},
				Tenants: []spec.Tenant{{ID: "a", Tier: tenants.TierPool, Pool: "default"}},
			}
			err := admissionTablesOutsideTablePrefixes(f, o)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
