package test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/stacks"
	"github.com/example/tenantpipeline/internal/templatecheck"
)

var sampleTenants = []string{"acme", "globex", "initech"}

func TestQueuePerTenant(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		t.Run(tenant, func(t *testing.T) {
			_, q := fifoQueue(t, shared.template, tenant)
			p := props(q)
			want := map[string]any{
				"FifoQueue":                     true,
				"ContentBasedDeduplication":     true,
				"VisibilityTimeout":             float64(330), // the safety net (5 min) + 30 s
				"MessageRetentionPeriod":        float64(1209600),
				"ReceiveMessageWaitTimeSeconds": float64(20),
				"SqsManagedSseEnabled":          true,
			}
			for k, v := range want {
				if p[k] != v {
					t.Errorf("%s: got %v, want %v", k, p[k], v)
				}
			}
			for _, absent := range []string{"RedrivePolicy", "KmsMasterKeyId"} {
				if _, ok := p[absent]; ok {
					t.Errorf("%s: got %v, want none (no DLQ on purpose; SSE-SQS, not a KMS key)", absent, p[absent])
				}
			}
		})
	}
}

func TestQueuePolicyOnlyRuleSendsAndTLSOnly(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		t.Run(tenant, func(t *testing.T) {
			ruleID, _ := fileRule(t, shared.template, tenant)
			queueID, _ := fifoQueue(t, shared.template, tenant)
			pol := queuePolicyOf(t, shared.template, tenant, queueID)
			stmts := get(t, props(pol), "PolicyDocument", "Statement").([]any)
			var tlsDeny, ruleAllow bool
			for _, s := range stmts {
				st := s.(map[string]any)
				js := asJSON(st)
				if st["Effect"] == "Deny" && strings.Contains(js, `"aws:SecureTransport":"false"`) {
					tlsDeny = true
				}
				if st["Effect"] == "Allow" {
					if !strings.Contains(js, `"Service":"events.amazonaws.com"`) || !strings.Contains(js, `"aws:SourceArn":{"Fn::GetAtt":["`+ruleID+`","Arn"]}`) {
						t.Errorf("allow statement %s: want only events.amazonaws.com on behalf of rule %s", js, ruleID)
					}
					ruleAllow = true
				}
			}
			if !tlsDeny || !ruleAllow {
				t.Errorf("got TLS deny %v, rule allow %v, want both", tlsDeny, ruleAllow)
			}
			if got := asJSON(get(t, props(pol), "Queues")); !strings.Contains(got, queueID) {
				t.Errorf("policy queues %s, want %s", got, queueID)
			}
		})
	}
}

func TestRulePerTenant(t *testing.T) {
	sharedApp(t)
	prefixes := map[string]string{"acme": "inbox/acme/", "globex": "inbox/globex/", "initech": "drop/initech/"}
	for tenant, prefix := range prefixes {
		t.Run(tenant, func(t *testing.T) {
			_, r := fileRule(t, shared.template, tenant)
			p := props(r)
			pat := get(t, p, "EventPattern")
			if got := asJSON(get(t, pat, "source")); got != `["aws.s3"]` {
				t.Errorf("source: got %s, want [\"aws.s3\"]", got)
			}
			if got := asJSON(get(t, pat, "detail-type")); got != `["Object Created"]` {
				t.Errorf("detail-type: got %s", got)
			}
			if got := asJSON(get(t, pat, "detail", "object", "key")); got != `[{"prefix":"`+prefix+`"}]` {
				t.Errorf("key: got %s, want prefix %s", got, prefix)
			}
			if got := asJSON(get(t, pat, "detail", "bucket", "name", 0)); !strings.Contains(got, "Fn::ImportValue") {
				t.Errorf("bucket name: got %s, want the ingest bucket's name imported from its stack", got)
			}
			if p["State"] != "ENABLED" {
				t.Errorf("State: got %v", p["State"])
			}
			target := get(t, p, "Targets", 0).(map[string]any)
			if got := get(t, target, "SqsParameters", "MessageGroupId"); got != tenant {
				t.Errorf("MessageGroupId: got %v, want %s", got, tenant)
			}
			queueID, _ := fifoQueue(t, shared.template, tenant)
			if got := asJSON(target["Arn"]); got != `{"Fn::GetAtt":["`+queueID+`","Arn"]}` {
				t.Errorf("target: got %s, want the tenant's queue", got)
			}
		})
	}
}

