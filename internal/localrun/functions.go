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

// CreateFunction deploys a function of the templates (deploy.Account): its package built once
// for every function of the package, its tenants' settings pointed at the run's sink
// (codeOptions.sink), the table its tenant names created, its role's credentials in its
// environment, and its timeout, concurrency and log group as the template says. A function
// without the source metadata (CDK's own custom-resource handlers, which configure AWS at deploy
// time) has nothing to do locally and is not run.
func (c *Cloud) CreateFunction(ctx context.Context, fr *deploy.Resource, spec deploy.Function) error {
	src := spec.Source
	if src == "" {
		fmt.Fprintf(c.logs, "localrun: %s has no %s metadata; not run locally\n", fr.LogicalID, MetadataSource)
		return nil
	}
	bin, ok := c.built[src]
	if !ok {
		var err error
		if bin, err = c.build(ctx, src, c.binDir()); err != nil {
			return err
		}
		c.built[src] = bin
	}
	vars := spec.Variables
	// The run points every tenant at its register endpoint by rewriting registerUrl in the TENANT
	// variable; the controller passes it into every execution, so Split and Register see it. A
	// silo Split's and Register's DEPLOYED_TENANT, which a request must agree with, is rewritten
	// alike. A table the tenant names is created first, so that the function is deployed with
	// DynamoDB's endpoint (dynamodb.go).
	for _, name := range []string{pipeline.EnvTenant, pipeline.EnvDeployedTenant} {
		t, ok := vars[name]
		if !ok {
			continue
		}
		table, err := tenantTable(t)
		if err != nil {
			return fmt.Errorf("function %s: %s: %w", fr.LogicalID, name, err)
		}
		if table != nil {
			if err := c.createTable(ctx, *table); err != nil {
				return err
			}
		}
		if vars[name], err = c.pointAtSink(t); err != nil {
			return fmt.Errorf("function %s: %s is not JSON: %w", fr.LogicalID, name, err)
		}
	}
	// Lambda unpacks the code asset in /var/task and names it LAMBDA_TASK_ROOT; locally it is the
	// asset's directory in the cloud assembly, where a pool's settings file lies beside bootstrap.
	assetDir := c.assetDir(fr)
	var pool *pipeline.PoolSettings
	poolName := vars[pipeline.EnvPool]
	if poolName != "" || vars[pipeline.EnvPoolSettings] != "" {
		// A pool's Split and Register name no pool, only the settings file they check requests
		// against: they are the pool's functions all the same (Run.Function), but serve no mapping.
		s, err := c.poolSettings(fr, spec.Name, assetDir, vars)
		if err != nil {
			return err
		}
		// The tables the pool's tenants name (tablePrefix + id), as for a silo tenant above.
		for _, pt := range s.Tenants {
			settings, _ := json.Marshal(pt.Settings)
			table, err := tenantTable(string(settings))
			if err != nil {
				return fmt.Errorf("function %s (pool %s): %w", fr.LogicalID, s.Pool, err)
			}
			if table != nil {
				if err := c.createTable(ctx, *table); err != nil {
					return err
				}
			}
		}
		if poolName != "" {
			pool = s
		}
		poolName = s.Pool
	}
	// The environment, once every table the function's tenants name exists (dynamoEnv).
	all := append(append([]string{}, c.fnEnv...), c.dynamoEnv...)
	if assetDir != "" {
		all = append(all, "LAMBDA_TASK_ROOT="+assetDir)
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		all = append(all, k+"="+vars[k])
	}
	creds, err := c.roleCredentials(fr, spec.Name)
	if err != nil {
		return err
	}
	all = append(all, creds...)
	all = append(all, c.opts.code.envFor[src]...)
	if p := vars[pipeline.EnvPool]; p != "" {
		all = append(all, c.opts.code.envForPool[p]...)
	}
	if spec.DeadLetterQ != "" && c.queues[spec.DeadLetterQ] == nil {
		return fmt.Errorf("function %s: dead-letter target %s is not a queue of the templates", fr.LogicalID, spec.DeadLetterQ)
	}
	logged := func([]byte) {}
	if c.watch != nil {
		logged = c.watch.logged
	}
	f := &emulate.Function{Name: spec.Name, ARN: spec.ARN, Source: src, Binary: bin, Env: all, Timeout: spec.Timeout, Concurrency: spec.Reserved, MemoryMB: spec.MemoryMB, Logs: c.logs, LogLine: c.insightLog.observer(spec.LogGroup, logged), LogGroup: spec.LogGroup,
		Async: emulate.AsyncConfig{DeadLetterTargetARN: spec.DeadLetterQ}, AssetDir: assetDir, PoolSettings: pool, Pool: poolName, Role: vars["FUNCTION_ROLE"], Account: c.account}
	if d, ok := c.opts.lambda.FunctionTimeout[src]; ok {
		f.Timeout = d
	}
	if t, ok := c.opts.lambda.Throttle[src]; ok {
		f.SetThrottle(t)
	}
	// The tenant a function serves: a silo controller's TENANT, or a silo Split's or Register's
	// DEPLOYED_TENANT.
	if t := cmp.Or(vars[pipeline.EnvTenant], vars[pipeline.EnvDeployedTenant]); t != "" {
		var cfg struct{ ID string }
		json.Unmarshal([]byte(t), &cfg)
		f.Tenant = cfg.ID
	}
	if t, ok := vars["TENANT"]; ok && c.opts.lambda.ControllerCrash != nil {
		var cfg struct{ ID string }
		json.Unmarshal([]byte(t), &cfg)
		// StartExecution calls are attributed to the invocation by its trace id (sfnGate), so the
		// hook knows whether the invocation it is asked about started an execution.
		crash := c.opts.lambda.ControllerCrash
		f.BeforeResponse = func(_ *emulate.Function, id string, payload []byte) bool {
			return crash(ControllerCall{Tenant: cfg.ID, Response: payload, StartExecutions: c.startsOf(id)})
		}
	}
	c.functions = append(c.functions, f)
	c.Lambda.Add(f)
	return nil
}

