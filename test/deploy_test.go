package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// fifoQueue returns the tenant's FIFO queue (the tenant also has its rule's standard dead-letter queue).
func fifoQueue(t *testing.T, tpl map[string]any, tenant string) (string, map[string]any) {
	t.Helper()
	var id string
	var q map[string]any
	for qid, r := range tenantResources(t, tpl, "AWS::SQS::Queue", tenant) {
		if props(r)["FifoQueue"] == true {
			if id != "" {
				t.Fatalf("tenant %s: got FIFO queues %s and %s, want one", tenant, id, qid)
			}
			id, q = qid, r
		}
	}
	if id == "" {
		t.Fatalf("tenant %s: got no FIFO queue", tenant)
	}
	return id, q
}

// ruleDLQ returns the tenant's only standard queue: its rule target's dead-letter queue.
func ruleDLQ(t *testing.T, tpl map[string]any, tenant string) (string, map[string]any) {
	t.Helper()
	var id string
	var q map[string]any
	for qid, r := range tenantResources(t, tpl, "AWS::SQS::Queue", tenant) {
		if props(r)["FifoQueue"] == nil {
			if id != "" {
				t.Fatalf("tenant %s: got standard queues %s and %s, want one", tenant, id, qid)
			}
			id, q = qid, r
		}
	}
	if id == "" {
		t.Fatalf("tenant %s: got no standard (dead-letter) queue", tenant)
	}
	return id, q
}

// queuePolicyOf returns the queue policy attached to one queue.
func queuePolicyOf(t *testing.T, tpl map[string]any, tenant, queueID string) map[string]any {
	t.Helper()
	for _, pol := range tenantResources(t, tpl, "AWS::SQS::QueuePolicy", tenant) {
		if asJSON(get(t, props(pol), "Queues")) == `[{"Ref":"`+queueID+`"}]` {
			return pol
		}
	}
	t.Fatalf("tenant %s: no queue policy for %s", tenant, queueID)
	return nil
}

// pipelineApp builds one TenantPipeline in a stack of its own with a bucket of this app, so that
// props the tenants file cannot set are tested. bucket may be nil for an EventBridge-enabled,
// versioned bucket.
func pipelineApp(t *testing.T, change func(*tenantpipeline.Props), bucket func(awscdk.Stack) awss3.IBucket) (awscdk.Stack, map[string]any) {
	t.Helper()
	app := testApp(t)
	stack := awscdk.NewStack(app, jsii.String("Construct-Test"), nil)
	if bucket == nil {
		bucket = func(s awscdk.Stack) awss3.IBucket {
			return awss3.NewBucket(s, jsii.String("Ingest"), &awss3.BucketProps{
				EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true),
				EnforceSSL: jsii.Bool(true), BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
			})
		}
	}
	p := &tenantpipeline.Props{
		Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/r"},
		Bucket: bucket(stack),
	}
	if change != nil {
		change(p)
	}
	tenantpipeline.New(stack, "Tenant-acme", p)
	return stack, templateJSON(assertions.Template_FromStack(stack, nil))
}

// 1a. Every state machine logs to a log group named under /aws/vendedlogs/states/, so that
// log groups do not grow the account's single CloudWatch Logs resource policy; names are unique
// per stack and tenant.
// https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html
func TestWorkflowLogGroupsAreVendedAndUnique(t *testing.T) {
	sharedApp(t)
	seen := map[string]string{}
	for _, tenant := range sampleTenants {
		sms := tenantResources(t, shared.template, "AWS::StepFunctions::StateMachine", tenant)
		if len(sms) != 2 {
			t.Fatalf("tenant %s: got %d state machines, want 2", tenant, len(sms))
		}
		for id, sm := range sms {
			dests := get(t, props(sm), "LoggingConfiguration", "Destinations").([]any)
			if len(dests) != 1 {
				t.Fatalf("%s: got %d log destinations, want 1", id, len(dests))
			}
			lgID, _ := get(t, dests[0], "CloudWatchLogsLogGroup", "LogGroupArn", "Fn::GetAtt", 0).(string)
			lg, ok := shared.template["Resources"].(map[string]any)[lgID].(map[string]any)
			if !ok {
				t.Fatalf("%s: log destination %q is not a log group of this stack", id, lgID)
			}
			name, _ := props(lg)["LogGroupName"].(string)
			want := "/aws/vendedlogs/states/TenantPipeline-Tenants-1/" + tenant
			if name != want {
				t.Errorf("%s: log group name got %q, want %q", id, name, want)
			}
			if other, dup := seen[name]; dup && other != tenant {
				t.Errorf("log group %s is shared by tenants %s and %s", name, other, tenant)
			}
			seen[name] = tenant
		}
	}
	// A second app with another stack prefix names its groups apart from the first.
	_, built := synthApp(t, "one-tenant.json", stacks.Options{StackPrefix: "Other"})
	tpl := stackTemplate(t, built.TenantStacks[0])
	var names []string
	for _, lg := range tenantResources(t, tpl, "AWS::Logs::LogGroup", "acme") {
		if n, ok := props(lg)["LogGroupName"].(string); ok {
			names = append(names, n)
		}
	}
	if asJSON(names) != `["/aws/vendedlogs/states/Other-Tenants-1/acme"]` {
		t.Errorf("stack prefix Other: got named log groups %v, want [/aws/vendedlogs/states/Other-Tenants-1/acme]", names)
	}
}