// Files the pipeline writes must never match a rule: every rule's prefix is a tenant inbox, and
// the reserved prefixes are rejected by validation (tested in internal/tenants).
func TestNoRuleMatchesPipelineWrites(t *testing.T) {
	sharedApp(t)
	for id, r := range tenantResources(t, shared.template, "AWS::Events::Rule", "") {
		if strings.Contains(id, "StatusRule") {
			continue // matches source aws.states only (TestStatusRule)
		}
		if _, scheduled := props(r)["ScheduleExpression"]; scheduled {
			continue // the reconciler's schedule matches no event (TestReconcileSchedule)
		}
		pat := asJSON(get(t, props(r), "EventPattern", "detail", "object", "key"))
		for _, reserved := range []string{"work/", "quarantine/", "control/"} {
			if strings.Contains(pat, `"`+reserved) {
				t.Errorf("rule key pattern %s covers %s", pat, reserved)
			}
		}
	}
}

func functionsOf(t *testing.T, tenant string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, fn := range tenantResources(t, shared.template, "AWS::Lambda::Function", tenant) {
		src, _ := get(t, fn, "Metadata").(map[string]any)["tenantpipeline:source"].(string)
		out[src] = fn
	}
	return out
}

func TestFunctionsPerTenant(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		t.Run(tenant, func(t *testing.T) {
			fns := functionsOf(t, tenant)
			for _, pkg := range []string{"lambdas/controller", "lambdas/split", "lambdas/register"} {
				fn, ok := fns[pkg]
				if !ok {
					t.Fatalf("no function for %s; got %v", pkg, slices.Collect(mapsKeys(fns)))
				}
				p := props(fn)
				if p["Runtime"] != "provided.al2023" || asJSON(p["Architectures"]) != `["arm64"]` || p["Handler"] != "bootstrap" {
					t.Errorf("%s: got runtime %v, architectures %v, handler %v; want provided.al2023, arm64, bootstrap", pkg, p["Runtime"], p["Architectures"], p["Handler"])
				}
				if lg := asJSON(get(t, p, "LoggingConfig", "LogGroup")); !strings.Contains(lg, "Ref") {
					t.Errorf("%s: log group %s, want the function's own log group", pkg, lg)
				}
			}
			c := props(fns["lambdas/controller"])
			if c["Timeout"] != float64(20) {
				t.Errorf("controller timeout: got %v, want 20", c["Timeout"])
			}
			env := get(t, c, "Environment", "Variables").(map[string]any)
			for _, k := range []string{"STATE_MACHINE_ARN", "QUEUE_URL", "TENANT", "TENANT_PREFIX", "INGEST_BUCKET", "ON_FAILURE", "IDEMPOTENCY_KEY",
				"MAX_WAIT_SECONDS", "HALT_WAIT_SECONDS", "METRICS_NAMESPACE", "POLL_BUDGET_SECONDS", "REGISTER_TIMEOUT_SECONDS", "SEGMENT_STATE_MACHINE_ARN",
				"WAKE_EVENTS", "SAFETY_NET_SECONDS"} {
				if _, ok := env[k]; !ok {
					t.Errorf("controller env: missing %s", k)
				}
			}
			for k, want := range map[string]string{
				"MAX_WAIT_SECONDS":         "330", // the visibility timeout: safety net + 30 s
				"POLL_BUDGET_SECONDS":      "0",   // wake events: no in-process polling
				"WAKE_EVENTS":              "true",
				"SAFETY_NET_SECONDS":       "300", // the default safety net, 5 minutes
				"REGISTER_TIMEOUT_SECONDS": "120", // the register function's default timeout
			} {
				if env[k] != want {
					t.Errorf("%s: got %v, want %s", k, env[k], want)
				}
			}
			var fileSM, segmentSM string
			for id := range tenantResources(t, shared.template, "AWS::StepFunctions::StateMachine", tenant) {
				if strings.Contains(id, "WorkflowFile") {
					fileSM = id
				} else if strings.Contains(id, "WorkflowSegment") {
					segmentSM = id
				}
			}
			if got := asJSON(env["STATE_MACHINE_ARN"]); got != `{"Ref":"`+fileSM+`"}` {
				t.Errorf("STATE_MACHINE_ARN: got %s, want the file state machine %s", got, fileSM)
			}
			if got := asJSON(env["SEGMENT_STATE_MACHINE_ARN"]); got != `{"Ref":"`+segmentSM+`"}` {
				t.Errorf("SEGMENT_STATE_MACHINE_ARN: got %s, want the segment state machine %s", got, segmentSM)
			}
			r := props(fns["lambdas/register"])
			if got := get(t, r, "Environment", "Variables", "HTTP_TIMEOUT_SECONDS"); got != "10" {
				t.Errorf("register HTTP_TIMEOUT_SECONDS: got %v, want the default 10", got)
			}
			if r["Timeout"] != float64(120) {
				t.Errorf("register timeout: got %v, want 120", r["Timeout"])
			}
			if !strings.Contains(env["TENANT"].(string), `"id":"`+tenant+`"`) {
				t.Errorf("TENANT: got %v, want the tenant's settings", env["TENANT"])
			}
		})
	}
}

