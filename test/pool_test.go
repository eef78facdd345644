package test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
	"github.com/example/tenantpipeline/internal/tenants"
)

// poolTemplate synthesizes testdata/pool.json and returns the app and pool default's template.
func poolTemplate(t *testing.T) (*stacks.App, map[string]any) {
	t.Helper()
	_, built := synthApp(t, "pool.json", stacks.Options{})
	if len(built.PoolStacks) != 2 {
		t.Fatalf("got %d pool stacks, want 2", len(built.PoolStacks))
	}
	return built, stackTemplate(t, built.PoolStacks[1])
}

// byType returns the template's resources of one type, by logical id.
func byType(tpl map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tpl["Resources"].(map[string]any) {
		if r.(map[string]any)["Type"] == typ {
			out[id] = r.(map[string]any)
		}
	}
	return out
}

func TestPoolStacks(t *testing.T) {
	built, _ := poolTemplate(t)
	var names []string
	for _, s := range built.PoolStacks {
		names = append(names, *s.StackName())
	}
	if got := strings.Join(names, ","); got != "TenantPipeline-Pool-big,TenantPipeline-Pool-default" {
		t.Errorf("pool stacks %s", got)
	}
	want := map[string]string{"acme": "TenantPipeline-Tenants-1", "hooli": "TenantPipeline-Pool-default",
		"umbrella": "TenantPipeline-Pool-default", "wayne": "TenantPipeline-Pool-big"}
	if !maps.Equal(built.StackOf, want) {
		t.Errorf("StackOf = %v, want %v", built.StackOf, want)
	}
	if p := built.Pools["default"]; p == nil || len(p.Props.Tenants) != 2 || p.Props.Tenants[0].Prefix != "pools/default/hooli/" {
		t.Errorf("pool default: %+v", p)
	}
}

