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

// A lease nobody renews (a lost message, a lost release) is handed over after LeaseTTL; a renewed
// one never is. The file whose lease went keeps running and regains a lease on its next delivery:
// an overflow lease that counts against the gate, so the bound holds again as files end.
func TestLostLeaseIsRegainedAndCounts(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	ctx := context.Background()
	mustAdmit(t, s, req("a", "a-f1", 1, g))
	crashed := &Store{DB: newClient(), LeaseTTL: s.LeaseTTL, WaiterTTL: s.WaiterTTL, Now: clk.Now} // another controller
	if d, err := crashed.Admit(ctx, again(req("a", "a-f1", 1, g))); err != nil || !d.Held {
		t.Fatalf("after a crash: got %+v, %v, want the lease held", d, err)
	}
	clk.Add(s.LeaseTTL - time.Minute)
	if res, err := s.Renew(ctx, []Gate{g}, "a", "a-f1"); err != nil || !res.Held || res.Regained != 0 {
		t.Fatalf("Renew: %+v, %v", res, err)
	}
	clk.Add(s.LeaseTTL - time.Minute)
	waitArmed(t, s, req("b", "b-f1", 1, g))
	if wakes, _ := s.Reconcile(ctx, g); len(wakes) != 0 {
		t.Fatalf("a lease renewed within LeaseTTL was handed to %v", wokenTenants(wakes))
	}
	clk.Add(2 * time.Minute) // now past LeaseTTL since the renewal
	wakes, err := s.Reconcile(ctx, g)
	if err != nil || !slices.Equal(wokenTenants(wakes), []string{"b"}) {
		t.Fatalf("Reconcile: got %v, %v, want the abandoned slot handed to b", wakes, err)
	}
	if d := mustAdmit(t, s, again(req("b", "b-f1", 1, g))); !d.Claimed {
		t.Fatalf("b: got %+v, want the slot claimed", d)
	}
	// a was running all along: its delivery regains a lease, beyond the limit.
	res, err := s.Renew(ctx, []Gate{g}, "a", "a-f1")
	if err != nil || res.Regained != 1 || res.Overflow != 1 {
		t.Fatalf("a's renewal: got %+v, %v, want the lease regained as overflow", res, err)
	}
	if h, _, _ := s.Holders(ctx, g); !slices.Equal(h, []string{"a-f1", "b-f1"}) {
		t.Fatalf("holders %v, want a and b", h)
	}
	waitArmed(t, s, req("c", "c-f1", 1, g))
	// b ends: a's overflow lease moves into the slot; c still waits (the gate was over its limit).
	if wakes := release(t, s, []Gate{g}, "b", "b-f1"); len(wakes) != 0 {
		t.Fatalf("b's release woke %v while the gate was over its limit", wokenTenants(wakes))
	}
	if res, err := s.Renew(ctx, []Gate{g}, "a", "a-f1"); err != nil || res.Regained != 0 {
		t.Fatalf("a after moving in: %+v, %v", res, err)
	}
	if got := wokenTenants(release(t, s, []Gate{g}, "a", "a-f1")); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("a's release woke %v, want c", got)
	}
}

func TestAdaptiveLimitLowersTheGate(t *testing.T) {
	put := func(s *Store, g Gate, v string) {
		if _, err := s.DB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: map[string]types.AttributeValue{
			schema.AttrPK: str(g.Key), schema.AttrSK: str(schema.LimitSK), schema.AttrLimit: &types.AttributeValueMemberN{Value: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		limit string
		want  int
	}{{"2", 2}, {"2.9", 2}, {"0", 1}, {"40", 4}}
	for _, tt := range tests {
		t.Run(tt.limit, func(t *testing.T) {
			s, _, table := newStore(t)
			g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 4, Adaptive: true}
			put(s, g, tt.limit)
			got := 0
			for i := range 6 {
				tenant := fmt.Sprintf("l%s-%d", tt.limit, i)
				if mustAdmit(t, s, req(tenant, tenant+"-f", 1, g)).Admitted {
					got++
				}
			}
			if got != tt.want {
				t.Fatalf("admitted %d, want %d", got, tt.want)
			}
		})
	}
}

// lostAnswer performs the first slot PutItem twice, as the SDK's retry does after an answer that
// was lost: the retry finds the item already written by the first attempt.
type lostAnswer struct {
	ItemAPI
	done bool
}

func (l *lostAnswer) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if !l.done && strings.HasPrefix(sOf(in.Item, schema.AttrSK), schema.SlotPrefix) {
		l.done = true
		if _, err := l.ItemAPI.PutItem(ctx, in, optFns...); err != nil {
			return nil, err
		}
	}
	return l.ItemAPI.PutItem(ctx, in, optFns...)
}

func TestLostPutAnswerNeverTakesTwoSlots(t *testing.T) {
	s, _, table := newStore(t)
	s.DB = &lostAnswer{ItemAPI: s.DB}
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 3}
	if d := mustAdmit(t, s, req("a", "a-f", 1, g)); !d.Admitted {
		t.Fatalf("a: %+v", d)
	}
	if h, _, _ := s.Holders(context.Background(), g); !slices.Equal(h, []string{"a-f"}) {
		t.Fatalf("holders %v, want a-f once", h)
	}
}
