package test

import (
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// scheduleRules are a template's scheduled rules (ScheduleExpression), by logical id.
func scheduleRules(tpl map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range byType(tpl, "AWS::Events::Rule") {
		if _, ok := props(r)["ScheduleExpression"]; ok {
			out[id] = r
		}
	}
	return out
}

// TestReconcileSchedule: the admission reconciler's schedule costs one rule per pool and per core
// system no pool covers, never one per tenant. testdata/reconcile.json: pool default covers ledger
// (also named by silo acme) and crm; erp has silo tenants zeta and beta only, so beta (the smallest
// id) carries erp's rule; globex names no core system. Each rule invokes its controller once a
// minute with the scheduled input, on the default bus, and only that rule may invoke it for it.
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-rule-schedule.html
func TestReconcileSchedule(t *testing.T) {
	_, built := synthApp(t, "reconcile.json", stacks.Options{})
	if len(built.PoolStacks) != 1 || len(built.TenantStacks) != 1 {
		t.Fatalf("got %d pool stacks and %d tenant stacks, want 1 and 1", len(built.PoolStacks), len(built.TenantStacks))
	}
	silo := stackTemplate(t, built.TenantStacks[0])
	pool := stackTemplate(t, built.PoolStacks[0])
	tests := []struct {
		name    string
		tpl     map[string]any
		owner   string // the logical id prefix of the construct that carries the rule
		isOwner func(id string) bool
	}{
		{name: "pool default", tpl: pool, owner: "Pool", isOwner: func(id string) bool { return strings.HasPrefix(id, "Pool") }},
		{name: "silo beta for erp", tpl: silo, owner: "Tenantbeta", isOwner: func(id string) bool { return strings.HasPrefix(id, "Tenantbeta") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := scheduleRules(tt.tpl)
			if len(rules) != 1 {
				t.Fatalf("got %d scheduled rules %v, want 1", len(rules), keysOf(rules))
			}
			for id, r := range rules {
				if !tt.isOwner(id) || !strings.Contains(id, "ReconcileRule") {
					t.Errorf("rule %s: want %sReconcileRule…", id, tt.owner)
				}
				p := props(r)
				if p["ScheduleExpression"] != pipeline.ReconcileSchedule || p["State"] != "ENABLED" {
					t.Errorf("rule %s: got schedule %v, state %v, want %s, ENABLED", id, p["ScheduleExpression"], p["State"], pipeline.ReconcileSchedule)
				}
				if _, ok := p["EventBusName"]; ok {
					t.Errorf("rule %s: got EventBusName %v, want none (the default bus)", id, p["EventBusName"])
				}
				targets := p["Targets"].([]any)
				if len(targets) != 1 {
					t.Fatalf("rule %s: got %d targets, want 1", id, len(targets))
				}
				target := targets[0].(map[string]any)
				ctl := controllerOf(t, tt.tpl, tt.isOwner)
				if got := asJSON(target["Arn"]); got != `{"Fn::GetAtt":["`+ctl+`","Arn"]}` {
					t.Errorf("rule %s: target %s, want the controller %s", id, got, ctl)
				}
				if target["Input"] != pipeline.ReconcileInput {
					t.Errorf("rule %s: input %v, want %s", id, target["Input"], pipeline.ReconcileInput)
				}
				var perms int
				for _, perm := range byType(tt.tpl, "AWS::Lambda::Permission") {
					pp := props(perm)
					if asJSON(pp["SourceArn"]) != `{"Fn::GetAtt":["`+id+`","Arn"]}` {
						continue
					}
					perms++
					if pp["Action"] != "lambda:InvokeFunction" || pp["Principal"] != "events.amazonaws.com" ||
						asJSON(pp["FunctionName"]) != `{"Fn::GetAtt":["`+ctl+`","Arn"]}` {
						t.Errorf("permission: got %s, want lambda:InvokeFunction by events.amazonaws.com on %s", asJSON(pp), ctl)
					}
				}
				if perms != 1 {
					t.Errorf("rule %s: got %d permissions scoped to it, want 1", id, perms)
				}
			}
		})
	}
}

func keysOf(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// controllerOf is the one controller function among the resources isOwner keeps.
func controllerOf(t *testing.T, tpl map[string]any, isOwner func(string) bool) string {
	t.Helper()
	var found []string
	for id, fn := range byType(tpl, "AWS::Lambda::Function") {
		if src, _ := get(t, fn, "Metadata").(map[string]any)["tenantpipeline:source"].(string); src == "lambdas/controller" && isOwner(id) && !strings.Contains(id, "Router") {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		t.Fatalf("got controllers %v, want 1", found)
	}
	return found[0]
}
