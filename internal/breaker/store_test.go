package breaker

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/backlog/backlogtest"
)

// The store's tests run against dynalite, the local run's DynamoDB emulator (make setup), so the
// conditions and expressions are DynamoDB's own.

var dynamoURL string

func TestMain(m *testing.M) {
	var err error
	if dynamoURL, err = backlogtest.Dynalite("../.."); err != nil {
		fmt.Fprintln(os.Stderr, "breaker tests need dynalite (make setup):", err)
		os.Exit(1)
	}
	code := m.Run()
	backlogtest.Stop()
	os.Exit(code)
}

func newStore(t *testing.T) Store {
	t.Helper()
	db, name := backlogtest.Table(t, dynamoURL)
	return Store{API: db, Table: name, Name: "ledger"}
}

func TestStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	cur, err := s.Read(ctx, true)
	if err != nil || cur.Stored() || cur.Effective(t0) != Closed {
		t.Fatalf("absent item: got %+v %v, want a closed zero state", cur, err)
	}
	want := State{Status: HalfOpen, OpenedAt: t0, Reason: "the core system did not answer: connection refused", Failures: 5,
		WindowStart: t0.Add(-time.Second), WindowFailures: 6, NextProbe: t0.Add(time.Second), Backoff: time.Second,
		Prober: "exec-1", ProbeUntil: t0.Add(30 * time.Second), Opens: 3}
	got, ok, err := s.Apply(ctx, cur, func(State) (State, bool) { return want, true })
	if err != nil || !ok {
		t.Fatalf("Apply: got ok %v err %v, want written", ok, err)
	}
	read, err := s.Read(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	want.Version = 1
	if read != want || got != want {
		t.Errorf("read back %+v\n returned %+v\n want %+v", read, got, want)
	}
}

func TestStoreApplyIsConditional(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// other writes between the caller's read and its write
		other     bool
		wantOpens int
	}{
		{name: "alone", other: false, wantOpens: 1},
		{name: "another writer first: decided again from its state", other: true, wantOpens: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			set := settings()
			stale, _ := s.Read(ctx, true)
			// Four failures stored; the caller read before them.
			cur := State{}
			for i := 0; i < 4; i++ {
				cur, _, _ = s.Apply(ctx, cur, func(st State) (State, bool) { return Failure(st, set, t0, "a", "boom") })
			}
			if !c.other {
				stale = cur
			}
			got, ok, err := s.Apply(ctx, stale, func(st State) (State, bool) { return Failure(st, set, t0, "b", "boom") })
			if err != nil || !ok {
				t.Fatalf("got ok %v err %v, want written", ok, err)
			}
			if got.Status != Open || got.Opens != c.wantOpens || got.Failures != 5 {
				t.Errorf("got %+v, want open after 5 failures, opens %d", got, c.wantOpens)
			}
		})
	}
}

func TestStoreSuccessWritesNothingWhenClean(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	cur, _ := s.Read(ctx, false)
	got, ok, err := s.Apply(ctx, cur, Success)
	if err != nil || ok || got.Stored() {
		t.Fatalf("got %+v ok %v err %v, want nothing written", got, ok, err)
	}
	if after, _ := s.Read(ctx, true); after.Stored() {
		t.Errorf("got an item %+v, want none", after)
	}
}
