package admission

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/example/tenantpipeline/internal/schema"
)

// waitRow is a tenant that starts waiting ago before the slot frees.
type waitRow struct {
	tenant string
	weight int
	ago    time.Duration
}

func TestHandoverFairByWaitScaledByWeight(t *testing.T) {
	tests := []struct {
		name  string
		waits []waitRow
		want  string // the tenant the freed slot is handed to
	}{
		{"longest wait first", []waitRow{{"a", 1, 30 * time.Second}, {"b", 1, 60 * time.Second}, {"c", 1, 10 * time.Second}}, "b"},
		{"weight scales the wait", []waitRow{{"a", 1, 60 * time.Second}, {"b", 3, 30 * time.Second}}, "b"}, // 90 weighted s beat 60
		{"weight does not beat a much longer wait", []waitRow{{"a", 1, 100 * time.Second}, {"b", 2, 30 * time.Second}}, "a"},
		{"equal weighted waits: the earlier since", []waitRow{{"a", 2, 20 * time.Second}, {"b", 1, 40 * time.Second}}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk, table := newStore(t)
			g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
			mustAdmit(t, s, req("holder", "holder-f", 1, g))
			start := clk.Now()
			maxAgo := time.Duration(0)
			for _, w := range tt.waits {
				maxAgo = max(maxAgo, w.ago)
			}
			order := slices.Clone(tt.waits)
			slices.SortFunc(order, func(a, b waitRow) int { return cmp.Compare(b.ago, a.ago) })
			for _, w := range order {
				clk.t = start.Add(maxAgo - w.ago)
				waitArmed(t, s, req(w.tenant, w.tenant+"-f", w.weight, g))
			}
			clk.t = start.Add(maxAgo)
			got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f"))
			if !slices.Equal(got, []string{tt.want}) {
				t.Fatalf("woken %v, want [%s]", got, tt.want)
			}
			for _, w := range tt.waits { // every tenant asks; only the one handed the slot has it
				d := mustAdmit(t, s, again(req(w.tenant, w.tenant+"-f", w.weight, g)))
				if d.Admitted != (w.tenant == tt.want) {
					t.Errorf("%s: got %+v, want admitted only for %s", w.tenant, d, tt.want)
				}
			}
		})
	}
}

// Over a long run, a weight-5 tenant is admitted about five times as often as a weight-1 tenant
// that waits as long (both always have a next file waiting).
func TestHandoverWeightShare(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f0", 1, g))
	weights := map[string]int{"heavy": 5, "light": 1}
	files := map[string]int{}
	for _, tenant := range []string{"heavy", "light"} {
		waitArmed(t, s, req(tenant, fmt.Sprintf("%s-f%d", tenant, files[tenant]), weights[tenant], g))
	}
	running, runner := "holder-f0", "holder"
	admitted := map[string]int{}
	for range 60 {
		clk.Add(10 * time.Second)
		wakes := release(t, s, []Gate{g}, runner, running)
		if len(wakes) != 1 {
			t.Fatalf("release of %s woke %v, want one waiter", running, wakes)
		}
		next := strings.TrimPrefix(wakes[0].ReceiptHandle, "rh-")
		exec := fmt.Sprintf("%s-f%d", next, files[next])
		if d := mustAdmit(t, s, again(req(next, exec, weights[next], g))); !d.Admitted {
			t.Fatalf("%s: got %+v, want admitted", next, d)
		}
		admitted[next]++
		running, runner = exec, next
		files[next]++ // the tenant's next file waits at once
		waitArmed(t, s, req(next, fmt.Sprintf("%s-f%d", next, files[next]), weights[next], g))
	}
	if admitted["light"] == 0 || admitted["heavy"] < 4*admitted["light"] {
		t.Fatalf("admitted %v, want heavy at least 4 times light, and light admitted", admitted)
	}
}

