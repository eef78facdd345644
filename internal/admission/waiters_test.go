package admission

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/example/tenantpipeline/internal/schema"
)

// A waiting place outlives a wait of more than a day: each ask moves its expiry on.
func TestWaitingPlaceSurvivesALongWait(t *testing.T) {
	s, clk, table := newStore(t)
	ctx := context.Background()
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	d := waitArmed(t, s, req("w", "w-f", 1, g))
	for range 30 { // 30 hours, an ask per hour
		clk.Add(time.Hour)
		if _, err := s.Renew(ctx, []Gate{g}, "holder", "holder-f"); err != nil {
			t.Fatal(err)
		}
		if d := mustAdmit(t, s, again(req("w", "w-f", 1, g))); d.Admitted {
			t.Fatalf("w admitted while the slot is held: %+v", d)
		}
	}
	for _, sk := range []string{d.Entry.SK, schema.PlacePrefix + "w"} {
		out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(g.queue(), sk), ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			t.Fatalf("%s: %v, %v", sk, out, err)
		}
		if exp := time.Unix(nOf(out.Item, schema.AttrExpiresAt), 0); !exp.After(clk.Now().Add(time.Hour)) {
			t.Fatalf("%s expires at %v, want well after now %v", sk, exp, clk.Now())
		}
	}
	if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"w"}) {
		t.Fatalf("woken %v after 30 hours, want w", got)
	}
}

func TestWaitHold(t *testing.T) {
	tests := []struct {
		ahead, limit int
		want         time.Duration
	}{
		{0, 50, 5 * time.Minute},
		{49, 50, 5 * time.Minute},
		{50, 50, 10 * time.Minute},
		{9950, 50, MaxHold},
		{3, 1, 20 * time.Minute},
		{-1, 0, 5 * time.Minute},
	}
	for _, tt := range tests {
		if got := WaitHold(5*time.Minute, tt.ahead, tt.limit); got != tt.want {
			t.Errorf("WaitHold(5m, %d ahead, limit %d): got %s, want %s", tt.ahead, tt.limit, got, tt.want)
		}
	}
}

// A file held long because it is far back in line keeps its place for as long as its hold: the
// handover wakes it, it is not taken for gone.
func TestLongHoldKeepsThePlace(t *testing.T) {
	s, clk, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	d := mustAdmit(t, s, req("far", "far-f", 1, g))
	if ok, err := s.Arm(context.Background(), d.Entry, Wake{QueueURL: "q", ReceiptHandle: "rh-far"}, 2*time.Hour); err != nil || !ok {
		t.Fatalf("Arm: %v, %v", ok, err)
	}
	clk.Add(3 * time.Hour) // far past WaiterTTL, within two holds
	if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"far"}) {
		t.Fatalf("woken %v, want far", got)
	}
}
