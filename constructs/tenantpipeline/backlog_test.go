package tenantpipeline

import (
	"strings"
	"testing"
)

// Pool props default maxQueuedFilesPerTenant to 10 and check it as tenants.json does, naming the prop.
func TestPoolMaxQueuedFilesPerTenant(t *testing.T) {
	p := PoolProps{Name: "p", Tenants: []Tenant{{ID: "x", RegisterURL: "https://x.example.com/"}}}
	if got := p.withDefaults().MaxQueuedFilesPerTenant; got != 10 {
		t.Errorf("default: got %d, want 10", got)
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, ""},
		{1000, ""},
		{1001, "PoolProps.MaxQueuedFilesPerTenant 1001 is out of range: use 1 to 1000"},
		{-1, "PoolProps.MaxQueuedFilesPerTenant -1 is out of range"},
	} {
		p.MaxQueuedFilesPerTenant = tc.n
		all := strings.Join(messages(p.withDefaults().file().ValidateNamed(propsNaming)), "\n")
		if tc.want == "" && all != "" {
			t.Errorf("%d: got %q, want no problem", tc.n, all)
		}
		if tc.want != "" && !strings.Contains(all, tc.want) {
			t.Errorf("%d: got %q, want %q", tc.n, all, tc.want)
		}
	}
}