// 1b. The controller reserves no concurrency by default: the FIFO message group serializes, and a
// reservation fails on accounts with a low concurrency quota. It stays available as an opt-in.
func TestControllerConcurrency(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		c := props(functionsOf(t, tenant)["lambdas/controller"])
		if v, ok := c["ReservedConcurrentExecutions"]; ok {
			t.Errorf("tenant %s: ReservedConcurrentExecutions got %v, want none by default", tenant, v)
		}
	}
	_, tpl := pipelineApp(t, func(p *tenantpipeline.Props) { p.ControllerReservedConcurrency = 1 }, nil)
	var got []any
	for _, fn := range tenantResources(t, tpl, "AWS::Lambda::Function", "acme") {
		if v, ok := props(fn)["ReservedConcurrentExecutions"]; ok {
			got = append(got, v)
		}
	}
	if asJSON(got) != `[1]` {
		t.Errorf("opt-in ControllerReservedConcurrency 1: got reserved values %v, want [1] on the controller only", got)
	}
}

// 1c. The rule's target has an explicit retry policy and a standard, SSE-SQS, TLS-only dead-letter
// queue that only this rule may send to.
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html
func TestRuleTargetHasRetryPolicyAndDeadLetterQueue(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		t.Run(tenant, func(t *testing.T) {
			ruleID, r := fileRule(t, shared.template, tenant)
			dlqID, dlq := ruleDLQ(t, shared.template, tenant)
			target := get(t, props(r), "Targets", 0)
			if got := asJSON(get(t, target, "DeadLetterConfig", "Arn")); got != `{"Fn::GetAtt":["`+dlqID+`","Arn"]}` {
				t.Errorf("DeadLetterConfig.Arn: got %s, want the tenant's dead-letter queue %s", got, dlqID)
			}
			if got := asJSON(get(t, target, "RetryPolicy")); got != `{"MaximumEventAgeInSeconds":86400,"MaximumRetryAttempts":185}` {
				t.Errorf("RetryPolicy: got %s, want 24 h and 185 attempts", got)
			}
			p := props(dlq)
			if p["SqsManagedSseEnabled"] != true || p["MessageRetentionPeriod"] != float64(1209600) {
				t.Errorf("dead-letter queue: got SSE-SQS %v, retention %v; want true, 1209600", p["SqsManagedSseEnabled"], p["MessageRetentionPeriod"])
			}
			if _, kms := p["KmsMasterKeyId"]; kms {
				t.Errorf("dead-letter queue: got a KMS key, want SSE-SQS")
			}
			var tlsDeny, ruleAllow bool
			for _, s := range get(t, props(queuePolicyOf(t, shared.template, tenant, dlqID)), "PolicyDocument", "Statement").([]any) {
				js := asJSON(s)
				st := s.(map[string]any)
				if st["Effect"] == "Deny" && strings.Contains(js, `"aws:SecureTransport":"false"`) {
					tlsDeny = true
				}
				if st["Effect"] == "Allow" {
					if !strings.Contains(js, `"Service":"events.amazonaws.com"`) || !strings.Contains(js, `"aws:SourceArn":{"Fn::GetAtt":["`+ruleID+`","Arn"]}`) {
						t.Errorf("dead-letter queue allow statement %s: want only events.amazonaws.com on behalf of rule %s", js, ruleID)
					}
					ruleAllow = true
				}
			}
			if !tlsDeny || !ruleAllow {
				t.Errorf("dead-letter queue policy: got TLS deny %v, rule allow %v, want both", tlsDeny, ruleAllow)
			}
		})
	}
}

