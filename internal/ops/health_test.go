package ops_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// healthWorld: pool default's rules report hooli halted (Blocked 1 in two periods), wayne at 0 (a
// not-blocked tenant's deliveries), wayne's failed file, and nobody over the time thresholds.
func healthWorld() *opsfake.World {
	w := opsfake.New(coreNow)
	w.AddPool("TenantPipeline-Pool-default", opsfake.Pool("default"), map[string]string{"hooli": pipeline.OnFailureHalt, "wayne": pipeline.OnFailureContinue})
	rule := func(m string) string { return "TenantPipeline-Pool-default-default-Tenant" + m }
	w.SetInsightReport(rule("Blocked"), map[string][]float64{"hooli": {1, 1}, "wayne": {0, 0, 0}})
	w.SetInsightReport(rule("FailedFiles"), map[string][]float64{"wayne": {0, 2}})
	w.SetInsightReport(rule("HeadRunningSeconds"), map[string][]float64{})
	w.SetInsightReport(rule("HeadQueuedSeconds"), map[string][]float64{})
	w.SetInsightReport(rule("SequenceGapsOverdue"), map[string][]float64{"wayne": {1}})
	return w
}

// PoolHealth names, per per-tenant alarm, the tenants whose value reached the alarm's threshold in
// a period, from the rules the construct names, with the API's most contributors; the others are
// not listed.
func TestPoolHealth(t *testing.T) {
	w := healthWorld()
	o := ops.New(w.Clients(), "TenantPipeline")
	o.Now, o.HTTP = func() time.Time { return coreNow }, w.HTTPClient()
	h, err := o.PoolHealth(context.Background(), "default", 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range h.Alarms {
		var ts []string
		for _, tv := range a.Tenants {
			ts = append(ts, fmt.Sprintf("%s=%g", tv.Tenant, tv.Value))
		}
		got = append(got, a.Alarm+":"+strings.Join(ts, ","))
	}
	want := "TenantBlocked:hooli=1 TenantFailedFiles:wayne=2 TenantHeadRunning: TenantHeadQueued: TenantSequenceGap:wayne=1"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("got %s, want %s", g, want)
	}
	if h.Stack != "TenantPipeline-Pool-default" || h.To.Sub(h.From) != 15*time.Minute {
		t.Errorf("got stack %s, window %v to %v; want TenantPipeline-Pool-default and 15 minutes", h.Stack, h.From, h.To)
	}
	if len(w.InsightRequests) != 5 {
		t.Fatalf("got %d report requests, want one per rule", len(w.InsightRequests))
	}
	for _, in := range w.InsightRequests {
		if aws.ToInt32(in.MaxContributorCount) != 100 || aws.ToString(in.OrderBy) != "Sum" || aws.ToInt32(in.Period) != 300 {
			t.Errorf("%s: got %d contributors by %s per %d s, want 100 by Sum per 300 s", aws.ToString(in.RuleName), aws.ToInt32(in.MaxContributorCount), aws.ToString(in.OrderBy), aws.ToInt32(in.Period))
		}
	}
}

func TestPoolHealthFails(t *testing.T) {
	tests := []struct {
		name, pool string
		err        error
		want       string
	}{
		{"no such pool", "nope", nil, `pool "nope" not found; pools: [default]`},
		{"report refused", "default", errors.New("AccessDenied"), "report of rule TenantPipeline-Pool-default-default-TenantBlocked: AccessDenied"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := healthWorld()
			if tc.err != nil {
				w.Err["GetInsightRuleReport"] = tc.err
			}
			o := ops.New(w.Clients(), "TenantPipeline")
			o.HTTP = w.HTTPClient()
			_, err := o.PoolHealth(context.Background(), tc.pool, time.Minute)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
