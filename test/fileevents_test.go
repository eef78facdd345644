package test

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// TestFileEventGrants: in both tiers the controller may put events on the File Processed bus
// (the default bus, or Props.EventBus) only with the source tenantpipeline, in exactly one
// statement, and is told the bus (EVENT_BUS_NAME); it reads summary.json and reads and writes the
// event markers of its tenant's results, the pool's through the tenant role.
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html
func TestFileEventGrants(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ownBus   bool
		wantBus  func(tpl map[string]any) string // the bus ARN as template JSON
		wantName string
	}{
		{name: "default bus", wantBus: func(map[string]any) string { return "event-bus/default" }},
		{name: "the app's bus", ownBus: true, wantBus: func(tpl map[string]any) string {
			for id := range byType(tpl, "AWS::Events::EventBus") {
				return `{"Fn::GetAtt":["` + id + `","Arn"]}`
			}
			return "no bus"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("Events"), nil)
			bucket := stacks.NewIngestBucket(stack, "Bucket")
			var bus awsevents.IEventBus
			if tc.ownBus {
				bus = awsevents.NewEventBus(stack, jsii.String("Files"), nil)
			}
			tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/r"}, Bucket: bucket, SharedProps: tenantpipeline.SharedProps{EventBus: bus}})
			tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{Name: "default", Bucket: bucket, Shared: tenantpipeline.SharedProps{EventBus: bus},
				Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/h"}}})
			tpl := templateJSON(assertions.Template_FromStack(stack, nil))
			wantBus := tc.wantBus(tpl)

			checkPut := func(t *testing.T, stmts []map[string]any, env map[string]any) {
				t.Helper()
				var puts []map[string]any
				for _, s := range stmts {
					if strings.Contains(asJSON(s["Action"]), "events:") {
						puts = append(puts, s)
					}
				}
				if len(puts) != 1 {
					t.Fatalf("got %d statements with events: actions, want 1: %s", len(puts), asJSON(puts))
				}
				s := puts[0]
				if got := asJSON(s["Action"]); got != `"events:PutEvents"` {
					t.Errorf("action: got %s, want events:PutEvents", got)
				}
				if got := asJSON(s["Resource"]); !strings.Contains(got, wantBus) {
					t.Errorf("resource: got %s, want the bus %s", got, wantBus)
				}
				if got, want := asJSON(s["Condition"]), `{"StringEquals":{"events:source":"tenantpipeline"}}`; got != want {
					t.Errorf("condition: got %s, want %s", got, want)
				}
				if got := asJSON(env[pipeline.EnvEventBusName]); !strings.Contains(got, wantBus) {
					t.Errorf("%s: got %s, want the bus %s", pipeline.EnvEventBusName, got, wantBus)
				}
			}
			objectGrants := func(stmts []map[string]any) map[string]string {
				out := map[string]string{} // resource fragment → actions
				for _, s := range stmts {
					res := asJSON(s["Resource"])
					if strings.Contains(res, "results/") {
						out[res] = asJSON(s["Action"])
					}
				}
				return out
			}

			t.Run("silo", func(t *testing.T) {
				env := get(t, props(tenantResources(t, tpl, "AWS::Lambda::Function", "acme")[controllerID(t, tpl, "acme")]), "Environment", "Variables").(map[string]any)
				stmts := statementsOf(t, tpl, "acme", "Controller")
				checkPut(t, stmts, env)
				grants := objectGrants(stmts)
				want := map[string]string{`/results/acme/*/summary.json`: `"s3:GetObject"`, `/results/acme/*/event-*.json`: `["s3:GetObject","s3:PutObject"]`}
				checkGrants(t, grants, want)
			})
			t.Run("pool", func(t *testing.T) {
				checkPut(t, poolPolicyStatements(t, tpl, "PoolController"), poolControllerEnv(t, stack))
				if g := objectGrants(poolPolicyStatements(t, tpl, "PoolController")); len(g) != 0 {
					t.Errorf("pool controller's own role: got grants on results %v, want none (the tenant role holds them)", g)
				}
				// The controller's tenant role: the summaries (read, and written for a file a
				// sequenced tenant refuses) and the event markers, nothing else under results/.
				want := map[string]string{`/results/${aws:PrincipalTag/tenant}/*/summary.json`: `["s3:GetObject","s3:PutObject"]`,
					`/results/${aws:PrincipalTag/tenant}/*/event-*.json`: `["s3:GetObject","s3:PutObject"]`}
				checkGrants(t, objectGrants(poolPolicyStatements(t, tpl, "PoolTenantRole")), want)
			})
		})
	}
}

