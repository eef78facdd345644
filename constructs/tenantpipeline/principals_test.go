package tenantpipeline

import (
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

// TestUploadersCheckedAsTheFileChecksThem: the constructs' Uploaders are IAM roles or users, as
// the tenants file's are: no account (root, AccountPrincipal, AccountRootPrincipal), no "*", no
// wildcard, no service or federated principal; an ARN and a role of the app pass.
func TestUploadersCheckedAsTheFileChecksThem(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    func(constructs.Construct) awsiam.IPrincipal
		want string // "" for accepted
	}{
		{"role ARN", func(constructs.Construct) awsiam.IPrincipal {
			return awsiam.NewArnPrincipal(jsii.String("arn:aws:iam::123456789012:role/platform"))
		}, ""},
		{"user ARN with a path", func(constructs.Construct) awsiam.IPrincipal {
			return awsiam.NewArnPrincipal(jsii.String("arn:aws:iam::123456789012:user/ops/uploader"))
		}, ""},
		{"a role of the app", func(s constructs.Construct) awsiam.IPrincipal {
			return awsiam.NewRole(s, jsii.String("Platform"), &awsiam.RoleProps{AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil)})
		}, ""},
		{"account root ARN", func(constructs.Construct) awsiam.IPrincipal {
			return awsiam.NewArnPrincipal(jsii.String("arn:aws:iam::123456789012:root"))
		}, `"arn:aws:iam::123456789012:root" is not an IAM role or user ARN`},
		{"AccountPrincipal", func(constructs.Construct) awsiam.IPrincipal {
			return awsiam.NewAccountPrincipal(jsii.String("123456789012"))
		}, "is a whole account or a wildcard"},
		{"AccountRootPrincipal", func(constructs.Construct) awsiam.IPrincipal { return awsiam.NewAccountRootPrincipal() }, "is a whole account or a wildcard"},
		{"StarPrincipal", func(constructs.Construct) awsiam.IPrincipal { return awsiam.NewStarPrincipal() }, `"*" is not an IAM role or user ARN`},
		{"AnyPrincipal", func(constructs.Construct) awsiam.IPrincipal { return awsiam.NewAnyPrincipal() }, `"*" is not an IAM role or user ARN`},
		{"wildcard role", func(constructs.Construct) awsiam.IPrincipal {
			return awsiam.NewArnPrincipal(jsii.String("arn:aws:iam::123456789012:role/*"))
		}, "is not an IAM role or user ARN"},
		{"service", func(constructs.Construct) awsiam.IPrincipal {
			return awsiam.NewServicePrincipal(jsii.String("transfer.amazonaws.com"), nil)
		}, "is a Service principal"},
		{"assumed-role session", func(constructs.Construct) awsiam.IPrincipal {
			return awsiam.NewArnPrincipal(jsii.String("arn:aws:sts::123456789012:assumed-role/platform/s"))
		}, "is not an IAM role or user ARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("S"), nil)
			err := checkUploaders(stack, "PoolProps.Uploaders", []awsiam.IPrincipal{tc.p(stack)})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "PoolProps.Uploaders[0]: ")):
				t.Errorf("got %v, want PoolProps.Uploaders[0]: …%s…", err, tc.want)
			}
		})
	}
}

// TestUploadersRefusedInBothTiers: a refused uploader reaches synth as the construct's
// validation, in both tiers, and the construct creates nothing.
func TestUploadersRefusedInBothTiers(t *testing.T) {
	root := []awsiam.IPrincipal{awsiam.NewAccountRootPrincipal()}
	for _, tier := range []string{"silo", "pool"} {
		t.Run(tier, func(t *testing.T) {
			stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("S"), nil)
			bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true)})
			tenant := Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"}
			var c constructs.Construct
			if tier == "silo" {
				c = New(stack, "Tenant-acme", &Props{Tenant: tenant, Bucket: bucket, Uploaders: root}).Construct
			} else {
				c = NewPool(stack, "Pool", &PoolProps{Name: "p", Bucket: bucket, Tenants: []Tenant{tenant}, Uploaders: root}).Construct
			}
			msgs := *c.Node().Validate()
			if len(msgs) != 1 || !strings.Contains(*msgs[0], "Uploaders[0]: ") || !strings.Contains(*msgs[0], "whole account") {
				t.Errorf("got %d messages (first %q), want one refusing Uploaders[0], a whole account", len(msgs), first(msgs))
			}
			if n := len(*c.Node().Children()); n != 0 {
				t.Errorf("got %d children, want none (nothing created)", n)
			}
		})
	}
}