// TestEachFunctionHasItsOwnCode guards the bundling cache: CDK keys it on the bundling options,
// so a cache hit across packages would deploy one binary as all three functions.
func TestEachFunctionHasItsOwnCode(t *testing.T) {
	sharedApp(t)
	fns := functionsOf(t, "acme")
	seen := map[string]string{}
	for pkg, fn := range fns {
		key := asJSON(get(t, props(fn), "Code", "S3Key"))
		if other, dup := seen[key]; dup {
			t.Errorf("%s and %s share code %s", pkg, other, key)
		}
		seen[key] = pkg
	}
	for pkg, fn := range functionsOf(t, "globex") {
		if got, want := asJSON(get(t, props(fn), "Code", "S3Key")), asJSON(get(t, props(fns[pkg]), "Code", "S3Key")); got != want {
			t.Errorf("%s: globex code %s, acme code %s; want one asset per package", pkg, got, want)
		}
	}
}

func mapsKeys[M ~map[K]V, K comparable, V any](m M) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestEventSourceMapping(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		t.Run(tenant, func(t *testing.T) {
			_, m := only(t, shared.template, "AWS::Lambda::EventSourceMapping", tenant)
			p := props(m)
			if p["BatchSize"] != float64(1) {
				t.Errorf("BatchSize: got %v, want 1", p["BatchSize"])
			}
			if got := asJSON(p["FunctionResponseTypes"]); got != `["ReportBatchItemFailures"]` {
				t.Errorf("FunctionResponseTypes: got %s", got)
			}
			if _, ok := p["ScalingConfig"]; ok {
				t.Errorf("ScalingConfig: got %v; MaximumConcurrency cannot be 1, so none is set", p["ScalingConfig"])
			}
			queueID, _ := fifoQueue(t, shared.template, tenant)
			if got := asJSON(p["EventSourceArn"]); !strings.Contains(got, queueID) {
				t.Errorf("EventSourceArn: got %s, want %s", got, queueID)
			}
		})
	}
}

// policyStatements returns every statement of the policies attached to the function's role.
func policyStatements(t *testing.T, tenant, fnLogicalPrefix string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for id, pol := range tenantResources(t, shared.template, "AWS::IAM::Policy", tenant) {
		if !strings.Contains(id, fnLogicalPrefix) {
			continue
		}
		for _, s := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
			out = append(out, s.(map[string]any))
		}
	}
	return out
}

