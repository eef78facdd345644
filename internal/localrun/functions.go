package localrun

// The Lambda functions of the templates: each one's binary, environment (the register endpoint of
// the run in its TENANT variable), timeout and concurrency, and its tenant.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
)

func (r *Run) function(ctx context.Context, asm *deploy.Assembly, res *deploy.Resolver, fr *deploy.Resource, binDir string, built map[string]string, endpoints []string) (*emulate.Function, error) {
	id, _ := res.Identity(fr)
	spec, err := asm.ReadFunction(res, fr)
	if err != nil {
		return nil, err
	}
	src := spec.Source
	if src == "" {
		return nil, fmt.Errorf("function %s has no %q metadata naming its Go package", fr.LogicalID, MetadataSource)
	}
	bin, ok := built[src]
	if !ok {
		var err error
		if bin, err = r.build(ctx, src, binDir); err != nil {
			return nil, err
		}
		built[src] = bin
	}
	vars := spec.Variables
	// The harness points every tenant at the register endpoint of the run by rewriting registerUrl in
	// the TENANT variable; the controller passes it into every execution, so Split and Register see
	// it. A silo Split's and Register's DEPLOYED_TENANT, which a request must agree with, is
	// rewritten alike.
	for _, name := range []string{pipeline.EnvTenant, pipeline.EnvDeployedTenant} {
		if t, ok := vars[name]; ok {
			v, err := r.pointAtSink(t)
			if err != nil {
				return nil, fmt.Errorf("function %s: %s is not JSON: %w", fr.LogicalID, name, err)
			}
			vars[name] = v
		}
	}
	// Lambda unpacks the code asset in /var/task and names it LAMBDA_TASK_ROOT; locally it is the
	// asset's directory in the cloud assembly, where a pool's settings file lies beside bootstrap.
	assetDir := r.assetDir(fr)
	all := append([]string{}, endpoints...)
	if assetDir != "" {
		all = append(all, "LAMBDA_TASK_ROOT="+assetDir)
	}
	var pool *pipeline.PoolSettings
	poolName := vars[pipeline.EnvPool]
	if poolName != "" || vars[pipeline.EnvPoolSettings] != "" {
		// A pool's Split and Register name no pool, only the settings file they check requests
		// against: they are the pool's functions all the same (Run.Function), but serve no mapping.
		s, err := r.poolSettings(fr, id.Ref, assetDir, vars)
		if err != nil {
			return nil, err
		}
		if poolName != "" {
			pool = s
		}
		poolName = s.Pool
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		all = append(all, k+"="+vars[k])
	}
	creds, err := r.roleCredentials(fr, id.Ref)
	if err != nil {
		return nil, err
	}
	all = append(all, creds...)
	all = append(all, r.cfg.EnvFor[src]...)
	if p := vars[pipeline.EnvPool]; p != "" {
		all = append(all, r.cfg.EnvForPool[p]...)
	}
	if spec.DeadLetterQ != "" && r.queues[spec.DeadLetterQ] == nil {
		return nil, fmt.Errorf("function %s: dead-letter target %s is not a queue of the templates", fr.LogicalID, spec.DeadLetterQ)
	}
	f := &emulate.Function{Name: id.Ref, ARN: id.Attrs["Arn"], Source: src, Binary: bin, Env: all, Timeout: spec.Timeout, Concurrency: spec.Reserved, MemoryMB: spec.MemoryMB, Logs: r.cfg.Logs, LogLine: r.insightLog.observer(spec.LogGroup, func(line []byte) { r.admissionWaits.observe(line); r.breakers.observe(line) }), LogGroup: spec.LogGroup,
		Async: emulate.AsyncConfig{DeadLetterTargetARN: spec.DeadLetterQ}, AssetDir: assetDir, PoolSettings: pool, Pool: poolName, Role: vars["FUNCTION_ROLE"]}
	if d, ok := r.cfg.Lambda.FunctionTimeout[src]; ok {
		f.Timeout = d
	}
	if t, ok := r.cfg.Lambda.Throttle[src]; ok {
		f.SetThrottle(t)
	}
	// The tenant a function serves: a silo controller's TENANT, or a silo Split's or Register's
	// DEPLOYED_TENANT.
	if t := cmp.Or(vars[pipeline.EnvTenant], vars[pipeline.EnvDeployedTenant]); t != "" {
		var cfg struct{ ID string }
		json.Unmarshal([]byte(t), &cfg)
		f.Tenant = cfg.ID
	}
	if t, ok := vars["TENANT"]; ok && r.cfg.Lambda.ControllerCrash != nil {
		var cfg struct{ ID string }
		json.Unmarshal([]byte(t), &cfg)
		// StartExecution calls are attributed to the invocation by its trace id (sfnGate), so the
		// hook knows whether the invocation it is asked about started an execution.
		crash := r.cfg.Lambda.ControllerCrash
		f.BeforeResponse = func(_ *emulate.Function, id string, payload []byte) bool {
			return crash(ControllerCall{Tenant: cfg.ID, Response: payload, StartExecutions: r.startsOf(id)})
		}
	}
	return f, nil
}

