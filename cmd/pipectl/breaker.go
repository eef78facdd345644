package main

import (
	"fmt"

	"github.com/example/tenantpipeline/internal/ops"
)

// breakerLine is a core system's breaker in status's text: its state, and while it is not closed
// since when, why, and what that means for its files.
func breakerLine(c ops.CoreSystemStatus) string {
	switch c.Breaker {
	case "", "closed", ops.BreakerDisabled:
		state := c.Breaker
		if state == "" {
			state = "closed"
		}
		return fmt.Sprintf("core system %s breaker: %s (opened %d times)\n", c.Name, state, c.BreakerOpens)
	}
	since := "?"
	if c.OpenedAt != nil {
		since = *c.OpenedAt
	}
	return fmt.Sprintf("core system %s breaker: %s since %s (opened %d times): %s; its running files hold at their cursor and nothing new is admitted until a probe succeeds\n",
		c.Name, c.Breaker, since, c.BreakerOpens, c.Reason)
}
