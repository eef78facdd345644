//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// Two tenants on one core system of one running file, in both tiers: pipectl status (the binary,
// through --serve's environment) reports the core system with its tenants and, once drained, no
// running file and nobody waiting; a file's admission wait in the report is part of its queued time.
// The cost meter sees admission's DynamoDB calls (reads and writes on the core system's table), the
// functions' log bytes, and, in the pool, the AssumeRole calls of the tenant's sessions.
func TestScenarioStatusCoreSystem(t *testing.T) {
	t.Parallel()
	const tenants = `{"coreSystems": {"ledger": {"maxRunningFiles": 1}}, "tenants": [
  {"id": "a", "coreSystem": "ledger", "registerUrl": "https://core.example.com/records"},
  {"id": "b", "coreSystem": "ledger", "registerUrl": "https://core.example.com/records"}
]}`
	forEachTier(t, tenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{{"a", "1.csv", csvOf(20)}, {"b", "1.csv", csvOf(20)}})
		rep := drain(t, ctx, r)
		wantStatuses(t, rep, "a", "SUCCEEDED")
		wantStatuses(t, rep, "b", "SUCCEEDED")
		for _, id := range []string{"a", "b"} {
			for _, f := range rep.Tenants[id].Files {
				if w := f.AdmissionWaitSeconds; w != nil && (f.StartedAt == nil || *w > f.StartedAt.Sub(f.UploadedAt).Seconds()+1) {
					t.Errorf("%s %s: got admission wait %v s, want it within the queued time", id, f.Key, *w)
				}
			}
		}
		u, err := r.Usage(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		pooled := r.Tenant("a").Tier == TierPool
		if u.DynamoDBReadUnits < 1 || u.DynamoDBWriteUnits < 1 || u.LogBytes <= 0 || pooled != (u.STSCalls > 0) {
			t.Errorf("usage of a: got %+v, want DynamoDB read and write units, log bytes, and AssumeRole calls only in the pool", u)
		}
		var st struct {
			CoreSystems []map[string]any `json:"coreSystems"`
		}
		out := pipectl(t, r, "status", "--json", "--stack-prefix", opsPrefix)
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		want := []map[string]any{{"name": "ledger", "maxRunningFiles": 1.0, "limit": 1.0, "adaptive": false, "runningFiles": 0.0,
			"running": []any{}, "waitingTenants": 0.0, "oldestAdmissionWaitSeconds": 0.0, "tenants": []any{"a", "b"},
			"breaker": "closed", "openedAt": nil, "reason": "", "breakerOpens": 0.0, "paused": false, "override": nil,
			"requestsInFlight": 0.0, "maxRequestsInFlight": 1.0}}
		if !reflect.DeepEqual(st.CoreSystems, want) {
			t.Errorf("coreSystems: got %v, want %v", st.CoreSystems, want)
		}
	})
}
