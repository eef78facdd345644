package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/breaker"
	"github.com/example/tenantpipeline/internal/corecontrol"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/internal/shares"
)

// Admission state for status (docs/operations.md, "Core systems"). pipectl finds each tenant's core
// system, and its admission table, where the controller does: a silo controller's environment
// holds its tenant's settings (TENANT, with the core system) and CORE_SYSTEM_TABLES (name → table);
// a pool controller's holds CORE_SYSTEM_TABLES and its pool gate (POOL_ADMISSION_TABLE,
// POOL_MAX_RUNNING_FILES), and its settings file each tenant's core system. GetFunction returns
// the environment with the configuration.
// https://docs.aws.amazon.com/lambda/latest/api/API_GetFunction.html

// CoreSystemStatus is one core system of the report, as its admission table holds it now.
type CoreSystemStatus struct {
	Name string `json:"name"`
	// MaxRunningFiles is the configured limit; Limit the effective one (the adaptive limit when
	// Adaptive, else MaxRunningFiles).
	MaxRunningFiles int  `json:"maxRunningFiles"`
	Limit           int  `json:"limit"`
	Adaptive        bool `json:"adaptive"`
	// RunningFiles is len(Running): the executions holding a live running-file lease, sorted.
	RunningFiles int      `json:"runningFiles"`
	Running      []string `json:"running"`
	// WaitingTenants are the tenants waiting for admission; OldestAdmissionWaitSeconds the longest
	// wait among them, 0 when none waits.
	WaitingTenants             int     `json:"waitingTenants"`
	OldestAdmissionWaitSeconds float64 `json:"oldestAdmissionWaitSeconds"`
	// Tenants are the reported tenants naming the core system, sorted.
	Tenants []string `json:"tenants"`
	// Breaker is the core system's breaker: closed, open or half-open (internal/breaker); while it
	// is not closed, OpenedAt is when it opened (RFC 3339, UTC) and Reason the failure that opened
	// it, else null and "". BreakerOpens counts its openings. A disabled breaker is "disabled".
	Breaker      string  `json:"breaker"`
	OpenedAt     *string `json:"openedAt"`
	Reason       string  `json:"reason"`
	BreakerOpens int     `json:"breakerOpens"`

	// RequestsInFlight is the requests in flight the core system's running files hold as shares
	// (internal/shares: the sum of the live grants, which bound what they send) against
	// MaxRequestsInFlight, the capacity they share: maxRequestsInFlight, scaled down by the
	// adaptive limit while that is below maxRunningFiles. RequestsInFlight is 0 under static
	// shares, which keep no shares item.
	RequestsInFlight    int `json:"requestsInFlight"`
	MaxRequestsInFlight int `json:"maxRequestsInFlight"`

	// Steering (steer.go): Paused while an operator's pause holds admission (pipectl core
	// pause); Override the limit override in force, null when none or expired.
	Paused   bool          `json:"paused"`
	Override *CoreOverride `json:"override"`
}

// BreakerDisabled is CoreSystemStatus.Breaker for a core system whose breaker is disabled.
const BreakerDisabled = "disabled"

// breakerStatus reads the core system's breaker into c.
func (o *Ops) breakerStatus(ctx context.Context, g coreGate, c *CoreSystemStatus) error {
	if !g.gate.Breaker {
		c.Breaker = BreakerDisabled
		return nil
	}
	st, err := breaker.Read(ctx, o.DynamoDB, g.gate.Table, g.cs.Name, true)
	if err != nil {
		return err
	}
	now := time.Now()
	if o.Now != nil {
		now = o.Now()
	}
	c.Breaker, c.BreakerOpens = string(st.Effective(now)), st.Opens
	if c.Breaker != string(breaker.Closed) {
		at := st.OpenedAt.UTC().Format(time.RFC3339)
		c.OpenedAt, c.Reason = &at, st.Reason
	}
	return nil
}