// binDir is where the functions' binaries go: Config.BinDir, or bin under the work directory.
func (c *Cloud) binDir() string {
	d := cmp.Or(c.opts.code.binDir, filepath.Join(c.opts.code.workDir, "bin"))
	os.MkdirAll(d, 0o755)
	return d
}

// build builds one function package, saying on Config.Progress what it builds and how long it took.
// The binary is for the host (GOOS and GOARCH as go build reads them), not the deployed asset's.
func (c *Cloud) build(ctx context.Context, src, binDir string) (string, error) {
	progress := c.opts.code.progress
	if progress == nil {
		progress = io.Discard
	}
	target := cmp.Or(os.Getenv("GOOS"), runtime.GOOS) + "/" + cmp.Or(os.Getenv("GOARCH"), runtime.GOARCH)
	fmt.Fprintf(progress, "  building %s (%s) ...\n", src, target)
	start := time.Now()
	bin, err := emulate.BuildFunctionBinary(ctx, c.moduleRoot, src, binDir)
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
	var tenantVar, prefix, machine, keysPool string
	for _, kv := range f.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case pipeline.EnvKeysPool:
			keysPool = v
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
			ts = append(ts, &Tenant{ID: pt.ID(), Prefix: pt.Prefix, Queue: q, FileMachine: machine, Controller: f, Config: cfg, Tier: TierPool, Pool: f.Pool, KeysPool: keysPool})
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
func (c *Cloud) assetDir(fr *deploy.Resource) string {
	var p string
	if raw, ok := fr.Metadata["aws:asset:path"]; ok {
		json.Unmarshal(raw, &p)
	}
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.opts.code.assembly, p)
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return p
}

// pointAtSink rewrites a tenant's settings JSON (a TENANT or DEPLOYED_TENANT variable) to send to
// the run's register endpoint and, for a core system with a lookupUrl, to its lookup URL
// (codeOptions.sink). A DynamoDB sink is left as it is.
func (c *Cloud) pointAtSink(settings string) (string, error) {
	var cfg map[string]any
	if err := json.Unmarshal([]byte(settings), &cfg); err != nil {
		return "", err
	}
	if cfg["dynamodb"] != nil || c.opts.code.sink == nil { // a DynamoDB sink has no registerUrl (dynamodb.go)
		return settings, nil
	}
	tid, _ := cfg["id"].(string)
	cs, _ := cfg["coreSystem"].(map[string]any)
	register, lookup := c.opts.code.sink(tid, cs != nil && cs["lookupUrl"] != nil)
	if register != "" {
		cfg["registerUrl"] = register
	}
	if lookup != "" && cs != nil {
		cs["lookupUrl"] = lookup
	}
	b, err := json.Marshal(cfg)
	return string(b), err
}

