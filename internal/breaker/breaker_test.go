package breaker

import (
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/spec"
)

var t0 = time.UnixMilli(1_800_000_000_000)

func settings() spec.BreakerSettings {
	return spec.CoreSystem{}.BreakerSettings() // 5 in a row, 20 in 60s, probes 1s doubling to 4s
}

func TestFailure(t *testing.T) {
	set := settings()
	cases := []struct {
		name      string
		from      State
		execution string
		at        time.Time
		set       func(*spec.BreakerSettings)
		want      State
		changed   bool
	}{
		{name: "first failure is counted", from: State{}, at: t0,
			want: State{Status: Closed, Failures: 1, WindowStart: t0, WindowFailures: 1}, changed: true},
		{name: "the fifth in a row opens", from: State{Status: Closed, Failures: 4, WindowStart: t0, WindowFailures: 4}, at: t0.Add(time.Second),
			want: State{Status: Open, OpenedAt: t0.Add(time.Second), Reason: "boom", Failures: 5, WindowStart: t0, WindowFailures: 5,
				NextProbe: t0.Add(2 * time.Second), Backoff: time.Second, Opens: 1}, changed: true},
		{name: "the twentieth in the window opens between successes", from: State{Status: Closed, Failures: 1, WindowStart: t0, WindowFailures: 19, Opens: 2}, at: t0.Add(59 * time.Second),
			want: State{Status: Open, OpenedAt: t0.Add(59 * time.Second), Reason: "boom", Failures: 2, WindowStart: t0, WindowFailures: 20,
				NextProbe: t0.Add(60 * time.Second), Backoff: time.Second, Opens: 3}, changed: true},
		{name: "a failure after the window starts a new one", from: State{Status: Closed, Failures: 1, WindowStart: t0, WindowFailures: 19}, at: t0.Add(60 * time.Second),
			want: State{Status: Closed, Failures: 2, WindowStart: t0.Add(60 * time.Second), WindowFailures: 1}, changed: true},
		{name: "consecutive threshold from settings", from: State{Status: Closed, Failures: 1}, at: t0, set: func(s *spec.BreakerSettings) { s.ConsecutiveFailures = 2 },
			want: State{Status: Open, OpenedAt: t0, Reason: "boom", Failures: 2, WindowStart: t0, WindowFailures: 1, NextProbe: t0.Add(time.Second), Backoff: time.Second, Opens: 1}, changed: true},
		{name: "disabled counts nothing", from: State{Status: Closed, Failures: 4}, at: t0, set: func(s *spec.BreakerSettings) { s.Disabled = true },
			want: State{Status: Closed, Failures: 4}, changed: false},
		{name: "open: another failure changes nothing", from: State{Status: Open, OpenedAt: t0, NextProbe: t0.Add(time.Second), Backoff: time.Second}, at: t0.Add(time.Second / 2),
			want: State{Status: Open, OpenedAt: t0, NextProbe: t0.Add(time.Second), Backoff: time.Second}, changed: false},
		{name: "half-open: another's failure changes nothing", execution: "other",
			from: State{Status: HalfOpen, OpenedAt: t0, Backoff: time.Second, Prober: "probe", ProbeUntil: t0.Add(time.Minute)}, at: t0.Add(2 * time.Second),
			want: State{Status: HalfOpen, OpenedAt: t0, Backoff: time.Second, Prober: "probe", ProbeUntil: t0.Add(time.Minute)}, changed: false},
		{name: "the probe's failure reopens with the backoff doubled", execution: "probe",
			from: State{Status: HalfOpen, OpenedAt: t0, Reason: "first", Backoff: time.Second, Prober: "probe", ProbeUntil: t0.Add(time.Minute), Opens: 1}, at: t0.Add(2 * time.Second),
			want: State{Status: Open, OpenedAt: t0, Reason: "boom", Backoff: 2 * time.Second, NextProbe: t0.Add(4 * time.Second), Opens: 1}, changed: true},
		{name: "the doubled backoff stops at the maximum", execution: "probe",
			from: State{Status: HalfOpen, OpenedAt: t0, Backoff: 3 * time.Second, Prober: "probe", ProbeUntil: t0.Add(time.Minute)}, at: t0.Add(10 * time.Second),
			want: State{Status: Open, OpenedAt: t0, Reason: "boom", Backoff: 4 * time.Second, NextProbe: t0.Add(14 * time.Second)}, changed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := set
			if c.set != nil {
				c.set(&s)
			}
			got, changed := Failure(c.from, s, c.at, c.execution, "boom")
			if got != c.want || changed != c.changed {
				t.Errorf("got %+v changed %v, want %+v changed %v", got, changed, c.want, c.changed)
			}
		})
	}
}

func TestSuccess(t *testing.T) {
	cases := []struct {
		name    string
		from    State
		want    State
		changed bool
	}{
		{name: "absent: nothing written", from: State{}, want: State{}, changed: false},
		{name: "closed without failures in a row: nothing written, the window kept",
			from: State{Status: Closed, WindowStart: t0, WindowFailures: 3, Version: 7}, want: State{Status: Closed, WindowStart: t0, WindowFailures: 3, Version: 7}},
		{name: "failures in a row are reset, the window kept", from: State{Status: Closed, Failures: 3, WindowStart: t0, WindowFailures: 3, Version: 7},
			want: State{Status: Closed, WindowStart: t0, WindowFailures: 3, Version: 7}, changed: true},
		{name: "open closes", from: State{Status: Open, OpenedAt: t0, Reason: "r", Failures: 5, WindowStart: t0, WindowFailures: 5, NextProbe: t0.Add(time.Second), Backoff: time.Second, Opens: 2},
			want: State{Status: Closed, OpenedAt: t0, Reason: "r", Opens: 2}, changed: true},
		{name: "half-open closes", from: State{Status: HalfOpen, OpenedAt: t0, Prober: "p", ProbeUntil: t0.Add(time.Minute), Backoff: 2 * time.Second, Opens: 1},
			want: State{Status: Closed, OpenedAt: t0, Opens: 1}, changed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, changed := Success(c.from)
			if got != c.want || changed != c.changed {
				t.Errorf("got %+v changed %v, want %+v changed %v", got, changed, c.want, c.changed)
			}
		})
	}
}

