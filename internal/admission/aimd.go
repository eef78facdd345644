package admission

import "time"

// The adaptive limit of a core system follows additive increase, multiplicative decrease (AIMD),
// the rule TCP congestion control uses to share a bottleneck fairly among senders that only see
// their own losses (RFC 5681, https://www.rfc-editor.org/rfc/rfc5681#section-3.1): every "slow
// down" answer (HTTP 429 or 503, with or without Retry-After) halves the number of files admission
// lets run at once, and every stretch of unthrottled registration adds one back, up to the core
// system's maxRunningFiles.

// DecreaseCooldown is the least time between two decreases of one core system's limit: a burst of
// 429s that many running files see together halves the limit once, not down to 1.
const DecreaseCooldown = 2 * time.Second

// IncreaseInterval is the least time after any change of the limit before it is increased: the
// files admitted at the new limit get time to be heard before another one is added.
const IncreaseInterval = 5 * time.Second

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

// decreaseDue reports whether a limit last changed at updatedAt may be decreased at now.
func decreaseDue(updatedAt, now time.Time) bool { return !now.Before(updatedAt.Add(DecreaseCooldown)) }

// increaseDue reports whether a limit last changed at updatedAt may be increased at now.
func increaseDue(updatedAt, now time.Time) bool { return !now.Before(updatedAt.Add(IncreaseInterval)) }
