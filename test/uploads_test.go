package test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// Customers upload, and who may steer: GrantUpload and the pool's uploader role in both tiers,
// and the operators' exemption from the write and send Denies by ARN alone.

const (
	operatorPattern = "arn:aws:iam::123456789012:role/ops/*"
	platformRole    = "arn:aws:iam::123456789012:role/platform"
)

// doors synthesizes, once, a silo tenant and a pool of one tenant on one bucket, with one operator
// ARN pattern, a customer role granted uploads of each, and the pool's uploaders.
var doors = sync.OnceValue(func() map[string]any {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(os.TempDir(), "doors-both-tiers"))})
	stack := awscdk.NewStack(app, jsii.String("Doors"), nil)
	bucket := stacks.NewIngestBucket(stack, "Bucket")
	ops := tenantpipeline.Operators{PrincipalARNs: []string{operatorPattern}}
	silo := tenantpipeline.New(stack, "Silo", &tenantpipeline.Props{
		Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"}, Bucket: bucket,
		SharedProps: tenantpipeline.SharedProps{Operators: ops},
	})
	pool := tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
		Name: "p", Bucket: bucket, IntakeGroups: 1,
		Tenants:   []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/hooli"}},
		Uploaders: []awsiam.IPrincipal{awsiam.NewArnPrincipal(jsii.String(platformRole))},
		Shared:    tenantpipeline.SharedProps{Operators: ops},
	})
	for _, c := range []struct {
		id    string
		grant func(awsiam.IGrantable) awsiam.Grant
	}{
		{"SiloCustomer", silo.GrantUpload},
		{"PoolCustomer", func(g awsiam.IGrantable) awsiam.Grant { return pool.GrantUpload("hooli", g) }},
	} {
		role := awsiam.NewRole(stack, jsii.String(c.id), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
		c.grant(role).AssertSuccess()
	}
	return templateJSON(assertions.Template_FromStack(stack, nil))
})

// uploadStatement is the one statement an upload grant under prefix is, in a template whose bucket
// has the logical id bucket.
func uploadStatement(bucket any, prefix string) string {
	return `{"Action":["s3:PutObject","s3:AbortMultipartUpload","s3:ListMultipartUploadParts"],` +
		`"Condition":{"Bool":{"aws:SecureTransport":"true"}},"Effect":"Allow",` +
		`"Resource":{"Fn::Join":["",[` + asJSON(bucket) + `,"/` + prefix + `*"]]}}`
}

// TestGrantUploadInBothTiers: the role granted a tenant's uploads holds exactly the put and
// multipart actions on that tenant's prefix, over TLS, and nothing else: no read, no list, no
// other prefix. In both tiers.
func TestGrantUploadInBothTiers(t *testing.T) {
	tpl := doors()
	bucket := getAtt(logicalIDOfType(t, tpl, "AWS::S3::Bucket"))
	for _, tc := range []struct{ tier, holder, prefix string }{
		{"silo", "SiloCustomerDefaultPolicy", "inbox/acme/"},
		{"pool", "PoolCustomerDefaultPolicy", "pools/p/hooli/"},
	} {
		t.Run(tc.tier, func(t *testing.T) {
			got := tierStatements(tpl, tc.holder)
			if want := []string{uploadStatement(bucket, tc.prefix)}; !slices.Equal(got, want) {
				t.Errorf("got statements\n%s\nwant\n%s", strings.Join(got, "\n"), want[0])
			}
		})
	}
}

// TestUploaderRole: the pool's uploader role is trusted by the uploaders alone, with exactly the
// tenant session tag; it may upload under <pool prefix>${aws:PrincipalTag/tenant}/ and nothing
// else; it is not under the pipeline's role path, which the bucket's Deny exempts; and the pool's
// output names it for pipectl.
func TestUploaderRole(t *testing.T) {
	tpl := doors()
	id := onlyID(t, tpl, "AWS::IAM::Role", "PoolUploaderRole")
	role := props(tpl["Resources"].(map[string]any)[id].(map[string]any))
	if p, ok := role["Path"]; ok {
		t.Errorf("got Path %v, want none", p)
	}
	wantTrust := `{"Statement":[{"Action":["sts:AssumeRole","sts:TagSession"],"Condition":` + tagConditions + `,` +
		`"Effect":"Allow","Principal":{"AWS":"` + platformRole + `"}}],"Version":"2012-10-17"}`
	if got := asJSON(role["AssumeRolePolicyDocument"]); got != wantTrust {
		t.Errorf("got trust policy\n%s\nwant\n%s", got, wantTrust)
	}
	bucket := getAtt(logicalIDOfType(t, tpl, "AWS::S3::Bucket"))
	if got, want := tierStatements(tpl, "PoolUploaderRoleDefaultPolicy"), []string{uploadStatement(bucket, "pools/p/${aws:PrincipalTag/tenant}/")}; !slices.Equal(got, want) {
		t.Errorf("got statements\n%s\nwant\n%s", strings.Join(got, "\n"), want[0])
	}
	out := asJSON(tpl["Outputs"].(map[string]any)[pipeline.PoolOutputKey("p")])
	if want := `\"uploaderRoleArn\":\"",{"Fn::GetAtt":["` + id + `","Arn"]}`; !strings.Contains(out, want) {
		t.Errorf("got pool output %s, want it to contain %s", out, want)
	}
}

