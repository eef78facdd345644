package admission

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// entryHook runs before each waiting entry's PutItem: a file between taking its ticket and
// writing its entry.
type entryHook struct {
	ItemAPI
	before func()
}

func (h entryHook) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if sk, ok := in.Item[schema.AttrSK].(*types.AttributeValueMemberS); ok && strings.HasPrefix(sk.Value, "w#") && h.before != nil {
		h.before()
	}
	return h.ItemAPI.PutItem(ctx, in, optFns...)
}

// A file that has its ticket but not yet its entry is still a waiter: a release that finds the
// queue empty in that moment must not count the ticket served, or no release would ever hand the
// file a slot. Here "b" takes its ticket; before its entry is written, the holder's release hands
// the slot to "a", and a's own release finds nobody in line. Once b's entry is there, the free slot
// goes to b.
func TestTicketWithoutEntryYetIsNotSettled(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	ctx := context.Background()
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	clk.Add(time.Second)
	waitArmed(t, s, req("a", "a-f", 1, g))
	clk.Add(time.Second)
	var inHook []string
	racing := &Store{DB: entryHook{ItemAPI: s.DB, before: func() {
		if inHook != nil {
			return
		}
		inHook = wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f"))
		if d := mustAdmit(t, s, again(req("a", "a-f", 1, g))); !d.Claimed {
			t.Errorf("a: got %+v, want its slot claimed", d)
		}
		inHook = append(inHook, wokenTenants(release(t, s, []Gate{g}, "a", "a-f"))...)
	}}, LeaseTTL: s.LeaseTTL, WaiterTTL: s.WaiterTTL, Now: clk.Now}
	d, err := racing.Admit(ctx, req("b", "b-f", 1, g))
	if err != nil || d.Admitted {
		t.Fatalf("b: got %+v, %v, want a wait", d, err)
	}
	if !slices.Equal(inHook, []string{"a"}) {
		t.Fatalf("while b wrote its entry: woken %v, want a, then nobody", inHook)
	}
	if ok, err := s.Arm(ctx, d.Entry, Wake{QueueURL: "q", ReceiptHandle: "rh-b"}, testHold); err != nil || !ok {
		t.Fatalf("Arm(b): %v, %v", ok, err)
	}
	clk.Add(DefaultReconcileEvery + time.Second)
	wakes, err := s.Reconcile(ctx, g)
	if err != nil || !slices.Equal(wokenTenants(wakes), []string{"b"}) {
		t.Fatalf("Reconcile: got %v, %v, want b woken for the free slot", wokenTenants(wakes), err)
	}
}
