package test

import (
	"slices"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
)

// poolStatements are the statements of the policies of the pool function whose logical id starts
// with prefix (PoolRouter, PoolController).
func poolStatements(t *testing.T, tpl map[string]any, prefix string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for id, pol := range byType(tpl, "AWS::IAM::Policy") {
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		for _, s := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
			out = append(out, s.(map[string]any))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no policy of %s*", prefix)
	}
	return out
}

// statementWith is the one statement whose resource mentions resource and that allows every
// action, or nil.
func statementWith(stmts []map[string]any, resource string, actions ...string) map[string]any {
	for _, s := range stmts {
		if s["Effect"] != "Allow" || !strings.Contains(asJSON(s["Resource"]), resource) {
			continue
		}
		got := actionsOf([]map[string]any{s})
		if !slices.ContainsFunc(actions, func(a string) bool { return !slices.Contains(got, a) }) {
			return s
		}
	}
	return nil
}

// The pool's router and controller keep each tenant's bounded backlog: parked files under
// control/<tenant>/parked/ and the backlog's items in the admission table, with exactly the
// actions they call.
func TestPoolBacklogGrants(t *testing.T) {
	_, tpl := poolTemplate(t)
	var table string
	for id := range byType(tpl, "AWS::DynamoDB::Table") {
		table = id
	}
	var queue string
	for id := range byType(tpl, "AWS::SQS::Queue") {
		if strings.HasPrefix(id, "PoolQueue") {
			queue = id
		}
	}
	router, controller := poolStatements(t, tpl, "PoolRouter"), poolStatements(t, tpl, "PoolController")
	// The pool's keys carry its name: its functions park only its own tenants' files.
	parked := pipeline.ControlPrefix + pipeline.PoolRootPrefix + "default/*/parked/*"

	for _, tc := range []struct {
		name     string
		stmts    []map[string]any
		resource string
		actions  []string
		exact    bool
	}{
		{"router parks and unparks files", router, parked, []string{"s3:DeleteObject", "s3:GetObject", "s3:PutObject"}, true},
		{"router keeps the backlog items", router, table, []string{"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"}, true},
		// It parks a sequenced tenant's held file it sends back to a full backlog, as the router does.
		{"controller parks and unparks files", controller, parked, []string{"s3:DeleteObject", "s3:GetObject", "s3:PutObject"}, true},
		{"controller sends unparked files to the pool queue", controller, queue, []string{"sqs:SendMessage"}, false},
		{"controller keeps the backlog items", controller, table, []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := statementWith(tc.stmts, tc.resource, tc.actions...)
			if s == nil {
				t.Fatalf("got no statement allowing %v on %s, want one", tc.actions, tc.resource)
			}
			if got := actionsOf([]map[string]any{s}); tc.exact && !slices.Equal(got, tc.actions) {
				t.Errorf("got actions %v, want exactly %v", got, tc.actions)
			}
		})
	}

	// The router's table grant is limited to the backlog's items: never a lease or a gate.
	s := statementWith(router, table, "dynamodb:UpdateItem")
	want := asJSON(map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{schema.BacklogKey("*"), schema.IndexKeyPattern, schema.LegacyIndexKey}}})
	if got := asJSON(s["Condition"]); got != want {
		t.Errorf("router's table grant: got condition %s, want %s", got, want)
	}
	// Parked files are written and read under the parked prefix alone.
	for who, stmts := range map[string][]map[string]any{"router": router, "controller": controller} {
		for _, s := range stmts {
			if acts := actionsOf([]map[string]any{s}); slices.Contains(acts, "s3:PutObject") && strings.Contains(asJSON(s["Resource"]), "/control/") &&
				!strings.HasSuffix(asJSON(s["Resource"]), `/`+parked+`"]]}`) {
				t.Errorf("%s: got s3:PutObject on %s, want control/ writes under %s only", who, asJSON(s["Resource"]), parked)
			}
		}
	}
}

// The router and the controller get the pool's bound and its admission table; a silo tenant,
// whose queue is its own, has neither bound nor parked files.
func TestBacklogEnvironment(t *testing.T) {
	_, tpl := poolTemplate(t)
	for id, f := range byType(tpl, "AWS::Lambda::Function") {
		if !strings.HasPrefix(id, "PoolRouter") && !strings.HasPrefix(id, "PoolController") {
			continue
		}
		env := get(t, props(f), "Environment", "Variables").(map[string]any)
		if got := env[pipeline.EnvMaxQueuedFilesPerTenant]; got != "10" {
			t.Errorf("%s: got %s %v, want 10 (the default)", id, pipeline.EnvMaxQueuedFilesPerTenant, got)
		}
		if _, ok := env[pipeline.EnvPoolAdmissionTable]; !ok {
			t.Errorf("%s: got no %s, want the pool's admission table", id, pipeline.EnvPoolAdmissionTable)
		}
	}
	sharedApp(t)
	if got := asJSON(policyStatements(t, "acme", "Controller")); strings.Contains(got, "parked") {
		t.Errorf("silo controller: got a grant on parked files, want none: %s", got)
	}
	for id, f := range tenantResources(t, shared.template, "AWS::Lambda::Function", "acme") {
		if strings.Contains(asJSON(props(f)), pipeline.EnvMaxQueuedFilesPerTenant) {
			t.Errorf("silo function %s: got %s, want none", id, pipeline.EnvMaxQueuedFilesPerTenant)
		}
	}
}
