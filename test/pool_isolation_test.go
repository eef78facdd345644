package test

import (
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/templatecheck"
	"github.com/example/tenantpipeline/internal/tenants"
)

// The pool's isolation, statement by statement: each of these was removed in a deliberate break of
// the pool and no other test noticed. The silo twins are TestQueuesDenySendsButTheRuleThePipelineAndOperators
// (steer_test.go) and the silo mapping's FunctionResponseTypes (pipeline_test.go); the pause marker
// is the pool's alone.
func TestPoolIsolationStatements(t *testing.T) {
	built, tpl := poolTemplate(t)
	pool := stackAssertions(t, built.PoolStacks[1])
	idOf := func(typ, prefix string) string {
		t.Helper()
		var found []string
		for id := range byType(tpl, typ) {
			if strings.HasPrefix(id, prefix) {
				found = append(found, id)
			}
		}
		if len(found) != 1 {
			t.Fatalf("got %v resources %s of type %s, want 1", found, prefix, typ)
		}
		return found[0]
	}
	queue := idOf("AWS::SQS::Queue", "PoolQueue")
	intake := idOf("AWS::SQS::Queue", "PoolIntake")
	dlq := idOf("AWS::SQS::Queue", "PoolRuleDeadLetterQueue")
	controllerRole := idOf("AWS::IAM::Role", "PoolControllerServiceRole")
	routerRole := idOf("AWS::IAM::Role", "PoolRouterServiceRole")
	controller := idOf("AWS::Lambda::Function", "PoolController")

	// The intake rules, in intake group order: the rule of group g sends to message group g.
	byGroup := map[string]string{}
	for id, r := range byType(tpl, "AWS::Events::Rule") {
		for _, target := range props(r)["Targets"].([]any) {
			if sqs, ok := target.(map[string]any)["SqsParameters"].(map[string]any); ok {
				byGroup[sqs["MessageGroupId"].(string)] = id
			}
		}
	}
	var rules []any
	for g := range tenants.DefaultPoolIntakeGroups {
		id, ok := byGroup[tenantpipeline.IntakeMessageGroupOf(g)]
		if !ok {
			t.Fatalf("no intake rule of group %d", g)
		}
		rules = append(rules, getAtt(id))
	}

	// (a) Each pool queue denies sqs:SendMessage to all but its intended senders.
	t.Run("queues deny sends but the intended senders", func(t *testing.T) {
		deny := func(q string, roles []any, sources []any) map[string]any {
			cond := map[string]any{
				"ArnNotLike": map[string]any{"aws:PrincipalArn": roles},
			}
			if sources != nil {
				cond["ArnNotEquals"] = map[string]any{"aws:SourceArn": sources}
			}
			return map[string]any{
				"Sid": "OnlyTheRouterThePipelineAndOperatorsSend", "Effect": "Deny", "Principal": "*",
				"Action": "sqs:SendMessage", "Resource": getAtt(q), "Condition": cond,
			}
		}
		for _, tc := range []struct {
			name, queue string
			stmt        map[string]any
		}{
			// The pool queue: the router puts events on it, the controller control messages.
			{"pool queue", queue, deny(queue, []any{getAtt(controllerRole), getAtt(routerRole)}, nil)},
			// The intake: its rules, and the router and controller.
			{"intake", intake, deny(intake, []any{getAtt(controllerRole), getAtt(routerRole)}, rules)},
			// The dead-letter queue: the rules' failed deliveries and the router's unknown tenants.
			{"dead-letter queue", dlq, deny(dlq, []any{getAtt(routerRole)}, rules)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				asserted(t, func() {
					hasStatement(t, pool, "AWS::SQS::QueuePolicy", map[string]any{"Queues": []any{map[string]any{"Ref": tc.queue}}}, tc.stmt)
				})
			})
		}
	})

	// (c) The controller reads a pooled tenant's pause marker, and lists control/<tenant>/ so that a
	// missing marker reads as absent (internal/controller/paused.go), through a session of the
	// tenant-scoped role tagged with the tenant: the grants are the tenant role's, named by the tag,
	// and the controller may assume it.
	t.Run("controller reads pause markers", func(t *testing.T) {
		bucket := map[string]any{"Fn::ImportValue": "TenantPipeline-Ingest:ExportsOutputFnGetAttBucket83908E77Arn063C8555"}
		tenantRole := idOf("AWS::IAM::Role", "PoolTenantRole")
		roles := map[string]any{"Roles": []any{map[string]any{"Ref": tenantRole}}}
		key := func(suffix string) map[string]any {
			return map[string]any{"Fn::Join": []any{"", []any{bucket, "/control/pool.default/${aws:PrincipalTag/tenant}/" + suffix}}}
		}
		asserted(t, func() {
			hasStatement(t, pool, "AWS::IAM::Policy", roles, map[string]any{
				"Action": "s3:GetObject", "Effect": "Allow", "Resource": []any{key("skip/*"), key("paused.json")},
			})
		})
		// The operators' control records, and the record of a sequenced tenant's own gap skip.
		asserted(t, func() {
			hasStatement(t, pool, "AWS::IAM::Policy", roles, map[string]any{
				"Action": []any{"s3:GetObject", "s3:PutObject"}, "Effect": "Allow", "Resource": key("requests/*"),
			})
		})
		asserted(t, func() {
			hasStatement(t, pool, "AWS::IAM::Policy", roles, map[string]any{
				"Action": "s3:ListBucket", "Effect": "Allow", "Resource": bucket,
				"Condition": map[string]any{"StringLike": map[string]any{"s3:prefix": []any{
					"control/pool.default/${aws:PrincipalTag/tenant}/*", "results/pool.default/${aws:PrincipalTag/tenant}/*",
				}}},
			})
		})
		asserted(t, func() {
			hasStatement(t, pool, "AWS::IAM::Policy", map[string]any{"Roles": []any{map[string]any{"Ref": controllerRole}}}, map[string]any{
				"Action": []any{"sts:AssumeRole", "sts:TagSession"}, "Effect": "Allow", "Resource": getAtt(tenantRole),
			})
		})
	})

	// (d) The controller's mapping reports batch item failures: without it a held message (a
	// waiting file, the tenant's lock) would be deleted with the batch's success.
	t.Run("controller mapping reports batch item failures", func(t *testing.T) {
		asserted(t, func() {
			templatecheck.Assert(t, func() {
				pool.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
					"FunctionName":          map[string]any{"Ref": controller},
					"EventSourceArn":        getAtt(queue),
					"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
					"BatchSize":             float64(1),
				})
			})
		})
	})
}

// asserted runs a template assertion, which panics when it does not hold, as a test error, so that
// every statement of a test is checked and reported.
func asserted(t *testing.T, assertion func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("got a template without the statement, want it: %v", r)
		}
	}()
	assertion()
}