// tagConditions are the uploader role's trust conditions: exactly one session tag, tenant, non-empty,
// without "/" and at most 32 characters.
const tagConditions = `{"ForAllValues:StringEquals":{"aws:TagKeys":["tenant"]},"Null":{"aws:RequestTag/tenant":"false"},` +
	`"StringLike":{"aws:RequestTag/tenant":"?*"},"StringNotLike":{"aws:RequestTag/tenant":["*/*","?????????????????????????????????*"]}}`

// denyStatements are the Deny statements of the template's queue and bucket policies, by the
// logical id of the resource each protects.
func denyStatements(t *testing.T, tpl map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for id, r := range tpl["Resources"].(map[string]any) {
		res := r.(map[string]any)
		var target string
		switch res["Type"] {
		case "AWS::SQS::QueuePolicy":
			target = get(t, props(res), "Queues", 0, "Ref").(string)
		case "AWS::S3::BucketPolicy":
			target = get(t, props(res), "Bucket", "Ref").(string)
		default:
			continue
		}
		for _, s := range get(t, props(res), "PolicyDocument", "Statement").([]any) {
			st := s.(map[string]any)
			if st["Effect"] != "Deny" || st["Principal"] != "*" {
				continue
			}
			if _, tls := get(t, st, "Condition").(map[string]any)["Bool"]; tls {
				continue // EnforceSSL's statement
			}
			if sid, _ := st["Sid"].(string); uploadDenySids[sid] || sid == sidReadDeny {
				continue // what the bucket cannot honour, and who reads it: exact, operators included, in bucketdenies_test.go
			}
			if out[target] != nil {
				t.Fatalf("%s (%s): two Deny statements", target, id)
			}
			out[target] = st
		}
	}
	return out
}

// checkOperatorDenies asserts, per protected resource, that its Deny exempts the operators by
// aws:PrincipalArn and by nothing a session can set, and that the bucket's names every object
// write: want maps each resource's logical id prefix to its Deny's action.
func checkOperatorDenies(t *testing.T, tpl map[string]any, want map[string]any) {
	t.Helper()
	denies := denyStatements(t, tpl)
	for prefix, action := range want {
		t.Run(prefix, func(t *testing.T) {
			var st map[string]any
			for id, s := range denies {
				if strings.HasPrefix(id, prefix) && len(id) == len(prefix)+8 {
					st = s
				}
			}
			if st == nil {
				t.Fatalf("got no Deny on %s*, want one; denies on %v", prefix, keys(anyMap(denies)))
			}
			if got := asJSON(st["Action"]); got != asJSON(action) {
				t.Errorf("got actions %s, want %s", got, asJSON(action))
			}
			cond := st["Condition"].(map[string]any)
			arns, _ := get(t, cond, "ArnNotLike", "aws:PrincipalArn").([]any)
			if !slices.Contains(arns, any(operatorPattern)) {
				t.Errorf("got ArnNotLike aws:PrincipalArn %v, want it to name %s", arns, operatorPattern)
			}
			for op := range cond {
				if op != "ArnNotLike" && op != "ArnNotEquals" {
					t.Errorf("got condition operator %s, want only ArnNotLike aws:PrincipalArn (and ArnNotEquals aws:SourceArn)", op)
				}
			}
			if c := asJSON(cond); strings.Contains(c, "PrincipalTag") || strings.Contains(c, "RequestTag") {
				t.Errorf("got condition %s, want no tag a session can claim", c)
			}
		})
	}
}

