//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// With the app's customer-managed key, EventBridge's delivery of a tenant's files to its queue is
// judged by the queue's policy and by the key's policy, as AWS judges it: the key policy names the
// rules by their stack's name (rule/<stack prefix>-*), so a rule must keep that name. A tenant with
// the longest id (32 characters) still gets its files, in both tiers; without the key policy's
// EventBridge statement (a pool: without its intake API role's key grant, which sends in its own
// name), the same upload is never delivered. CloudWatch Logs' use of the key is
// judged likewise when a log group is created.
func TestScenarioKeyedRulesDeliverEveryTenantsFiles(t *testing.T) {
	t.Parallel()
	const id = "tenant-with-a-long-id-0123456789"
	tenants := withTopLevelJSON(t, `{"tenants": [{"id": "`+id+`", "registerUrl": "https://core.example.com/records"}]}`,
		"encryption", map[string]any{"key": "create"})
	forEachTier(t, tenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		refused := r.auth.Refused()
		uploadAll(t, ctx, r, []upload{{id, "a.csv", csvOf(3)}})
		rep := drain(t, ctx, r)
		if got := len(r.Sink.Registered(id)); got != 3 {
			t.Fatalf("got %d records registered, want 3", got)
		}
		noViolations(t, rep)
		if n := r.auth.Refused() - refused; n != 0 {
			t.Errorf("got %d requests refused, want none", n)
		}

		// Without the statement that lets EventBridge use the key, the next upload's event is refused.
		key := ""
		for _, q := range r.queues {
			if k := r.auth.queueKMS(q.Name); k != "" {
				key = k
			}
		}
		if key == "" {
			t.Fatal("no queue under the app's key")
		}
		policy, err := r.auth.resourceStatements(key)
		if err != nil {
			t.Fatal(err)
		}
		var without []statement
		for _, st := range policy {
			if b, _ := json.Marshal(st.Principal); string(b) != `{"Service":["events.amazonaws.com"]}` && string(b) != `{"Service":"events.amazonaws.com"}` {
				without = append(without, st)
			}
		}
		if len(without) != len(policy)-1 {
			t.Fatalf("got %d statements for EventBridge in the key policy, want 1", len(policy)-len(without))
		}
		r.auth.mu.Lock()
		r.auth.resourcePolicies[key] = without
		r.auth.mu.Unlock()
		// A pool's rule posts to its intake API, whose role sends to the intake under the key in
		// its own name: its grant is what a pool's delivery needs.
		what := "the key policy's EventBridge statement"
		if r.Tenant(id).Pooled() {
			r.auth.mu.Lock()
			r.auth.resourcePolicies[key] = policy
			r.auth.mu.Unlock()
			what = withoutIntakeAPIKeyGrant(t, r)
		}
		refused = r.auth.Refused()
		if _, err := r.Upload(ctx, id, "b.csv", csvOf(2)); err != nil {
			t.Fatal(err)
		}
		if n := r.auth.Refused() - refused; n == 0 {
			t.Errorf("the upload's event was delivered without %s, want it refused", what)
		}
		r.auth.mu.Lock()
		r.auth.resourcePolicies[key] = policy
		r.auth.mu.Unlock()

		// The log groups under the key were created at the start, each judged as CloudWatch Logs
		// judges a log group created with a key; without the key policy's statement for the
		// service, creating one fails as CloudWatch Logs refuses it.
		var groups []deploy.LogGroup
		for _, lr := range r.asm.OfType("AWS::Logs::LogGroup") {
			if g, err := r.asm.ReadLogGroup(r.res, lr); err == nil && g.KmsKeyId == key {
				groups = append(groups, g)
			}
		}
		if len(groups) == 0 {
			t.Fatal("no log group under the app's key")
		}
		var noLogs []statement
		for _, st := range policy {
			if b, _ := json.Marshal(st.Principal); !strings.Contains(string(b), `"logs.`+emulate.Region+`.amazonaws.com"`) {
				noLogs = append(noLogs, st)
			}
		}
		if len(noLogs) != len(policy)-1 {
			t.Fatalf("got %d statements for CloudWatch Logs in the key policy, want 1", len(policy)-len(noLogs))
		}
		for _, tc := range []struct {
			name    string
			policy  []statement
			wantErr string
		}{{"with the key policy", policy, ""}, {"without its CloudWatch Logs statement", noLogs, "InvalidParameterException: The specified KMS key does not exist or is not allowed to be used with Arn"}} {
			r.auth.mu.Lock()
			r.auth.resourcePolicies[key] = tc.policy
			r.auth.mu.Unlock()
			err := r.CreateLogGroup(ctx, nil, groups[0])
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("CreateLogGroup %s %s: got %v, want %q", groups[0].Name, tc.name, err, tc.wantErr)
			}
		}
	})
}