// build builds one function package, saying on Config.Progress what it builds and how long it took.
// The binary is for the host (GOOS and GOARCH as go build reads them), not the deployed asset's.
func (r *Run) build(ctx context.Context, src, binDir string) (string, error) {
	progress := r.cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	target := cmp.Or(os.Getenv("GOOS"), runtime.GOOS) + "/" + cmp.Or(os.Getenv("GOARCH"), runtime.GOARCH)
	fmt.Fprintf(progress, "  building %s (%s) ...\n", src, target)
	start := time.Now()
	bin, err := emulate.BuildFunctionBinary(ctx, r.cfg.ModuleRoot, src, binDir)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "  built %s in %.1fs\n", src, time.Since(start).Seconds())
	return bin, nil
}

// tenantsOf makes the tenants a controller's mapping serves: the one of its TENANT variable (a
// silo tenant, with its own queue), or every tenant of its pool's settings file (pooled tenants,
// sharing the pool's queue, each its message group).
func (r *Run) tenantsOf(f *emulate.Function, q *Queue) []*Tenant {
	var tenantVar, prefix, machine string
	for _, kv := range f.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "TENANT":
			tenantVar = v
		case "TENANT_PREFIX":
			prefix = v
		case "STATE_MACHINE_ARN":
			machine = v
		}
	}
	if f.PoolSettings != nil && tenantVar == "" {
		if f.Role == pipeline.FunctionRoleRouter {
			return nil // the router's mapping reads the pool's intake, not a tenant's files
		}
		var ts []*Tenant
		for _, pt := range f.PoolSettings.Tenants {
			var cfg map[string]any
			json.Unmarshal(mustJSON(pt.Settings), &cfg)
			if pt.OnFailure != "" {
				cfg["onFailure"] = pt.OnFailure
			}
			if pt.IdempotencyKey != "" {
				cfg["idempotencyKey"] = pt.IdempotencyKey
			}
			ts = append(ts, &Tenant{ID: pt.ID(), Prefix: pt.Prefix, Queue: q, FileMachine: machine, Controller: f, Config: cfg, Tier: TierPool, Pool: f.Pool})
		}
		return ts
	}
	if tenantVar == "" {
		return nil
	}
	var cfg map[string]any
	json.Unmarshal([]byte(tenantVar), &cfg)
	id, _ := cfg["id"].(string)
	return []*Tenant{{ID: id, Prefix: prefix, Queue: q, FileMachine: machine, Controller: f, Config: cfg, Tier: TierSilo}}
}

// assetDir is the directory of a function's code asset (its "aws:asset:path" metadata, relative
// to the cloud assembly), or "" when the template names none.
func (r *Run) assetDir(fr *deploy.Resource) string {
	var p string
	if raw, ok := fr.Metadata["aws:asset:path"]; ok {
		json.Unmarshal(raw, &p)
	}
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.cfg.Assembly, p)
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return p
}

// pointAtSink rewrites a tenant's settings JSON (a TENANT or DEPLOYED_TENANT variable) to send
// to the run's register endpoint: the --register-url, or the sink's per-tenant URL and, for a core
// system with a lookupUrl or --sink-lookup, its lookup URL. A DynamoDB sink is left as it is.
func (r *Run) pointAtSink(settings string) (string, error) {
	var cfg map[string]any
	if err := json.Unmarshal([]byte(settings), &cfg); err != nil {
		return "", err
	}
	tid, _ := cfg["id"].(string)
	switch {
	case cfg["dynamodb"] != nil: // a DynamoDB sink has no registerUrl (dynamodb.go)
	case r.cfg.RegisterURL != "":
		cfg["registerUrl"] = r.registerURL
	default:
		cfg["registerUrl"] = emulate.SinkURL(r.sinkURL, tid)
		// A core system's lookupUrl, declared or asked for with --sink-lookup, is the sink's.
		if cs, ok := cfg["coreSystem"].(map[string]any); ok && (r.cfg.Core.Lookup || cs["lookupUrl"] != nil) {
			cs["lookupUrl"] = emulate.SinkLookupURL(r.sinkURL, tid)
		}
	}
	b, err := json.Marshal(cfg)
	return string(b), err
}