// TestPoolShape: the intake rules feed the intake, one message group each; the router reads it in order;
// the controller reads the pool queue with the configured MaximumConcurrency; nothing is per tenant.
func TestPoolShape(t *testing.T) {
	_, tpl := poolTemplate(t)
	queues := byType(tpl, "AWS::SQS::Queue")
	var intake, pool, dlq string
	for id, q := range queues {
		p := props(q)
		switch {
		case strings.HasPrefix(id, "PoolIntake"):
			intake = id
		case strings.HasPrefix(id, "PoolQueue"):
			pool = id
		case strings.HasPrefix(id, "PoolRuleDeadLetterQueue"):
			dlq = id
		}
		if strings.HasPrefix(id, "PoolIntake") || strings.HasPrefix(id, "PoolQueue") {
			if p["FifoQueue"] != true || p["ContentBasedDeduplication"] != true {
				t.Errorf("%s: want a FIFO queue with content-based deduplication, got %v", id, p)
			}
		}
		if q["DeletionPolicy"] != "Retain" {
			t.Errorf("%s: DeletionPolicy %v, want Retain", id, q["DeletionPolicy"])
		}
	}
	if len(queues) != 3 || intake == "" || pool == "" || dlq == "" {
		t.Fatalf("queues %v, want the intake, the pool queue and the dead-letter queue", keys(anyMap(queues)))
	}

	// One rule per intake group (16 by default), each with its own message group, the silo rule's
	// retry policy and dead-letter queue, and a filter on the characters of its group.
	rules := byType(tpl, "AWS::Events::Rule")
	if len(rules) != tenants.DefaultPoolIntakeGroups+2 {
		t.Fatalf("got %d rules, want %d intake rules, the status rule and the reconciler's schedule", len(rules), tenants.DefaultPoolIntakeGroups)
	}
	groups := map[string]string{} // message group -> rule
	for id, r := range rules {
		for _, target := range props(r)["Targets"].([]any) {
			tg := target.(map[string]any)
			if asJSON(tg["Arn"]) != asJSON(map[string]any{"Fn::GetAtt": []any{intake, "Arn"}}) {
				continue
			}
			g, _ := get(t, tg, "SqsParameters", "MessageGroupId").(string)
			if other, dup := groups[g]; dup {
				t.Errorf("rules %s and %s both send to message group %q", other, id, g)
			}
			groups[g] = id
			if a := get(t, tg, "RetryPolicy", "MaximumRetryAttempts"); a != float64(tenantpipeline.RuleRetryAttempts) {
				t.Errorf("%s: retry attempts %v", id, a)
			}
			if a := get(t, tg, "RetryPolicy", "MaximumEventAgeInSeconds"); a != tenantpipeline.RuleMaxEventAge.Seconds() {
				t.Errorf("%s: maximum event age %v", id, a)
			}
			if d := asJSON(get(t, tg, "DeadLetterConfig", "Arn")); d != asJSON(map[string]any{"Fn::GetAtt": []any{dlq, "Arn"}}) {
				t.Errorf("%s: dead-letter queue %s", id, d)
			}
			if n := len(asJSON(get(t, props(r), "EventPattern"))); n > tenantpipeline.MaxEventPatternChars {
				t.Errorf("%s: event pattern of %d characters, over EventBridge's %d", id, n, tenantpipeline.MaxEventPatternChars)
			}
		}
	}
	for g := range tenants.DefaultPoolIntakeGroups {
		id, ok := groups[tenantpipeline.IntakeMessageGroupOf(g)]
		if !ok {
			t.Errorf("no rule sends to intake group %q", tenantpipeline.IntakeMessageGroupOf(g))
		}
		// Construct ids are an API: group 0's rule keeps the id of the pool's one rule.
		if g == 0 && !strings.HasPrefix(id, "PoolRule") {
			t.Errorf("intake group 0's rule is %s, want the pool's Rule (PoolRule...)", id)
		}
	}
	if len(groups) != tenants.DefaultPoolIntakeGroups {
		t.Errorf("got intake message groups %v, want %d", groups, tenants.DefaultPoolIntakeGroups)
	}
	if n := len(byType(tpl, "AWS::Lambda::EventInvokeConfig")); n != 0 {
		t.Errorf("got %d asynchronous invocation configs, want none: nothing is invoked asynchronously but the status rule's wake-up", n)
	}

	functions := byType(tpl, "AWS::Lambda::Function")
	envOf := func(prefix string) (string, map[string]any) {
		for id, f := range functions {
			if strings.HasPrefix(id, prefix) {
				return id, get(t, props(f), "Environment", "Variables").(map[string]any)
			}
		}
		t.Fatalf("no function %s*", prefix)
		return "", nil
	}
	router, renv := envOf("PoolRouter")
	controller, cenv := envOf("PoolController")
	if renv[pipeline.EnvFunctionRole] != pipeline.FunctionRoleRouter || renv[pipeline.EnvPool] != "default" {
		t.Errorf("router environment %v", renv)
	}
	if cenv[pipeline.EnvPool] != "default" || cenv[pipeline.EnvPoolSettings] != pipeline.PoolSettingsFile || cenv[pipeline.EnvPoolPrefix] != "pools/default/" {
		t.Errorf("controller environment %v", cenv)
	}
	for _, k := range []string{pipeline.EnvTenant, pipeline.EnvTenantPrefix, pipeline.EnvOnFailure, pipeline.EnvIdempotencyKey, pipeline.EnvFunctionRole} {
		if _, ok := cenv[k]; ok {
			t.Errorf("pool controller has %s, a silo tenant's variable", k)
		}
	}
	mappings := byType(tpl, "AWS::Lambda::EventSourceMapping")
	if len(mappings) != 2 {
		t.Fatalf("got %d event source mappings, want 2", len(mappings))
	}
	for _, m := range mappings {
		p := props(m)
		fn, src := asJSON(p["FunctionName"]), asJSON(p["EventSourceArn"])
		switch {
		case strings.Contains(fn, controller):
			if !strings.Contains(src, pool) || p["BatchSize"] != float64(1) || get(t, p, "ScalingConfig", "MaximumConcurrency") != float64(7) {
				t.Errorf("controller mapping %v: want the pool queue, batch 1, MaximumConcurrency 7", p)
			}
		case strings.Contains(fn, router):
			if !strings.Contains(src, intake) || p["BatchSize"] != float64(10) || asJSON(p["FunctionResponseTypes"]) != `["ReportBatchItemFailures"]` {
				t.Errorf("router mapping %v: want the intake, batches of 10, partial batch responses", p)
			}
		default:
			t.Errorf("mapping of %s", fn)
		}
	}
	if n := len(byType(tpl, "AWS::DynamoDB::Table")); n != 1 {
		t.Errorf("got %d tables, want 1, the pool's admission table: a pool creates no table per tenant", n)
	}

	// No grant names a tenant: the pool's policies stay the same size whatever its tenants.
	var policies []string
	for _, p := range byType(tpl, "AWS::IAM::Policy") {
		policies = append(policies, asJSON(props(p)["PolicyDocument"]))
	}
	all := strings.Join(policies, "\n")
	for _, tenant := range []string{"hooli", "umbrella"} {
		if strings.Contains(all, tenant) {
			t.Errorf("a policy names tenant %s", tenant)
		}
	}
	for _, want := range []string{":secret:tenantpipeline/${aws:PrincipalTag/tenant}-??????", ":table/pool-${aws:PrincipalTag/tenant}", "pools/default/${aws:PrincipalTag/tenant}/*"} {
		if !strings.Contains(all, want) {
			t.Errorf("no policy grants %q", want)
		}
	}
}

