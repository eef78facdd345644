package tenantpipeline

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// uploadFixture is a stack with a bucket, a role to grant and, with withKey, a customer-managed key.
type uploadFixture struct {
	stack  awscdk.Stack
	bucket awss3.Bucket
	role   awsiam.Role
	key    awskms.IKey
}

func newUploadFixture(withKey bool) uploadFixture {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Uploads"), nil)
	f := uploadFixture{
		stack:  stack,
		bucket: awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true)}),
		role:   awsiam.NewRole(stack, jsii.String("Customer"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()}),
	}
	if withKey {
		f.key = awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
	}
	return f
}

// statementsOf is the JSON of the statements of the IAM policies attached to role.
func statementsOf(t *testing.T, stack awscdk.Stack, role awsiam.IRole) string {
	t.Helper()
	roleRef, _ := json.Marshal([]any{map[string]any{"Ref": logicalID(stack, role)}})
	tpl := assertions.Template_FromStack(stack, nil).ToJSON()
	var out []any
	res := (*tpl)["Resources"].(map[string]any)
	for _, r := range res {
		m := r.(map[string]any)
		if m["Type"] != "AWS::IAM::Policy" {
			continue
		}
		if roles, _ := json.Marshal(m["Properties"].(map[string]any)["Roles"]); string(roles) != string(roleRef) {
			continue
		}
		out = append(out, m["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any)...)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// logicalID is the logical id of an L2 construct's resource.
func logicalID(stack awscdk.Stack, c constructs.IConstruct) string {
	return *stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

// TestGrantUploadStatements: an upload grant is exactly the put and multipart actions on the keys
// under the prefix, over TLS; with a customer-managed key, also GenerateDataKey and Decrypt on
// that key, through S3 only, for the bucket's or the prefix's objects. Known answers, written out.
func TestGrantUploadStatements(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		withKey      bool
	}{
		{"silo tenant", "inbox/acme/", false},
		{"silo tenant with a key", "inbox/acme/", true},
		{"pool session", "pools/p/${aws:PrincipalTag/tenant}/", false},
		{"pool session with a key", "pools/p/${aws:PrincipalTag/tenant}/", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newUploadFixture(tc.withKey)
			g := grantUpload(f.stack, f.role, f.bucket, f.key, tc.prefix)
			if !*g.Success() {
				t.Fatal("got an unsuccessful grant")
			}
			bucket := logicalID(f.stack, f.bucket)
			arn := `{"Fn::GetAtt":["` + bucket + `","Arn"]}`
			objects := `{"Fn::Join":["",[` + arn + `,"/` + tc.prefix + `*"]]}`
			want := `[{"Action":["s3:PutObject","s3:AbortMultipartUpload","s3:ListMultipartUploadParts"],` +
				`"Condition":{"Bool":{"aws:SecureTransport":"true"}},"Effect":"Allow","Resource":` + objects + `}`
			if tc.withKey {
				want += `,{"Action":["kms:GenerateDataKey","kms:Decrypt"],"Condition":{"Bool":{"aws:SecureTransport":"true"},` +
					`"StringEquals":{"kms:ViaService":{"Fn::Join":["",["s3.",{"Ref":"AWS::Region"},".amazonaws.com"]]}},` +
					`"StringLike":{"kms:EncryptionContext:aws:s3:arn":[` + arn + `,` + objects + `]}},` +
					`"Effect":"Allow","Resource":{"Fn::GetAtt":["` + logicalID(f.stack, f.key) + `","Arn"]}}`
			}
			want += `]`
			if got := statementsOf(t, f.stack, f.role); got != want {
				t.Errorf("got statements\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestUploaderRole: the pool's uploader role trusts only the uploaders, only with exactly the
// tenant session tag, non-empty, without "/" and at most 32 characters; its one grant is the upload
// under <pool prefix>${aws:PrincipalTag/tenant}/ (and the key's, with a key); it is not under the
// pipeline's role path, which the bucket's Deny exempts.
func TestUploaderRole(t *testing.T) {
	for _, withKey := range []bool{false, true} {
		f := newUploadFixture(withKey)
		platform := "arn:aws:iam::123456789012:role/platform"
		pool := &TenantPool{
			Construct: constructs.NewConstruct(f.stack, jsii.String("Pool")),
			Props: PoolProps{Name: "p", Prefix: "pools/p/", Bucket: f.bucket,
				Uploaders: []awsiam.IPrincipal{awsiam.NewArnPrincipal(jsii.String(platform))}, Shared: SharedProps{RolePath: DefaultRolePath}},
			Pipeline: Pipeline{objects: newEncryption(f.stack, f.key)},
		}
		pool.newUploaderRole()
		if pool.UploaderRole == nil {
			t.Fatal("got no UploaderRole")
		}
		tpl := assertions.Template_FromStack(f.stack, nil)
		roles := tpl.FindResources(jsii.String("AWS::IAM::Role"), &map[string]any{"Properties": map[string]any{"Description": assertions.Match_StringLikeRegexp(jsii.String("uploads"))}})
		if len(*roles) != 1 {
			t.Fatalf("got %d uploader roles, want 1", len(*roles))
		}
		for _, r := range *roles {
			p := (*r)["Properties"].(map[string]any)
			if _, ok := p["Path"]; ok {
				t.Errorf("got Path %v, want none (not under the pipeline's role path)", p["Path"])
			}
			b, _ := json.Marshal(p["AssumeRolePolicyDocument"])
			want := `{"Statement":[{"Action":["sts:AssumeRole","sts:TagSession"],"Condition":{` +
				`"ForAllValues:StringEquals":{"aws:TagKeys":["tenant"]},"Null":{"aws:RequestTag/tenant":"false"},` +
				`"StringLike":{"aws:RequestTag/tenant":"?*"},` +
				`"StringNotLike":{"aws:RequestTag/tenant":["*/*","?????????????????????????????????*"]}},` +
				`"Effect":"Allow","Principal":{"AWS":"` + platform + `"}}],"Version":"2012-10-17"}`
			if string(b) != want {
				t.Errorf("got trust policy\n%s\nwant\n%s", b, want)
			}
		}
		got := statementsOf(t, f.stack, pool.UploaderRole)
		if !strings.Contains(got, `"Action":["s3:PutObject","s3:AbortMultipartUpload","s3:ListMultipartUploadParts"],"Condition":{"Bool":{"aws:SecureTransport":"true"}}`) ||
			!strings.Contains(got, `"/pools/p/${aws:PrincipalTag/tenant}/*"`) || strings.Contains(got, "kms:") != withKey {
			t.Errorf("key %v: got statements %s, want the upload under pools/p/${aws:PrincipalTag/tenant}/ (and the key's with a key)", withKey, got)
		}
	}
}

// TestPoolGrantUploadOfUnknownTenant: a tenant id the pool does not have is refused with a
// *PropsError that names it and the pool's tenants.
func TestPoolGrantUploadOfUnknownTenant(t *testing.T) {
	f := newUploadFixture(false)
	pool := &TenantPool{
		Construct: constructs.NewConstruct(f.stack, jsii.String("Pool")),
		Props:     PoolProps{Name: "p", Prefix: "pools/p/", Bucket: f.bucket, Tenants: []Tenant{{ID: "hooli", Prefix: "pools/p/hooli/"}}},
	}
	defer func() {
		var pe *PropsError
		err, _ := recover().(error)
		if !errors.As(err, &pe) || !strings.Contains(pe.Error(), `[Uploads/Pool] pool "p": GrantUpload: "acme" is not a tenant of the pool (its tenants: [hooli])`) {
			t.Errorf("got %v, want a *PropsError naming acme and the pool's tenants", err)
		}
	}()
	pool.GrantUpload("acme", f.role)
	t.Error("GrantUpload of an unknown tenant returned")
}

// TestGrantUploadTakesTheConstructsKey: the key an upload needs is the bucket's own (SSE-KMS with
// the customer-managed key), or SharedProps.EncryptionKey when the bucket does not say (imported by
// name); with neither, the grant has no KMS statement. Both tiers.
func TestGrantUploadTakesTheConstructsKey(t *testing.T) {
	for _, tier := range []string{"silo", "pool"} {
		for _, tc := range []struct {
			name      string
			bucketKey bool // the bucket is created with the key
			sharedKey bool // SharedProps.EncryptionKey is set
			wantKMS   bool
		}{
			{"no key", false, false, false},
			{"the bucket's key", true, false, true},
			{"SharedProps.EncryptionKey", false, true, true},
		} {
			t.Run(tier+"/"+tc.name, func(t *testing.T) {
				app := awscdk.NewApp(nil)
				stack := awscdk.NewStack(app, jsii.String("Keys"), nil)
				key := awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
				bp := &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true)}
				if tc.bucketKey {
					bp.Encryption, bp.EncryptionKey, bp.BucketKeyEnabled = awss3.BucketEncryption_KMS, key, jsii.Bool(true)
				}
				bucket := awss3.NewBucket(stack, jsii.String("Ingest"), bp)
				var shared SharedProps
				if tc.sharedKey {
					shared.EncryptionKey = key
				}
				role := awsiam.NewRole(stack, jsii.String("Customer"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
				tenant := Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"}
				if tier == "silo" {
					New(stack, "Tenant-acme", &Props{Tenant: tenant, Bucket: bucket, SharedProps: shared}).GrantUpload(role)
				} else {
					NewPool(stack, "Pool", &PoolProps{Name: "p", Bucket: bucket, Tenants: []Tenant{tenant}, Shared: shared}).GrantUpload("acme", role)
				}
				got := statementsOf(t, stack, role)
				keyArn := `{"Fn::GetAtt":["` + logicalID(stack, key) + `","Arn"]}`
				if strings.Contains(got, "kms:GenerateDataKey") != tc.wantKMS || tc.wantKMS && !strings.Contains(got, keyArn) {
					t.Errorf("got statements %s, want the key's statement on %s: %v", got, keyArn, tc.wantKMS)
				}
			})
		}
	}
}

// TestSiloUploadersNil: a nil principal among a silo tenant's Uploaders is refused, naming its
// index; principals are accepted.
func TestSiloUploadersNil(t *testing.T) {
	p := valid()
	p.Uploaders = []awsiam.IPrincipal{awsiam.NewArnPrincipal(jsii.String("arn:aws:iam::123456789012:role/platform"))}
	if err := p.withDefaults().validate(); err != nil {
		t.Errorf("got %v, want no error", err)
	}
	p.Uploaders = append(p.Uploaders, nil)
	want := `Uploaders[1] is nil: name a principal (awsiam.NewArnPrincipal(<role ARN>)), or remove it`
	if err := p.withDefaults().validate(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want an error containing %q", err, want)
	}
}
