package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// hookDB runs afterDelete once a DeleteItem of a waiting entry succeeded: the moment between a
// handover's taking of its waiter and its writing of the slot, where a racing writer can take the
// slot first.
type hookDB struct {
	ItemAPI
	afterDelete    func()
	afterSlotQuery func() // once a Query of a gate's slots answered: a reconciler's read
}

func (h *hookDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := h.ItemAPI.Query(ctx, in, o...)
	if v, ok := in.ExpressionAttributeValues[":slot"]; err == nil && ok && sOf(map[string]types.AttributeValue{"v": v}, "v") == schema.SlotPrefix && h.afterSlotQuery != nil {
		f := h.afterSlotQuery
		h.afterSlotQuery = nil
		f()
	}
	return out, err
}

func (h *hookDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := h.ItemAPI.DeleteItem(ctx, in, o...)
	if err == nil && h.afterDelete != nil && strings.HasPrefix(sOf(in.Key, schema.AttrSK), schema.EntryPrefix) {
		f := h.afterDelete
		h.afterDelete = nil
		f()
	}
	return out, err
}

// A handover whose slot another writer took between the waiter's removal and the slot's write puts
// the waiter back as it was: its ticket, and the receipt handle its message is held under, so that
// the next handover wakes it. A waiter put back without its receipt could never be woken.
func TestHandoverThatLostItsSlotKeepsTheWaitersReceipt(t *testing.T) {
	s, clk, table := newStore(t)
	hook := &hookDB{ItemAPI: s.DB}
	s.DB = hook
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("a", "a-f", 1, g))
	clk.Add(time.Second)
	waitArmed(t, s, req("b", "b-f", 1, g))
	hook.afterDelete = func() {
		// Another controller's stale-lease takeover: slot 0 now names "thief".
		item := leaseItem(g, 0, Request{Execution: "thief-f", Tenant: "thief"}, clk.Now(), s.leaseExpiry(clk.Now()))
		if _, err := hook.ItemAPI.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	if got := release(t, s, []Gate{g}, "a", "a-f"); len(got) != 0 {
		t.Fatalf("a's release woke %v, want nobody (the slot was taken before it was handed over)", got)
	}
	if hook.afterDelete != nil {
		t.Fatal("the handover never took the waiter: the test did not reach the race it is about")
	}
	if sum, err := s.Summarize(context.Background(), g); err != nil || sum.Waiting != 1 {
		t.Fatalf("Summarize: %+v, %v, want b waiting again", sum, err)
	}
	wakes := release(t, s, []Gate{g}, "thief", "thief-f")
	if len(wakes) != 1 || wakes[0].ReceiptHandle != "rh-b" || wakes[0].QueueURL != "q" || wakes[0].MessageID != "m-b" {
		t.Fatalf("thief's release woke %+v, want b's message (rh-b on q, m-b)", wakes)
	}
}

// A waiter whose reservation expired unclaimed and that asks again is put back under its ticket
// and counted as waiting again: when it is the only waiter, the free slot goes to it (by its own
// ask or the next reconcile), never idles while it waits.
func TestRequeuedWaiterCountsAsWaiting(t *testing.T) {
	s, clk, table := newStore(t)
	ctx := context.Background()
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	clk.Add(time.Second)
	waitArmed(t, s, req("late", "late-f", 1, g))
	if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("woken %v, want late", got)
	}
	// The wake-up is lost: nobody claims the slot in time, and the reconciler frees it.
	clk.Add(s.reserveFor() + time.Second)
	if wakes, err := s.Reconcile(ctx, g); err != nil || !slices.Equal(wokenTenants(wakes), []string{"late"}) {
		t.Fatalf("Reconcile: %v, %v, want the slot freed with nobody else to wake, and late woken again from its receipt", wakes, err)
	}
	d := mustAdmit(t, s, again(req("late", "late-f", 1, g)))
	if d.Admitted {
		return // admitted by its own ask: nothing idles
	}
	tenants := func(ws []Wake) (out []string) {
		for _, w := range ws {
			out = append(out, w.Tenant)
		}
		return out
	}
	woken := tenants(d.Wakes) // its ask may reconcile and hand the free slot to itself
	if !slices.Contains(woken, "late") {
		sum, err := s.Summarize(ctx, g)
		if err != nil || sum.Waiting != 1 {
			t.Fatalf("Summarize after the requeue: %+v, %v, want late counted as waiting", sum, err)
		}
		clk.Add(s.reconcileEvery())
		wakes, err := s.Reconcile(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		woken = append(woken, tenants(wakes)...)
	}
	if !slices.Contains(woken, "late") {
		t.Fatalf("woken %v while the only slot is free, want late (the only waiter)", woken)
	}
	if d := mustAdmit(t, s, again(req("late", "late-f", 1, g))); !d.Admitted {
		t.Fatalf("late after its wake-up: got %+v, want admitted", d)
	}
}

