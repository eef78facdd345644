package controller

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/testfake"
)

const (
	testPool               = "shared-1"
	testPoolPrefix         = "inbox/"
	testPoolAdmissionTable = "TenantPipeline-Pool-shared-1-PoolAdmissionTable-ABC123"
)

// poolEnv is a pool controller's environment: the shared variables of baseEnv without the silo
// tenant's own, and the pool's settings file made from testdata/pool-settings.json (tenants acme
// and globex), found through LAMBDA_TASK_ROOT as on Lambda.
func poolEnv(t *testing.T) map[string]string {
	t.Helper()
	js, err := os.ReadFile(filepath.Join("testdata", "pool-settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	testfake.WritePoolSettings(t, root, pipeline.PoolSettingsFile, string(js))
	env := baseEnv()
	for _, k := range []string{pipeline.EnvTenant, pipeline.EnvTenantPrefix, pipeline.EnvOnFailure, pipeline.EnvIdempotencyKey} {
		delete(env, k)
	}
	maps.Copy(env, map[string]string{
		pipeline.EnvPool:         testPool,
		pipeline.EnvKeysPool:     testPool, // its tenants' keys carry it, as a new pool's do
		pipeline.EnvPoolPrefix:   testPoolPrefix,
		pipeline.EnvPoolSettings: pipeline.PoolSettingsFile,
		"LAMBDA_TASK_ROOT":       root,
		// Every pool has its admission table and running-file limit.
		pipeline.EnvPoolAdmissionTable:  testPoolAdmissionTable,
		pipeline.EnvPoolMaxRunningFiles: "200",
	})
	return env
}

func mustPoolConfig(t *testing.T, overrides map[string]string) PoolConfig {
	t.Helper()
	env := poolEnv(t)
	maps.Copy(env, overrides)
	cfg, err := PoolConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("test pool config: %v", err)
	}
	return cfg
}

// Each pool tenant's Config is what a silo controller with that tenant's variables would read.
func TestPoolConfigFromEnv(t *testing.T) {
	pc := mustPoolConfig(t, nil)
	a, err := pc.tenantConfig("acme")
	if err != nil {
		t.Fatal(err)
	}
	g, err := pc.tenantConfig("globex")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"pool", pc.Shared.Pool, testPool},
		{"tenants", pc.Settings.Len(), 2},
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
		{"pool admission table", g.PoolAdmissionTable, testPoolAdmissionTable},
		{"pool max running files", g.PoolMaxRunningFiles, 200},
		{"no core system", a.Tenant.CoreSystem == nil, true},
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
		{"settings file of version 1", map[string]string{pipeline.EnvPoolSettings: write("v1.json", `{"version":1,"pool":"shared-1","prefix":"inbox/","tenants":[]}`)},
			[]string{"POOL_SETTINGS:", "v1.json", "not a version 2 settings file"}},
		{"settings file of version 3", map[string]string{pipeline.EnvPoolSettings: write("v3.json", `{"format":"tenantpipeline-pool-settings","version":3,"pool":"shared-1","prefix":"inbox/"}`+"\n")},
			[]string{"POOL_SETTINGS:", "version 3, want 2"}},
		{"shared variable missing", map[string]string{pipeline.EnvStateMachineARN: ""}, []string{"STATE_MACHINE_ARN: is required"}},
		{"admission table missing", map[string]string{pipeline.EnvPoolAdmissionTable: ""}, []string{"POOL_ADMISSION_TABLE: is required"}},
		{"admission table not a table name", map[string]string{pipeline.EnvPoolAdmissionTable: "a b"}, []string{"POOL_ADMISSION_TABLE:", `"a b" is not a DynamoDB table name`}},
		{"max running files missing", map[string]string{pipeline.EnvPoolMaxRunningFiles: ""}, []string{"POOL_MAX_RUNNING_FILES: is required"}},
		{"max running files zero", map[string]string{pipeline.EnvPoolMaxRunningFiles: "0"}, []string{"POOL_MAX_RUNNING_FILES: 0 is out of range, want 1 to 1000"}},
		{"max running files above 1000", map[string]string{pipeline.EnvPoolMaxRunningFiles: "1001"}, []string{"POOL_MAX_RUNNING_FILES: 1001 is out of range"}},
		{"max running files not a number", map[string]string{pipeline.EnvPoolMaxRunningFiles: "many"}, []string{`POOL_MAX_RUNNING_FILES: "many" is not a whole number`}},
		{"CORE_SYSTEM_TABLES not JSON", map[string]string{pipeline.EnvCoreSystemTables: "ledger=x"}, []string{"CORE_SYSTEM_TABLES: is not a JSON object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := poolEnv(t)
			maps.Copy(env, tt.env)
			_, err := PoolConfigFromEnv(func(k string) string { return env[k] })
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

// A tenant's bad row is found when the tenant is first served, and holds that tenant only: the
// pool starts, and its other tenants' Configs are made.
func TestPoolTenantConfigRejects(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		settings string
		tables   string
		bad      string // the tenant whose row is bad
		want     []string
	}{
		{"a tenant's policy", `{"pool":"shared-1","prefix":"inbox/","tenants":[
			{"settings":{"id":"acme"},"prefix":"inbox/acme/","onFailure":"stop"},
			{"settings":{"id":"globex"},"prefix":"inbox/globex/"}]}`, "", "acme",
			[]string{`POOL_SETTINGS: tenant "acme" onFailure: "stop"`}},
		{"a tenant's idempotency key", `{"pool":"shared-1","prefix":"inbox/","tenants":[
			{"settings":{"id":"acme"},"prefix":"inbox/acme/"},
			{"settings":{"id":"globex"},"prefix":"inbox/globex/","idempotencyKey":"etag"}]}`, "", "globex",
			[]string{`POOL_SETTINGS: tenant "globex" idempotencyKey: "etag"`}},
		{"a tenant's core system without a table", coreSystemsSettings, `{"ledger": "ledger-admission"}`, "globex",
			[]string{`CORE_SYSTEM_TABLES: has no table for core system "crm", which tenant "globex" names`}},
		{"core systems without CORE_SYSTEM_TABLES", coreSystemsSettings, "", "acme",
			[]string{`CORE_SYSTEM_TABLES: has no table for core system "ledger", which tenant "acme" names`}},
		{"a core system of no running files", `{"pool":"shared-1","prefix":"inbox/","tenants":[
			{"settings":{"id":"acme","coreSystem":{"name":"ledger","maxRunningFiles":0}},"prefix":"inbox/acme/"},
			{"settings":{"id":"initech"},"prefix":"inbox/initech/"}]}`, `{"ledger":"ledger-admission"}`, "acme",
			[]string{`POOL_SETTINGS: tenant "acme" settings: coreSystem "ledger": maxRunningFiles 0, want 1 to 1000`}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := testfake.WritePoolSettings(t, dir, fmt.Sprintf("s%d", i), tt.settings)
			pc := mustPoolConfig(t, map[string]string{pipeline.EnvPoolSettings: path, pipeline.EnvCoreSystemTables: tt.tables})
			_, err := pc.tenantConfig(tt.bad)
			if err == nil {
				t.Fatalf("tenant %s: got no error, want one naming %v", tt.bad, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
			for e := range pc.Settings.All() {
				if e.ID == tt.bad {
					continue
				}
				if _, err := pc.tenantConfig(e.ID); err != nil && !strings.Contains(err.Error(), "has no table") {
					t.Errorf("tenant %s: got %v, want its Config", e.ID, err)
				}
			}
		})
	}
}

// coreSystemsSettings is a pool's settings file whose tenants name core systems (without their
// tables, as the construct writes it).
const coreSystemsSettings = `{"pool":"shared-1","prefix":"inbox/","tenants":[
	{"settings":{"id":"acme","weight":3,"coreSystem":{"name":"ledger","maxRunningFiles":20,"maxRecordsPerSecond":500,"adaptive":true,"table":""}},"prefix":"inbox/acme/"},
	{"settings":{"id":"globex","coreSystem":{"name":"crm","maxRunningFiles":4,"table":""}},"prefix":"inbox/globex/"},
	{"settings":{"id":"initech"},"prefix":"inbox/initech/"}]}`

// CORE_SYSTEM_TABLES gives each pool tenant's core system its table, so every execution carries it.
func TestPoolConfigCoreSystemTables(t *testing.T) {
	path := testfake.WritePoolSettings(t, t.TempDir(), "core", coreSystemsSettings)
	pc := mustPoolConfig(t, map[string]string{
		pipeline.EnvPoolSettings:     path,
		pipeline.EnvCoreSystemTables: `{"ledger": "TenantPipeline-Ingest-ledger-ABC", "crm": "TenantPipeline-Ingest-crm-DEF"}`,
	})
	tenant := func(id string) pipeline.Tenant {
		c, err := pc.tenantConfig(id)
		if err != nil {
			t.Fatalf("tenant %s: %v", id, err)
		}
		return c.Tenant
	}
	want := pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 20, MaxRecordsPerSecond: 500, Adaptive: true, Table: "TenantPipeline-Ingest-ledger-ABC"}
	if got := tenant("acme").CoreSystem; got == nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("acme: got core system %+v, want %+v", got, want)
	}
	if got := tenant("acme").AdmissionWeight(); got != 3 {
		t.Errorf("acme weight: got %d, want 3", got)
	}
	if got := tenant("globex").CoreSystem; got == nil || got.Table != "TenantPipeline-Ingest-crm-DEF" {
		t.Errorf("globex: got core system %+v, want crm's table", got)
	}
	if got := tenant("initech").CoreSystem; got != nil {
		t.Errorf("initech: got core system %+v, want none", got)
	}
}
