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

// A paused tenant gives back what it waited for, takes nothing while paused, and its pause does
// not count as waiting: after Resume it queues behind those who waited meanwhile.
func TestPauseGivesBackAndDoesNotCountAsWaiting(t *testing.T) {
	s, clk, table := newStore(t)
	ctx := context.Background()
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 1}
	mustAdmit(t, s, req("holder", "holder-f", 1, g))
	waitArmed(t, s, req("p", "p-f", 1, g))
	clk.Add(time.Second)
	waitArmed(t, s, req("q", "q-f", 1, g))
	if got := wokenTenants(release(t, s, []Gate{g}, "holder", "holder-f")); !slices.Equal(got, []string{"p"}) {
		t.Fatalf("woken %v, want p", got)
	}
	// p's woken delivery finds its tenant paused: it hands the slot on.
	wakes, err := s.Pause(ctx, []Gate{g}, "p", "p-f")
	if err != nil || !slices.Equal(wokenTenants(wakes), []string{"q"}) {
		t.Fatalf("Pause: got %v, %v, want q woken", wakes, err)
	}
	clk.Add(time.Hour)
	if d := mustAdmit(t, s, again(req("p", "p-f", 1, g))); !d.Paused || d.Admitted {
		t.Fatalf("p while paused: got %+v, want Paused", d)
	}
	if d := mustAdmit(t, s, again(req("q", "q-f", 1, g))); !d.Claimed {
		t.Fatalf("q: got %+v, want claimed", d)
	}
	waitArmed(t, s, req("r", "r-f", 1, g))
	if err := s.Resume(ctx, []Gate{g}, "p", "p-f"); err != nil {
		t.Fatal(err)
	}
	d := waitArmed(t, s, req("p", "p-f", 1, g))
	if d.WaitedFor > time.Second || d.Ahead != 1 {
		t.Fatalf("p after resume: got %+v, want a new wait behind r", d)
	}
}

// A file's second release (its status event and its delivery both release it) reads one item;
// a late release of an earlier file, whose tenant's place names its next file already, still
// finds and frees that file's slot.
func TestReleaseTwiceAndLate(t *testing.T) {
	s, _, table := newStore(t)
	cc := &callCounter{ItemAPI: s.DB}
	s.DB = cc
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 2}
	mustAdmit(t, s, req("a", "a-f1", 1, g))
	release(t, s, []Gate{g}, "a", "a-f1")
	before := cc.n.Load()
	if n, _, err := s.Release(context.Background(), []Gate{g}, "a", "a-f1"); err != nil || n != 0 {
		t.Fatalf("second release: %d, %v", n, err)
	}
	if calls := cc.n.Load() - before; calls != 1 {
		t.Fatalf("second release made %d requests, want 1", calls)
	}
	// b's first file ends, but its release is lost; b's next file runs; the late release comes.
	mustAdmit(t, s, req("b", "b-f1", 1, g))
	if _, err := s.DB.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key(g.queue(), schema.PlacePrefix+"b")}); err != nil {
		t.Fatal(err)
	}
	mustAdmit(t, s, req("b", "b-f2", 1, g))
	if n, _, err := s.Release(context.Background(), []Gate{g}, "b", "b-f1"); err != nil || n != 1 {
		t.Fatalf("late release of b-f1: %d, %v, want its slot freed", n, err)
	}
	if h, _, _ := s.Holders(context.Background(), g); !slices.Equal(h, []string{"b-f2"}) {
		t.Fatalf("holders %v, want b-f2 only", h)
	}
}

// A halted tenant's failed file gave its slot back; its redrive runs without asking (the head
// message blocks the group), and its next look takes a slot as adopted, not as a lost lease.
func TestRedrivenAfterReleaseIsAdopted(t *testing.T) {
	s, _, table := newStore(t)
	g := Gate{Table: table, Key: schema.CoreGate("x"), Limit: 2}
	mustAdmit(t, s, req("h", "h-f", 1, g))
	release(t, s, []Gate{g}, "h", "h-f")
	res, err := s.Renew(context.Background(), []Gate{g}, "h", "h-f")
	if err != nil || res.Adopted != 1 || res.Regained != 0 {
		t.Fatalf("Renew after the redrive: got %+v, %v, want adopted, not regained", res, err)
	}
	if h, _, _ := s.Holders(context.Background(), g); !slices.Equal(h, []string{"h-f"}) {
		t.Fatalf("holders %v, want h-f", h)
	}
}
