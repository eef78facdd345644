package test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/internal/stacks"
	"github.com/example/tenantpipeline/spec"
)

var core struct {
	built                     *stacks.App
	ingest, silo, pool, other map[string]any
}

// coreApp is the app of testdata/coresystems.json: core systems ledger and crm in the ingest
// stack; silo tenant acme names ledger, globex none; pool default (maxRunningFiles 50) has hooli
// on ledger and umbrella on crm; pool big has wayne, on none.
func coreApp(t *testing.T) {
	t.Helper()
	if core.built != nil {
		return
	}
	_, built := synthApp(t, "coresystems.json", stacks.Options{})
	if len(built.PoolStacks) != 2 || len(built.TenantStacks) != 1 {
		t.Fatalf("got %d pool stacks and %d tenant stacks, want 2 and 1", len(built.PoolStacks), len(built.TenantStacks))
	}
	core.built = built
	core.ingest = stackTemplate(t, built.Ingest)
	core.silo = stackTemplate(t, built.TenantStacks[0])
	core.other = stackTemplate(t, built.PoolStacks[0]) // big
	core.pool = stackTemplate(t, built.PoolStacks[1])  // default
}

// coreTableID is the logical id of a core system's table in the ingest stack.
func coreTableID(t *testing.T, name string) string {
	t.Helper()
	var found []string
	for id := range byType(core.ingest, "AWS::DynamoDB::Table") {
		if strings.HasPrefix(id, "CoreSystems"+name+"Table") {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		t.Fatalf("core system %s: got tables %v in the ingest stack, want 1", name, found)
	}
	return found[0]
}

// checkAdmissionTable: pk and sk strings, TTL on expiresAt, on demand, AWS-managed encryption,
// no point-in-time recovery, destroyed with its construct (it holds only short-lived leases).
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-dynamodb-table.html
func checkAdmissionTable(t *testing.T, table map[string]any) {
	t.Helper()
	p := props(table)
	for k, want := range map[string]string{
		"KeySchema":               `[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}]`,
		"AttributeDefinitions":    `[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"}]`,
		"BillingMode":             `"PAY_PER_REQUEST"`,
		"TimeToLiveSpecification": `{"AttributeName":"expiresAt","Enabled":true}`,
		"SSESpecification":        `{"SSEEnabled":true}`,
	} {
		if got := asJSON(p[k]); got != want {
			t.Errorf("%s: got %s, want %s", k, got, want)
		}
	}
	for _, k := range []string{"TableName", "PointInTimeRecoverySpecification", "ProvisionedThroughput"} {
		if _, ok := p[k]; ok {
			t.Errorf("%s: got %v, want none", k, asJSON(p[k]))
		}
	}
	if table["DeletionPolicy"] != "Delete" || table["UpdateReplacePolicy"] != "Delete" {
		t.Errorf("got DeletionPolicy %v, UpdateReplacePolicy %v, want Delete", table["DeletionPolicy"], table["UpdateReplacePolicy"])
	}
}

func TestCoreSystemTables(t *testing.T) {
	coreApp(t)
	if got := len(byType(core.ingest, "AWS::DynamoDB::Table")); got != 2 {
		t.Errorf("ingest stack: got %d tables, want 2 (ledger, crm)", got)
	}
	for _, name := range []string{"ledger", "crm"} {
		t.Run(name, func(t *testing.T) {
			checkAdmissionTable(t, byType(core.ingest, "AWS::DynamoDB::Table")[coreTableID(t, name)])
		})
	}
	for name, tpl := range map[string]map[string]any{"default": core.pool, "big": core.other} {
		t.Run("pool "+name, func(t *testing.T) {
			tables := byType(tpl, "AWS::DynamoDB::Table")
			if len(tables) != 1 {
				t.Fatalf("got %d tables, want 1, the pool's admission table", len(tables))
			}
			for id, table := range tables {
				if !strings.HasPrefix(id, "PoolAdmissionTable") {
					t.Errorf("logical id: got %s, want PoolAdmissionTable + hash", id)
				}
				checkAdmissionTable(t, table)
			}
		})
	}
	if got := len(byType(core.silo, "AWS::DynamoDB::Table")); got != 0 {
		t.Errorf("tenant stack: got %d tables, want none (core systems live in the ingest stack)", got)
	}
}

// importOf is how a tenant or pool stack sees a core system table's attribute.
func importOf(t *testing.T, name, attr string) string {
	t.Helper()
	id := coreTableID(t, name)
	if attr == "Ref" {
		return "<Import:TenantPipeline-Ingest:ExportsOutputRef" + id
	}
	return "<Import:TenantPipeline-Ingest:ExportsOutputFnGetAtt" + id + attr
}

// statementsWhere are the statements of the policies whose logical id contains part that keep
// accepts.
func statementsWhere(t *testing.T, tpl map[string]any, part string, keep func(map[string]any) bool) []map[string]any {
	t.Helper()
	var out []map[string]any
	for id, pol := range byType(tpl, "AWS::IAM::Policy") {
		if !strings.Contains(id, part) {
			continue
		}
		for _, s := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
			if st := s.(map[string]any); keep(st) {
				out = append(out, st)
			}
		}
	}
	return out
}

