package admission

import (
	"context"

	"github.com/example/tenantpipeline/internal/breaker"
)

// breakerLimit is the bound the core system's breaker puts on the gate (breaker.GateLimit): while
// it is open no file is admitted, while half-open one, and only when none of the core system's
// files runs, since a slot is taken only below the limit: that file carries the probe. A breaker
// that cannot be read fails the admission closed, as the adaptive limit's read does.
func (s *Store) breakerLimit(ctx context.Context, g Gate) (int, bool, error) {
	if !g.Breaker {
		return 0, false, nil
	}
	return breaker.GateLimit(ctx, s.DB, g.Table, g.Key, s.now())
}
