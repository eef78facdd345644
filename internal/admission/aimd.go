package admission

import "time"

// The adaptive limit of a core system follows additive increase, multiplicative decrease (AIMD),
// the rule TCP congestion control uses to share a bottleneck fairly among senders that only see
// their own losses (RFC 5681, https://www.rfc-editor.org/rfc/rfc5681#section-3.1): a "slow down"
// answer (HTTP 429 or 503, with or without Retry-After) halves the number of files admission lets
// run at once, and a limit's worth of unthrottled Register invocations adds one back, up to the
// core system's maxRunningFiles.
//
// A decrease happens at most once per generation of running files. When the core system is
// overloaded every running file sees 429s, and keeps seeing them for a while after the limit
// falls: admission only stops admitting, the files already running go on until they end. Those
// answers tell nothing about the new limit, so only a file admitted after the last decrease may
// cause the next one. This is how TCP NewReno treats the losses of one window: one reduction per
// window of data in flight, not one per lost segment
// (https://www.rfc-editor.org/rfc/rfc6582#section-3.2).

// Decrease is the limit after a "slow down" answer: half of limit, rounded down, never below 1.
func Decrease(limit int) int {
	return max(1, limit/2)
}

// Increase is the limit after unthrottled registration: one more than limit, never above
// maxRunning (nor below 1).
func Increase(limit, maxRunning int) int {
	return max(1, min(maxRunning, limit+1))
}

// Clamp bounds a stored limit to 1..maxRunning: the core system's maxRunningFiles may have been
// lowered since the limit was written.
func Clamp(limit, maxRunning int) int {
	return max(1, min(maxRunning, limit))
}

// decreaseAllowed reports whether a "slow down" answer to a file admitted at admitted may halve
// the limit cur. A zero admitted is a file whose admission time is unknown (an execution that
// started before its state machine passed it on, or the per-chunk design).
//
//   - A limit of 1, or an absent item that is already 1, never falls.
//   - A limit that has never been decreased (no item, or an item without decreasedAt, written
//     before the attribute existed) falls: the first answer of an overload is always heard.
//   - A file admitted after the last decrease may cause the next one; one admitted at or before
//     it was already running when the limit fell and is part of the generation that decrease
//     answered.
//   - A file of unknown admission may cause a decrease only if the limit has been raised since
//     the last one. Either way of guessing its admission fails somewhere: as "long ago" it could
//     never lower a limit decreased once (a core system left unprotected), as "just now" every
//     one of them could lower it again (the collapse to 1 this rule exists to stop). Allowing it
//     after a raise keeps both: an increase is a probe, and a 429 after it answers the probe, as
//     a loss after a window grew does in TCP; right after a decrease it waits for a file admitted
//     since, so these files alone halve the limit at most once between two raises.
func decreaseAllowed(cur AdaptiveLimit, admitted time.Time) bool {
	switch {
	case cur.Value <= 1:
		return false
	case !cur.Stored || cur.DecreasedAt.IsZero():
		return true
	case admitted.IsZero():
		return cur.UpdatedAt.After(cur.DecreasedAt)
	default:
		return admitted.After(cur.DecreasedAt)
	}
}

// increaseDue reports whether clean unthrottled invocations since the last change are enough to
// raise limit by one: a limit's worth, so that at any limit every running file gets about one turn
// to be heard before another file is let in.
func increaseDue(clean, limit int) bool { return clean >= max(1, limit) }
