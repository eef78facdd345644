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
)

// poolTemplate synthesizes testdata/pool.json and returns the app and pool default's template.
func poolTemplate(t *testing.T) (*stacks.App, map[string]any) {
	t.Helper()
	_, built := synthApp(t, "pool.json", stacks.Options{})
	if len(built.PoolStacks) != 2 {
		t.Fatalf("got %d pool stacks, want 2", len(built.PoolStacks))
	}
	return built, templateJSON(assertions.Template_FromStack(built.PoolStacks[1], nil))
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

// TestPoolShape: the rule feeds the intake in one message group; the router reads it in order;
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

	rules := byType(tpl, "AWS::Events::Rule")
	if len(rules) != 2 {
		t.Fatalf("got %d rules, want the files' rule and the status rule", len(rules))
	}
	found := false
	for _, r := range rules {
		for _, target := range props(r)["Targets"].([]any) {
			tg := target.(map[string]any)
			if asJSON(tg["Arn"]) != asJSON(map[string]any{"Fn::GetAtt": []any{intake, "Arn"}}) {
				continue
			}
			found = true
			if g := get(t, tg, "SqsParameters", "MessageGroupId"); g != tenantpipeline.IntakeMessageGroup {
				t.Errorf("intake target's group %v, want %q", g, tenantpipeline.IntakeMessageGroup)
			}
			if a := get(t, tg, "RetryPolicy", "MaximumRetryAttempts"); a != float64(tenantpipeline.RuleRetryAttempts) {
				t.Errorf("retry attempts %v", a)
			}
			if d := asJSON(get(t, tg, "DeadLetterConfig", "Arn")); d != asJSON(map[string]any{"Fn::GetAtt": []any{dlq, "Arn"}}) {
				t.Errorf("dead-letter queue %s", d)
			}
			if p := asJSON(get(t, props(r), "EventPattern", "detail", "object", "key")); p != `[{"prefix":"pools/default/"}]` {
				t.Errorf("rule pattern on key %s, want the pool's prefix", p)
			}
		}
	}
	if !found {
		t.Error("no rule targets the intake queue")
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
	for _, want := range []string{":secret:tenantpipeline/*", ":table/pool-*", "pools/default/*"} {
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
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
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

// TestInvalidPoolPropsFailAtValidation: NewPool's invalid props fail synth at CDK's validation,
// every problem listed, each naming the prop to change (never a tenants.json field).
func TestInvalidPoolPropsFailAtValidation(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := awscdk.NewStack(app, jsii.String("BadPool"), nil)
	bucket := stacks.NewIngestBucket(stack, "Bucket")
	tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
		Name:               "shared",
		Bucket:             bucket,
		MaximumConcurrency: 1,
		Shared:             tenantpipeline.Props{Tenant: tenantpipeline.Tenant{ID: "x"}},
		Tenants: []tenantpipeline.Tenant{
			{ID: "a", RegisterURL: "https://core.example.com/a", Prefix: "inbox/a/"},
			{ID: "b"},
		},
	})
	msg := synthPanic(app)
	for _, want := range []string{
		"Validation failed with the following errors:",
		`tenant "a": Tenant.Prefix: "inbox/a/" is outside pool shared's prefix "pools/shared/"`,
		`or set PoolProps.Prefix`,
		`tenant "b": Tenant.RegisterURL is required`,
		`pool "shared": PoolProps.MaximumConcurrency 1 is out of range`,
		`pool "shared": Shared.Tenant must be unset`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("synth message\n%s\nlacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "pools.shared") || strings.Contains(msg, "no tenant is in this pool") {
		t.Errorf("synth message\n%s\nspeaks tenants.json, want the props' names", msg)
	}
}