func TestClaim(t *testing.T) {
	open := State{Status: Open, OpenedAt: t0, NextProbe: t0.Add(time.Second), Backoff: time.Second}
	held := State{Status: HalfOpen, OpenedAt: t0, NextProbe: t0.Add(time.Second), Backoff: time.Second, Prober: "a", ProbeUntil: t0.Add(20 * time.Second)}
	cases := []struct {
		name      string
		from      State
		at        time.Time
		execution string
		ok        bool
	}{
		{name: "closed needs no probe", from: State{Status: Closed}, at: t0, execution: "a"},
		{name: "open before the probe time", from: open, at: t0.Add(999 * time.Millisecond), execution: "a"},
		{name: "open at the probe time", from: open, at: t0.Add(time.Second), execution: "a", ok: true},
		{name: "held by another within its lease", from: held, at: t0.Add(19 * time.Second), execution: "b"},
		{name: "held by another past its lease", from: held, at: t0.Add(20 * time.Second), execution: "b", ok: true},
		{name: "held by the same execution renews", from: held, at: t0.Add(5 * time.Second), execution: "a", ok: true},
		{name: "no execution never claims", from: open, at: t0.Add(time.Hour), execution: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Claim(c.from, c.at, c.execution, 20*time.Second)
			if ok != c.ok {
				t.Fatalf("got ok %v, want %v", ok, c.ok)
			}
			if !ok {
				if got != c.from {
					t.Errorf("got %+v, want it unchanged", got)
				}
				return
			}
			if got.Status != HalfOpen || got.Prober != c.execution || !got.ProbeUntil.Equal(c.at.Add(20*time.Second)) {
				t.Errorf("got %+v, want half-open held by %s until %v", got, c.execution, c.at.Add(20*time.Second))
			}
			if Holds(got, c.execution) || !Holds(got, "someone-else") {
				t.Errorf("Holds: the prober must send and nobody else, got prober %v other %v", Holds(got, c.execution), Holds(got, "someone-else"))
			}
		})
	}
}

func TestGateAndEffective(t *testing.T) {
	cases := []struct {
		name    string
		s       State
		at      time.Time
		status  Status
		limit   int
		limited bool
	}{
		{name: "absent", s: State{}, at: t0, status: Closed},
		{name: "closed with failures", s: State{Status: Closed, Failures: 4}, at: t0, status: Closed},
		{name: "open before the probe time admits nothing", s: State{Status: Open, NextProbe: t0.Add(time.Second)}, at: t0, status: Open, limit: 0, limited: true},
		{name: "open at the probe time admits one when none runs", s: State{Status: Open, NextProbe: t0.Add(time.Second)}, at: t0.Add(time.Second), status: HalfOpen, limit: 1, limited: true},
		{name: "half-open admits one when none runs", s: State{Status: HalfOpen, Prober: "p"}, at: t0, status: HalfOpen, limit: 1, limited: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.s.Effective(c.at); got != c.status {
				t.Errorf("Effective: got %s, want %s", got, c.status)
			}
			limit, limited := Gate(c.s, c.at)
			if limit != c.limit || limited != c.limited {
				t.Errorf("Gate: got %d %v, want %d %v", limit, limited, c.limit, c.limited)
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"the core system answered 500", "the core system answered 500"},
		{"first line\nsecond", "first line"},
		{strings.Repeat("é", MaxReasonBytes), strings.Repeat("é", MaxReasonBytes/2)},
	}
	for _, c := range cases {
		if got := OneLine(c.in); got != c.want {
			t.Errorf("OneLine(%.20q...): got %.20q... (%d bytes), want %d bytes", c.in, got, len(got), len(c.want))
		}
	}
}

// TestOutage walks a breaker through an outage as the decisions see it: failures open it, no
// probe before its time, one prober, its failure doubles the wait, its success closes.
func TestOutage(t *testing.T) {
	set := settings()
	var s State
	now := t0
	for i := 0; i < set.ConsecutiveFailures; i++ {
		s, _ = Failure(s, set, now, "file-1", "refused")
	}
	if s.Effective(now) != Open || s.Opens != 1 {
		t.Fatalf("after %d failures got %s opens %d, want open once", set.ConsecutiveFailures, s.Effective(now), s.Opens)
	}
	if _, ok := Claim(s, now, "file-1", time.Minute); ok {
		t.Fatal("a probe was claimed before the probe interval")
	}
	waits := []time.Duration{}
	for i := 0; i < 4; i++ {
		now = s.NextProbe
		var ok bool
		if s, ok = Claim(s, now, "file-2", time.Minute); !ok {
			t.Fatalf("probe %d not claimed at its time", i)
		}
		if _, ok := Claim(s, now, "file-3", time.Minute); ok {
			t.Fatalf("probe %d claimed twice", i)
		}
		s, _ = Failure(s, set, now, "file-2", "refused")
		waits = append(waits, s.Backoff)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("probe waits got %v, want %v", waits, want)
		}
	}
	now = s.NextProbe
	s, _ = Claim(s, now, "file-3", time.Minute)
	s, _ = Success(s)
	if s.Effective(now) != Closed || s.Opens != 1 {
		t.Fatalf("after the probe's success got %s opens %d, want closed, opened once", s.Effective(now), s.Opens)
	}
}
