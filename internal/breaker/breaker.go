// Package breaker is a core system's circuit breaker: one item in the core system's admission
// table (pk schema.CoreGate(name), sk SK), shared by every tenant, pool and silo naming the core
// system. Failures of the core system's health (5xx other than 503, timeouts, refused or reset
// connections) open it; while it is open Register holds its files at their cursor instead of
// failing them, and admission admits none of the core system's files; after a probe interval one
// invocation at a time claims the probe (half-open) and sends one request, whose success closes
// the breaker and whose failure reopens it with a doubled interval. See docs/data-path.md,
// "Breaker".
//
// The decisions (Failure, Success, Claim, Gate) are pure functions of the stored State; Store
// reads the item and writes a decision back only if the item is still the one it was computed
// from.
package breaker

import (
	"strings"
	"time"

	"github.com/example/tenantpipeline/spec"
)

// SK is the sort key of a core system's breaker item, in the core system's gate partition.
const SK = "breaker"

// Status is where a breaker stands.
type Status string

// A breaker's statuses, as stored and as `pipectl status` shows them.
const (
	// Closed: requests go to the core system.
	Closed Status = "closed"
	// Open: nothing goes to the core system until the probe time.
	Open Status = "open"
	// HalfOpen: one probe request may go (an open breaker whose probe time has come, or whose
	// probe an invocation has claimed); every other request waits for its answer.
	HalfOpen Status = "half-open"
)

// MaxReasonBytes bounds the stored reason: one line, the error's message, never record data.
const MaxReasonBytes = 300

// State is a breaker item as stored. The zero State is a closed breaker that never failed (an
// absent item).
type State struct {
	Status Status
	// OpenedAt is when the breaker last opened; zero when it never did.
	OpenedAt time.Time
	// Reason is the failure that last opened it, one line.
	Reason string
	// Failures counts the core system's failures in a row since the last success.
	Failures int
	// WindowStart and WindowFailures count the failures within the window that starts at
	// WindowStart, successes or not.
	WindowStart    time.Time
	WindowFailures int
	// NextProbe is when the next probe may be claimed, while open; Backoff is the wait that set it.
	NextProbe time.Time
	Backoff   time.Duration
	// Prober is the execution that holds the probe, until ProbeUntil; then another may claim it.
	Prober     string
	ProbeUntil time.Time
	// Opens counts the times the breaker opened.
	Opens int

	// Version is the item's write counter, which each write's condition names; 0 when absent.
	Version int64
}

// Stored reports whether the item exists.
func (s State) Stored() bool { return s.Version > 0 }

// closed reports whether requests go through: an absent or closed breaker.
func (s State) closed() bool { return s.Status == "" || s.Status == Closed }

// Effective is the status as `pipectl status` shows it at now: an open breaker whose probe time
// has come is half-open.
func (s State) Effective(now time.Time) Status {
	switch {
	case s.closed():
		return Closed
	case s.Status == Open && now.Before(s.NextProbe):
		return Open
	}
	return HalfOpen
}

// Failure is the breaker after a failure of the core system's health at now, seen by execution;
// changed is false when nothing is to be written. A closed breaker counts it and opens after
// ConsecutiveFailures in a row or WindowFailures within Window. The probe's failure (execution
// holds the probe) reopens it with the probe interval doubled, up to MaxProbeInterval. Any other
// failure while open or half-open (a request sent before it opened) changes nothing.
func Failure(s State, set spec.BreakerSettings, now time.Time, execution, reason string) (next State, changed bool) {
	if set.Disabled {
		return s, false
	}
	switch {
	case s.closed():
		s.Status = Closed
		s.Failures++
		if s.WindowStart.IsZero() || now.Sub(s.WindowStart) >= set.Window || now.Before(s.WindowStart) {
			s.WindowStart, s.WindowFailures = now, 0
		}
		s.WindowFailures++
		if s.Failures >= set.ConsecutiveFailures || s.WindowFailures >= set.WindowFailures {
			s = open(s, now, set.ProbeInterval, reason)
			s.Opens++
		}
		return s, true
	case s.Status == HalfOpen && s.Prober == execution && execution != "":
		backoff := min(max(2*s.Backoff, set.ProbeInterval), set.MaxProbeInterval)
		return open(s, now, backoff, reason), true
	}
	return s, false
}

// open is s opened at now with the probe backoff away.
func open(s State, now time.Time, backoff time.Duration, reason string) State {
	if s.Status != Open && s.Status != HalfOpen {
		s.OpenedAt = now
	}
	s.Status, s.Reason = Open, OneLine(reason)
	s.Backoff, s.NextProbe = backoff, now.Add(backoff)
	s.Prober, s.ProbeUntil = "", time.Time{}
	return s
}

// Success is the breaker after an answer that shows the core system healthy; changed is false
// when nothing is to be written: a closed breaker without failures in a row stays as it is
// (Register writes nothing per request). Failures in a row are reset; an open or half-open
// breaker closes: the first success closes it, the probe's or that of a request sent before it
// opened.
func Success(s State) (next State, changed bool) {
	switch {
	case s.closed() && s.Failures == 0:
		return s, false
	case s.closed():
		s.Failures = 0
		return s, true
	}
	s.Status, s.Failures, s.WindowStart, s.WindowFailures = Closed, 0, time.Time{}, 0
	s.NextProbe, s.Backoff, s.Prober, s.ProbeUntil = time.Time{}, 0, "", time.Time{}
	return s, true
}

// Claim is the breaker with the probe claimed by execution at now for lease, when the probe is
// free: open and past its probe time, or half-open with the prober's lease run out, or already
// execution's (its lease is renewed). ok is false when another holds it or its time has not come;
// a closed breaker needs no probe.
func Claim(s State, now time.Time, execution string, lease time.Duration) (next State, ok bool) {
	switch {
	case s.closed(), execution == "":
		return s, false
	case s.Status == Open && now.Before(s.NextProbe):
		return s, false
	case s.Status == HalfOpen && s.Prober != execution && now.Before(s.ProbeUntil):
		return s, false
	}
	s.Status, s.Prober, s.ProbeUntil = HalfOpen, execution, now.Add(lease)
	return s, true
}

// Holds reports whether execution must not send at now: the breaker is open, or half-open with
// the probe another's or not claimed yet (Claim decides who sends it).
func Holds(s State, execution string) bool {
	return !s.closed() && !(s.Status == HalfOpen && s.Prober == execution && execution != "")
}

// Gate is the most running files admission may have of the core system at now: none while the
// breaker is open, one while it is half-open (admission takes a slot only below the limit, so a
// file starts only when none of the core system runs, and it carries the probe); limited is
// false when the breaker does not limit admission.
func Gate(s State, now time.Time) (limit int, limited bool) {
	switch s.Effective(now) {
	case Open:
		return 0, true
	case HalfOpen:
		return 1, true
	}
	return 0, false
}

// OneLine is err's message as a stored reason: its first line, at most MaxReasonBytes.
func OneLine(reason string) string {
	if i := strings.IndexAny(reason, "\r\n"); i >= 0 {
		reason = reason[:i]
	}
	if len(reason) > MaxReasonBytes {
		reason = reason[:MaxReasonBytes]
		for len(reason) > 0 && !validEnd(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	return reason
}

// validEnd reports whether s does not end inside a UTF-8 sequence.
func validEnd(s string) bool {
	return strings.ToValidUTF8(s, "\x00") == s
}