// dynamoStatements are the statements of the policies whose logical id contains part that grant
// a DynamoDB action.
func dynamoStatements(t *testing.T, tpl map[string]any, part string) []map[string]any {
	t.Helper()
	return statementsWhere(t, tpl, part, func(st map[string]any) bool { return strings.Contains(asJSON(st["Action"]), "dynamodb:") })
}

// resources flattens a statement's Resource, one string per resource, sorted.
func resources(t *testing.T, s map[string]any) []string {
	t.Helper()
	rs, ok := s["Resource"].([]any)
	if !ok {
		rs = []any{s["Resource"]}
	}
	var out []string
	for _, r := range rs {
		out = append(out, flatten(t, r))
	}
	slices.Sort(out)
	return out
}

func actions(s map[string]any) []string { return actionsOf([]map[string]any{s}) }

var wantLeaseActions = []string{"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"}

// checkLeaseGrant: exactly one DynamoDB statement: Allow the lease actions on exactly the tables.
func checkLeaseGrant(t *testing.T, stmts []map[string]any, tables []string) {
	t.Helper()
	if len(stmts) != 1 {
		t.Fatalf("got %d DynamoDB statements, want 1: %s", len(stmts), asJSON(stmts))
	}
	s := stmts[0]
	if got := actions(s); s["Effect"] != "Allow" || !slices.Equal(got, wantLeaseActions) || s["Condition"] != nil {
		t.Errorf("got %s %v (condition %v), want Allow %v without a condition", s["Effect"], got, s["Condition"], wantLeaseActions)
	}
	got := resources(t, s)
	slices.Sort(tables)
	if len(got) != len(tables) {
		t.Fatalf("resources: got %v, want %v", got, tables)
	}
	for i := range got {
		if !strings.HasPrefix(got[i], tables[i]) {
			t.Errorf("resource %d: got %s, want %s…", i, got[i], tables[i])
		}
	}
}

// checkAdaptiveGrants: one statement per core system: Allow GetItem and UpdateItem on its table,
// only for items of its gate (dynamodb:LeadingKeys core#<name>).
func checkAdaptiveGrants(t *testing.T, stmts []map[string]any, names ...string) {
	t.Helper()
	if len(stmts) != len(names) {
		t.Fatalf("got %d DynamoDB statements, want %d: %s", len(stmts), len(names), asJSON(stmts))
	}
	byName := map[string]map[string]any{}
	for _, s := range stmts {
		var keys []string
		json.Unmarshal([]byte(asJSON(get(t, s, "Condition", "ForAllValues:StringEquals", "dynamodb:LeadingKeys"))), &keys)
		if len(keys) == 1 {
			byName[strings.TrimPrefix(keys[0], "core#")] = s
		}
	}
	for _, name := range names {
		s, ok := byName[name]
		if !ok {
			t.Errorf("core system %s: no statement limited to dynamodb:LeadingKeys %s: %s", name, schema.CoreGate(name), asJSON(stmts))
			continue
		}
		if got := actions(s); s["Effect"] != "Allow" || !slices.Equal(got, []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}) {
			t.Errorf("core system %s: got %s %v, want Allow [dynamodb:GetItem dynamodb:UpdateItem]", name, s["Effect"], got)
		}
		if got, want := resources(t, s), importOf(t, name, "Arn"); len(got) != 1 || !strings.HasPrefix(got[0], want) {
			t.Errorf("core system %s: resources %v, want its table %s…", name, got, want)
		}
		if n := len(s["Condition"].(map[string]any)); n != 1 {
			t.Errorf("core system %s: got %d condition operators, want 1", name, n)
		}
	}
}

