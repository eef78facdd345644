package report

import (
	"slices"
	"time"
)

// Breaker events, as Register logs them (internal/register/breaker.go).
const (
	BreakerOpened      = "opened"
	BreakerProbe       = "probe"
	BreakerProbeFailed = "probe failed"
	BreakerClosed      = "closed"
)

// BreakerEvent is one change of a core system's breaker.
type BreakerEvent struct {
	At         time.Time `json:"at"`
	CoreSystem string    `json:"coreSystem"`
	Event      string    `json:"event"`
	Execution  string    `json:"execution,omitempty"`
	Reason     string    `json:"reason,omitempty"`
}

// CoreSystemBreaker is a core system's breaker over the run: its state at the end (closed unless
// its last event opened it or failed a probe), how often it opened, probed, failed a probe and
// closed, when it first opened and last closed, and its events in time order.
type CoreSystemBreaker struct {
	State         string         `json:"state"`
	Opens         int            `json:"opens"`
	Probes        int            `json:"probes"`
	ProbeFailures int            `json:"probeFailures"`
	Closes        int            `json:"closes"`
	FirstOpenedAt *time.Time     `json:"firstOpenedAt"`
	LastClosedAt  *time.Time     `json:"lastClosedAt"`
	Reason        string         `json:"reason"`
	Events        []BreakerEvent `json:"events"`
}

// SummarizeBreaker is the breaker of one core system's events.
func SummarizeBreaker(events []BreakerEvent) CoreSystemBreaker {
	es := slices.Clone(events)
	slices.SortStableFunc(es, func(a, b BreakerEvent) int { return a.At.Compare(b.At) })
	c := CoreSystemBreaker{State: "closed", Events: es}
	for _, e := range es {
		at := e.At
		switch e.Event {
		case BreakerOpened:
			c.Opens++
			c.State, c.Reason = "open", e.Reason
			if c.FirstOpenedAt == nil {
				c.FirstOpenedAt = &at
			}
		case BreakerProbe:
			c.Probes++
			c.State = "half-open"
		case BreakerProbeFailed:
			c.ProbeFailures++
			c.State = "open"
		case BreakerClosed:
			c.Closes++
			c.State, c.LastClosedAt = "closed", &at
		}
	}
	return c
}
