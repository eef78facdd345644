package test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
	"github.com/example/tenantpipeline/internal/templatecheck"
)

// Who may steer a tenant: the queues and the bucket's control/, work/ and quarantine/ prefixes
// deny everyone but the pipeline and the operators (docs/operations.md, "Who may steer a tenant").

// roleID is the logical id of the service role of the tenant's function whose id contains fn.
func roleID(t *testing.T, tpl map[string]any, tenant, fn string) string {
	t.Helper()
	return logicalIDOf(t, tpl, "AWS::IAM::Role", tenant, fn+"ServiceRole")
}

// logicalIDOfType is the logical id of the template's only resource of a type.
func logicalIDOfType(t *testing.T, tpl map[string]any, typ string) string {
	t.Helper()
	var found []string
	for id, r := range tpl["Resources"].(map[string]any) {
		if r.(map[string]any)["Type"] == typ {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		t.Fatalf("got %v resources of type %s, want 1", found, typ)
	}
	return found[0]
}

func getAtt(id string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, "Arn"}} }

// queueDeny is the exact statement a tenant's queue policy must carry for queueID: operators are
// exempt by ARN alone, never by a tag.
func queueDeny(queueID, ruleID, controllerRoleID string, operatorARNs ...any) map[string]any {
	return map[string]any{
		"Sid":       "OnlyTheRuleThePipelineAndOperatorsSend",
		"Effect":    "Deny",
		"Principal": "*",
		"Action":    "sqs:SendMessage",
		"Resource":  getAtt(queueID),
		"Condition": map[string]any{
			// ANDed: the Deny applies unless the request comes from the rule, the controller's
			// role or an operator; each negated operator also holds when its key is absent.
			"ArnNotEquals": map[string]any{"aws:SourceArn": getAtt(ruleID)},
			"ArnNotLike":   map[string]any{"aws:PrincipalArn": append([]any{getAtt(controllerRoleID)}, operatorARNs...)},
		},
	}
}

// controlWriteActions are the S3 actions that write an object, a version, its ACL, tags,
// retention or legal hold, replicate or restore one, or abort an upload: the actions of access
// level Write, Tagging and Permissions management on the object resource
// (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html), written
// out, not taken from the construct.
var controlWriteActions = []any{
	"s3:PutObject", "s3:PutObjectAcl", "s3:PutObjectVersionAcl",
	"s3:PutObjectTagging", "s3:PutObjectVersionTagging", "s3:DeleteObjectTagging", "s3:DeleteObjectVersionTagging",
	"s3:PutObjectRetention", "s3:PutObjectLegalHold",
	"s3:DeleteObject", "s3:DeleteObjectVersion",
	"s3:ReplicateObject", "s3:ReplicateDelete", "s3:ReplicateTags",
	"s3:RestoreObject", "s3:AbortMultipartUpload",
}

// bucketDeny is the exact statement the ingest bucket's policy must carry.
func bucketDeny(bucketArn any, roles []any, operatorARNs ...any) map[string]any {
	res := func(prefix string) any {
		if s, ok := bucketArn.(string); ok {
			return map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, ":s3:::" + s + "/" + prefix + "*"}}}
		}
		return map[string]any{"Fn::Join": []any{"", []any{bucketArn, "/" + prefix + "*"}}}
	}
	return map[string]any{
		"Sid":       "OnlyThePipelineAndOperatorsWriteControlWorkQuarantine",
		"Effect":    "Deny",
		"Principal": "*",
		"Action":    controlWriteActions,
		"Resource":  []any{res("control/"), res("work/"), res("quarantine/"), res("results/")},
		"Condition": map[string]any{
			"ArnNotLike": map[string]any{"aws:PrincipalArn": append(slices.Clone(roles), operatorARNs...)},
		},
	}
}

func hasStatement(t *testing.T, tpl assertions.Template, typ string, extra map[string]any, stmt map[string]any) {
	t.Helper()
	want := map[string]any{"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectEquals(&stmt)})}}
	for k, v := range extra {
		want[k] = v
	}
	templatecheck.Assert(t, func() { tpl.HasResourceProperties(jsii.String(typ), want) })
}

// TestQueuesDenySendsButTheRuleThePipelineAndOperators: both queues of every tenant (the FIFO
// queue, and the rule's dead-letter queue that pipectl replays from) deny sqs:SendMessage to all
// but the tenant's rule and the controller's role: by default there are no operators.
func TestQueuesDenySendsButTheRuleThePipelineAndOperators(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		t.Run(tenant, func(t *testing.T) {
			ruleID, _ := fileRule(t, shared.template, tenant)
			controller := roleID(t, shared.template, tenant, "Controller")
			fifo, _ := fifoQueue(t, shared.template, tenant)
			dlq, _ := ruleDLQ(t, shared.template, tenant)
			for _, q := range []string{fifo, dlq} {
				hasStatement(t, shared.tenants, "AWS::SQS::QueuePolicy", map[string]any{"Queues": []any{map[string]any{"Ref": q}}},
					queueDeny(q, ruleID, controller))
			}
		})
	}
}

