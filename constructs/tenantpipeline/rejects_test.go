package tenantpipeline

import (
	"strings"
	"testing"
)

// A tenant's rejectStatuses are checked as tenants.json checks them, in both tiers, and travel in
// its settings.
func TestValidateRejectStatuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   string
		statuses []int
		want     string // "" for no problem
	}{
		{"skipRecord with 422", "skipRecord", []int{422}, ""},
		{"without skipRecord", "", []int{422}, `RejectStatuses (tenant "acme"): [422] is set, but it only has effect with "onInvalidRecord": "skipRecord"`},
		{"408", "skipRecord", []int{408}, `RejectStatuses (tenant "acme"): 408 is retried by Register`},
		{"429", "skipRecord", []int{429}, `RejectStatuses (tenant "acme"): 429 is retried by Register`},
		{"5xx", "skipRecord", []int{503}, `RejectStatuses (tenant "acme"): 503 is not a 4xx status`},
		{"twice", "skipRecord", []int{400, 400}, `RejectStatuses (tenant "acme"): 400 is listed twice`},
	} {
		tenant := func() Tenant {
			return Tenant{ID: "acme", RegisterURL: "https://core.example.com/", OnInvalidRecord: tc.policy, RejectStatuses: tc.statuses}
		}
		t.Run("silo/"+tc.name, func(t *testing.T) {
			p := valid()
			p.Tenant = tenant()
			check(t, p.withDefaults().validate(), tc.want)
			if tc.want == "" && !settings(p.withDefaults().Tenant, nil).RejectsStatus(422) {
				t.Errorf("got settings that do not reject 422, want them to")
			}
		})
		t.Run("pool/"+tc.name, func(t *testing.T) {
			// The pool's other props (its bucket) are not this test's: only rejectStatuses' problems count.
			p := PoolProps{Name: "p", Tenants: []Tenant{tenant()}}
			err := p.withDefaults().validate()
			if tc.want == "" && err != nil && strings.Contains(err.Error(), "rejectStatuses") {
				t.Errorf("got %v, want no rejectStatuses problem", err)
			}
			if tc.want != "" {
				check(t, err, tc.want)
			}
		})
	}
}

func check(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("got %v, want no problem", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("got %v, want an error containing %q", err, want)
	}
}
