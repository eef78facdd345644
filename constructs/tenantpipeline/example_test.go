package tenantpipeline_test

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
)

// A silo tenant and a pool of two tenants on one ingest bucket, in a stack of the app's own. Both
// tiers take the same SharedProps, set once. The constructs add the bucket's write Deny
// (BucketWriteDeny) themselves; pipectl finds the tenants by the constructs' outputs (pipectl
// --stack MyPipeline status).
func Example() {
	app := awscdk.NewApp(nil)
	// Synth returns what fails as one error: invalid props (before any Lambda asset is bundled),
	// and at synth overlapping prefixes or a tenant id used twice, in CDK's validation message.
	err := tenantpipeline.Synth(app, func() error {
		stack := awscdk.NewStack(app, jsii.String("MyPipeline"), nil)
		bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{
			EventBridgeEnabled: jsii.Bool(true), // required: the pipeline reads S3's events
			Versioned:          jsii.Bool(true), // recommended: a file is read as it was when it arrived
			EnforceSSL:         jsii.Bool(true),
		})
		shared := tenantpipeline.SharedProps{LogRetention: awslogs.RetentionDays_THREE_MONTHS}

		tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
			Tenant:      tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"},
			Bucket:      bucket,
			SharedProps: shared,
		})
		tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
			Name:   "default",
			Bucket: bucket,
			Tenants: []tenantpipeline.Tenant{
				{ID: "hooli", RegisterURL: "https://core.example.com/hooli"},
				{ID: "umbrella", RegisterURL: "https://core.example.com/umbrella"},
			},
			Shared: shared,
		})
		return nil
	})
	jsii.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// A silo tenant's key prefix defaults to inbox/<id>/. Props holds the props after defaults; the
// example prints them rather than the template, whose asset hashes follow the Go toolchain.
func ExampleNew() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("MyPipeline"), nil)
	bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true)})

	acme := tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
		Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme", OnFailure: "halt"},
		Bucket: bucket,
	})
	fmt.Println(acme.Props.Tenant.Prefix, acme.Props.Tenant.OnFailure)
	// Output: inbox/acme/ halt
}

// A pool's prefix defaults to pools/<name>/, and each tenant's to the pool's prefix and its id.
func ExampleNewPool() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("MyPipeline"), nil)
	bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true)})

	pool := tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
		Name:   "default",
		Bucket: bucket,
		Tenants: []tenantpipeline.Tenant{
			{ID: "hooli", RegisterURL: "https://core.example.com/hooli"},
			{ID: "umbrella", RegisterURL: "https://core.example.com/umbrella"},
		},
		// At most 20 controller invocations at once, each handing one tenant's head file on;
		// MaxRunningFiles (default 200) bounds the files running at once.
		MaximumConcurrency: 20,
	})
	fmt.Println(pool.Props.Prefix)
	for _, t := range pool.Props.Tenants {
		fmt.Println(t.ID, t.Prefix)
	}
	// Output:
	// pools/default/
	// hooli pools/default/hooli/
	// umbrella pools/default/umbrella/
}

// A customer's role may upload one pooled tenant's files (and a silo tenant's, with
// TenantPipeline.GrantUpload); a platform that signs its customers in itself assumes the pool's
// UploaderRole with the session tag tenant=<id>.
func ExampleTenantPool_GrantUpload() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("MyPipeline"), nil)
	bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true)})
	pool := tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
		Name:      "default",
		Bucket:    bucket,
		Tenants:   []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/hooli"}},
		Uploaders: []awsiam.IPrincipal{awsiam.NewArnPrincipal(jsii.String("arn:aws:iam::123456789012:role/platform"))},
	})
	customer := awsiam.NewRole(stack, jsii.String("Hooli"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountPrincipal(jsii.String("210987654321"))})
	// s3:PutObject and the multipart actions on pools/default/hooli/*, over TLS, nothing else.
	pool.GrantUpload("hooli", customer)
	awscdk.NewCfnOutput(stack, jsii.String("UploaderRole"), &awscdk.CfnOutputProps{Value: pool.UploaderRole.RoleArn()})
}