// TestOperatorsExemptByARNInBothTiers: the bucket's write Deny, the silo's two queues and the
// pool's three queues exempt the operators by ARN only.
func TestOperatorsExemptByARNInBothTiers(t *testing.T) {
	checkOperatorDenies(t, doors(), map[string]any{
		"Bucket": controlWriteActions, "SiloQueue": "sqs:SendMessage", "SiloRuleDeadLetterQueue": "sqs:SendMessage",
		"PoolQueue": "sqs:SendMessage", "PoolIntake": "sqs:SendMessage", "PoolRuleDeadLetterQueue": "sqs:SendMessage",
	})
}

// TestUploadersFromTheTenantsFile: a pool's "uploaders" make its uploader role, trusted by those
// ARNs; a pool without them has none.
func TestUploadersFromTheTenantsFile(t *testing.T) {
	_, built := synthApp(t, "uploads.json", stacks.Options{})
	pool := built.Pools["default"]
	if pool.UploaderRole == nil {
		t.Fatal("got no UploaderRole")
	}
	tpl := templateJSON(assertions.Template_FromStack(built.PoolStacks[0], nil))
	id := onlyID(t, tpl, "AWS::IAM::Role", "PoolUploaderRole")
	// CDK writes one statement per principal: each must carry the tag conditions.
	var principals []string
	for _, st := range get(t, props(tpl["Resources"].(map[string]any)[id].(map[string]any)), "AssumeRolePolicyDocument", "Statement").([]any) {
		principals = append(principals, get(t, st, "Principal", "AWS").(string))
		if got := asJSON(get(t, st, "Condition")); got != tagConditions {
			t.Errorf("got trust conditions %s, want %s", got, tagConditions)
		}
	}
	slices.Sort(principals)
	if want := []string{platformRole, "arn:aws:iam::123456789012:role/svc/vendor"}; !slices.Equal(principals, want) {
		t.Errorf("got principals %v, want %v", principals, want)
	}
	_, plain := poolTemplate(t)
	for id := range byType(plain, "AWS::IAM::Role") {
		if strings.Contains(id, "UploaderRole") {
			t.Errorf("got uploader role %s in a pool without uploaders, want none", id)
		}
	}
}

// onlyID is the logical id of the template's one resource of typ whose id is prefix and a hash.
func onlyID(t *testing.T, tpl map[string]any, typ, prefix string) string {
	t.Helper()
	var found []string
	for id := range byType(tpl, typ) {
		if strings.HasPrefix(id, prefix) && len(id) == len(prefix)+8 {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		t.Fatalf("got %v %s resources %s*, want 1", found, typ, prefix)
	}
	return found[0]
}

// siloKeyed synthesizes, once, a silo tenant with uploaders whose bucket takes a customer-managed
// key (SharedProps.EncryptionKey); it returns the template and the key's logical id.
var siloKeyed = sync.OnceValues(func() (map[string]any, string) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(os.TempDir(), "doors-silo-keyed"))})
	stack := awscdk.NewStack(app, jsii.String("SiloKeyed"), nil)
	key := awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
	tenantpipeline.New(stack, "Silo", &tenantpipeline.Props{
		Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"}, Bucket: stacks.NewIngestBucket(stack, "Bucket"),
		Uploaders:   []awsiam.IPrincipal{awsiam.NewArnPrincipal(jsii.String(platformRole))},
		SharedProps: tenantpipeline.SharedProps{EncryptionKey: key},
	})
	return templateJSON(assertions.Template_FromStack(stack, nil)), *stack.GetLogicalId(key.Node().DefaultChild().(awskms.CfnKey))
})

// siloTrust is the silo uploader role's trust policy: sts:AssumeRole by the uploaders alone, no
// session tag (the role is one tenant's).
func siloTrust(principals ...string) string {
	var st []string
	for _, p := range principals {
		st = append(st, `{"Action":"sts:AssumeRole","Effect":"Allow","Principal":{"AWS":"`+p+`"}}`)
	}
	return `{"Statement":[` + strings.Join(st, ",") + `],"Version":"2012-10-17"}`
}

