package admission

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/schema"
)

// The scheduled reconcile hands a slot whose wake-up was lost on, with nobody releasing or asking,
// and runs no more often than ReconcileEvery: a release or ask that reconciled just before it
// leaves it nothing to do.
func TestReconcileDue(t *testing.T) {
	tests := []struct {
		name      string
		after     time.Duration // since the last reconcile (the release's)
		wantWoken []string
	}{
		{name: "due: the lost wake-up's waiter is woken again", after: DefaultReconcileEvery + time.Second, wantWoken: []string{"late"}},
		{name: "not due: nothing", after: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk, table := newStore(t)
			ctx := context.Background()
			g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
			mustAdmit(t, s, req("holder", "holder-f", 1, g))
			clk.Add(time.Second)
			waitArmed(t, s, req("late", "late-f", 1, g))
			// The release hands the slot to late, whose wake-up is then lost.
			clk.Add(s.reconcileEvery())
			if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"late"}) {
				t.Fatalf("woken %v, want late", got)
			}
			clk.Add(max(tt.after, s.reserveFor()+time.Second))
			if tt.after < s.reconcileEvery() {
				// Someone's ask reconciled just before (and woke late), so the schedule finds it not due.
				m, err := s.readMeta(ctx, g)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.reconcileIfDue(ctx, g, m, s.now()); err != nil {
					t.Fatal(err)
				}
				clk.Add(tt.after)
			}
			wakes, err := s.ReconcileDue(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			if got := wokenTenants(wakes); !slices.Equal(got, tt.wantWoken) {
				t.Fatalf("got woken %v, want %v", got, tt.wantWoken)
			}
		})
	}
}