// requestShares reads the core system's request shares into c: the live grants and the
// capacity, as Register computes it.
func (o *Ops) requestShares(ctx context.Context, g coreGate, c *CoreSystemStatus) error {
	st, err := shares.Read(ctx, o.DynamoDB, g.gate.Table, g.cs.Name, true)
	if err != nil {
		return err
	}
	adaptive := 0
	if g.cs.Adaptive {
		if adaptive, err = shares.LimitOf(ctx, o.DynamoDB, g.gate.Table, g.cs.Name, g.cs.MaxRunningFiles); err != nil {
			return err
		}
	}
	now := time.Now()
	if o.Now != nil {
		now = o.Now()
	}
	c.RequestsInFlight, c.MaxRequestsInFlight = shares.Sum(st.Entries, now), shares.Capacity(g.cs, adaptive)
	return nil
}

// ttls are the controller's lease and waiting-entry times to live, from its environment as the
// controller works them out (admission.LeaseTTLFor, admission.WaiterTTLFor): the safety net
// (default 5 minutes) and MAX_WAIT_SECONDS (default 5 minutes), and whether wake-up events hold a
// waiting file for the safety net (else MAX_WAIT_SECONDS).
func ttls(env map[string]string) (lease, waiter time.Duration) {
	secs := func(name string, def int) time.Duration {
		n, err := strconv.Atoi(env[name])
		if err != nil || n <= 0 {
			n = def
		}
		return time.Duration(n) * time.Second
	}
	safetyNet, maxWait := secs(pipeline.EnvSafetyNetSeconds, 300), secs(pipeline.EnvMaxWaitSeconds, 300)
	hold := maxWait
	if env[pipeline.EnvWakeEvents] == "true" {
		hold = safetyNet
	}
	return admission.LeaseTTLFor(safetyNet, maxWait), admission.WaiterTTLFor(hold)
}

// controllerEnv reads a function's environment variables.
func (o *Ops) controllerEnv(ctx context.Context, function string) (map[string]string, error) {
	env, err := o.functionEnv(ctx, function)
	if err != nil {
		return nil, fmt.Errorf("get function %s (its environment names the core system's admission table): %w", function, err)
	}
	return env, nil
}

// functionEnv reads a function's environment variables with GetFunction, once per Ops and
// function: status reads a silo controller's for its tenant's sequence and again for its core
// system.
func (o *Ops) functionEnv(ctx context.Context, function string) (map[string]string, error) {
	o.found.mu.Lock()
	env, ok := o.found.envs[function]
	o.found.mu.Unlock()
	if ok {
		return env, nil
	}
	fn, err := o.Lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(function)})
	if err != nil {
		return nil, err
	}
	env = envOf(fn)
	o.found.mu.Lock()
	if o.found.envs == nil {
		o.found.envs = map[string]map[string]string{}
	}
	o.found.envs[function] = env
	o.found.mu.Unlock()
	return env, nil
}

func envOf(fn *lambda.GetFunctionOutput) map[string]string {
	if fn == nil || fn.Configuration == nil || fn.Configuration.Environment == nil {
		return nil
	}
	return fn.Configuration.Environment.Variables
}

// coreGate is one tenant's core system gate, as its controller sees it.
type coreGate struct {
	tenant string
	cs     pipeline.CoreSystem
	gate   admission.Gate
	env    map[string]string
}

// coreGates finds the core system of each tenant that names one.
func (o *Ops) coreGates(ctx context.Context, ts []pipeline.TenantOutput) ([]coreGate, error) {
	var out []coreGate
	for _, t := range ts {
		var cs *pipeline.CoreSystem
		var env map[string]string
		if t.Pool != "" {
			for _, p := range o.found.pools {
				if p.out.Pool != t.Pool || p.settings == nil {
					continue
				}
				env = p.env
				if pt, err := p.settings.Tenant(t.ID); err == nil {
					cs = pt.Settings.CoreSystem
				}
			}
		} else {
			var err error
			if env, err = o.controllerEnv(ctx, t.ControllerFunction); err != nil {
				return nil, fmt.Errorf("tenant %s: %w", t.ID, err)
			}
			s, err := tenantFromEnv(t, env)
			if err != nil {
				return nil, err
			}
			if s != nil {
				cs = s.CoreSystem
			}
		}
		if cs == nil {
			continue
		}
		tables := map[string]string{}
		if raw := env[pipeline.EnvCoreSystemTables]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &tables); err != nil {
				return nil, fmt.Errorf("tenant %s: %s is not a JSON object of core system to table: %w", t.ID, pipeline.EnvCoreSystemTables, err)
			}
		}
		if tables[cs.Name] == "" {
			return nil, fmt.Errorf("tenant %s: core system %s has no admission table in its controller's %s", t.ID, cs.Name, pipeline.EnvCoreSystemTables)
		}
		out = append(out, coreGate{tenant: t.ID, cs: *cs, env: env, gate: admission.Gate{
			Table: tables[cs.Name], Key: schema.CoreGate(cs.Name), Limit: cs.MaxRunningFiles, Adaptive: cs.Adaptive,
			Breaker: !cs.Spec().BreakerSettings().Disabled,
			Core:    &corecontrol.Settings{Name: cs.Name, MaxRunningFiles: cs.MaxRunningFiles, MaxRequestsInFlight: cs.RequestsInFlight(), Maintenance: cs.Maintenance},
		}})
	}
	return out, nil
}

