package shares

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/backlog/backlogtest"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
)

// The store's tests run against dynalite, the local run's DynamoDB emulator (make setup), so the
// conditions and expressions are DynamoDB's own.

var dynamoURL string

func TestMain(m *testing.M) {
	var err error
	if dynamoURL, err = backlogtest.Dynalite("../.."); err != nil {
		fmt.Fprintln(os.Stderr, "shares tests need dynalite (make setup):", err)
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

var (
	ledger = pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 10, MaxRequestsInFlight: 30}
	// pair runs two files at most: one running alone leaves one request free for the other
	// (Reserve), and two running hold nothing back.
	pair = pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 2, MaxRequestsInFlight: 30}
)

func member(s Store, core pipeline.CoreSystem, name string, i, demand, weight int, now func() time.Time) *Member {
	return &Member{Store: s, Core: core, Now: now, Self: Entry{Execution: name, Demand: demand, Weight: weight,
		Joined: t0.Add(time.Duration(i) * time.Second), Until: t0.Add(2 * time.Minute)}}
}

func clock() func() time.Time { return func() time.Time { return t0.Add(time.Second) } }

// TestMembersShare walks two large files through the item: the first alone takes the capacity
// but the one request held back for a file that starts, the second starts at once with that one
// and grows to its share once the first's requests drain to its new target, and when the first
// leaves the second grows into the capacity.
func TestMembersShare(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	a := member(s, pair, "a", 0, 64, 1, clock())
	b := member(s, pair, "b", 1, 64, 1, clock())
	steps := []struct {
		name string
		do   func() (int, error)
		who  *Member
		want int // the limit returned
		// the grants in the item afterwards
		wantA, wantB int
	}{
		{"a joins alone: all but the reserve", func() (int, error) { return a.Join(ctx) }, a, 29, 29, -1},
		{"b joins: the reserved one at once", func() (int, error) { return b.Join(ctx) }, b, 1, 29, 1},
		{"a sees b: keeps its grant while 29 are in flight, sends at most 15", func() (int, error) { return a.Refresh(ctx, 29) }, a, 15, 29, 1},
		{"b: nothing more free yet", func() (int, error) { return b.Refresh(ctx, 1) }, b, 1, 29, 1},
		{"a drained to 15: lowers its grant", func() (int, error) { return a.Refresh(ctx, 15) }, a, 15, 15, 1},
		{"b takes what a freed", func() (int, error) { return b.Refresh(ctx, 1) }, b, 15, 15, 15},
		{"a leaves", func() (int, error) { return 0, a.Leave(ctx) }, a, 0, -1, 15},
		{"b grows into the capacity but the reserve", func() (int, error) { return b.Refresh(ctx, 15) }, b, 29, -1, 29},
	}
	for _, st := range steps {
		got, err := st.do()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got != st.want {
			t.Errorf("%s: got limit %d, want %d", st.name, got, st.want)
		}
		item, err := s.Read(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []struct {
			name string
			want int
		}{{"a", st.wantA}, {"b", st.wantB}} {
			e, ok := item.Entry(w.name)
			if (w.want < 0) == ok || ok && e.Grant != w.want {
				t.Errorf("%s: got %s's entry %+v (present %v), want grant %d (-1: absent)", st.name, w.name, e, ok, w.want)
			}
		}
		if n := Sum(item.Entries, t0.Add(time.Second)); n > 30 {
			t.Errorf("%s: got grants of %d, want at most 30", st.name, n)
		}
	}
}

// TestMembersStaleEntryPruned: an invocation that died without leaving holds its grant until its
// deadline (and the skew) has passed; then the next write drops it and its grant is free.
func TestMembersStaleEntryPruned(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	dead := member(s, pair, "dead", 0, 64, 1, clock())
	if _, err := dead.Join(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		at   time.Time
		want int
	}{
		{"before the dead one's deadline: only the reserve", t0.Add(time.Minute), 1},
		{"past its deadline and the skew: all free", t0.Add(2*time.Minute + Skew + time.Second), 29},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := c.at
			m := member(s, pair, "new", 1, 64, 1, func() time.Time { return at })
			m.Self.Until = at.Add(2 * time.Minute)
			got, err := m.Join(ctx)
			if err != nil || got != c.want {
				t.Fatalf("got %d %v, want %d", got, err, c.want)
			}
			item, _ := s.Read(ctx, true)
			if _, ok := item.Entry("dead"); ok == (c.want == 29) {
				t.Errorf("got the dead entry present %v, want it pruned only past its deadline", ok)
			}
			if err := m.Leave(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMembersStorm: the adaptive limit falls (a 429 storm), and running files lower their limits
// to the smaller capacity at once, their grants as their requests drain.
func TestMembersStorm(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	core := pair
	core.Adaptive = true
	a := member(s, core, "a", 0, 64, 1, clock())
	b := member(s, core, "b", 1, 64, 1, clock())
	a.Join(ctx)
	b.Join(ctx)
	a.Refresh(ctx, 29) // limits itself to 15
	a.Refresh(ctx, 15) // drained: lowers its grant
	b.Refresh(ctx, 1)
	if a.Grant() != 15 || b.Grant() != 15 {
		t.Fatalf("before the storm: got grants %d and %d, want 15 and 15", a.Grant(), b.Grant())
	}
	_, err := s.API.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.Table),
		Key: map[string]types.AttributeValue{
			schema.AttrPK: &types.AttributeValueMemberS{Value: schema.CoreGate("ledger")},
			schema.AttrSK: &types.AttributeValueMemberS{Value: schema.LimitSK}},
		UpdateExpression:          aws.String("SET #l = :l"),
		ExpressionAttributeNames:  map[string]string{"#l": schema.AttrLimit},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": num(1)}})
	if err != nil {
		t.Fatal(err)
	}
	// Capacity 30 × 1/2 = 15: targets 8 and 7. Each first limits itself, then lowers its grant
	// once drained.
	for _, c := range []struct {
		m                   *Member
		inFlight, wantLimit int
		wantGrant           int
	}{{a, 15, 8, 15}, {b, 15, 7, 15}, {a, 8, 8, 8}, {b, 7, 7, 7}} {
		got, err := c.m.Refresh(ctx, c.inFlight)
		if err != nil || got != c.wantLimit || c.m.Grant() != c.wantGrant || c.m.Capacity() != 15 {
			t.Errorf("%s with %d in flight: got limit %d grant %d capacity %d %v, want limit %d grant %d capacity 15",
				c.m.Self.Execution, c.inFlight, got, c.m.Grant(), c.m.Capacity(), err, c.wantLimit, c.wantGrant)
		}
	}
}

// TestMembersNeverAboveCapacity: many invocations join, refresh with as many requests in flight
// as their limits allow, and leave, concurrently; at every moment the limits they act on add up
// to at most the capacity, and so does every version of the item.
func TestMembersNeverAboveCapacity(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const capacity, writers, rounds = 30, 8, 12
	var (
		mu     sync.Mutex
		limits = map[string]int{}
		worst  int
	)
	publish := func(name string, limit int) {
		mu.Lock()
		defer mu.Unlock()
		limits[name] = limit
		n := 0
		for _, l := range limits {
			n += l
		}
		worst = max(worst, n)
	}
	stop := make(chan struct{})
	var itemWorst atomic.Int64
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if st, err := s.Read(ctx, true); err == nil {
				if n := int64(Sum(st.Entries, t0.Add(time.Second))); n > itemWorst.Load() {
					itemWorst.Store(n)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for r := range rounds {
				name := fmt.Sprintf("w%d-%d", w, r)
				m := member(s, ledger, name, w*rounds+r, 1+rng.IntN(40), 1+rng.IntN(3), clock())
				limit, err := m.Join(ctx)
				for errors.Is(err, ErrBusy) {
					limit, err = m.Refresh(ctx, 0)
				}
				if err != nil {
					t.Error(err)
					return
				}
				publish(name, limit)
				for range 1 + rng.IntN(4) {
					// In flight is all the last limit allowed; a lower limit drains to it, a
					// higher one sends more, each only after Refresh returned it.
					if limit, err = m.Refresh(ctx, limit); err != nil && !errors.Is(err, ErrBusy) {
						t.Error(err)
						return
					}
					publish(name, limit)
				}
				publish(name, 0)
				for err = ErrBusy; errors.Is(err, ErrBusy); {
					err = m.Leave(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	if worst > capacity || itemWorst.Load() > capacity {
		t.Errorf("got at most %d in flight and %d granted, want both at most %d", worst, itemWorst.Load(), capacity)
	}
	if worst == 0 {
		t.Errorf("got nothing ever granted, want the writers to have sent")
	}
	if st, _ := s.Read(ctx, true); len(st.Entries) != 0 {
		t.Errorf("got %d entries after every invocation left, want none", len(st.Entries))
	}
}

// TestItemRoundTrip: Item writes what Read decodes.
func TestItemRoundTrip(t *testing.T) {
	want := State{Version: 3, Entries: []Entry{
		{Execution: "a", Demand: 8, Weight: 2, Grant: 5, Joined: t0, Seen: t0.Add(time.Second), Until: t0.Add(time.Minute)},
		{Execution: "b", Demand: 1, Weight: 1, Grant: 0, Joined: t0, Seen: t0, Until: t0.Add(time.Minute)},
	}}
	got, err := decode(Item("ledger", want))
	if err != nil {
		t.Fatal(err)
	}
	for i := range got.Entries {
		for _, tm := range []*time.Time{&got.Entries[i].Joined, &got.Entries[i].Seen, &got.Entries[i].Until} {
			*tm = tm.UTC()
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestMembersLowerOnlyUnderAnEnforcedLimit: a refresh that finds the invocation's requests in
// flight already at its new target still does not write the lower grant while the limit it
// enforced until then was higher (sends admitted under it may not be counted yet); the next one
// does.
func TestMembersLowerOnlyUnderAnEnforcedLimit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	a := member(s, pair, "a", 0, 64, 1, clock())
	b := member(s, pair, "b", 1, 64, 1, clock())
	a.Join(ctx)
	b.Join(ctx)
	for i, want := range []struct{ limit, grant int }{{15, 29}, {15, 15}} {
		limit, err := a.Refresh(ctx, 0)
		if err != nil || limit != want.limit || a.Grant() != want.grant {
			t.Errorf("refresh %d: got limit %d grant %d %v, want limit %d grant %d", i+1, limit, a.Grant(), err, want.limit, want.grant)
		}
	}
}

// TestMembersRejoinTakesTheEntry: an invocation of a file whose earlier invocation ended without
// leaving takes over its entry with its own deadline, so the entry is not pruned while it runs;
// the grant it finds is its own.
func TestMembersRejoinTakesTheEntry(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	first := member(s, pair, "file", 0, 64, 1, clock())
	if _, err := first.Join(ctx); err != nil {
		t.Fatal(err)
	}
	next := member(s, pair, "file", 0, 64, 1, clock())
	next.Self.Until = t0.Add(10 * time.Minute)
	limit, err := next.Join(ctx)
	if err != nil || limit != 29 {
		t.Fatalf("got %d %v, want the entry's 29", limit, err)
	}
	item, _ := s.Read(ctx, true)
	if e, ok := item.Entry("file"); !ok || !e.Until.Equal(next.Self.Until) || len(item.Entries) != 1 {
		t.Errorf("got %+v, want one entry with the new deadline %v", item.Entries, next.Self.Until)
	}
}