// Silo: the controller manages leases in its tenant's core system table only, Register reads and
// updates the items of its core system's gate only (adaptive limit, breaker, request shares);
// Split, and a tenant without a core system, get nothing.
func TestSiloAdmissionGrants(t *testing.T) {
	coreApp(t)
	checkLeaseGrant(t, dynamoStatements(t, core.silo, "Tenantacme"+"Controller"), []string{importOf(t, "ledger", "Arn")})
	checkAdaptiveGrants(t, dynamoStatements(t, core.silo, "TenantacmeRegister"), "ledger")
	for _, part := range []string{"TenantacmeSplit", "Tenantglobex"} {
		if s := dynamoStatements(t, core.silo, part); len(s) != 0 {
			t.Errorf("%s: got DynamoDB statements %s, want none", part, asJSON(s))
		}
	}
}

// Pool: the controller manages leases in the pool's table and its tenants' core system tables;
// Register reads and updates each core system's gate items (crm keeps no breaker and no adaptive
// limit: its grant is for the request shares alone); the router only its backlog items; Split gets
// nothing.
// A pool whose tenants name no core system grants its controller its own table only.
func TestPoolAdmissionGrants(t *testing.T) {
	coreApp(t)
	poolTable := func(tpl map[string]any) string {
		for id := range byType(tpl, "AWS::DynamoDB::Table") {
			return "<GetAtt:" + id + ".Arn>"
		}
		t.Fatal("no pool table")
		return ""
	}
	checkLeaseGrant(t, dynamoStatements(t, core.pool, "PoolController"),
		[]string{poolTable(core.pool), importOf(t, "ledger", "Arn"), importOf(t, "crm", "Arn")})
	checkAdaptiveGrants(t, dynamoStatements(t, core.pool, "PoolRegister"), "ledger", "crm")
	checkLeaseGrant(t, dynamoStatements(t, core.other, "PoolController"), []string{poolTable(core.other)})
	for name, tpl := range map[string]map[string]any{"default": core.pool, "big": core.other} {
		if s := dynamoStatements(t, tpl, "PoolSplit"); len(s) != 0 {
			t.Errorf("pool %s PoolSplit: got DynamoDB statements %s, want none", name, asJSON(s))
		}
		// The router counts and parks each tenant's files in the pool's table (the bounded
		// backlog), and may touch only those items, never a lease or a gate.
		want := `[{"Action":["dynamodb:GetItem","dynamodb:PutItem","dynamodb:UpdateItem","dynamodb:DeleteItem","dynamodb:Query"],` +
			`"Condition":{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["queue#*","backlog#*","backlog"]}},"Effect":"Allow","Resource":{"Fn::GetAtt":["` + strings.TrimSuffix(strings.TrimPrefix(poolTable(tpl), "<GetAtt:"), ".Arn>") + `","Arn"]}}]`
		if got := asJSON(dynamoStatements(t, tpl, "PoolRouter")); got != want {
			t.Errorf("pool %s PoolRouter: got DynamoDB statements %s, want %s", name, got, want)
		}
	}
	if s := dynamoStatements(t, core.other, "PoolRegister"); len(s) != 0 {
		t.Errorf("pool big Register: got DynamoDB statements %s, want none (no core system)", asJSON(s))
	}
}

// env returns the environment of the one function whose logical id starts with prefix.
func env(t *testing.T, tpl map[string]any, prefix string) map[string]any {
	t.Helper()
	var found []map[string]any
	for id, fn := range byType(tpl, "AWS::Lambda::Function") {
		if strings.HasPrefix(id, prefix) {
			found = append(found, fn)
		}
	}
	if len(found) != 1 {
		t.Fatalf("got %d functions %s…, want 1", len(found), prefix)
	}
	return get(t, props(found[0]), "Environment", "Variables").(map[string]any)
}