// The reservation window and the reconciler's period are what a lost wake-up costs: a slot handed
// to a file that does not come is handed on after ReserveFor (30 s: a woken message reaches Lambda
// in well under a second, so 30 s rides out a throttled poller, and no longer idles the slot), and
// a gate is reconciled at most once and at least once per ReconcileEvery (15 s) of asks.
func TestReservationWindowAndReconcilePeriod(t *testing.T) {
	if DefaultReserveFor != 30*time.Second || DefaultReconcileEvery != 15*time.Second {
		t.Fatalf("got a %s window and a %s period, want 30s and 15s", DefaultReserveFor, DefaultReconcileEvery)
	}
	t.Run("window", func(t *testing.T) {
		tests := []struct {
			after time.Duration
			want  []string
		}{
			{29 * time.Second, nil},                         // still first's
			{31 * time.Second, []string{"second", "first"}}, // past the window: handed on, first woken again
		}
		for _, tt := range tests {
			s, clk, table := newStore(t)
			g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
			mustAdmit(t, s, req("holder", "holder-f", 1, g))
			for _, tenant := range []string{"first", "second"} {
				clk.Add(time.Second)
				waitArmed(t, s, req(tenant, tenant+"-f", 1, g))
			}
			release(t, s, []Gate{g}, "holder", "holder-f")
			clk.Add(tt.after)
			wakes, err := s.Reconcile(context.Background(), g)
			if err != nil || !slices.Equal(wokenTenants(wakes), tt.want) {
				t.Errorf("%s after the handover: woken %v, %v, want %v", tt.after, wokenTenants(wakes), err, tt.want)
			}
		}
	})
	t.Run("period", func(t *testing.T) {
		s, clk, table := newStore(t)
		ctx := context.Background()
		g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
		mustAdmit(t, s, req("holder", "holder-f", 1, g))
		r := req("w", "w-f", 1, g)
		mustAdmit(t, s, r) // its wait marks the reconcile
		m, err := s.readMeta(ctx, g)
		if err != nil || m.reconciledAt != clk.Now().UnixMilli() {
			t.Fatalf("got reconciledAt %d, %v, want the first ask's %d", m.reconciledAt, err, clk.Now().UnixMilli())
		}
		first := m.reconciledAt
		tests := []struct {
			after time.Duration // since the first reconcile
			want  int64         // reconciledAt after the ask
		}{
			{2 * time.Second, first},
			{14 * time.Second, first},
			{16 * time.Second, first + 16_000},
		}
		start := clk.Now()
		for _, tt := range tests {
			clk.t = start.Add(tt.after)
			mustAdmit(t, s, again(r))
			if m, err := s.readMeta(ctx, g); err != nil || m.reconciledAt != tt.want {
				t.Errorf("ask %s after: got reconciledAt %d, %v, want %d", tt.after, m.reconciledAt, err, tt.want)
			}
		}
	})
}

