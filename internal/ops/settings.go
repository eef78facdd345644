package ops

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// TenantSettings returns the settings the tenant's files are split with, as deployed: a silo
// tenant's are its controller's TENANT variable (pipeline.EnvTenant, read with GetFunction), a
// pooled tenant's its row of the pool's settings file, read with the pool when the tenants are
// found. Prefix is the tenant's key prefix, as the controller sets it for Split.
// https://docs.aws.amazon.com/lambda/latest/api/API_GetFunction.html
func (o *Ops) TenantSettings(ctx context.Context, id string) (pipeline.Tenant, error) {
	t, err := o.Tenant(ctx, id)
	if err != nil {
		return pipeline.Tenant{}, err
	}
	var s pipeline.Tenant
	if t.Pool != "" {
		p, ok := o.poolNamed(t.Pool)
		if !ok || p.settings == nil {
			return pipeline.Tenant{}, fmt.Errorf("tenant %s: pool %s's settings file was not read", id, t.Pool)
		}
		pt, err := p.settings.Tenant(id)
		if err != nil {
			return pipeline.Tenant{}, fmt.Errorf("tenant %s: pool %s's %s in the code of %s: %w", id, t.Pool, pipeline.PoolSettingsFile, t.ControllerFunction, err)
		}
		s = pt.Settings
	} else {
		env, err := o.functionEnv(ctx, t.ControllerFunction)
		if err != nil {
			return pipeline.Tenant{}, fmt.Errorf("tenant %s: get function %s (its %s variable holds the tenant's settings): %w", id, t.ControllerFunction, pipeline.EnvTenant, err)
		}
		ts, err := tenantFromEnv(t, env)
		switch {
		case err != nil:
			return pipeline.Tenant{}, err
		case ts == nil:
			return pipeline.Tenant{}, fmt.Errorf("tenant %s: function %s has no %s variable, so its settings cannot be read", id, t.ControllerFunction, pipeline.EnvTenant)
		case ts.ID != id:
			return pipeline.Tenant{}, fmt.Errorf("tenant %s: %s of %s holds the settings of tenant %q", id, pipeline.EnvTenant, t.ControllerFunction, ts.ID)
		}
		s = *ts
	}
	s.Prefix = t.Prefix
	return s, nil
}

// tenantFromEnv decodes a silo controller's TENANT variable from its environment, as the
// controller does; nil when there is none.
func tenantFromEnv(t pipeline.TenantOutput, env map[string]string) (*pipeline.Tenant, error) {
	raw := env[pipeline.EnvTenant]
	if raw == "" {
		return nil, nil
	}
	var s pipeline.Tenant
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, fmt.Errorf("tenant %s: %s of %s is not a tenant's JSON: %w", t.ID, pipeline.EnvTenant, t.ControllerFunction, err)
	}
	return &s, nil
}

// poolNamed is the pool the stacks describe under this name.
func (o *Ops) poolNamed(name string) (poolInfo, bool) {
	for _, p := range o.found.pools {
		if p.out.Pool == name {
			return p, true
		}
	}
	return poolInfo{}, false
}