// TestIngestBucketDeniesForeignWrites: the bucket the app creates denies writes and deletes under
// control/, work/ and quarantine/ to all but the roles under the app's role path, each by its exact
// ARN, and the operators, in one statement.
func TestIngestBucketDeniesForeignWrites(t *testing.T) {
	sharedApp(t)
	bucket := logicalIDOfType(t, templateJSON(shared.ingest), "AWS::S3::Bucket")
	hasStatement(t, shared.ingest, "AWS::S3::BucketPolicy", nil,
		bucketDeny(getAtt(bucket), exactRoles(t, "/tenantpipeline/TenantPipeline/", appTemplates(t, shared.app)...)))
	// The app adds the Deny before the tenants' and pools' constructs, which then add none.
	denies := 0
	for _, pol := range byType(templateJSON(shared.ingest), "AWS::S3::BucketPolicy") {
		for _, st := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
			if st.(map[string]any)["Sid"] == "OnlyThePipelineAndOperatorsWriteControlWorkQuarantine" {
				denies++
			}
		}
	}
	if denies != 1 {
		t.Errorf("got %d write Denies in the ingest bucket's policy, want 1", denies)
	}
}

// TestFunctionRolesAreUnderTheRolePath: the roles the bucket's Deny exempts by path are exactly the
// functions' roles; the state machines' roles write nothing to the bucket and keep the default path.
func TestFunctionRolesAreUnderTheRolePath(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		for id, r := range tenantResources(t, shared.template, "AWS::IAM::Role", tenant) {
			got, _ := props(r)["Path"].(string)
			want := ""
			if strings.Contains(id, "ServiceRole") && !strings.Contains(id, "Workflow") {
				want = "/tenantpipeline/TenantPipeline/"
			}
			if got != want {
				t.Errorf("%s: got Path %q, want %q", id, got, want)
			}
		}
	}
}

// TestOperatorsFromContext: the operator ARNs of the CDK context reach both Deny statements.
func TestOperatorsFromContext(t *testing.T) {
	app := testAppWithContext(t, map[string]any{
		stacks.CtxOperatorArns: "arn:aws:iam::123456789012:role/ops/*, arn:aws:iam::123456789012:user/alice",
		stacks.CtxStackPrefix:  "Corp",
	})
	o, err := stacks.OptionsFromContext(app)
	if err != nil {
		t.Fatal(err)
	}
	o.TenantsFile, o.AssignmentFile = "testdata/one-tenant.json", "testdata/one-tenant.stacks.json"
	built, err := stacks.Build(app, o)
	if err != nil {
		t.Fatal(err)
	}
	arns := []any{"arn:aws:iam::123456789012:role/ops/*", "arn:aws:iam::123456789012:user/alice"}
	ingest := assertions.Template_FromStack(built.Ingest, nil)
	hasStatement(t, ingest, "AWS::S3::BucketPolicy", nil,
		bucketDeny(getAtt(logicalIDOfType(t, templateJSON(ingest), "AWS::S3::Bucket")), exactRoles(t, "/tenantpipeline/Corp/", appTemplates(t, built)...), arns...))
	tenants := assertions.Template_FromStack(built.TenantStacks[0], nil)
	tpl := templateJSON(tenants)
	ruleID, _ := fileRule(t, tpl, "acme")
	fifo, _ := fifoQueue(t, tpl, "acme")
	hasStatement(t, tenants, "AWS::SQS::QueuePolicy", map[string]any{"Queues": []any{map[string]any{"Ref": fifo}}},
		queueDeny(fifo, ruleID, roleID(t, tpl, "acme", "Controller"), arns...))
}

// TestOperatorTagContextIsRefused: a session can claim any tag, so an operator tag in the context
// fails synth with a message that says to name operators by ARN.
func TestOperatorTagContextIsRefused(t *testing.T) {
	app := testAppWithContext(t, map[string]any{stacks.CtxOperatorTag: "team=pipeline-ops"})
	_, err := stacks.OptionsFromContext(app)
	for _, want := range []string{`context operatorTag "team=pipeline-ops" is no longer read`, "set -c operatorArns="} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
	}
}

