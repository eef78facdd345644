package main

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

const (
	testPool       = "shared-1"
	testPoolPrefix = "inbox/"
)

// poolEnv is a pool controller's environment: the shared variables of baseEnv without the silo
// tenant's own, and the pool's settings file testdata/pool-tenants.json (tenants acme and globex)
// found through LAMBDA_TASK_ROOT as on Lambda.
func poolEnv(t *testing.T) map[string]string {
	t.Helper()
	root, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	env := baseEnv()
	for _, k := range []string{pipeline.EnvTenant, pipeline.EnvTenantPrefix, pipeline.EnvOnFailure, pipeline.EnvIdempotencyKey} {
		delete(env, k)
	}
	maps.Copy(env, map[string]string{
		pipeline.EnvPool:         testPool,
		pipeline.EnvPoolPrefix:   testPoolPrefix,
		pipeline.EnvPoolSettings: pipeline.PoolSettingsFile,
		"LAMBDA_TASK_ROOT":       root,
	})
	return env
}

func mustPoolConfig(t *testing.T, overrides map[string]string) PoolConfig {
	t.Helper()
	env := poolEnv(t)
	maps.Copy(env, overrides)
	cfg, err := poolConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("test pool config: %v", err)
	}
	return cfg
}

// Each pool tenant's Config is what a silo controller with that tenant's variables would read.
func TestPoolConfigFromEnv(t *testing.T) {
	pc := mustPoolConfig(t, nil)
	acme, _ := pc.Settings.Tenant("acme")
	globex, _ := pc.Settings.Tenant("globex")
	a, g := pc.Shared.forTenant(acme), pc.Shared.forTenant(globex)
	checks := []struct {
		what      string
		got, want any
	}{
		{"pool", pc.Shared.Pool, testPool},
		{"tenants", len(pc.Settings.Tenants), 2},
		{"shared has no tenant", pc.Shared.Tenant.ID, ""},
		{"acme id", a.Tenant.ID, "acme"},
		{"acme prefix", a.TenantPrefix, "inbox/acme/"},
		{"acme on failure default", a.OnFailure, pipeline.OnFailureContinue},
		{"acme idempotency key default", a.IdempotencyKey, pipeline.IdempotencyEventID},
		{"globex chunk size", g.Tenant.ChunkSize, 50},
		{"globex on failure", g.OnFailure, pipeline.OnFailureHalt},
		{"globex idempotency key", g.IdempotencyKey, pipeline.IdempotencyObjectVersion},
		{"shared state machine", g.StateMachineARN, testStateMachine},
		{"shared queue", g.QueueURL, testQueueURL},
		{"shared execution ARN", g.ExecutionARN("x"), testExecPrefix + "x"},
		{"max wait", g.MaxWait, a.MaxWait},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
}

// Every problem of a pool controller's environment is named.
func TestPoolConfigFromEnvRejects(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badPolicy := write("bad-policy.json", `{"version":1,"pool":"shared-1","prefix":"inbox/","tenants":[
		{"settings":{"id":"acme"},"prefix":"inbox/acme/","onFailure":"stop"},
		{"settings":{"id":"globex"},"prefix":"inbox/globex/","idempotencyKey":"etag"}]}`)
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"TENANT set", map[string]string{pipeline.EnvTenant: `{"id":"acme"}`}, []string{"TENANT: is set", "POOL_SETTINGS"}},
		{"every silo tenant variable set", map[string]string{pipeline.EnvTenantPrefix: "inbox/acme/", pipeline.EnvOnFailure: "halt", pipeline.EnvIdempotencyKey: "event-id"},
			[]string{"TENANT_PREFIX: is set", "ON_FAILURE: is set", "IDEMPOTENCY_KEY: is set"}},
		{"missing POOL_PREFIX", map[string]string{pipeline.EnvPoolPrefix: ""}, []string{"POOL_PREFIX: is required"}},
		{"POOL_PREFIX not the file's", map[string]string{pipeline.EnvPoolPrefix: "pool/"}, []string{"POOL_PREFIX:", `"pool/"`, `prefix "inbox/"`}},
		{"POOL_PREFIX without slash", map[string]string{pipeline.EnvPoolPrefix: "inbox"}, []string{"POOL_PREFIX:", "must end with '/'"}},
		{"POOL not the file's", map[string]string{pipeline.EnvPool: "shared-2"}, []string{"POOL:", `pool "shared-1"`}},
		{"settings file missing", map[string]string{pipeline.EnvPoolSettings: "nowhere.json"}, []string{"POOL_SETTINGS:", "nowhere.json"}},
		{"settings file not JSON", map[string]string{pipeline.EnvPoolSettings: write("bad.json", "tenants: acme")}, []string{"POOL_SETTINGS:", "bad.json"}},
		{"settings file of another version", map[string]string{pipeline.EnvPoolSettings: write("v2.json", `{"version":2,"pool":"shared-1","prefix":"inbox/"}`)},
			[]string{"POOL_SETTINGS:", "version 2"}},
		{"a tenant's policy and key", map[string]string{pipeline.EnvPoolSettings: badPolicy},
			[]string{`POOL_SETTINGS: tenant "acme" onFailure: "stop"`, `POOL_SETTINGS: tenant "globex" idempotencyKey: "etag"`}},
		{"shared variable missing", map[string]string{pipeline.EnvStateMachineARN: ""}, []string{"STATE_MACHINE_ARN: is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := poolEnv(t)
			maps.Copy(env, tt.env)
			_, err := poolConfigFromEnv(func(k string) string { return env[k] })
			if err == nil {
				t.Fatalf("got no error, want one naming %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
