//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/spec"
)

// Steering a core system at run time, driven by the pipectl binary, in both tiers: pipectl core
// pause holds admission (no request reaches the embedded sink, counted from the sink's own log,
// while the file waits for admission), an override set meanwhile shows in core status and status,
// resume lets the files run in order and exactly once, and every action is audited in the core
// system's admission table. A maintenance window open now admits nothing either.

const steerTenants = `{"coreSystems": {"ledger": {"maxRunningFiles": 1, "maxRequestsInFlight": 4}}, "tenants": [
  {"id": "a", "coreSystem": "ledger", "registerUrl": "https://core.example.com/records"}
]}`

func TestScenarioSteerPauseResume(t *testing.T) {
	t.Parallel()
	forEachTier(t, steerTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		in := r.Tenant("a").Prefix
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if out := pipectl(t, r, "core", "pause", "ledger", "--reason", "ERP deploy", "--stack-prefix", opsPrefix); !strings.HasPrefix(out, "paused core system ledger") {
			t.Errorf("core pause: got %q, want one line saying it paused ledger", out)
		}
		uploadAll(t, ctx, r, []upload{{"a", "1.csv", csvOf(20)}, {"a", "2.csv", csvOf(10)}})
		// The controller has seen the file and holds it: it waits for admission.
		c := waitForCore(t, ctx, r, "a file waits for ledger", func(c ops.CoreStatus) bool { return c.WaitingTenants == 1 })
		if !c.Paused || c.Limit != 0 || c.LimitReason != "paused" || c.Pause == nil || c.Pause.Reason != "ERP deploy" {
			t.Errorf("core status while paused: got %+v, want paused for ERP deploy, limit 0", c)
		}
		if n := len(r.Sink.Requests("a")); n != 0 {
			t.Fatalf("paused: got %d requests at the sink, want none", n)
		}
		pipectl(t, r, "core", "limit", "ledger", "2", "--until", "1h", "--reason", "catch up", "--stack-prefix", opsPrefix)
		c = coreStatus(t, r)[0]
		if c.Override == nil || c.Override.Limit != 2 || c.Limit != 0 {
			t.Errorf("core status with an override while paused: got override %+v, limit %d; want 2, and 0 while paused", c.Override, c.Limit)
		}
		var st struct {
			CoreSystems []ops.CoreSystemStatus `json:"coreSystems"`
		}
		if err := json.Unmarshal([]byte(pipectl(t, r, "status", "--json", "--stack-prefix", opsPrefix)), &st); err != nil || len(st.CoreSystems) != 1 {
			t.Fatalf("status --json: %v, %+v", err, st)
		}
		if s := st.CoreSystems[0]; !s.Paused || s.Override == nil || s.Override.Limit != 2 {
			t.Errorf("status: got paused %v, override %+v; want paused with the override of 2", s.Paused, s.Override)
		}
		if n := len(r.Sink.Requests("a")); n != 0 {
			t.Fatalf("still paused: got %d requests at the sink, want none", n)
		}
		if out := pipectl(t, r, "core", "resume", "ledger", "--reason", "ERP back", "--stack-prefix", opsPrefix); !strings.HasPrefix(out, "resumed core system ledger") {
			t.Errorf("core resume: got %q", out)
		}
		rep := drain(t, ctx, r)
		wantStatuses(t, rep, "a", "SUCCEEDED", "SUCCEEDED")
		noViolations(t, rep)
		assertOrderedOnce(t, r, "a", []string{in + "1.csv", in + "2.csv"}, map[string]int64{in + "1.csv": 20, in + "2.csv": 10})

		got := map[string]string{}
		for _, it := range auditItems(t, ctx, r, c.Table) {
			got[sAttrOf(it, "action")] = sAttrOf(it, "by")
		}
		for _, action := range []string{"pause", "limit", "resume"} {
			if by := got[action]; !strings.Contains(by, "arn:aws:iam::"+emulate.Account+":user/tester") {
				t.Errorf("audit of %s: got by %q, want the operator (audit items %v)", action, by, got)
			}
		}
	})
}