// summarize reads one gate whole with the TTLs of the controller whose environment is env.
func (o *Ops) summarize(ctx context.Context, g admission.Gate, env map[string]string) (admission.Summary, error) {
	if o.DynamoDB == nil {
		return admission.Summary{}, fmt.Errorf("no DynamoDB client to read admission table %s", g.Table)
	}
	lease, waiter := ttls(env)
	s := &admission.Store{DB: o.DynamoDB, LeaseTTL: lease, WaiterTTL: waiter, Now: o.Now}
	sum, err := s.Summarize(ctx, g)
	if err != nil {
		return sum, fmt.Errorf("admission table %s, gate %s: %w", g.Table, g.Key, err)
	}
	return sum, nil
}

// coreSystems reports the core systems the tenants name, by name.
func (o *Ops) coreSystems(ctx context.Context, ts []pipeline.TenantOutput) ([]CoreSystemStatus, error) {
	gates, err := o.coreGates(ctx, ts)
	if err != nil {
		return nil, err
	}
	byName := map[string]*CoreSystemStatus{}
	var names []string
	for _, g := range gates {
		if c, ok := byName[g.cs.Name]; ok {
			c.Tenants = append(c.Tenants, g.tenant)
			continue
		}
		sum, err := o.summarize(ctx, g.gate, g.env)
		if err != nil {
			return nil, fmt.Errorf("core system %s: %w", g.cs.Name, err)
		}
		byName[g.cs.Name] = &CoreSystemStatus{
			Name: g.cs.Name, MaxRunningFiles: g.cs.MaxRunningFiles, Limit: sum.Limit, Adaptive: g.cs.Adaptive,
			RunningFiles: len(sum.Running), Running: sum.Running, WaitingTenants: sum.Waiting,
			OldestAdmissionWaitSeconds: *seconds(sum.OldestWaitSeconds), Tenants: []string{g.tenant},
		}
		if err := o.breakerStatus(ctx, g, byName[g.cs.Name]); err != nil {
			return nil, fmt.Errorf("core system %s: %w", g.cs.Name, err)
		}
		if err := o.requestShares(ctx, g, byName[g.cs.Name]); err != nil {
			return nil, fmt.Errorf("core system %s: %w", g.cs.Name, err)
		}
		if err := o.steering(ctx, g, byName[g.cs.Name]); err != nil {
			return nil, fmt.Errorf("core system %s: %w", g.cs.Name, err)
		}
		names = append(names, g.cs.Name)
	}
	slices.Sort(names)
	out := []CoreSystemStatus{}
	for _, n := range names {
		slices.Sort(byName[n].Tenants)
		out = append(out, *byName[n])
	}
	return out, nil
}

// poolGate adds the pool gate's running files and waiting tenants to its row, when the pool
// controller has one.
func (o *Ops) poolGate(ctx context.Context, p poolInfo, ps *PoolStatus) error {
	table := p.env[pipeline.EnvPoolAdmissionTable]
	limit, err := strconv.Atoi(p.env[pipeline.EnvPoolMaxRunningFiles])
	if table == "" || err != nil || limit < 1 {
		return nil
	}
	sum, err := o.summarize(ctx, admission.Gate{Table: table, Key: schema.PoolGate(p.out.Pool), Limit: limit}, p.env)
	if err != nil {
		return err
	}
	running := len(sum.Running)
	ps.MaxRunningFiles, ps.RunningFiles, ps.WaitingTenants = &limit, &running, &sum.Waiting
	return nil
}