// checkGrants checks that each wanted key fragment is granted exactly the actions, and that
// nothing else under results/ is.
func checkGrants(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d statements on results/, want %d: %v", len(got), len(want), got)
	}
	for frag, actions := range want {
		found := false
		for res, a := range got {
			// The fragment ends the resource's last string ("…/*" would match every key under it).
			if strings.HasSuffix(res, frag+`"]]}`) || strings.HasSuffix(res, frag) {
				found = true
				if a != actions {
					t.Errorf("%s: got actions %s, want %s", frag, a, actions)
				}
			}
		}
		if !found {
			t.Errorf("got no statement on %s, want %s: %v", frag, actions, got)
		}
	}
}

// TestFailedResultsGrant: in both tiers the controller may invoke exactly its Split function (whose
// results task writes a failed file's results), by its unqualified ARN, and no other function,
// and is told which (RESULTS_FUNCTION).
// https://docs.aws.amazon.com/lambda/latest/dg/lambda-api-permissions-ref.html
func TestFailedResultsGrant(t *testing.T) {
	app := testApp(t)
	stack := awscdk.NewStack(app, jsii.String("Results"), nil)
	bucket := stacks.NewIngestBucket(stack, "Bucket")
	tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
		Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/r"}, Bucket: bucket})
	tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{Name: "default", Bucket: bucket,
		Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/h"}}})
	tpl := templateJSON(assertions.Template_FromStack(stack, nil))

	splitOf := func(t *testing.T, fns map[string]map[string]any) string {
		t.Helper()
		for id, fn := range fns {
			if src, _ := get(t, fn, "Metadata").(map[string]any)["tenantpipeline:source"].(string); src == "lambdas/split" {
				return id
			}
		}
		t.Fatal("no split function")
		return ""
	}
	check := func(t *testing.T, stmts []map[string]any, env map[string]any, split string) {
		t.Helper()
		want := `{"Fn::GetAtt":["` + split + `","Arn"]}`
		var invokes []map[string]any
		for _, s := range stmts {
			if strings.Contains(asJSON(s["Action"]), "lambda:") {
				invokes = append(invokes, s)
			}
		}
		if len(invokes) != 1 {
			t.Fatalf("got %d statements with lambda: actions, want 1: %s", len(invokes), asJSON(invokes))
		}
		if got := asJSON(invokes[0]["Action"]); got != `"lambda:InvokeFunction"` {
			t.Errorf("action: got %s, want lambda:InvokeFunction", got)
		}
		if got := asJSON(invokes[0]["Resource"]); got != want {
			t.Errorf("resource: got %s, want exactly the Split function %s", got, want)
		}
		if got := asJSON(env[pipeline.EnvResultsFunction]); got != want {
			t.Errorf("%s: got %s, want %s", pipeline.EnvResultsFunction, got, want)
		}
	}
	t.Run("silo", func(t *testing.T) {
		fns := tenantResources(t, tpl, "AWS::Lambda::Function", "acme")
		env := get(t, props(fns[controllerID(t, tpl, "acme")]), "Environment", "Variables").(map[string]any)
		check(t, statementsOf(t, tpl, "acme", "Controller"), env, splitOf(t, fns))
	})
	t.Run("pool", func(t *testing.T) {
		fns := map[string]map[string]any{}
		for id, fn := range byType(tpl, "AWS::Lambda::Function") {
			if strings.HasPrefix(id, "Pool") {
				fns[id] = fn
			}
		}
		check(t, poolPolicyStatements(t, tpl, "PoolController"), poolControllerEnv(t, stack), splitOf(t, fns))
	})
}

// TestNoRuleTakesFileProcessedEvents: the pipeline puts File Processed events and none of its own
// rules takes them, in either tier. Every rule of the constructs is scheduled or matches only
// events of AWS services (source "aws.*": S3's Object Created, Step Functions' status changes),
// which no PutEvents caller can send: a source may not start with "aws."
// (https://docs.aws.amazon.com/scheduler/latest/APIReference/API_EventBridgePutEventsV2Parameters.html,
// "Source"). So a File Processed event from anyone else, or a forged S3 or status event, reaches no
// controller, queue or function of the pipeline; its consumers are the users' own rules.
func TestNoRuleTakesFileProcessedEvents(t *testing.T) {
	rules := 0
	for id, r := range bothTiers()["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] != "AWS::Events::Rule" {
			continue
		}
		rules++
		p := props(res)
		if _, scheduled := p["ScheduleExpression"]; scheduled {
			continue
		}
		pattern, _ := p["EventPattern"].(map[string]any)
		sources, _ := pattern["source"].([]any)
		if len(sources) == 0 {
			t.Errorf("rule %s: got pattern %s, want one that names its sources", id, asJSON(pattern))
		}
		for _, s := range sources {
			if name, ok := s.(string); !ok || !strings.HasPrefix(name, "aws.") {
				t.Errorf("rule %s: takes events of source %v, want AWS services' alone (aws.*)", id, s)
			}
		}
	}
	if rules == 0 {
		t.Fatal("got no rule in either tier")
	}
}