// poolSettings reads the settings file of a pool function (POOL_SETTINGS against its asset
// directory, as the function resolves it) and, as pointAtSink does for a silo tenant's TENANT
// variable, points every pooled tenant at the register endpoint of the run: it writes the changed
// file to the work directory and sets POOL_SETTINGS to it (an absolute path, which the function
// takes as it is).
func (c *Cloud) poolSettings(fr *deploy.Resource, name, assetDir string, vars map[string]string) (*pipeline.PoolSettings, error) {
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
		if t.DynamoDB != nil || c.opts.code.sink == nil { // a DynamoDB sink has no registerUrl (dynamodb.go)
			continue
		}
		register, lookup := c.opts.code.sink(t.ID, t.CoreSystem != nil && t.CoreSystem.LookupURL != "")
		if register != "" {
			t.RegisterURL = register
		}
		if lookup != "" && t.CoreSystem != nil {
			t.CoreSystem.LookupURL = lookup
		}
	}
	dir := filepath.Join(c.opts.code.workDir, "pool-settings")
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

// PutFunctionEventInvokeConfig applies an AWS::Lambda::EventInvokeConfig to its function's
// asynchronous invocations (asyncinvoke.go; deploy.Account). Its DestinationConfig is not
// emulated.
func (c *Cloud) PutFunctionEventInvokeConfig(_ context.Context, r *deploy.Resource, ic deploy.InvokeConfig) error {
	f := c.Lambda.Lookup(ic.FunctionName)
	if f == nil {
		fmt.Fprintf(c.logs, "localrun: event invoke config %s: function %s is not run locally\n", r.LogicalID, ic.FunctionName)
		return nil
	}
	if n := ic.MaximumRetryAttempts; n != nil && (*n < 0 || *n > emulate.AsyncDefaultRetries) {
		return fmt.Errorf("MaximumRetryAttempts %d: Lambda accepts 0 to %d", *n, emulate.AsyncDefaultRetries)
	}
	if age := ic.MaximumEventAge; age != 0 && (age < emulate.AsyncMinEventAge || age > emulate.AsyncDefaultEventAge) {
		return fmt.Errorf("MaximumEventAgeInSeconds %d: Lambda accepts %d to %d", ic.MaximumEventAgeSeconds, int(emulate.AsyncMinEventAge.Seconds()), int(emulate.AsyncDefaultEventAge.Seconds()))
	}
	if ic.Destinations {
		fmt.Fprintf(c.logs, "localrun: event invoke config %s: DestinationConfig is not emulated\n", r.LogicalID)
	}
	f.Async.MaximumRetryAttempts, f.Async.MaximumEventAge = ic.MaximumRetryAttempts, ic.MaximumEventAge
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
func (c *Cloud) roleCredentials(fr *deploy.Resource, name string) ([]string, error) {
	if _, ok := fr.Properties["Role"]; !ok {
		fmt.Fprintf(c.logs, "localrun: function %s has no Role; it runs with the run's own key, and its requests are not judged\n", fr.LogicalID)
		return nil, nil
	}
	role, err := c.res.ResolveString(fr.Stack, fr.Properties["Role"])
	if err != nil || role == "" {
		return nil, fmt.Errorf("function %s: its role: %v", fr.LogicalID, err)
	}
	key := c.auth.newSession(role, name, nil)
	c.auth.mu.Lock()
	if c.auth.functionRoles == nil {
		c.auth.functionRoles = map[string]string{}
	}
	c.auth.functionRoles[name] = role
	c.auth.mu.Unlock()
	return []string{"AWS_ACCESS_KEY_ID=" + key, "AWS_SECRET_ACCESS_KEY=" + localSecret, "AWS_SESSION_TOKEN=local-" + key}, nil
}