func TestScenarioSteerMaintenanceWindow(t *testing.T) {
	t.Parallel()
	// A window that starts every minute and lasts two: open whenever the test runs.
	tenants := strings.Replace(steerTenants, `"maxRequestsInFlight": 4`, `"maxRequestsInFlight": 4, "maintenance": [{"cron": "* * * * *", "duration": "2m"}]`, 1)
	forEachTier(t, tenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{{"a", "1.csv", csvOf(20)}})
		c := waitForCore(t, ctx, r, "a file waits for ledger", func(c ops.CoreStatus) bool { return c.WaitingTenants == 1 })
		if !c.Maintenance.Open || c.Maintenance.End == nil || c.Limit != 0 || c.LimitReason != "maintenance" {
			t.Errorf("core status in a window: got %+v, want a window open, limit 0 (maintenance)", c)
		}
		if n := len(r.Sink.Requests("a")); n != 0 {
			t.Fatalf("in a maintenance window: got %d requests at the sink, want none", n)
		}
	})
}

// A file that runs into a maintenance window holds at its cursor: windows open every even minute
// for a minute, and a slow file needs more than a closed minute to send. No request reaches the
// sink inside a window (the sink's own arrival times), and the file finishes in order and exactly
// once after it.
func TestScenarioSteerMaintenanceHoldsRunningFiles(t *testing.T) {
	t.Parallel()
	windows := []spec.MaintenanceWindow{{Cron: "*/2 * * * *", Duration: "1m"}}
	tenants := strings.Replace(steerTenants, `"maxRequestsInFlight": 4`, `"maxRequestsInFlight": 4, "maintenance": [{"cron": "*/2 * * * *", "duration": "1m"}]`, 1)
	forEachTier(t, tenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		in := r.Tenant("a").Prefix
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		r.Sink.SetDelay(func(string, string, int64) time.Duration { return 400 * time.Millisecond })
		uploadAll(t, ctx, r, []upload{{"a", "1.csv", csvOf(200)}}) // 80 s of sending: more than a closed minute
		rep := drain(t, ctx, r)
		wantStatuses(t, rep, "a", "SUCCEEDED")
		assertOrderedOnce(t, r, "a", []string{in + "1.csv"}, map[string]int64{in + "1.csv": 200})
		reqs := r.Sink.Requests("a")
		var windowsCrossed int
		for i, q := range reqs {
			if open, _, _ := spec.Maintenance(windows, q.Start); open {
				t.Errorf("request of record %d arrived at %s, inside a maintenance window", q.RecordNumber, q.Start.Format(time.RFC3339Nano))
			}
			if i > 0 && q.Start.Truncate(2*time.Minute) != reqs[i-1].Start.Truncate(2*time.Minute) {
				windowsCrossed++
			}
		}
		if windowsCrossed == 0 {
			t.Errorf("got the file's %d requests within one closed minute, want it to have run into a window (the scenario tests nothing)", len(reqs))
		}
	})
}

func coreStatus(t *testing.T, r *Run) []ops.CoreStatus {
	t.Helper()
	var cs []ops.CoreStatus
	out := pipectl(t, r, "core", "status", "--json", "--stack-prefix", opsPrefix)
	if err := json.Unmarshal([]byte(out), &cs); err != nil || len(cs) != 1 {
		t.Fatalf("core status --json: %v\n%s", err, out)
	}
	return cs
}

// waitForCore polls pipectl core status until cond holds for the one core system.
func waitForCore(t *testing.T, ctx context.Context, r *Run, what string, cond func(ops.CoreStatus) bool) ops.CoreStatus {
	t.Helper()
	for {
		c := coreStatus(t, r)[0]
		if cond(c) {
			return c
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting until %s: %v; last core status %+v", what, ctx.Err(), c)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// auditItems reads the core system's audit items from its admission table.
func auditItems(t *testing.T, ctx context.Context, r *Run, table string) []map[string]types.AttributeValue {
	t.Helper()
	out, err := r.DynamoDB().Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :a)"),
		ExpressionAttributeNames:  map[string]string{"#pk": schema.AttrPK, "#sk": schema.AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: schema.CoreGate("ledger")}, ":a": &types.AttributeValueMemberS{Value: schema.AuditPrefix}}})
	if err != nil {
		t.Fatalf("read the audit items: %v", err)
	}
	return out.Items
}

func sAttrOf(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
