package localrun

// The Lambda functions of the templates: each one's binary, environment (the register endpoint of
// the run in its TENANT variable), timeout and concurrency, and its tenant.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

func (r *Run) function(ctx context.Context, asm *Assembly, res *Resolver, fr *Resource, binDir string, built map[string]string, endpoints []string) (*Function, error) {
	id, _ := res.Identity(fr)
	var src string
	if raw, ok := fr.Metadata[MetadataSource]; ok {
		json.Unmarshal(raw, &src)
	}
	if src == "" {
		return nil, fmt.Errorf("function %s has no %q metadata naming its Go package", fr.LogicalID, MetadataSource)
	}
	bin, ok := built[src]
	if !ok {
		var err error
		if bin, err = buildFunctionBinary(ctx, r.cfg.ModuleRoot, src, binDir); err != nil {
			return nil, err
		}
		built[src] = bin
	}
	var env struct{ Variables map[string]string }
	if err := asm.Prop(res, fr, "Environment", &env); err != nil {
		return nil, err
	}
	var timeout, reserved, memory int
	asm.Prop(res, fr, "Timeout", &timeout)
	asm.Prop(res, fr, "ReservedConcurrentExecutions", &reserved)
	asm.Prop(res, fr, "MemorySize", &memory)
	if timeout == 0 {
		timeout = 3 // the Lambda default
	}
	if memory == 0 {
		memory = 128 // the Lambda default
	}
	vars := env.Variables
	if vars == nil {
		vars = map[string]string{}
	}
	// The harness points every tenant at the register endpoint of the run by rewriting registerUrl in
	// the TENANT variable; the controller passes it into every execution, so Split and Register see it.
	if t, ok := vars["TENANT"]; ok {
		var cfg map[string]any
		if err := json.Unmarshal([]byte(t), &cfg); err != nil {
			return nil, fmt.Errorf("function %s: TENANT is not JSON: %w", fr.LogicalID, err)
		}
		tid, _ := cfg["id"].(string)
		switch {
		case cfg["dynamodb"] != nil: // a DynamoDB sink has no registerUrl (dynamodb.go)
		case r.cfg.RegisterURL != "":
			cfg["registerUrl"] = r.cfg.RegisterURL
		default:
			cfg["registerUrl"] = sinkURL(r.sinkURL, tid)
		}
		b, _ := json.Marshal(cfg)
		vars["TENANT"] = string(b)
	}
	all := append([]string{}, endpoints...)
	for _, k := range sortedKeys(vars) {
		all = append(all, k+"="+vars[k])
	}
	all = append(all, r.cfg.EnvFor[src]...)
	var dlc struct{ TargetArn string }
	if err := asm.Prop(res, fr, "DeadLetterConfig", &dlc); err != nil {
		return nil, err
	}
	if dlc.TargetArn != "" && r.queues[dlc.TargetArn] == nil {
		return nil, fmt.Errorf("function %s: dead-letter target %s is not a queue of the templates", fr.LogicalID, dlc.TargetArn)
	}
	f := &Function{Name: id.Ref, ARN: id.Attrs["Arn"], Source: src, Binary: bin, Env: all, Timeout: time.Duration(timeout) * time.Second, Concurrency: reserved, MemoryMB: memory, Logs: r.cfg.Logs,
		Async: AsyncConfig{DeadLetterTargetARN: dlc.TargetArn}}
	if d, ok := r.cfg.FunctionTimeout[src]; ok {
		f.Timeout = d
	}
	if t, ok := r.cfg.Throttle[src]; ok {
		f.SetThrottle(t)
	}
	if t, ok := vars["TENANT"]; ok {
		var cfg struct{ ID string }
		json.Unmarshal([]byte(t), &cfg)
		f.Tenant = cfg.ID
	}
	if t, ok := vars["TENANT"]; ok && r.cfg.ControllerCrash != nil {
		var cfg struct{ ID string }
		json.Unmarshal([]byte(t), &cfg)
		// StartExecution calls are attributed to the invocation by its trace id (sfnGate), so the
		// hook knows whether the invocation it is asked about started an execution.
		crash := r.cfg.ControllerCrash
		f.BeforeResponse = func(_ *Function, id string, payload []byte) bool {
			return crash(ControllerCall{Tenant: cfg.ID, Response: payload, StartExecutions: r.startsOf(id)})
		}
	}
	return f, nil
}

func (r *Run) tenantOf(f *Function, q *Queue) *Tenant {
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
	if tenantVar == "" {
		return nil
	}
	var cfg map[string]any
	json.Unmarshal([]byte(tenantVar), &cfg)
	id, _ := cfg["id"].(string)
	return &Tenant{ID: id, Prefix: prefix, Queue: q, FileMachine: machine, Controller: f, Config: cfg}
}

// eventInvokeConfig applies an AWS::Lambda::EventInvokeConfig to its function's asynchronous
// invocations (asyncinvoke.go). Its DestinationConfig is not emulated.
func (r *Run) eventInvokeConfig(asm *Assembly, res *Resolver, c *Resource) error {
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
	if n := props.MaximumRetryAttempts; n != nil && (*n < 0 || *n > asyncDefaultRetries) {
		return fmt.Errorf("event invoke config %s: MaximumRetryAttempts %d: Lambda accepts 0 to %d", c.LogicalID, *n, asyncDefaultRetries)
	}
	age := time.Duration(props.MaximumEventAgeInSeconds) * time.Second
	if age != 0 && (age < asyncMinEventAge || age > asyncDefaultEventAge) {
		return fmt.Errorf("event invoke config %s: MaximumEventAgeInSeconds %d: Lambda accepts %d to %d", c.LogicalID, props.MaximumEventAgeInSeconds, int(asyncMinEventAge.Seconds()), int(asyncDefaultEventAge.Seconds()))
	}
	if len(props.DestinationConfig) > 0 {
		fmt.Fprintf(r.cfg.Logs, "localrun: event invoke config %s: DestinationConfig is not emulated\n", c.LogicalID)
	}
	f.Async.MaximumRetryAttempts, f.Async.MaximumEventAge = props.MaximumRetryAttempts, age
	return nil
}