// TestRegisterRequestSharesEnv: the bundled Register of both tiers is told how to share a core
// system's requests in flight (REQUEST_SHARES): shared by default, static with -c
// requestShares=static.
func TestRegisterRequestSharesEnv(t *testing.T) {
	coreApp(t)
	_, static := synthApp(t, "keyorder.json", stacks.Options{RequestShares: pipeline.RequestSharesStatic})
	for _, c := range []struct {
		name, prefix string
		tpl          map[string]any
		want         string
	}{
		{"silo, default", "TenantacmeRegister", core.silo, pipeline.RequestSharesShared},
		{"pool, default", "PoolRegister", core.pool, pipeline.RequestSharesShared},
		{"silo, static", "TenantacmeRegister", stackTemplate(t, static.TenantStacks[0]), pipeline.RequestSharesStatic},
		{"pool, static", "PoolRegister", stackTemplate(t, static.PoolStacks[0]), pipeline.RequestSharesStatic},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := env(t, c.tpl, c.prefix)[pipeline.EnvRequestShares]; got != c.want {
				t.Errorf("got %s %v, want %q", pipeline.EnvRequestShares, got, c.want)
			}
		})
	}
}

// TestRequestSharesContext: -c requestShares reads "shared" and "static" and refuses anything
// else, naming the key and both values.
func TestRequestSharesContext(t *testing.T) {
	for _, c := range []struct {
		value, want, err string
	}{
		{"", "", ""},
		{"shared", pipeline.RequestSharesShared, ""},
		{"static", pipeline.RequestSharesStatic, ""},
		{"even", "", `context requestShares: "even" is not a way to share a core system's requests: use "shared"`},
	} {
		t.Run(c.value, func(t *testing.T) {
			ctx := map[string]any{}
			if c.value != "" {
				ctx[stacks.CtxRequestShares] = c.value
			}
			o, err := stacks.OptionsFromContext(testAppWithContext(t, ctx))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("got %v, want an error starting %q", err, c.err)
				}
				return
			}
			if err != nil || o.RequestShares != c.want {
				t.Errorf("got %q %v, want %q", o.RequestShares, err, c.want)
			}
		})
	}
}