func actionsOf(stmts []map[string]any) []string {
	var out []string
	for _, s := range stmts {
		switch a := s["Action"].(type) {
		case string:
			out = append(out, a)
		case []any:
			for _, x := range a {
				out = append(out, x.(string))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestControllerPermissionsAreExact(t *testing.T) {
	sharedApp(t)
	stmts := policyStatements(t, "acme", "Controller")
	got := actionsOf(stmts)
	want := []string{
		"events:PutEvents",      // the File Processed event (TestFileEventGrants)
		"lambda:InvokeFunction", // a failed file's results, by its Split function (TestFailedResultsGrant)
		"s3:GetObject", "s3:ListBucket", "s3:PutObject",
		"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage",
		"states:DescribeExecution", "states:GetExecutionHistory", "states:RedriveExecution", "states:StartExecution", "states:StopExecution",
	}
	if !slices.Equal(got, want) {
		t.Errorf("controller actions:\ngot  %v\nwant %v", got, want)
	}
	all := asJSON(stmts)
	for _, frag := range []string{`/quarantine/acme/*`, `/control/acme/skip/*`, `/control/acme/requests/*`, `:execution:`, `/control/acme/wake.json`, `/control/acme/wake-done.json`} {
		if !strings.Contains(all, frag) {
			t.Errorf("controller policy lacks resource %s: %s", frag, all)
		}
	}

	// Step Functions actions, per state machine: the file's executions are started, described and
	// read back (history); the segment's are described and stopped, and nothing else.
	var fileName, segmentName string
	for id := range tenantResources(t, shared.template, "AWS::StepFunctions::StateMachine", "acme") {
		if strings.Contains(id, "WorkflowFile") {
			fileName = id
		} else if strings.Contains(id, "WorkflowSegment") {
			segmentName = id
		}
	}
	bySM := map[string][]string{}
	for _, s := range stmts {
		acts := actionsOf([]map[string]any{s})
		if !strings.HasPrefix(acts[0], "states:") {
			continue
		}
		res := asJSON(s["Resource"])
		key := "other: " + res
		switch {
		case res == `{"Ref":"`+fileName+`"}`:
			key = "file state machine"
		case strings.Contains(res, `{"Ref":"`+fileName+`"}`) && strings.Contains(res, ":execution:"):
			key = "file executions"
		case strings.Contains(res, `{"Ref":"`+segmentName+`"}`) && strings.Contains(res, ":execution:"):
			key = "segment executions"
		}
		bySM[key] = append(bySM[key], acts...)
	}
	for key, want := range map[string][]string{
		"file state machine": {"states:StartExecution"},
		"file executions":    {"states:DescribeExecution", "states:GetExecutionHistory", "states:RedriveExecution"},
		"segment executions": {"states:DescribeExecution", "states:StopExecution"},
	} {
		got := bySM[key]
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("controller on %s: got %v, want %v", key, got, want)
		}
		delete(bySM, key)
	}
	if len(bySM) != 0 {
		t.Errorf("controller has Step Functions actions on other resources: %v", bySM)
	}
}

// listStatements returns the function's s3:ListBucket statements.
func listStatements(stmts []map[string]any) []map[string]any {
	var out []map[string]any
	for _, s := range stmts {
		if slices.Contains(actionsOf([]map[string]any{s}), "s3:ListBucket") {
			out = append(out, s)
		}
	}
	return out
}

// TestListBucketIsScopedToTheTenant: Split, Register and the controller may list (so that a
// missing key reads as 404, not 403), but only under the tenant's own prefix: one statement,
// ListBucket alone, on the bucket, with an s3:prefix condition.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html
func TestListBucketIsScopedToTheTenant(t *testing.T) {
	sharedApp(t)
	for _, tc := range []struct {
		tenant, fn string
		prefixes   []string
	}{
		// Split's function also runs the results task, which lists the file's rejection parts.
		{"acme", "Split", []string{"inbox/acme/*", "results/acme/*"}},
		// Register's function also runs the SmallFile task, which writes a small file's results.
		{"acme", "Register", []string{"inbox/acme/*", "results/acme/*"}},
		{"acme", "Controller", []string{"control/acme/*"}},
		{"initech", "Split", []string{"drop/initech/*", "results/initech/*"}},
		{"initech", "Register", []string{"drop/initech/*", "results/initech/*"}},
		{"initech", "Controller", []string{"control/initech/*"}},
	} {
		t.Run(tc.tenant+"/"+tc.fn, func(t *testing.T) {
			ls := listStatements(policyStatements(t, tc.tenant, tc.fn))
			if len(ls) != len(tc.prefixes) {
				t.Fatalf("got %d ListBucket statements, want %d: %s", len(ls), len(tc.prefixes), asJSON(ls))
			}
			for i, s := range ls {
				if got := asJSON(s["Action"]); got != `"s3:ListBucket"` {
					t.Errorf("actions: got %s, want ListBucket alone", got)
				}
				if got := asJSON(s["Resource"]); !strings.Contains(got, "Fn::ImportValue") || strings.Contains(got, "/*") {
					t.Errorf("resource: got %s, want the ingest bucket's ARN (not its objects)", got)
				}
				if got := asJSON(s["Condition"]); got != `{"StringLike":{"s3:prefix":"`+tc.prefixes[i]+`"}}` {
					t.Errorf("condition: got %s, want StringLike s3:prefix %s", got, tc.prefixes[i])
				}
			}
		})
	}
}

func TestDataPathPermissions(t *testing.T) {
	sharedApp(t)
	split := asJSON(policyStatements(t, "acme", "Split"))
	for _, frag := range []string{`"s3:GetObject","s3:GetObjectVersion"`, `/inbox/acme/*`, `"s3:PutObject"`, `/work/acme/*`, `/results/acme/*`} {
		if !strings.Contains(split, frag) {
			t.Errorf("split policy lacks %s: %s", frag, split)
		}
	}
	// The results task (Split's function) reads the manifest by version and the progress under
	// work/<tenant>/, reads the parts and writes the results under results/<tenant>/, and writes
	// nowhere else.
	for _, want := range []string{
		`"s3:GetObject","s3:GetObjectVersion"]` + ` /work/acme/*`,
		`"s3:GetObject","s3:PutObject"]` + ` /results/acme/*`,
	} {
		found := false
		for _, s := range policyStatements(t, "acme", "Split") {
			acts, res := asJSON(s["Action"]), asJSON(s["Resource"])
			parts := strings.SplitN(want, " ", 2)
			found = found || strings.HasSuffix(acts, parts[0]) && strings.Contains(res, parts[1]+`"`)
		}
		if !found {
			t.Errorf("split policy lacks %s: %s", want, split)
		}
	}
	for _, s := range policyStatements(t, "acme", "Split") {
		acts, res := asJSON(s["Action"]), asJSON(s["Resource"])
		if strings.Contains(acts, "s3:PutObject") && !strings.Contains(res, "/work/acme/*") && !strings.Contains(res, "/results/acme/*") {
			t.Errorf("acme split may put objects at %s, want only work/acme/* and results/acme/*", res)
		}
	}
	// Register reads the manifests and writes each segment's progress under work/<tenant>/, writes
	// its rejections under results/<tenant>/, and writes nowhere else.
	var rejections bool
	for _, s := range policyStatements(t, "acme", "Register") {
		acts, res := asJSON(s["Action"]), asJSON(s["Resource"])
		// The manifest is read by its version id in the versioned bucket: s3:GetObjectVersion.
		if strings.Contains(res, "/work/") && acts != `["s3:GetObject","s3:GetObjectVersion","s3:PutObject"]` {
			t.Errorf("acme register on work/: got actions %s, want [s3:GetObject s3:GetObjectVersion s3:PutObject]", acts)
		}
		if strings.Contains(acts, "s3:PutObject") && strings.Contains(res, "/results/acme/*") {
			rejections = true
		}
		if strings.Contains(acts, "s3:PutObject") && !strings.Contains(res, "/work/acme/*") && !strings.Contains(res, "/results/acme/*") || strings.Contains(acts, "s3:PutObject") && strings.Contains(res, "/inbox/") {
			t.Errorf("acme register may put objects at %s, want only work/acme/* and results/acme/*", res)
		}
	}
	if !rejections {
		t.Errorf("acme register: got no s3:PutObject on results/acme/*, want it for its rejections")
	}
	if got := actionsOf(policyStatements(t, "acme", "Register")); !slices.Contains(got, "s3:PutObject") {
		t.Errorf("acme register actions %v, want s3:PutObject for its segments' progress", got)
	}
	reg := policyStatements(t, "globex", "Register")
	if got := actionsOf(reg); !slices.Contains(got, "secretsmanager:GetSecretValue") {
		t.Errorf("globex register actions %v, want secretsmanager:GetSecretValue for its auth secret", got)
	}
	if got := actionsOf(policyStatements(t, "acme", "Register")); slices.Contains(got, "secretsmanager:GetSecretValue") {
		t.Errorf("acme register actions %v: acme has no secret", got)
	}
}

func TestLogGroupsHaveRetention(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		lgs := tenantResources(t, shared.template, "AWS::Logs::LogGroup", tenant)
		if len(lgs) != 4 {
			t.Errorf("tenant %s: got %d log groups, want 4 (three functions, one for the workflows)", tenant, len(lgs))
		}
		for id, lg := range lgs {
			if props(lg)["RetentionInDays"] != float64(30) {
				t.Errorf("%s: RetentionInDays got %v, want 30", id, props(lg)["RetentionInDays"])
			}
		}
	}
}

func TestAlarmTopicReceivesEveryAlarm(t *testing.T) {
	_, built := synthApp(t, "one-tenant.json", stackOptions("arn:aws:sns:eu-west-1:123456789012:ops"))
	tpl := stackAssertions(t, built.TenantStacks[0])
	templatecheck.Assert(t, func() {
		tpl.AllResourcesProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"AlarmActions": []any{"arn:aws:sns:eu-west-1:123456789012:ops"},
			"OKActions":    []any{"arn:aws:sns:eu-west-1:123456789012:ops"},
		})
	})
}

