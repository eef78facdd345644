package shares

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// ErrBusy is the error of a write that lost MaxAttempts races with other invocations' writes:
// nothing of this invocation's changed, and it may try again.
var ErrBusy = errors.New("the request shares item changed under every attempt")

// RefreshInterval is how often a running invocation reads the shares again: the time a file that
// starts waits, at most, for the others to give way (about one interval for them to read it, one
// for it to read their lower grants).
const RefreshInterval = time.Second

// Member is one Register invocation's entry in its core system's shares. Join, Refresh and Leave
// each return what the invocation may keep in flight now (its limit): at most its grant in the
// item, and less while it gives way. Its methods are not safe for concurrent use.
type Member struct {
	Store Store
	Core  pipeline.CoreSystem
	// Self is the invocation's entry: Execution, Demand, Weight, Joined and Until (its deadline).
	Self Entry
	Now  func() time.Time // Default: time.Now.

	version  int64 // the latest version of the item seen
	grant    int   // the grant the item holds for Self
	joined   bool  // the item holds Self
	limit    int
	capacity int
}

func (m *Member) now() time.Time {
	if m.Now == nil {
		return time.Now()
	}
	return m.Now()
}

// Capacity is the capacity of the last read.
func (m *Member) Capacity() int { return m.capacity }

// Grant is the invocation's grant as the item holds it (0 before it joined).
func (m *Member) Grant() int { return m.grant }

// Joined reports whether the item holds the invocation's entry.
func (m *Member) Joined() bool { return m.joined }

// Join adds the invocation's entry with a grant out of the capacity no other live entry holds,
// up to its target: strongly consistent, since its write needs the latest version. An error
// leaves the invocation out of the item (the caller falls back to the static share).
func (m *Member) Join(ctx context.Context) (int, error) {
	st, err := m.Store.Read(ctx, true)
	if err != nil {
		return 0, err
	}
	return m.move(ctx, st, 0)
}

// Refresh reads the shares again (eventually consistent), with the adaptive limit of an adaptive
// core system, and moves the invocation's grant toward its target (Step) given its own requests
// in flight. It joins when the item does not hold its entry. An error leaves the grant and the
// limit as they were, which stays within the capacity, since the item still counts the grant.
func (m *Member) Refresh(ctx context.Context, inFlight int) (int, error) {
	st, err := m.Store.Read(ctx, false)
	if err != nil {
		return m.limit, err
	}
	if st.Version < m.version {
		// An eventually consistent read from before this invocation's own last write: it may show
		// a grant higher than the one written since. Nothing is learnt from it.
		return m.limit, nil
	}
	return m.move(ctx, st, inFlight)
}

// move reads the capacity and applies Step to st.
func (m *Member) move(ctx context.Context, st State, inFlight int) (int, error) {
	adaptive := 0
	if m.Core.Adaptive {
		n, err := LimitOf(ctx, m.Store.API, m.Store.Table, m.Store.Name, m.Core.MaxRunningFiles)
		if err != nil {
			return m.limit, err
		}
		adaptive = n
	}
	m.capacity = Capacity(m.Core, adaptive)
	now := m.now()
	decided, changed := 0, false
	got, wrote, err := m.Store.Apply(ctx, st, now, func(cur State) ([]Entry, bool) {
		self, ok := cur.Entry(m.Self.Execution)
		entries := slices.Clone(cur.Entries)
		if !ok {
			self = m.Self
			self.Grant = 0
			entries = append(entries, self)
		}
		// An entry of an earlier invocation of the same file (one that ended without leaving)
		// is this one's from now on: its deadline, demand and weight are this invocation's, or
		// it would be pruned while this one runs. Its grant and place stay.
		stale := ok && (!self.Until.Equal(m.Self.Until) || self.Demand != m.Self.Demand || self.Weight != m.Self.Weight)
		self.Until, self.Demand, self.Weight = m.Self.Until, m.Self.Demand, m.Self.Weight
		i := slices.IndexFunc(entries, func(e Entry) bool { return e.Execution == self.Execution })
		entries[i] = self
		live := 0
		for _, e := range entries {
			if e.Live(now) {
				live++
			}
		}
		// A lower grant is written only once the limit the invocation enforces is at or below
		// it too: sends admitted under an older, higher limit may not have reached inFlight yet.
		grant, limit := Step(entries, m.Self.Execution, m.capacity, Reserve(m.Core, m.capacity, live), max(inFlight, m.limit), now)
		decided = limit
		changed = !ok || stale || grant != self.Grant
		if !changed {
			return nil, false
		}
		self.Grant, self.Seen = grant, now
		entries[i] = self
		return entries, true
	})
	if err != nil {
		return m.limit, err
	}
	self, ok := got.Entry(m.Self.Execution)
	m.version, m.grant, m.joined = got.Version, self.Grant, ok
	if !wrote {
		// decided was computed from the state got holds only when nothing was written; after a
		// lost race it may be from an older one, and the grant is the bound.
		decided = min(decided, m.grant)
	}
	m.limit = min(m.grant, decided)
	if changed && !wrote {
		return m.limit, ErrBusy
	}
	return m.limit, nil
}

// Leave removes the invocation's entry (Store.Remove), so that its grant goes to the others at
// their next read.
func (m *Member) Leave(ctx context.Context) error {
	if err := m.Store.Remove(ctx, m.Self.Execution); err != nil {
		return err
	}
	m.grant, m.joined, m.limit = 0, false, 0
	return nil
}
