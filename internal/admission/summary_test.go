package admission

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/schema"
)

func TestSummarize(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 2}
	mustAdmit(t, s, req("a", "a-f", 1, g))
	mustAdmit(t, s, req("b", "b-f", 1, g))
	waitArmed(t, s, req("c", "c-f", 1, g))
	clk.Add(40 * time.Second)
	waitArmed(t, s, req("d", "d-f", 2, g))
	clk.Add(20 * time.Second)
	sum, err := s.Summarize(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.Running, []string{"a-f", "b-f"}) || sum.Waiting != 2 || sum.OldestWaitSeconds != 60 || sum.Limit != 2 {
		t.Fatalf("got %+v, want a-f and b-f running, 2 waiting, the oldest for 60 s", sum)
	}
}