// The controllers' admission environment: CORE_SYSTEM_TABLES names each core system's table (a
// silo's one, a pool's every one its tenants name), a pool's POOL_ADMISSION_TABLE and
// POOL_MAX_RUNNING_FILES; the tenants' settings carry their core system without its table.
func TestAdmissionEnvironment(t *testing.T) {
	coreApp(t)
	tables := func(t *testing.T, e map[string]any) map[string]string {
		t.Helper()
		m := map[string]string{}
		flattenJSON(t, e[pipeline.EnvCoreSystemTables], &m)
		return m
	}
	t.Run("silo", func(t *testing.T) {
		e := env(t, core.silo, "TenantacmeController")
		if got := tables(t, e); len(got) != 1 || !strings.HasPrefix(got["ledger"], importOf(t, "ledger", "Ref")) {
			t.Errorf("%s: got %v, want ledger's table only", pipeline.EnvCoreSystemTables, got)
		}
		var s pipeline.Tenant
		flattenJSON(t, e[pipeline.EnvTenant], &s)
		want := pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 20, MaxRecordsPerSecond: 500, Adaptive: true}
		if s.CoreSystem == nil || !reflect.DeepEqual(*s.CoreSystem, want) || s.Weight != 3 {
			t.Errorf("TENANT: got core system %+v, weight %d, want %+v (no table), weight 3", s.CoreSystem, s.Weight, want)
		}
		for _, name := range []string{pipeline.EnvPoolAdmissionTable, pipeline.EnvPoolMaxRunningFiles} {
			if v, ok := e[name]; ok {
				t.Errorf("%s: got %v, want unset in a silo controller", name, v)
			}
		}
		g := env(t, core.silo, "TenantglobexController")
		if v, ok := g[pipeline.EnvCoreSystemTables]; ok {
			t.Errorf("globex %s: got %v, want unset (no core system)", pipeline.EnvCoreSystemTables, v)
		}
		if strings.Contains(asJSON(g[pipeline.EnvTenant]), "coreSystem") {
			t.Errorf("globex TENANT: got %v, want no core system", g[pipeline.EnvTenant])
		}
	})
	t.Run("pool", func(t *testing.T) {
		e := env(t, core.pool, "PoolController")
		got := tables(t, e)
		if len(got) != 2 || !strings.HasPrefix(got["ledger"], importOf(t, "ledger", "Ref")) || !strings.HasPrefix(got["crm"], importOf(t, "crm", "Ref")) {
			t.Errorf("%s: got %v, want ledger's and crm's tables", pipeline.EnvCoreSystemTables, got)
		}
		if v := asJSON(e[pipeline.EnvPoolAdmissionTable]); !strings.HasPrefix(v, `{"Ref":"PoolAdmissionTable`) {
			t.Errorf("%s: got %s, want the pool's table", pipeline.EnvPoolAdmissionTable, v)
		}
		if v := e[pipeline.EnvPoolMaxRunningFiles]; v != "50" {
			t.Errorf("%s: got %v, want 50", pipeline.EnvPoolMaxRunningFiles, v)
		}
		if v := env(t, core.other, "PoolController")[pipeline.EnvPoolMaxRunningFiles]; v != "200" {
			t.Errorf("pool big %s: got %v, want the default 200", pipeline.EnvPoolMaxRunningFiles, v)
		}
		if v, ok := env(t, core.other, "PoolController")[pipeline.EnvCoreSystemTables]; ok {
			t.Errorf("pool big %s: got %v, want unset", pipeline.EnvCoreSystemTables, v)
		}
		for _, fn := range []string{"PoolRouter", "PoolRegister", "PoolSplit"} {
			for _, name := range []string{pipeline.EnvCoreSystemTables, pipeline.EnvPoolAdmissionTable, pipeline.EnvPoolMaxRunningFiles} {
				if fn == "PoolRouter" && name == pipeline.EnvPoolAdmissionTable {
					continue // the router's bounded backlog lives in the pool's table
				}
				if v, ok := env(t, core.pool, fn)[name]; ok {
					t.Errorf("%s %s: got %v, want unset", fn, name, v)
				}
			}
		}
		if v := asJSON(env(t, core.pool, "PoolRouter")[pipeline.EnvPoolAdmissionTable]); !strings.HasPrefix(v, `{"Ref":"PoolAdmissionTable`) {
			t.Errorf("PoolRouter %s: got %s, want the pool's table (the bounded backlog)", pipeline.EnvPoolAdmissionTable, v)
		}
		// pool-tenants.json rows: the core system without its table, the tenant's own rate.
		s, err := poolsettings.Parse(core.built.Pools["default"].SettingsFile)
		if err != nil {
			t.Fatalf("pool default's SettingsFile: %v", err)
		}
		hooli, _ := s.Tenant("hooli")
		umbrella, _ := s.Tenant("umbrella")
		want := pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 20, MaxRecordsPerSecond: 500, Adaptive: true}
		if c := hooli.Settings.CoreSystem; c == nil || !reflect.DeepEqual(*c, want) || hooli.Settings.MaxRecordsPerSecond != 20 {
			t.Errorf("hooli: got core system %+v, rate %v, want %+v, rate 20", c, hooli.Settings.MaxRecordsPerSecond, want)
		}
		// The tenants file's breaker travels with the core system's settings.
		if c := umbrella.Settings.CoreSystem; c == nil || !reflect.DeepEqual(*c, pipeline.CoreSystem{Name: "crm", MaxRunningFiles: 4, Breaker: &spec.Breaker{Disabled: true}}) {
			t.Errorf("umbrella: got core system %+v, want crm (4 running files, its breaker disabled)", c)
		}
	})
}

// With an existing bucket there is no ingest stack: the core systems get a stack of their own.
func TestCoreSystemsWithAnExistingBucket(t *testing.T) {
	_, built := synthApp(t, "coresystems.json", stacks.Options{BucketName: "existing-ingest-bucket"})
	if built.Ingest != nil || built.CoreSystemStack == nil || *built.CoreSystemStack.StackName() != "TenantPipeline-CoreSystems" {
		t.Fatalf("got ingest %v, core system stack %v, want no ingest stack and TenantPipeline-CoreSystems", built.Ingest, built.CoreSystemStack)
	}
	tpl := stackTemplate(t, built.CoreSystemStack)
	if got := len(byType(tpl, "AWS::DynamoDB::Table")); got != 2 || len(built.CoreSystems) != 2 {
		t.Errorf("got %d tables and %d core systems, want 2 and 2", got, len(built.CoreSystems))
	}
}