// 2a. Both queues are retained when a tenant is removed: they may hold files.
func TestQueuesAreRetained(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		qs := tenantResources(t, shared.template, "AWS::SQS::Queue", tenant)
		if len(qs) != 2 {
			t.Errorf("tenant %s: got %d queues, want 2 (FIFO queue, rule dead-letter queue)", tenant, len(qs))
		}
		for id, q := range qs {
			if q["DeletionPolicy"] != "Retain" || q["UpdateReplacePolicy"] != "Retain" {
				t.Errorf("%s: got DeletionPolicy %v, UpdateReplacePolicy %v, want Retain, Retain", id, q["DeletionPolicy"], q["UpdateReplacePolicy"])
			}
		}
	}
}

// 4a. A bucket of this app without EventBridge fails synth with the fix in the message; without
// versioning it warns; an imported bucket cannot be read and is not checked. Both tiers.
func TestBucketChecks(t *testing.T) {
	bucketWith := func(eventBridge, versioned bool) func(awscdk.Stack) awss3.IBucket {
		return func(s awscdk.Stack) awss3.IBucket {
			return awss3.NewBucket(s, jsii.String("Ingest"), &awss3.BucketProps{
				EventBridgeEnabled: jsii.Bool(eventBridge), Versioned: jsii.Bool(versioned), EnforceSSL: jsii.Bool(true),
			})
		}
	}
	tests := []struct {
		name        string
		bucket      func(awscdk.Stack) awss3.IBucket
		wantError   string
		wantWarning bool
	}{
		{name: "EventBridge on, versioned", bucket: bucketWith(true, true)},
		{name: "EventBridge off", bucket: bucketWith(false, true), wantError: "does not send events to EventBridge"},
		{name: "EventBridge turned on after creation", bucket: func(s awscdk.Stack) awss3.IBucket {
			b := bucketWith(false, true)(s).(awss3.Bucket)
			b.EnableEventBridgeNotification()
			return b
		}},
		{name: "unversioned", bucket: bucketWith(true, false), wantWarning: true},
		{name: "imported", bucket: func(s awscdk.Stack) awss3.IBucket {
			return awss3.Bucket_FromBucketName(s, jsii.String("Ingest"), jsii.String("corp-ingest"))
		}},
	}
	// Both tiers: a silo pipeline, and a pool.
	build := map[string]func(t *testing.T, bucket func(awscdk.Stack) awss3.IBucket) awscdk.Stack{
		"silo": func(t *testing.T, bucket func(awscdk.Stack) awss3.IBucket) awscdk.Stack {
			stack, _ := pipelineApp(t, nil, bucket)
			return stack
		},
		"pool": func(t *testing.T, bucket func(awscdk.Stack) awss3.IBucket) awscdk.Stack {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("Construct-Test"), nil)
			tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{Name: "default", Bucket: bucket(stack),
				Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/h"}}})
			app.Synth(nil)
			return stack
		},
	}
	for _, tier := range []string{"silo", "pool"} {
		for _, tt := range tests {
			t.Run(tier+"/"+tt.name, func(t *testing.T) {
				testBucketCheck(t, tt.wantError, tt.wantWarning, func() awscdk.Stack { return build[tier](t, tt.bucket) })
			})
		}
	}
}

// testBucketCheck builds a stack and checks its synth error and versioning warning.
func testBucketCheck(t *testing.T, wantError string, wantWarning bool, build func() awscdk.Stack) {
	t.Helper()
	var stack awscdk.Stack
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		stack = build()
		return nil
	}()
	switch {
	case wantError == "" && err != nil:
		t.Fatalf("got synth error %v, want none", err)
	case wantError != "":
		if err == nil || !strings.Contains(err.Error(), wantError) || !strings.Contains(err.Error(), "EventBridgeEnabled: jsii.Bool(true)") {
			t.Fatalf("got synth error %v, want one containing %q and the fix", err, wantError)
		}
		return
	}
	warnings := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
		assertions.Match_StringLikeRegexp(jsii.String("is not versioned.*Versioned: jsii.Bool\\(true\\)")))
	if got := len(*warnings) > 0; got != wantWarning {
		t.Errorf("got versioning warning %v, want %v", got, wantWarning)
	}
}