// TestSiloUploaderRole: a silo tenant's "uploaders" make its uploader role, trusted by exactly
// those ARNs with sts:AssumeRole alone, for sessions of at most an hour, not under the pipeline's
// role path; its only policy is the upload under the tenant's prefix over TLS; the tenant's output
// names it for pipectl. A silo tenant without uploaders has none.
func TestSiloUploaderRole(t *testing.T) {
	_, built := synthApp(t, "uploads.json", stacks.Options{})
	silo := built.Pipelines["acme"]
	if silo == nil || silo.UploaderRole == nil {
		t.Fatal("got no silo UploaderRole")
	}
	tpl := templateJSON(assertions.Template_FromStack(built.TenantStacks[0], nil))
	id := onlyID(t, tpl, "AWS::IAM::Role", "TenantacmeUploaderRole")
	role := props(tpl["Resources"].(map[string]any)[id].(map[string]any))
	if got, want := asJSON(role["AssumeRolePolicyDocument"]), siloTrust(platformRole); got != want {
		t.Errorf("got trust policy\n%s\nwant\n%s", got, want)
	}
	if got := asJSON(role["MaxSessionDuration"]); got != "3600" {
		t.Errorf("got MaxSessionDuration %s, want 3600", got)
	}
	if p, ok := role["Path"]; ok {
		t.Errorf("got Path %v, want none (not under the pipeline's role path, which the bucket's Deny exempts)", p)
	}
	if got := asJSON(role["ManagedPolicyArns"]); got != "null" {
		t.Errorf("got managed policies %s, want none", got)
	}
	policies := 0
	for _, r := range byType(tpl, "AWS::IAM::Policy") {
		if strings.Contains(asJSON(get(t, props(r), "Roles")), `"`+id+`"`) {
			policies++
		}
	}
	if policies != 1 {
		t.Errorf("got %d policies on %s, want 1", policies, id)
	}
	got := tierStatements(tpl, "TenantacmeUploaderRoleDefaultPolicy")
	if len(got) != 1 || !strings.HasPrefix(got[0], `{"Action":["s3:PutObject","s3:AbortMultipartUpload","s3:ListMultipartUploadParts"],"Condition":{"Bool":{"aws:SecureTransport":"true"}},"Effect":"Allow","Resource":{"Fn::Join":["",[`) ||
		!strings.HasSuffix(got[0], `,"/inbox/acme/*"]]}}`) {
		t.Errorf("got statements\n%s\nwant the upload under inbox/acme/ alone", strings.Join(got, "\n"))
	}
	out := asJSON(tpl["Outputs"].(map[string]any)[pipeline.TenantOutputKey("acme")])
	if want := `\"uploaderRoleArn\":\"",{"Fn::GetAtt":["` + id + `","Arn"]}`; !strings.Contains(out, want) {
		t.Errorf("got tenant output %s, want it to contain %s", out, want)
	}
	// Without uploaders: no role, and no uploaderRoleArn in the output.
	plain := doors()
	for id := range byType(plain, "AWS::IAM::Role") {
		if strings.Contains(id, "SiloUploaderRole") {
			t.Errorf("got uploader role %s in a silo without uploaders, want none", id)
		}
	}
	if out := asJSON(plain["Outputs"].(map[string]any)[pipeline.TenantOutputKey("acme")]); strings.Contains(out, "uploaderRoleArn") {
		t.Errorf("got tenant output %s without uploaders, want no uploaderRoleArn", out)
	}
}

// TestSiloUploaderRoleWithKey: with a customer-managed key, the silo uploader role's policy is the
// upload under the tenant's prefix and the key's GenerateDataKey and Decrypt through S3, for the
// bucket's objects under that prefix (or the bucket, with Bucket Keys), over TLS; nothing else.
func TestSiloUploaderRoleWithKey(t *testing.T) {
	tpl, key := siloKeyed()
	id := onlyID(t, tpl, "AWS::IAM::Role", "SiloUploaderRole")
	role := props(tpl["Resources"].(map[string]any)[id].(map[string]any))
	if got, want := asJSON(role["AssumeRolePolicyDocument"]), siloTrust(platformRole); got != want {
		t.Errorf("got trust policy\n%s\nwant\n%s", got, want)
	}
	bucket := getAtt(logicalIDOfType(t, tpl, "AWS::S3::Bucket"))
	objects := `{"Fn::Join":["",[` + asJSON(bucket) + `,"/inbox/acme/*"]]}`
	want := []string{
		uploadStatement(bucket, "inbox/acme/"),
		`{"Action":["kms:GenerateDataKey","kms:Decrypt"],"Condition":{"Bool":{"aws:SecureTransport":"true"},` +
			`"StringEquals":{"kms:ViaService":{"Fn::Join":["",["s3.",{"Ref":"AWS::Region"},".amazonaws.com"]]}},` +
			`"StringLike":{"kms:EncryptionContext:aws:s3:arn":[` + asJSON(bucket) + `,` + objects + `]}},` +
			`"Effect":"Allow","Resource":{"Fn::GetAtt":["` + key + `","Arn"]}}`,
	}
	if got := tierStatements(tpl, "SiloUploaderRoleDefaultPolicy"); !slices.Equal(got, want) {
		t.Errorf("got statements\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