// TestGrantUploadGrantsOrFails: a grant to a principal whose policy the app cannot change (an
// ArnPrincipal, a role of another account) lands in the bucket's and the key's policies when the
// app creates them, and fails synth naming the grantee and the statement to add when it does not
// (an imported bucket or key); never a silent success. Both tiers.
func TestGrantUploadGrantsOrFails(t *testing.T) {
	const platform = "arn:aws:iam::210987654321:role/platform"
	for _, tier := range []string{"silo", "pool"} {
		for _, tc := range []struct {
			name            string
			importedBucket  bool
			key             string   // "", "app", "imported"
			grantee         string   // "arn", "role"
			want            []string // what its one message says
			bucketStatement bool     // the bucket policy names the grantee
			keyStatement    bool     // the key policy names the grantee
		}{
			{name: "ARN, the app's bucket", grantee: "arn", bucketStatement: true},
			{name: "ARN, the app's bucket and key", key: "app", grantee: "arn", bucketStatement: true, keyStatement: true},
			{name: "ARN, an imported bucket", importedBucket: true, grantee: "arn",
				want: []string{`GrantUpload to {"AWS":["` + platform + `"]}`, "add to the bucket policy a statement allowing s3:PutObject, s3:AbortMultipartUpload, s3:ListMultipartUploadParts on"}},
			{name: "ARN, an imported key", key: "imported", grantee: "arn", bucketStatement: true,
				want: []string{`GrantUpload to {"AWS":["` + platform + `"]}`, "add to the key policy a statement allowing kms:GenerateDataKey, kms:Decrypt to that principal"}},
			{name: "the app's role, an imported key", key: "imported", grantee: "role"},
			{name: "the app's role, an imported bucket", importedBucket: true, grantee: "role"},
		} {
			t.Run(tier+"/"+tc.name, func(t *testing.T) {
				stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("S"), nil)
				var key awskms.IKey
				switch tc.key {
				case "app":
					key = awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
				case "imported":
					key = awskms.Key_FromKeyArn(stack, jsii.String("Key"), jsii.String("arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"))
				}
				var bucket awss3.IBucket
				if tc.importedBucket {
					bucket = awss3.Bucket_FromBucketName(stack, jsii.String("Ingest"), jsii.String("ingest"))
				} else {
					bucket = awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true)})
				}
				var grantee awsiam.IGrantable = awsiam.NewArnPrincipal(jsii.String(platform))
				if tc.grantee == "role" {
					grantee = awsiam.NewRole(stack, jsii.String("Customer"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
				}
				tenant := Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"}
				shared := SharedProps{EncryptionKey: key}
				var c constructs.Construct
				if tier == "silo" {
					p := New(stack, "Tenant-acme", &Props{Tenant: tenant, Bucket: bucket, SharedProps: shared})
					p.GrantUpload(grantee)
					c = p.Construct
				} else {
					p := NewPool(stack, "Pool", &PoolProps{Name: "p", Bucket: bucket, Tenants: []Tenant{tenant}, Shared: shared})
					p.GrantUpload("acme", grantee)
					c = p.Construct
				}
				var got []string
				for _, m := range *c.Node().Validate() {
					if strings.Contains(*m, "GrantUpload") {
						got = append(got, *m)
					}
				}
				if len(got) != min(len(tc.want), 1) {
					t.Fatalf("got messages %q, want %d", got, min(len(tc.want), 1))
				}
				for _, w := range tc.want {
					if !strings.Contains(got[0], w) {
						t.Errorf("got %q, want it to contain %q", got[0], w)
					}
				}
				if tc.importedBucket || tc.key == "imported" {
					return // synth would fail: the messages are the assertion
				}
				tpl := assertions.Template_FromStack(stack, nil)
				principal := map[string]any{"AWS": platform}
				has := func(typ string, doc string) bool {
					found := tpl.FindResources(jsii.String(typ), &map[string]any{"Properties": map[string]any{doc: map[string]any{
						"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{"Principal": principal, "Effect": "Allow"})}),
					}}})
					return len(*found) > 0
				}
				if got := has("AWS::S3::BucketPolicy", "PolicyDocument"); got != tc.bucketStatement {
					t.Errorf("bucket policy names %s: got %v, want %v", platform, got, tc.bucketStatement)
				}
				if got := has("AWS::KMS::Key", "KeyPolicy"); got != tc.keyStatement {
					t.Errorf("key policy names %s: got %v, want %v", platform, got, tc.keyStatement)
				}
				if tc.keyStatement {
					tpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{"KeyPolicy": map[string]any{
						"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
							"Principal": principal, "Action": []any{"kms:GenerateDataKey", "kms:Decrypt"}, "Resource": "*",
							"Condition": assertions.Match_ObjectLike(&map[string]any{"StringEquals": assertions.Match_ObjectLike(&map[string]any{"kms:ViaService": assertions.Match_AnyValue()})}),
						})}),
					}})
				}
			})
		}
	}
}

// first is the first of msgs, "" for none.
func first(msgs []*string) string {
	if len(msgs) == 0 {
		return ""
	}
	return *msgs[0]
}