func TestIngestBucket(t *testing.T) {
	sharedApp(t)
	templatecheck.Assert(t, func() { shared.ingest.ResourceCountIs(jsii.String("AWS::S3::Bucket"), jsii.Number(1)) })
	templatecheck.Assert(t, func() {
		shared.ingest.HasResourceProperties(jsii.String("AWS::S3::Bucket"), map[string]any{
			"VersioningConfiguration":        map[string]any{"Status": "Enabled"},
			"PublicAccessBlockConfiguration": map[string]any{"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true},
			"LifecycleConfiguration": map[string]any{"Rules": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{"Prefix": "work/", "ExpirationInDays": 366, "Status": "Enabled"}),
				assertions.Match_ObjectLike(&map[string]any{"Prefix": "results/", "ExpirationInDays": 30, "Status": "Enabled"}),
			})},
		})
	})
	templatecheck.Assert(t, func() {
		shared.ingest.HasResource(jsii.String("AWS::S3::Bucket"), map[string]any{"DeletionPolicy": "Retain"})
	})
	// CDK turns EventBridge notifications on through its bucket-notifications custom resource.
	templatecheck.Assert(t, func() {
		shared.ingest.HasResourceProperties(jsii.String("Custom::S3BucketNotifications"), map[string]any{
			"NotificationConfiguration": map[string]any{"EventBridgeConfiguration": map[string]any{}},
		})
	})
	templatecheck.Assert(t, func() {
		shared.ingest.HasResourceProperties(jsii.String("AWS::S3::BucketPolicy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}}),
			})},
		})
	})
}