// wakeStatements are the statements of the policies whose logical id contains part that are
// conditioned on a queue tag.
func wakeStatements(t *testing.T, tpl map[string]any, part string) []map[string]any {
	t.Helper()
	return statementsWhere(t, tpl, part, func(st map[string]any) bool {
		return strings.Contains(asJSON(st["Condition"]), "aws:ResourceTag/")
	})
}

// checkWakeGrants: one statement per core system, Allow sqs:ChangeMessageVisibility alone on the
// account's queues that carry the core system's wake-up tag.
func checkWakeGrants(t *testing.T, stmts []map[string]any, names ...string) {
	t.Helper()
	if len(stmts) != len(names) {
		t.Fatalf("got %d tag-scoped statements, want %d: %s", len(stmts), len(names), asJSON(stmts))
	}
	for _, name := range names {
		found := false
		for _, s := range stmts {
			cond := asJSON(s["Condition"])
			if cond != `{"StringEquals":{"aws:ResourceTag/`+tenantpipeline.WakeTagKey(name)+`":"true"}}` {
				continue
			}
			found = true
			if got := actions(s); s["Effect"] != "Allow" || !slices.Equal(got, []string{"sqs:ChangeMessageVisibility"}) {
				t.Errorf("core system %s: got %s %v, want Allow [sqs:ChangeMessageVisibility]", name, s["Effect"], got)
			}
			if got := resources(t, s); len(got) != 1 || got[0] != "arn:<Ref:AWS::Partition>:sqs:<Ref:AWS::Region>:<Ref:AWS::AccountId>:*" {
				t.Errorf("core system %s: resources %v, want the account's queues", name, got)
			}
		}
		if !found {
			t.Errorf("core system %s: no statement conditioned on its wake-up tag: %s", name, asJSON(stmts))
		}
	}
}

// queueTags are the tag keys of the FIFO queues whose logical id contains part.
func queueTags(t *testing.T, tpl map[string]any, part string) []string {
	t.Helper()
	var keys []string
	for id, q := range byType(tpl, "AWS::SQS::Queue") {
		if !strings.Contains(id, part) {
			continue
		}
		tags, _ := props(q)["Tags"].([]any)
		for _, tag := range tags {
			if k := tag.(map[string]any)["Key"].(string); strings.HasPrefix(k, "tenantpipeline:wake:") {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// A release hands the freed slot to the core system's next waiter, in whichever tenant's queue it
// waits, and wakes its message: every controller that takes a core system's slots may change the
// visibility of the queues tagged for that core system, and of no other queue; each queue whose
// files take a core system's slots carries its tag. Both tiers.
func TestAdmissionWakeUpGrants(t *testing.T) {
	coreApp(t)
	checkWakeGrants(t, wakeStatements(t, core.silo, "TenantacmeController"), "ledger")
	checkWakeGrants(t, wakeStatements(t, core.silo, "Tenantglobex"))
	checkWakeGrants(t, wakeStatements(t, core.pool, "PoolController"), "ledger", "crm")
	checkWakeGrants(t, wakeStatements(t, core.other, "PoolController"))
	for _, part := range []string{"TenantacmeSplit", "TenantacmeRegister", "PoolSplit", "PoolRegister", "PoolRouter"} {
		for _, tpl := range []map[string]any{core.silo, core.pool} {
			if s := wakeStatements(t, tpl, part); len(s) != 0 {
				t.Errorf("%s: got tag-scoped statements %s, want none", part, asJSON(s))
			}
		}
	}
	if got := queueTags(t, core.silo, "TenantacmeQueue"); !slices.Equal(got, []string{tenantpipeline.WakeTagKey("ledger")}) {
		t.Errorf("acme's queue: got wake-up tags %v, want ledger's", got)
	}
	if got := queueTags(t, core.silo, "TenantglobexQueue"); len(got) != 0 {
		t.Errorf("globex's queue: got wake-up tags %v, want none", got)
	}
	if got := queueTags(t, core.pool, "PoolQueue"); !slices.Equal(got, []string{tenantpipeline.WakeTagKey("crm"), tenantpipeline.WakeTagKey("ledger")}) {
		t.Errorf("pool default's queue: got wake-up tags %v, want crm's and ledger's", got)
	}
}