// TestPoolSizeIsConstant: the pool's resources are the same for 2 and for 60 tenants.
func TestPoolSizeIsConstant(t *testing.T) {
	count := func(n int) map[string]int {
		var entries []string
		for i := range n {
			entries = append(entries, fmt.Sprintf(`{"id": "t%03d", "tier": "pool", "registerUrl": "https://core.example.com/records"}`, i))
		}
		dir := t.TempDir()
		file := filepath.Join(dir, "tenants.json")
		if err := os.WriteFile(file, []byte(`{"tenants": [`+strings.Join(entries, ",")+`]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		app := testApp(t)
		built, err := stacks.Build(app, stacks.Options{TenantsFile: file})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, r := range templateJSON(assertions.Template_FromStack(built.PoolStacks[0], nil))["Resources"].(map[string]any) {
			out[r.(map[string]any)["Type"].(string)]++
		}
		return out
	}
	small, large := count(2), count(60)
	if !maps.Equal(small, large) {
		t.Errorf("2 tenants: %v\n60 tenants: %v\nwant the same resources", small, large)
	}
	if small["AWS::CloudWatch::Alarm"] == 0 || small["AWS::IAM::Role"] == 0 {
		t.Errorf("pool resources %v: no alarms or roles", small)
	}
}

// TestInvalidPoolPropsFailAtValidation: NewPool refuses invalid props before it creates anything,
// every problem listed, each naming the prop to change (never a tenants.json field).
func TestInvalidPoolPropsFailAtValidation(t *testing.T) {
	app := testApp(t)
	stack := awscdk.NewStack(app, jsii.String("BadPool"), nil)
	bucket := stacks.NewIngestBucket(stack, "Bucket")
	msg := propsFailure(t, app, func() {
		tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
			Name:               "shared",
			Bucket:             bucket,
			MaximumConcurrency: 1,
			Shared:             tenantpipeline.SharedProps{SplitMemoryMB: 64, RolePath: "bad"},
			Tenants: []tenantpipeline.Tenant{
				{ID: "a", RegisterURL: "https://core.example.com/a", Prefix: "inbox/a/"},
				{ID: "b"},
			},
		})
	})
	for _, want := range []string{
		"Validation failed with the following errors:",
		`PoolProps.Tenants[0].Prefix (tenant "a"): "inbox/a/" is not "pools/shared/a/": a pooled tenant's prefix is its pool's prefix "pools/shared/" followed by its id`,
		`PoolProps.Tenants[1].RegisterURL (tenant "b"): required unless the tenant has a DynamoDB sink`,
		`pool "shared": PoolProps.MaximumConcurrency 1 is out of range`,
		`[BadPool/Pool] pool "shared": Shared: split memory 64 MB is invalid`,
		`[BadPool/Pool] pool "shared": Shared: role path "bad" is not an IAM path: set Shared.RolePath to`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("synth message\n%s\nlacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "pools.shared") || strings.Contains(msg, "no tenant is in this pool") {
		t.Errorf("synth message\n%s\nspeaks tenants.json, want the props' names", msg)
	}
}

// TestInvalidIntakeGroupsFailAtValidation: IntakeGroups out of range, or so few groups for a long
// prefix that a rule's pattern would pass EventBridge's size, fail synth with a message naming it.
func TestInvalidIntakeGroupsFailAtValidation(t *testing.T) {
	long := "pools/" + strings.Repeat("x", 40) + "/"
	for _, tc := range []struct {
		name  string
		props tenantpipeline.PoolProps
		want  string
	}{
		{"out of range", tenantpipeline.PoolProps{IntakeGroups: 65}, `pool "shared": PoolProps.IntakeGroups 65 is out of range: use 1 to 64`},
		{"pattern too large", tenantpipeline.PoolProps{IntakeGroups: 2, Prefix: long},
			`pool "shared": IntakeGroups 2: the event pattern of intake group 0 would be`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("BadPool"), nil)
			p := tc.props
			p.Name, p.Bucket = "shared", stacks.NewIngestBucket(stack, "Bucket")
			p.Tenants = []tenantpipeline.Tenant{{ID: "a", RegisterURL: "https://core.example.com/a"}}
			if msg := propsFailure(t, app, func() { tenantpipeline.NewPool(stack, "Pool", &p) }); !strings.Contains(msg, tc.want) {
				t.Errorf("synth message\n%s\nlacks %q", msg, tc.want)
			}
		})
	}
}

// TestPoolRuleFailuresWatchEveryIntakeRule: each intake rule's FailedInvocations is in exactly one
// alarm, and no alarm reads more than the 10 metrics CloudWatch allows.
func TestPoolRuleFailuresWatchEveryIntakeRule(t *testing.T) {
	_, tpl := poolTemplate(t)
	watched := map[string]int{}
	for id, a := range byType(tpl, "AWS::CloudWatch::Alarm") {
		p := props(a)
		stats := 0
		if ms, ok := p["Metrics"].([]any); ok {
			for _, m := range ms {
				if stat, ok := m.(map[string]any)["MetricStat"].(map[string]any); ok {
					stats++
					if get(t, stat, "Metric", "MetricName") == "FailedInvocations" {
						for _, d := range get(t, stat, "Metric", "Dimensions").([]any) {
							watched[asJSON(d.(map[string]any)["Value"])]++
						}
					}
				}
			}
		} else if p["MetricName"] == "FailedInvocations" {
			for _, d := range p["Dimensions"].([]any) {
				watched[asJSON(d.(map[string]any)["Value"])]++
			}
		}
		if stats > 10 {
			t.Errorf("%s reads %d metrics, want at most 10", id, stats)
		}
	}
	rules := 0
	for id, r := range byType(tpl, "AWS::Events::Rule") {
		if strings.Contains(asJSON(props(r)["EventPattern"]), `"aws.states"`) {
			continue // the status rule: its target is the controller
		}
		if _, scheduled := props(r)["ScheduleExpression"]; scheduled {
			continue // the reconciler's schedule: its target is the controller
		}
		rules++
		if n := watched[asJSON(map[string]any{"Ref": id})]; n != 1 {
			t.Errorf("intake rule %s: in %d FailedInvocations alarms, want 1", id, n)
		}
	}
	if rules != tenants.DefaultPoolIntakeGroups {
		t.Errorf("got %d intake rules, want %d", rules, tenants.DefaultPoolIntakeGroups)
	}
}