// outsideApp builds, once, a CDK app in a module outside this one that uses the construct's public
// API alone: a temporary module that requires this one through a replace directive. With
// OUTSIDE_INVALID set it builds a pipeline whose props are invalid.
var outsideApp = sync.OnceValues(func() (string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	// In the project's ignored .build folder, as appBinary.
	dir := filepath.Join(root, ".build", "test", "outside")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return "", err
	}
	// Same requirements as this module, so no download is needed.
	mod := strings.Replace(string(goMod), "module github.com/example/tenantpipeline", "module example.org/outside", 1) +
		"\nrequire github.com/example/tenantpipeline v0.0.0\nreplace github.com/example/tenantpipeline => " + root + "\n"
	files := map[string]string{
		"go.mod": mod,
		"go.sum": string(sum),
		"main.go": `package main

import (
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
)

func main() {
	app := awscdk.NewApp(nil)
	err := tenantpipeline.Synth(app, func() error {
		stack := awscdk.NewStack(app, jsii.String("Outside"), nil)
		bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true)})
		if os.Getenv("OUTSIDE_INVALID") == "" {
			p := tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: "acme", Format: "jsonl", OnFailure: "halt", RegisterURL: "https://core.example.com/r"},
				Bucket: bucket,
				SharedProps: tenantpipeline.SharedProps{
					WorkflowTimeout: 2 * time.Hour,
					Alarms:          tenantpipeline.AlarmThresholds{HeadQueued: time.Hour},
				},
			})
			_ = p.Alarms.Stalled
			return nil
		}
		tenantpipeline.New(stack, "Tenant-bad", &tenantpipeline.Props{
			Tenant: tenantpipeline.Tenant{ID: "Bad_Id"}, Bucket: bucket,
			SharedProps: tenantpipeline.SharedProps{ControllerTimeout: 45 * time.Second, VisibilityTimeout: 30 * time.Second, SplitMemoryMB: 64},
		})
		return nil
	})
	jsii.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, "outside")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build of an app in a module outside this one: %v\n%s", err, out)
	}
	return bin, nil
})

// 4b. An app outside this module builds a TenantPipeline from the public API alone.
func TestOutsideModuleUsesPublicAPIOnly(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	if _, err := outsideApp(); err != nil {
		t.Fatal(err)
	}
}

// TestOutsideAppInvalidPropsExitsCleanly: a user's own app that synthesizes through
// tenantpipeline.Synth fails on invalid props with every problem of the construct under its path,
// in CDK's shape, status 1 and no goroutine dump; and before anything is bundled or staged: the
// invalid construct stays an empty scope, so the assembly directory stays empty.
func TestOutsideAppInvalidPropsExitsCleanly(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	bin, err := outsideApp()
	if err != nil {
		t.Fatal(err)
	}
	outdir := t.TempDir()
	cmd := exec.Command(bin)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OUTSIDE_INVALID=1", "CDK_OUTDIR="+outdir, "CDK_CONTEXT_JSON={}")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 1 {
		t.Errorf("got exit status %d, want 1", code)
	}
	for _, bad := range []string{"goroutine ", "panic:", "    at "} {
		if strings.Contains(string(out), bad) {
			t.Errorf("got output containing %q, want CDK's message alone:\n%s", bad, out)
		}
	}
	for _, want := range []string{
		"Validation failed with the following errors:\n",
		"\n  [Outside/Tenant-bad] Tenant.ID (tenant \"Bad_Id\"): \"Bad_Id\" is invalid",
		"\n  [Outside/Tenant-bad] tenant \"Bad_Id\": controller timeout 45s must be shorter than the queue visibility timeout 30s",
		"\n  [Outside/Tenant-bad] tenant \"Bad_Id\": split memory 64 MB is invalid",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("got output %q, want it to contain %q", out, want)
		}
	}
	if left, _ := os.ReadDir(outdir); len(left) != 0 {
		t.Errorf("got %d entries in the assembly directory, want nothing written", len(left))
	}
	if strings.Contains(string(out), "Bundling asset") {
		t.Errorf("got output %q, want nothing of the invalid construct bundled", out)
	}
}

// Defaults that derive from the workflow timeout reach the template.
func TestAlarmThresholdsFollowWorkflowTimeout(t *testing.T) {
	_, tpl := pipelineApp(t, func(p *tenantpipeline.Props) { p.WorkflowTimeout = 2 * time.Hour }, nil)
	want := map[string]float64{"OldestMessageAlarm": 3 * 3600, "HeadRunningAlarm": 90 * 60, "HeadQueuedAlarm": 2 * 3600}
	for suffix, threshold := range want {
		p := alarmByID(t, tpl, "acme", suffix)
		if p["Threshold"] != threshold {
			t.Errorf("%s: got threshold %v, want %v", suffix, p["Threshold"], threshold)
		}
	}
}
