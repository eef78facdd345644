package localrun

// The event source mappings of the templates: a poller per mapping (esm.go), its Enabled under the
// Lambda API (controlplane.go), and the tenant it serves.

import (
	"context"
	"fmt"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

func (r *Run) startMapping(ctx context.Context, asm *deploy.Assembly, res *deploy.Resolver, m *deploy.Resource) error {
	props, err := deploy.ReadMapping(res, m)
	if err != nil {
		return err
	}
	q := r.queues[props.EventSourceArn]
	if q == nil {
		return fmt.Errorf("mapping %s: event source %s is not a queue of the templates", m.LogicalID, props.EventSourceArn)
	}
	f := r.Lambda.Lookup(props.FunctionName)
	if f == nil {
		return fmt.Errorf("mapping %s: function %s not found", m.LogicalID, props.FunctionName)
	}
	batch, reportFailures := props.BatchSize, props.ReportBatchItemFailures
	for _, t := range r.tenantsOf(f, q) {
		if r.Tenant(t.ID) != nil {
			return fmt.Errorf("mapping %s: tenant %s is served twice", m.LogicalID, t.ID)
		}
		t.Stack = m.Stack.Name
		r.Tenants = append(r.Tenants, t)
		r.Sink.SetKeyColumns(t.ID, t.KeyColumns())     // the sink checks a keyed tenant's order per key
		r.Sink.SetCoreSystem(t.ID, t.CoreSystemName()) // and gauges each core system's requests in flight
	}
	if c := props.MaximumConcurrency; c != 0 && (c < minMaximumConcurrency || c > maxMaximumConcurrency) {
		return fmt.Errorf("mapping %s: ScalingConfig.MaximumConcurrency %d: Lambda accepts %d to %d", m.LogicalID, c, minMaximumConcurrency, maxMaximumConcurrency)
	}
	mp := &mapping{cloud: r.Cloud, queue: q, fn: f, batch: min(batch, 10), reportFailures: reportFailures,
		scale: mappingScale(f.Concurrency, props.MaximumConcurrency)}
	// Its Enabled is the Lambda API's to change (pipectl pause/resume); a disabled mapping does not poll.
	state := newESM(uuidFor(m.Stack.Name+"/"+m.LogicalID), f.ARN, q.ARN, batch, props.Enabled)
	res.Set(m, deploy.Identity{Ref: state.UUID})
	r.addMapping(ctx, mp, state)
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