// An imported key (the tenants file's keyArn) has its owner's policy, which the local run cannot
// read: it judges the key's uses by the policy synth asks the owner to write (the account's
// statement and the pipeline's service statements), so a tenant's files run under it, in both
// tiers, its log groups are created, and taking the EventBridge statement away refuses the
// delivery as before.
func TestScenarioImportedKeyJudgedAsSynthAsks(t *testing.T) {
	t.Parallel()
	const key = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	tenants := withTopLevelJSON(t, `{"tenants": [{"id": "acme", "registerUrl": "https://core.example.com/records"}]}`,
		"encryption", map[string]any{"keyArn": key})
	forEachTier(t, tenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		refused := r.auth.Refused()
		uploadAll(t, ctx, r, []upload{{"acme", "a.csv", csvOf(3)}})
		drain(t, ctx, r)
		if got := len(r.Sink.Registered("acme")); got != 3 || r.auth.Refused() != refused {
			t.Fatalf("got %d records registered, %d requests refused; want 3 and none", got, r.auth.Refused()-refused)
		}
		policy, err := r.auth.resourceStatements(key)
		if err != nil || len(policy) < 3 {
			t.Fatalf("the imported key's policy: %v, %d statements; want the account's and the services'", err, len(policy))
		}
		var without []statement
		for _, st := range policy {
			if b, _ := json.Marshal(st.Principal); !strings.Contains(string(b), `"events.amazonaws.com"`) {
				without = append(without, st)
			}
		}
		what := "the EventBridge statement"
		if r.Tenant("acme").Pooled() {
			what = withoutIntakeAPIKeyGrant(t, r)
		} else {
			r.auth.mu.Lock()
			r.auth.resourcePolicies[key] = without
			r.auth.mu.Unlock()
		}
		if _, err := r.Upload(ctx, "acme", "b.csv", csvOf(2)); err != nil {
			t.Fatal(err)
		}
		if r.auth.Refused() == refused {
			t.Errorf("the upload's event was delivered without %s, want it refused", what)
		}
	})
}

// withoutIntakeAPIKeyGrant takes the KMS statements from the identity policy of the pool's intake
// API role, as the run judges it from now on, and says what it took.
func withoutIntakeAPIKeyGrant(t *testing.T, r *Run) string {
	t.Helper()
	role := ""
	for _, rl := range r.rules {
		if rl.api != nil {
			role = rl.api.method.Credentials
		}
	}
	if role == "" {
		t.Fatal("no rule posts to an intake API")
	}
	policy, err := r.auth.roleStatements(role)
	if err != nil {
		t.Fatal(err)
	}
	var without []statement
	for _, st := range policy {
		if !strings.HasPrefix(strings.Join(st.Action, " "), "kms:") {
			without = append(without, st)
		}
	}
	if len(without) == len(policy) {
		t.Fatalf("the intake API role %s holds no KMS statement", role)
	}
	r.auth.mu.Lock()
	r.auth.policies[role] = without
	r.auth.mu.Unlock()
	return "the intake API role's key grant"
}
