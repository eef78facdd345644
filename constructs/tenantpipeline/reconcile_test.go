package tenantpipeline

import "testing"

// The silo tenant that runs a core system's schedule is the one with the smallest id, whatever the
// order the app creates its tenants and pools in; none when a pool covers the core system.
func TestSiloReconciler(t *testing.T) {
	tests := []struct {
		name   string
		silos  []string
		pooled bool
		want   string // "" for none
	}{
		{name: "smallest id, created last", silos: []string{"zeta", "mu", "beta"}, want: "beta"},
		{name: "smallest id, created first", silos: []string{"beta", "zeta"}, want: "beta"},
		{name: "one silo tenant", silos: []string{"acme"}, want: "acme"},
		{name: "a pool covers it", silos: []string{"beta", "zeta"}, pooled: true},
		{name: "pooled tenants only", pooled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &CoreSystem{}
			for _, id := range tt.silos {
				c.reconcilers.silos = append(c.reconcilers.silos, &TenantPipeline{Props: Props{Tenant: Tenant{ID: id}}})
			}
			if tt.pooled {
				c.coveredByPool()
			}
			got := ""
			if r := c.siloReconciler(); r != nil {
				got = r.Props.Tenant.ID
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