// A release runs the gate's reconciler when it is due, as an ask does: a waiter whose wake-up was
// lost is woken again by the next file that ends, not only when another waiter asks (waiters far
// back in line ask rarely, after long holds).
func TestReleaseReconcilesWhenDue(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 2}
	mustAdmit(t, s, req("a", "a-f", 1, g))
	mustAdmit(t, s, req("b", "b-f", 1, g))
	for _, tenant := range []string{"lost", "next"} {
		clk.Add(time.Second)
		waitArmed(t, s, req(tenant, tenant+"-f", 1, g))
	}
	if got := wokenTenants(release(t, s, []Gate{g}, "a", "a-f")); !slices.Equal(got, []string{"lost"}) {
		t.Fatalf("a's release woke %v, want lost", got)
	}
	// lost's wake-up is lost; nobody asks; b ends past the reservation and the reconcile period.
	clk.Add(max(s.reserveFor(), s.reconcileEvery()) + time.Second)
	got := wokenTenants(release(t, s, []Gate{g}, "b", "b-f"))
	slices.Sort(got)
	if !slices.Equal(got, []string{"lost", "next"}) {
		t.Fatalf("b's release woke %v, want next (b's slot) and lost again (its reservation expired)", got)
	}
}

// The gate's reconcile marks keep its pace: a file that waits is told its expected wait at that
// pace (one file every 10 s here, so about 10 s per file ahead of it).
func TestExpectedWaitFromTheGatesPace(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("r0", "r0-f", 1, g))
	var line []string
	for i := range 12 {
		tenant := fmt.Sprintf("w%02d", i)
		waitArmed(t, s, req(tenant, tenant+"-f", 1, g))
		line = append(line, tenant)
	}
	runner := "r0"
	for range 8 { // a file ends every 10 s, and the next claims its slot
		clk.Add(10 * time.Second)
		woken := wokenTenants(release(t, s, []Gate{g}, runner, runner+"-f"))
		if len(woken) == 0 {
			t.Fatalf("%s's release woke nobody", runner)
		}
		runner = woken[0]
		if d := mustAdmit(t, s, again(req(runner, runner+"-f", 1, g))); !d.Admitted {
			t.Fatalf("%s: got %+v, want admitted", runner, d)
		}
	}
	d := mustAdmit(t, s, req("late", "late-f", 1, g))
	if d.Admitted || d.ExpectedWait <= 0 {
		t.Fatalf("late: got %+v, want a wait with an expected wait", d)
	}
	per := d.ExpectedWait / time.Duration(d.Ahead+1)
	if per < 5*time.Second || per > 20*time.Second {
		t.Errorf("got %s expected for %d ahead (%s a file), want about 10 s a file", d.ExpectedWait, d.Ahead, per)
	}
}

// A late file that claims its expired reservation between the reconciler's read of the slots and
// its handing on of that slot keeps the slot: the reconciler passes a stale slot on only if it is
// still as it read it. Otherwise the running file would lose its lease to the next waiter.
func TestReconcileLeavesALateClaimAlone(t *testing.T) {
	s, clk, table := newStore(t)
	raw := s.DB
	hook := &hookDB{ItemAPI: raw}
	s.DB = hook
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	for _, tenant := range []string{"late", "next"} {
		clk.Add(time.Second)
		waitArmed(t, s, req(tenant, tenant+"-f", 1, g))
	}
	release(t, s, []Gate{g}, "holder", "holder-f")
	clk.Add(s.reserveFor() + time.Second)
	other := &Store{DB: raw, LeaseTTL: s.LeaseTTL, WaiterTTL: s.WaiterTTL, Now: clk.Now}
	hook.afterSlotQuery = func() {
		if d := mustAdmit(t, other, again(req("late", "late-f", 1, g))); !d.Admitted {
			t.Errorf("late's claim: got %+v, want admitted (its slot still named it)", d)
		}
	}
	wakes, err := s.Reconcile(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if hook.afterSlotQuery != nil {
		t.Fatal("the reconciler never read the slots: the test did not reach the race it is about")
	}
	if h, _, _ := s.Holders(context.Background(), g); !slices.Equal(h, []string{"late-f"}) {
		t.Fatalf("holders %v, want late-f, which claimed its slot", h)
	}
	if slices.Contains(wokenTenants(wakes), "next") {
		t.Fatalf("woken %v, want next still waiting (no slot was free)", wokenTenants(wakes))
	}
	if d := mustAdmit(t, s, again(req("next", "next-f", 1, g))); d.Admitted || d.Ahead != 0 {
		t.Fatalf("next: got %+v, want still waiting, first in line", d)
	}
}
