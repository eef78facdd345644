package localrun

// The event source mappings of the templates: a poller per mapping (esm.go, created by
// CreateEventSourceMapping), its Enabled under the Lambda API (controlplane.go), and the tenants
// it serves.

import (
	"context"
	"fmt"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// mappingCreated records the tenants a controller's mapping serves (tenantsOf) before it polls.
func (r *Run) mappingCreated(stack string, f *emulate.Function, q *Queue) error {
	for _, t := range r.tenantsOf(f, q) {
		if r.Tenant(t.ID) != nil {
			return fmt.Errorf("tenant %s is served twice", t.ID)
		}
		t.Stack = stack
		r.Tenants = append(r.Tenants, t)
		r.Sink.SetKeyColumns(t.ID, t.KeyColumns())     // the sink checks a keyed tenant's order per key
		r.Sink.SetCoreSystem(t.ID, t.CoreSystemName()) // and gauges each core system's requests in flight
	}
	return nil
}

// addMapping records a mapping's state under the Lambda API and starts its pollers.
func (c *Cloud) addMapping(ctx context.Context, mp *mapping, state *esm) {
	c.mu.Lock()
	c.esms = append(c.esms, state)
	c.esmOf[mp] = state
	c.mu.Unlock()
	mp.start(ctx)
}
