package tenantpipeline

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// WarningBucketUnversioned is the id of the warning for an unversioned ingest bucket: API, the id
// an app passes to Annotations.AcknowledgeWarning.
const WarningBucketUnversioned = "tenantpipeline:BucketUnversioned"

// bucketProblems checks, at synth, an ingest bucket created in this app (an awss3.Bucket, not an
// imported one, whose settings cannot be read): without EventBridge notifications no file would
// ever reach the pipeline, so synth fails; without versioning the pipeline cannot pin the version
// that triggered a file, so synth warns. It runs at validation, after the app may have changed the
// bucket (EnableEventBridgeNotification, versioning on the L1), and once: validation may ask twice.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html
func (t *TenantPipeline) bucketProblems() []string {
	t.checks.bucketOnce.Do(func() {
		t.checks.bucket = checkBucket(t.Construct, fmt.Sprintf("tenant %q", t.Props.Tenant.ID), t.Props.Bucket)
	})
	return t.checks.bucket
}

// bucketProblems checks the pool's ingest bucket as a pipeline's is checked.
func (t *TenantPool) bucketProblems() []string {
	t.bucketOnce.Do(func() { t.bucket = checkBucket(t.Construct, fmt.Sprintf("pool %q", t.Props.Name), t.Props.Bucket) })
	return t.bucket
}

// checkBucket checks bucket for the construct scope, which messages call what.
func checkBucket(scope constructs.Construct, what string, bucket awss3.IBucket) []string {
	if bucket == nil {
		return nil // a props problem
	}
	cfn, ok := bucket.Node().DefaultChild().(awss3.CfnBucket)
	if !ok {
		return nil // imported: nothing to read
	}
	var problems []string
	if !eventBridgeEnabled(bucket) {
		problems = append(problems, fmt.Sprintf(
			"%s: bucket %s does not send events to EventBridge, so no file would ever reach the pipeline: "+
				"create it with awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true)} or call its EnableEventBridgeNotification()",
			what, *bucket.Node().Path()))
	}
	if !versioned(cfn) {
		awscdk.Annotations_Of(scope).AddWarningV2(jsii.String(WarningBucketUnversioned), jsii.String(fmt.Sprintf(
			"%s: bucket %s is not versioned: a file overwritten while queued is read in its new content, and idempotencyKey "+
				"object-version falls back to the ETag. Create it with awss3.BucketProps{Versioned: jsii.Bool(true)}",
			what, *bucket.Node().Path())), nil)
	}
	return problems
}

// eventBridgeEnabled reads the bucket's notification configuration, which CDK renders into its
// Custom::S3BucketNotifications resource (child Notifications/Resource of the bucket).
func eventBridgeEnabled(bucket awss3.IBucket) bool {
	n := bucket.Node().TryFindChild(jsii.String("Notifications"))
	if n == nil {
		return false
	}
	r, ok := n.Node().TryFindChild(jsii.String("Resource")).(awscdk.CfnResource)
	if !ok || r == nil {
		return false
	}
	props := r.CfnProperties()
	if props == nil {
		return false
	}
	conf, ok := awscdk.Stack_Of(r).Resolve((*props)["NotificationConfiguration"]).(map[string]any)
	if !ok {
		return false
	}
	_, on := conf["EventBridgeConfiguration"]
	return on
}

// versioned reads the bucket's VersioningConfiguration.Status.
func versioned(cfn awss3.CfnBucket) bool {
	conf := cfn.VersioningConfiguration()
	if conf == nil {
		return false
	}
	m, ok := awscdk.Stack_Of(cfn).Resolve(conf).(map[string]any)
	if !ok {
		return false
	}
	for _, k := range []string{"status", "Status"} {
		if s, ok := m[k].(string); ok {
			return s == "Enabled"
		}
	}
	return false
}
