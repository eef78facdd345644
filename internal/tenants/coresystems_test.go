package tenants

import (
	"reflect"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

func TestCoreSystemSettings(t *testing.T) {
	f, err := Parse([]byte(`{
		"coreSystems": {"ledger": {"maxRunningFiles": 20, "maxRecordsPerSecond": 500, "adaptive": true}, "crm": {"maxRunningFiles": 3, "breaker": {"consecutiveFailures": 3},
			"maintenance": [{"cron": "0 2 * * SUN", "duration": "1h"}], "idempotencyRetention": "24h",
			"lookupUrl": "https://crm.example/r/{key}", "completeUrl": "https://crm.example/done"}},
		"pools": {"big": {"maxRunningFiles": 50}},
		"tenants": [
			{"id": "a", "coreSystem": "ledger", "weight": 3, "maxRecordsPerSecond": 12.5},
			{"id": "b", "tier": "pool", "coreSystem": "ledger"},
			{"id": "c", "tier": "pool", "pool": "big", "coreSystem": "crm", "maxRecordsPerSecond": 9000},
			{"id": "d"}
		]}`), Options{RegisterURL: "https://core.example.com/records"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"core system names", strings.Join(f.CoreSystemNames(), ","), "crm,ledger"},
		{"ledger", *f.CoreSystemSettings("ledger"), pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 20, MaxRecordsPerSecond: 500, Adaptive: true}},
		{"crm", *f.CoreSystemSettings("crm"), pipeline.CoreSystem{Name: "crm", MaxRunningFiles: 3, Breaker: &spec.Breaker{ConsecutiveFailures: 3},
			Maintenance: []spec.MaintenanceWindow{{Cron: "0 2 * * SUN", Duration: "1h"}}, IdempotencyRetention: "24h",
			LookupURL: "https://crm.example/r/{key}", CompleteURL: "https://crm.example/done"}},
		{"unknown core system", f.CoreSystemSettings("nosuch") == nil, true},
		{"a core system", f.Tenants[0].CoreSystem, "ledger"},
		{"a settings weight", pipeline.SettingsOf(f.Tenants[0]).Weight, 3},
		{"a settings rate", pipeline.SettingsOf(f.Tenants[0]).MaxRecordsPerSecond, 12.5},
		// Weight stays zero (pipeline.DefaultWeight), so a tenant without one keeps its settings.
		{"b weight", f.Tenants[1].Weight, 0},
		{"b admission weight", pipeline.SettingsOf(f.Tenants[1]).AdmissionWeight(), pipeline.DefaultWeight},
		// Above its core system's rate: accepted, bounded by the core system's.
		{"c rate", f.Tenants[2].MaxRecordsPerSecond, 9000.0},
		{"d core system", f.Tenants[3].CoreSystem, ""},
		{"settings carry no core system", pipeline.SettingsOf(f.Tenants[0]).CoreSystem == nil, true},
		{"pool big max running files", f.Pool("big").MaxRunningFiles, 50},
		{"pool default max running files", f.Pool("default").MaxRunningFiles, DefaultPoolMaxRunningFiles},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
}

// The default keeps a default pool inside a default account's 1,000 concurrent executions, with
// room for three more default pools and for silo tenants: running files + the controller mapping's
// maximumConcurrency + the router.
func TestDefaultPoolMaxRunningFilesFitsTheAccount(t *testing.T) {
	const accountConcurrency = 1000
	perPool := DefaultPoolMaxRunningFiles + DefaultPoolMaximumConcurrency + 1
	if got := 4 * perPool; got >= accountConcurrency-100 {
		t.Errorf("four default pools: got %d concurrent executions, want below %d (room for silo tenants and other functions)", got, accountConcurrency-100)
	}
}

func TestCoreSystemValidation(t *testing.T) {
	const ok = `{"id": "a", "coreSystem": "ledger"}`
	ledger := `"ledger": {"maxRunningFiles": 5}`
	cases := []struct {
		name, json string
		want       []string
		notWant    []string
	}{
		{"running files zero", `{"coreSystems": {"ledger": {"maxRunningFiles": 0}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger.maxRunningFiles 0 must be 1 to 1000`}, nil},
		{"running files missing", `{"coreSystems": {"ledger": {"adaptive": true}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger.maxRunningFiles 0 must be 1 to 1000 (it is required)`}, nil},
		{"running files too many", `{"coreSystems": {"ledger": {"maxRunningFiles": 1001}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger.maxRunningFiles 1001 must be 1 to 1000`}, nil},
		{"running files not a number", `{"coreSystems": {"ledger": {"maxRunningFiles": "5"}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger: maxRunningFiles: got JSON string, want a whole number`}, []string{"must be 1 to 1000"}},
		{"negative rate", `{"coreSystems": {"ledger": {"maxRunningFiles": 5, "maxRecordsPerSecond": -1}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger.maxRecordsPerSecond -1 must be above 0`}, nil},
		{"zero rate", `{"coreSystems": {"ledger": {"maxRunningFiles": 5, "maxRecordsPerSecond": 0}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger.maxRecordsPerSecond 0 must be above 0`}, nil},
		{"adaptive not a boolean", `{"coreSystems": {"ledger": {"maxRunningFiles": 5, "adaptive": "yes"}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger: adaptive: got JSON string, want true or false`}, nil},
		{"unknown field", `{"coreSystems": {"ledger": {"maxRunningFile": 5}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger: unknown field "maxRunningFile" (did you mean "maxRunningFiles"?)`}, []string{"must be 1 to 1000"}},
		{"bad name", `{"coreSystems": {"Ledger": {"maxRunningFiles": 5}}, "tenants": [{"id": "a", "coreSystem": "Ledger"}]}`,
			[]string{`coreSystems.Ledger: core system name "Ledger" is invalid`}, []string{`tenant "a"`}},
		{"null", `{"coreSystems": {"ledger": null}, "tenants": [` + ok + `]}`, []string{`coreSystems.ledger: is null`}, []string{"is not in coreSystems"}},
		{"not an object", `{"coreSystems": [], "tenants": [` + ok + `]}`, []string{`"coreSystems": got JSON array, want an object`}, nil},
		{"unknown core system", `{"coreSystems": {` + ledger + `}, "tenants": [{"id": "acme", "coreSystem": "ledgr"}, {"id": "b", "coreSystem": "ledger"}]}`,
			[]string{`coreSystem (tenant "acme"): "ledgr" is not in coreSystems (did you mean "ledger"?)`}, nil},
		{"no coreSystems at all", `{"tenants": [{"id": "acme", "tier": "pool", "coreSystem": "ledger"}]}`,
			[]string{`coreSystem (tenant "acme"): "ledger" is not in coreSystems`}, nil},
		{"unused core system", `{"coreSystems": {` + ledger + `, "spare": {"maxRunningFiles": 1}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.spare: no tenant names this core system`}, []string{"coreSystems.ledger"}},
		{"weight too big", `{"coreSystems": {` + ledger + `}, "tenants": [{"id": "a", "coreSystem": "ledger", "weight": 11}]}`,
			[]string{`weight (tenant "a"): 11 is out of range: use 1 to 10`}, nil},
		{"weight negative", `{"tenants": [{"id": "a", "weight": -1}]}`, []string{`weight (tenant "a"): -1 is out of range`}, nil},
		{"weight zero", `{"tenants": [{"id": "a", "weight": 0}]}`, []string{`weight (tenant "a"): 0 is out of range: use 1 to 10, or leave it out for 1`}, nil},
		{"weight not whole", `{"tenants": [{"id": "a", "weight": 1.5}]}`, []string{`tenants[0] ("a"): weight: got JSON number 1.5, want a whole number`}, []string{"out of range"}},
		{"tenant rate negative", `{"tenants": [{"id": "a", "tier": "pool", "maxRecordsPerSecond": -2}]}`,
			[]string{`maxRecordsPerSecond (tenant "a"): -2 must be above 0`}, nil},
		{"tenant rate zero", `{"tenants": [{"id": "a", "maxRecordsPerSecond": 0}]}`, []string{`maxRecordsPerSecond (tenant "a"): 0 is out of range`}, nil},
		{"tenant misspells coreSystem", `{"coreSystems": {` + ledger + `}, "tenants": [{"id": "a", "coreSistem": "ledger"}]}`,
			[]string{`unknown field "coreSistem" (did you mean "coreSystem"?)`}, nil},
		{"pool running files", `{"pools": {"default": {"maxRunningFiles": 1001}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: maxRunningFiles 1001 is out of range: use 1 to 1000 (default 200)`}, nil},
		{"breaker window", `{"coreSystems": {"ledger": {"maxRunningFiles": 5, "breaker": {"window": "2h", "consecutiveFailures": "5"}}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger.breaker.window "2h" must be a Go duration from 1s to 1h0m0s`, `coreSystems.ledger: breaker.consecutiveFailures: got JSON string`}, nil},
		{"maintenance cron", `{"coreSystems": {"ledger": {"maxRunningFiles": 5, "maintenance": [{"cron": "0 2 * *", "duration": "1h"}]}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger.maintenance[0].cron "0 2 * *" must have five fields`}, nil},
		{"maintenance unknown field", `{"coreSystems": {"ledger": {"maxRunningFiles": 5, "maintenance": [{"cron": "0 2 * * SUN", "duration": "1h", "zone": "UTC"}]}}, "tenants": [` + ok + `]}`,
			[]string{`unknown field "zone"`}, nil},
		{"lookup without key", `{"coreSystems": {"ledger": {"maxRunningFiles": 5, "lookupUrl": "https://erp.example/r"}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger.lookupUrl "https://erp.example/r" must contain {key}`}, nil},
		{"retention", `{"coreSystems": {"ledger": {"maxRunningFiles": 5, "idempotencyRetention": "1d"}}, "tenants": [` + ok + `]}`,
			[]string{`coreSystems.ledger.idempotencyRetention "1d" must be a Go duration`}, nil},
		{"pool running files negative", `{"pools": {"default": {"maxRunningFiles": -1}}, "tenants": [{"id": "a", "tier": "pool"}]}`,
			[]string{`pools.default: maxRunningFiles -1 is out of range`}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json), Options{RegisterURL: "https://core.example.com/records"})
			if err == nil {
				t.Fatalf("got no error, want one containing %q", tc.want)
			}
			for _, w := range tc.want {
				if n := strings.Count(err.Error(), w); n != 1 {
					t.Errorf("got error\n%v\nwith %d of %q, want 1", err, n, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("got error\n%v\nwant none about %q", err, w)
				}
			}
		})
	}
}
