package test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
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
				"VisibilityTimeout":             float64(30),
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
			ruleID, _ := only(t, shared.template, "AWS::Events::Rule", tenant)
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
			_, r := only(t, shared.template, "AWS::Events::Rule", tenant)
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
	for _, r := range tenantResources(t, shared.template, "AWS::Events::Rule", "") {
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
			for _, k := range []string{"STATE_MACHINE_ARN", "QUEUE_URL", "TENANT", "TENANT_PREFIX", "INGEST_BUCKET", "ON_FAILURE", "IDEMPOTENCY_KEY", "MAX_WAIT_SECONDS", "HALT_WAIT_SECONDS", "METRICS_NAMESPACE"} {
				if _, ok := env[k]; !ok {
					t.Errorf("controller env: missing %s", k)
				}
			}
			if env["MAX_WAIT_SECONDS"] != "30" {
				t.Errorf("MAX_WAIT_SECONDS: got %v, want the visibility timeout 30", env["MAX_WAIT_SECONDS"])
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
		"s3:GetObject", "s3:ListBucket", "s3:PutObject",
		"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage",
		"states:DescribeExecution", "states:StartExecution",
	}
	if !slices.Equal(got, want) {
		t.Errorf("controller actions:\ngot  %v\nwant %v", got, want)
	}
	all := asJSON(stmts)
	for _, frag := range []string{`/quarantine/acme/*`, `/control/acme/skip/*`, `:execution:`} {
		if !strings.Contains(all, frag) {
			t.Errorf("controller policy lacks resource %s: %s", frag, all)
		}
	}
}

func TestDataPathPermissions(t *testing.T) {
	sharedApp(t)
	split := asJSON(policyStatements(t, "acme", "Split"))
	for _, frag := range []string{`"s3:GetObject","s3:GetObjectVersion"`, `/inbox/acme/*`, `"s3:PutObject"`, `/work/acme/*`} {
		if !strings.Contains(split, frag) {
			t.Errorf("split policy lacks %s: %s", frag, split)
		}
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
	tpl := assertions.Template_FromStack(built.TenantStacks[0], nil)
	tpl.AllResourcesProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
		"AlarmActions": []any{"arn:aws:sns:eu-west-1:123456789012:ops"},
		"OKActions":    []any{"arn:aws:sns:eu-west-1:123456789012:ops"},
	})
}

func TestIngestBucket(t *testing.T) {
	sharedApp(t)
	shared.ingest.ResourceCountIs(jsii.String("AWS::S3::Bucket"), jsii.Number(1))
	shared.ingest.HasResourceProperties(jsii.String("AWS::S3::Bucket"), map[string]any{
		"VersioningConfiguration":        map[string]any{"Status": "Enabled"},
		"PublicAccessBlockConfiguration": map[string]any{"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true},
		"LifecycleConfiguration": map[string]any{"Rules": assertions.Match_ArrayWith(&[]any{
			assertions.Match_ObjectLike(&map[string]any{"Prefix": "work/", "ExpirationInDays": 30, "Status": "Enabled"}),
		})},
	})
	shared.ingest.HasResource(jsii.String("AWS::S3::Bucket"), map[string]any{"DeletionPolicy": "Retain"})
	// CDK turns EventBridge notifications on through its bucket-notifications custom resource.
	shared.ingest.HasResourceProperties(jsii.String("Custom::S3BucketNotifications"), map[string]any{
		"NotificationConfiguration": map[string]any{"EventBridgeConfiguration": map[string]any{}},
	})
	shared.ingest.HasResourceProperties(jsii.String("AWS::S3::BucketPolicy"), map[string]any{
		"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
			assertions.Match_ObjectLike(&map[string]any{"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}}),
		})},
	})
}

func TestExistingBucketByName(t *testing.T) {
	o := stackOptions("")
	o.BucketName = "corp-ingest"
	_, built := synthApp(t, "one-tenant.json", o)
	if built.Ingest != nil {
		t.Errorf("got an ingest stack, want none when bucketName names an existing bucket")
	}
	tpl := templateJSON(assertions.Template_FromStack(built.TenantStacks[0], nil))
	_, r := only(t, tpl, "AWS::Events::Rule", "acme")
	if got := asJSON(get(t, props(r), "EventPattern", "detail", "bucket", "name")); got != `["corp-ingest"]` {
		t.Errorf("bucket name: got %s, want [\"corp-ingest\"]", got)
	}
}