// poolSettings reads the settings file of a pool function (POOL_SETTINGS against its asset
// directory, as the function resolves it) and, as the harness does for a silo tenant's TENANT
// variable, points every pooled tenant at the register endpoint of the run: it writes the changed
// file to the work directory and sets POOL_SETTINGS to it (an absolute path, which the function
// takes as it is).
func (r *Run) poolSettings(fr *deploy.Resource, name, assetDir string, vars map[string]string) (*pipeline.PoolSettings, error) {
	path := pipeline.PoolSettingsPath(func(k string) string {
		if k == "LAMBDA_TASK_ROOT" {
			return assetDir
		}
		return vars[k]
	})
	s, err := poolsettings.Load(path)
	if err != nil {
		return nil, fmt.Errorf("function %s (pool %s): %w", fr.LogicalID, vars[pipeline.EnvPool], err)
	}
	for i := range s.Tenants {
		t := &s.Tenants[i].Settings
		switch {
		case t.DynamoDB != nil: // a DynamoDB sink has no registerUrl (dynamodb.go)
		case r.cfg.RegisterURL != "":
			t.RegisterURL = r.registerURL
		default:
			t.RegisterURL = emulate.SinkURL(r.sinkURL, t.ID)
			if t.CoreSystem != nil && (r.cfg.Core.Lookup || t.CoreSystem.LookupURL != "") {
				t.CoreSystem.LookupURL = emulate.SinkLookupURL(r.sinkURL, t.ID)
			}
		}
	}
	dir := filepath.Join(r.cfg.WorkDir, "pool-settings")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, name+"-"+pipeline.PoolSettingsFile)
	b, err := poolsettings.Encode(s)
	if err != nil {
		return nil, fmt.Errorf("function %s (pool %s): %w", fr.LogicalID, vars[pipeline.EnvPool], err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return nil, err
	}
	vars[pipeline.EnvPoolSettings] = out
	return s, nil
}

// eventInvokeConfig applies an AWS::Lambda::EventInvokeConfig to its function's asynchronous
// invocations (asyncinvoke.go). Its DestinationConfig is not emulated.
func (r *Run) eventInvokeConfig(asm *deploy.Assembly, res *deploy.Resolver, c *deploy.Resource) error {
	var props struct {
		FunctionName             string
		Qualifier                string
		MaximumRetryAttempts     *int
		MaximumEventAgeInSeconds int
		DestinationConfig        map[string]any
	}
	raw, err := res.Resolve(c.Stack, mustJSON(c.Properties))
	if err != nil {
		return fmt.Errorf("event invoke config %s: %w", c.LogicalID, err)
	}
	if err := json.Unmarshal(mustJSON(raw), &props); err != nil {
		return fmt.Errorf("event invoke config %s: %w", c.LogicalID, err)
	}
	f := r.Lambda.Lookup(props.FunctionName)
	if f == nil {
		fmt.Fprintf(r.cfg.Logs, "localrun: event invoke config %s: function %s is not run locally\n", c.LogicalID, props.FunctionName)
		return nil
	}
	if n := props.MaximumRetryAttempts; n != nil && (*n < 0 || *n > emulate.AsyncDefaultRetries) {
		return fmt.Errorf("event invoke config %s: MaximumRetryAttempts %d: Lambda accepts 0 to %d", c.LogicalID, *n, emulate.AsyncDefaultRetries)
	}
	age := time.Duration(props.MaximumEventAgeInSeconds) * time.Second
	if age != 0 && (age < emulate.AsyncMinEventAge || age > emulate.AsyncDefaultEventAge) {
		return fmt.Errorf("event invoke config %s: MaximumEventAgeInSeconds %d: Lambda accepts %d to %d", c.LogicalID, props.MaximumEventAgeInSeconds, int(emulate.AsyncMinEventAge.Seconds()), int(emulate.AsyncDefaultEventAge.Seconds()))
	}
	if len(props.DestinationConfig) > 0 {
		fmt.Fprintf(r.cfg.Logs, "localrun: event invoke config %s: DestinationConfig is not emulated\n", c.LogicalID)
	}
	f.Async.MaximumRetryAttempts, f.Async.MaximumEventAge = props.MaximumRetryAttempts, age
	return nil
}

// roleCredentials are the credentials Lambda gives a function in its environment: a session of its
// execution role, which the local STS records, so that the S3, SQS and DynamoDB endpoints judge the
// function's requests by its role's policies and the resources' policies (tenantauth.go), as AWS
// does. They come after the run's own key in the environment, and the last value of a name wins.
// https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime
//
// CloudFormation requires a function's Role, so only a hand-made template (the tests' fixture) has
// none: such a function keeps the run's own key, and the run's log says so.
// https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-lambda-function.html
func (r *Run) roleCredentials(fr *deploy.Resource, name string) ([]string, error) {
	if _, ok := fr.Properties["Role"]; !ok {
		fmt.Fprintf(r.cfg.Logs, "localrun: function %s has no Role; it runs with the run's own key, and its requests are not judged\n", fr.LogicalID)
		return nil, nil
	}
	role, err := r.res.ResolveString(fr.Stack, fr.Properties["Role"])
	if err != nil || role == "" {
		return nil, fmt.Errorf("function %s: its role: %v", fr.LogicalID, err)
	}
	key := r.auth.newSession(role, name, nil)
	r.auth.mu.Lock()
	if r.auth.functionRoles == nil {
		r.auth.functionRoles = map[string]string{}
	}
	r.auth.functionRoles[name] = role
	r.auth.mu.Unlock()
	return []string{"AWS_ACCESS_KEY_ID=" + key, "AWS_SECRET_ACCESS_KEY=" + localSecret, "AWS_SESSION_TOKEN=local-" + key}, nil
}