// A silo tenant's Uploaders make its own UploaderRole, which the platform assumes without tags:
// the role may upload under the tenant's prefix and nowhere else.
func ExampleTenantPipeline_GrantUpload() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("MyPipeline"), nil)
	bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true)})
	p := tenantpipeline.New(stack, "Acme", &tenantpipeline.Props{
		Tenant:    tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"},
		Bucket:    bucket,
		Uploaders: []awsiam.IPrincipal{awsiam.NewArnPrincipal(jsii.String("arn:aws:iam::123456789012:role/platform"))},
	})
	customer := awsiam.NewRole(stack, jsii.String("AcmeCustomer"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountPrincipal(jsii.String("210987654321"))})
	// s3:PutObject and the multipart actions on inbox/acme/*, over TLS, nothing else.
	p.GrantUpload(customer)
	awscdk.NewCfnOutput(stack, jsii.String("UploaderRole"), &awscdk.CfnOutputProps{Value: p.UploaderRole.RoleArn()})
}

// The app that owns an ingest bucket which the pipeline's app imports by name adds the bucket's
// Denies to its policy itself: the constructs change only the policy of a bucket created in their
// own app (and warn otherwise). Uploads must then send "If-None-Match: *" on PutObject and
// CompleteMultipartUpload, no SSE-C, and no key or storage class but the bucket's.
func ExampleBucketUploadDenies() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("IngestBucket"), nil)
	key := awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
	bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{
		EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true), EnforceSSL: jsii.Bool(true),
		Encryption: awss3.BucketEncryption_KMS, EncryptionKey: key, BucketKeyEnabled: jsii.Bool(true),
	})
	// The pipeline's app uses the same role path and operators (SharedProps.RolePath, Operators).
	ops := tenantpipeline.Operators{PrincipalARNs: []string{"arn:aws:iam::123456789012:role/ops/*"}}
	bucket.AddToResourcePolicy(tenantpipeline.BucketWriteDeny(bucket, tenantpipeline.DefaultRolePath, ops))
	bucket.AddToResourcePolicy(tenantpipeline.BucketReadDeny(bucket, tenantpipeline.DefaultRolePath, ops))
	for _, s := range tenantpipeline.BucketUploadDenies(bucket, key, tenantpipeline.DefaultRolePath, ops) {
		bucket.AddToResourcePolicy(s)
	}
	app.Synth(nil)
}

// An on-call role may run pipectl against one tenant (status, pause, skip, redrive, replay),
// and, listed in the operator set, write what the Denies keep from everyone else.
func ExampleTenantPipeline_GrantOperate() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("MyPipeline"), nil)
	bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true)})
	oncall := "arn:aws:iam::123456789012:role/ops/oncall"
	p := tenantpipeline.New(stack, "Acme", &tenantpipeline.Props{
		Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"},
		Bucket: bucket,
		SharedProps: tenantpipeline.SharedProps{
			Operators: tenantpipeline.Operators{PrincipalARNs: []string{oncall}},
		},
	})
	// An imported role takes policies (it is mutable); an awsiam.ArnPrincipal would fail synth.
	p.GrantOperate(awsiam.Role_FromRoleArn(stack, jsii.String("OnCall"), jsii.String(oncall), nil))
}

// The pipeline's key, with its administration apart from its use: IAM policies may let roles use
// it, never delete or disable it; only the named administrators may, and they cannot decrypt.
func ExampleNewKey() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("MyPipeline"), nil)
	key := tenantpipeline.NewKey(stack, "Key", &tenantpipeline.KeyProps{
		Alias:  "alias/my-pipeline",
		Admins: []string{"arn:aws:iam::123456789012:role/key-admin"},
	})
	bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{
		EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true),
		Encryption: awss3.BucketEncryption_KMS, EncryptionKey: key, BucketKeyEnabled: jsii.Bool(true),
	})
	tenantpipeline.New(stack, "Acme", &tenantpipeline.Props{
		Tenant:      tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"},
		Bucket:      bucket,
		SharedProps: tenantpipeline.SharedProps{EncryptionKey: key},
	})
}