// TestExistingBucketGetsTheStatementToAdd: CDK cannot change an imported bucket's policy, so the
// first tenant stack outputs the exact statement for the bucket's owner, and synth warns.
func TestExistingBucketGetsTheStatementToAdd(t *testing.T) {
	o := stackOptions("")
	o.BucketName = "corp-ingest"
	_, built := synthApp(t, "one-tenant.json", o)
	stack := built.TenantStacks[0]
	tpl := assertions.Template_FromStack(stack, nil)
	out := templateJSON(tpl)["Outputs"].(map[string]any)[stacks.ImportedBucketPolicyOutput]
	if out == nil {
		t.Fatalf("got no output %s", stacks.ImportedBucketPolicyOutput)
	}
	got := flatten(t, get(t, out, "Value"))
	want := `{"Sid":"OnlyThePipelineAndOperatorsWriteControlWorkQuarantine","Effect":"Deny","Principal":"*",` +
		`"Action":["s3:PutObject","s3:PutObjectAcl","s3:PutObjectVersionAcl","s3:PutObjectTagging","s3:PutObjectVersionTagging",` +
		`"s3:DeleteObjectTagging","s3:DeleteObjectVersionTagging","s3:PutObjectRetention","s3:PutObjectLegalHold","s3:DeleteObject","s3:DeleteObjectVersion",` +
		`"s3:ReplicateObject","s3:ReplicateDelete","s3:ReplicateTags","s3:RestoreObject","s3:AbortMultipartUpload"],` +
		`"Resource":["arn:<Ref:AWS::Partition>:s3:::corp-ingest/control/*","arn:<Ref:AWS::Partition>:s3:::corp-ingest/work/*","arn:<Ref:AWS::Partition>:s3:::corp-ingest/quarantine/*","arn:<Ref:AWS::Partition>:s3:::corp-ingest/results/*"],` +
		`"Condition":{"ArnNotLike":{"aws:PrincipalArn":[` + exactRolesFlat(t, "/tenantpipeline/TenantPipeline/", appTemplates(t, built)...) + `]}}}`
	if got != want {
		t.Errorf("got output\n%s\nwant\n%s", got, want)
	}
	msgs := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
		assertions.Match_StringLikeRegexp(jsii.String("corp-ingest is not managed by this app.*stack output "+stacks.ImportedBucketPolicyOutput)))
	if len(*msgs) != 1 {
		t.Errorf("got %d warnings about the imported bucket's policy, want 1", len(*msgs))
	}
}

// TestResultsExpirationDaysContext: the results/ lifecycle rule of the bucket the app creates
// follows the context, and a value that is not a number of days names the key.
func TestResultsExpirationDaysContext(t *testing.T) {
	app := testAppWithContext(t, map[string]any{stacks.CtxResultsExpirationDays: "7"})
	o, err := stacks.OptionsFromContext(app)
	if err != nil {
		t.Fatal(err)
	}
	o.TenantsFile, o.AssignmentFile = "testdata/one-tenant.json", "testdata/one-tenant.stacks.json"
	built, err := stacks.Build(app, o)
	if err != nil {
		t.Fatal(err)
	}
	templatecheck.Assert(t, func() {
		assertions.Template_FromStack(built.Ingest, nil).HasResourceProperties(jsii.String("AWS::S3::Bucket"), map[string]any{
			"LifecycleConfiguration": map[string]any{"Rules": assertions.Match_ArrayWith(&[]any{
				assertions.Match_ObjectLike(&map[string]any{"Id": "ExpireResults", "Prefix": "results/", "ExpirationInDays": 7, "Status": "Enabled"}),
			})},
		})
	})
	for _, bad := range []string{"0", "a month"} {
		app := testAppWithContext(t, map[string]any{stacks.CtxResultsExpirationDays: bad})
		if _, err := stacks.OptionsFromContext(app); err == nil || !strings.Contains(err.Error(), "context resultsExpirationDays") {
			t.Errorf("%q: got %v, want an error naming resultsExpirationDays", bad, err)
		}
	}
}

// TestLifecycleRulesForYourBucket: a bucket a construct user creates with
// tenantpipeline.LifecycleRules gets the rules the app's own bucket has: work/ for a redrive's
// year, results/ for the given days (30 by default), noncurrent versions and incomplete uploads.
func TestLifecycleRulesForYourBucket(t *testing.T) {
	for _, tc := range []struct {
		days, want int
	}{{90, 90}, {0, pipeline.DefaultResultsExpirationDays}} {
		app := testApp(t)
		stack := awscdk.NewStack(app, jsii.String("Mine"), nil)
		awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{Versioned: jsii.Bool(true), EventBridgeEnabled: jsii.Bool(true),
			LifecycleRules: tenantpipeline.LifecycleRules(tc.days)})
		templatecheck.Assert(t, func() {
			assertions.Template_FromStack(stack, nil).HasResourceProperties(jsii.String("AWS::S3::Bucket"), map[string]any{
				"LifecycleConfiguration": map[string]any{"Rules": []any{
					map[string]any{"Id": "ExpireWorkFiles", "Prefix": "work/", "ExpirationInDays": pipeline.WorkExpirationDays,
						"NoncurrentVersionExpiration": map[string]any{"NoncurrentDays": 1}, "AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 7}, "Status": "Enabled"},
					map[string]any{"Id": "ExpireResults", "Prefix": "results/", "ExpirationInDays": tc.want,
						"NoncurrentVersionExpiration": map[string]any{"NoncurrentDays": 1}, "AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 7}, "Status": "Enabled"},
					map[string]any{"Id": "ExpireOldVersions",
						"NoncurrentVersionExpiration": map[string]any{"NoncurrentDays": 30}, "AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 7}, "Status": "Enabled"},
				}},
			})
		})
	}
}