func TestExistingBucketByName(t *testing.T) {
	o := stackOptions("")
	o.BucketName = "corp-ingest"
	_, built := synthApp(t, "one-tenant.json", o)
	if built.Ingest != nil {
		t.Errorf("got an ingest stack, want none when bucketName names an existing bucket")
	}
	tpl := stackTemplate(t, built.TenantStacks[0])
	_, r := fileRule(t, tpl, "acme")
	if got := asJSON(get(t, props(r), "EventPattern", "detail", "bucket", "name")); got != `["corp-ingest"]` {
		t.Errorf("bucket name: got %s, want [\"corp-ingest\"]", got)
	}
}

// TestTimeoutPropsReachTheFunctionsAndTheWorkflow: non-default RegisterHTTPTimeout and
// RegisterTimeout reach the register function (HTTP_TIMEOUT_SECONDS, its timeout), the controller
// (REGISTER_TIMEOUT_SECONDS) and the Register task's retry after an unknown invoke outcome
// (function timeout + 30 s).
func TestTimeoutPropsReachTheFunctionsAndTheWorkflow(t *testing.T) {
	app := testApp(t)
	stack := awscdk.NewStack(app, jsii.String("Props"), nil)
	tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
		Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/r"},
		Bucket: stacks.NewIngestBucket(stack, "Bucket"),
		SharedProps: tenantpipeline.SharedProps{
			RegisterHTTPTimeout: 30 * time.Second,
			RegisterTimeout:     45 * time.Second,
		},
	})
	tpl := templateJSON(assertions.Template_FromStack(stack, nil))
	fns := map[string]map[string]any{}
	for _, fn := range tenantResources(t, tpl, "AWS::Lambda::Function", "acme") {
		src, _ := get(t, fn, "Metadata").(map[string]any)["tenantpipeline:source"].(string)
		fns[src] = props(fn)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"register HTTP_TIMEOUT_SECONDS", get(t, fns["lambdas/register"], "Environment", "Variables", "HTTP_TIMEOUT_SECONDS"), "30"},
		{"register Timeout", fns["lambdas/register"]["Timeout"], float64(45)},
		{"controller REGISTER_TIMEOUT_SECONDS", get(t, fns["lambdas/controller"], "Environment", "Variables", "REGISTER_TIMEOUT_SECONDS"), "45"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	for id, sm := range tenantResources(t, tpl, "AWS::StepFunctions::StateMachine", "acme") {
		if !strings.Contains(id, "WorkflowSegment") {
			continue
		}
		_, asl := renderASL(t, props(sm)["DefinitionString"])
		reg := get(t, asl, "States", "Register").(map[string]any)
		by := retriersByError(t, "Register", reg)
		if got := by["Lambda.ClientExecutionTimeoutException"]["IntervalSeconds"]; got != float64(75) {
			t.Errorf("Register ClientExecutionTimeoutException interval: got %v, want 75 (45 s timeout + 30 s)", got)
		}
	}
}