// A slot handed to a file that does not claim it within ReserveFor goes to the next waiter; the
// late file then queues again with its own ticket, ahead of every later waiter.
func TestReservationExpiresToTheNextWaiter(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	for _, tenant := range []string{"late", "next", "later"} {
		clk.Add(time.Second)
		waitArmed(t, s, req(tenant, tenant+"-f", 1, g))
	}
	if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("woken %v, want late", got)
	}
	clk.Add(s.reserveFor() + time.Second)
	wakes, err := s.Reconcile(context.Background(), g)
	// next is handed the slot; late, whose wake-up was lost, is woken again from its receipt.
	if err != nil || !slices.Equal(wokenTenants(wakes), []string{"next", "late"}) {
		t.Fatalf("Reconcile: got %v, %v, want next woken, and late woken again", wakes, err)
	}
	d := mustAdmit(t, s, again(req("late", "late-f", 1, g)))
	if d.Admitted || d.Ahead != 0 {
		t.Fatalf("late after its reservation expired: got %+v, want a wait, first in line", d)
	}
	if _, err := s.Arm(context.Background(), d.Entry, Wake{QueueURL: "q", ReceiptHandle: "rh-late"}, testHold); err != nil {
		t.Fatal(err)
	}
	if d := mustAdmit(t, s, again(req("next", "next-f", 1, g))); !d.Claimed {
		t.Fatalf("next: got %+v, want its slot claimed", d)
	}
	if got := wokenTenants(release(t, s, []Gate{g}, "next", "next-f")); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("woken %v, want late again, before later", got)
	}
}

// A waiting file that stops asking (its message is gone) is skipped by the handover once its entry
// is older than WaiterTTL.
func TestStaleWaiterIsSkipped(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	waitArmed(t, s, req("gone", "gone-f", 1, g))
	clk.Add(s.WaiterTTL + time.Second)
	waitArmed(t, s, req("late", "late-f", 1, g))
	if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("woken %v, want late, past the stale entry", got)
	}
}

// callCounter counts the DynamoDB requests a Store makes.
type callCounter struct {
	ItemAPI
	n atomic.Int64
}

func (c *callCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.n.Add(1)
	return c.ItemAPI.GetItem(ctx, in, o...)
}
func (c *callCounter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.n.Add(1)
	return c.ItemAPI.PutItem(ctx, in, o...)
}
func (c *callCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.n.Add(1)
	return c.ItemAPI.UpdateItem(ctx, in, o...)
}
func (c *callCounter) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.n.Add(1)
	return c.ItemAPI.DeleteItem(ctx, in, o...)
}
func (c *callCounter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.n.Add(1)
	return c.ItemAPI.Query(ctx, in, o...)
}

// Ranking is constant work: a waiter's ask and a release's handover make as many requests with 20
// waiters as with 400.
func TestRankingCostDoesNotGrowWithWaiters(t *testing.T) {
	cost := func(waiters int) (ask, rel int64) {
		s, _, table := newStore(t)
		cc := &callCounter{ItemAPI: s.DB}
		s.DB = cc
		s.ReconcileEvery = time.Hour
		g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 2}
		mustAdmit(t, s, req("h0", "h0-f", 1, g))
		mustAdmit(t, s, req("h1", "h1-f", 1, g))
		s.Reconcile(context.Background(), g)
		for i := range waiters {
			tenant := fmt.Sprintf("w%04d", i)
			waitArmed(t, s, req(tenant, tenant+"-f", 1+i%3, g))
		}
		before := cc.n.Load()
		mustAdmit(t, s, again(req("w0100", "w0100-f", 1+100%3, g))) // a waiter in the middle
		ask = cc.n.Load() - before
		before = cc.n.Load()
		release(t, s, []Gate{g}, "h0", "h0-f")
		return ask, cc.n.Load() - before
	}
	askSmall, relSmall := cost(120)
	askLarge, relLarge := cost(400)
	if askLarge != askSmall || relLarge != relSmall || askLarge > 6 || relLarge > 12 {
		t.Fatalf("requests: ask %d → %d, release %d → %d (120 → 400 waiters), want equal and at most 6 and 12",
			askSmall, askLarge, relSmall, relLarge)
	}
}
