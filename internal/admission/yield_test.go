package admission

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/schema"
)

// A pooled file that gives its core system's slot back while it waits for its pool keeps its place
// at the core system: when the pool admits it and the core system is busy, it queues ahead of the
// core system's later waiters, and the core system's next slot is its. It does not go to the back
// of the line each time it passes from one gate to the other.
func TestTwoGatesNoBounce(t *testing.T) {
	tests := []struct {
		name     string
		ticketed bool // f first waited at the core system (a ticket), or took a free slot there
	}{
		{"took a free core slot", false},
		{"was handed the core slot", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk, table := newStore(t)
			ctx := context.Background()
			core := Gate{Table: table, Key: schema.CoreGate("ledger"), Limit: 1}
			pool := Gate{Table: table, Key: schema.PoolGate("p"), Limit: 1}
			mustAdmit(t, s, req("p0", "p0-f", 1, pool)) // the pool is full
			if tt.ticketed {
				mustAdmit(t, s, req("s0", "s0-f", 1, core))
				clk.Add(time.Second)
				waitArmed(t, s, req("f", "f-f", 1, core, pool))
				clk.Add(time.Second)
				if got := wokenTenants(release(t, s, []Gate{core}, "s0", "s0-f")); !slices.Equal(got, []string{"f"}) {
					t.Fatalf("woken %v, want f", got)
				}
			}
			// f takes (or claims) the core slot, finds the pool full, gives the core slot back and
			// waits for the pool.
			clk.Add(time.Second)
			fr := req("f", "f-f", 1, core, pool)
			fr.Fresh = !tt.ticketed
			d := mustAdmit(t, s, fr)
			if d.Admitted || d.Gate != pool.Key {
				t.Fatalf("f: got %+v, want a wait for the pool", d)
			}
			if _, err := s.Arm(ctx, d.Entry, Wake{QueueURL: "q", ReceiptHandle: "rh-f"}, testHold); err != nil {
				t.Fatal(err)
			}
			// A core system's own tenant runs, and another waits for the core system after f.
			clk.Add(time.Second)
			if d := mustAdmit(t, s, req("s1", "s1-f", 1, core)); !d.Admitted {
				t.Fatalf("s1: got %+v, want the free core slot", d)
			}
			clk.Add(time.Second)
			waitArmed(t, s, req("s2", "s2-f", 1, core))
			// The pool admits f; the core system is busy: f queues there ahead of s2.
			clk.Add(time.Second)
			if got := wokenTenants(release(t, s, []Gate{pool}, "p0", "p0-f")); !slices.Equal(got, []string{"f"}) {
				t.Fatalf("p0's release woke %v, want f", got)
			}
			d = mustAdmit(t, s, again(req("f", "f-f", 1, core, pool)))
			if d.Admitted || d.Gate != core.Key || d.Ahead != 0 {
				t.Fatalf("f back at the core system: got %+v, want a wait first in line", d)
			}
			if _, err := s.Arm(ctx, d.Entry, Wake{QueueURL: "q", ReceiptHandle: "rh-f"}, testHold); err != nil {
				t.Fatal(err)
			}
			clk.Add(time.Second)
			if got := wokenTenants(release(t, s, []Gate{core}, "s1", "s1-f")); !slices.Equal(got, []string{"f"}) {
				t.Fatalf("s1's release woke %v, want f (it waited first), not s2", got)
			}
			if d := mustAdmit(t, s, again(req("f", "f-f", 1, core, pool))); !d.Admitted {
				t.Fatalf("f: got %+v, want admitted at both gates", d)
			}
			if d := mustAdmit(t, s, again(req("s2", "s2-f", 1, core))); d.Admitted || d.Ahead != 0 {
				t.Fatalf("s2: got %+v, want still waiting, first in line", d)
			}
		})
	}
}
