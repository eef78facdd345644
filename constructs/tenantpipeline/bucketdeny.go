package tenantpipeline

import (
	"fmt"
	"sync"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// WarningBucketWriteDenyMissing is the id of the warning for an ingest bucket whose policy the
// construct cannot give BucketWriteDeny: API, the id an app passes to
// Annotations.AcknowledgeWarning.
const WarningBucketWriteDenyMissing = "tenantpipeline:BucketWriteDenyMissing"

// addWriteDeny puts BucketWriteDeny for rolePath and ops in the policy of an ingest bucket this
// app creates, so that no app goes without it by forgetting it, unless the policy holds it
// already: the app added it, before or after the construct, or another pipeline or pool on the
// bucket did. It is added by an aspect, when the app is complete. A bucket the app imports has a
// policy CDK cannot change, and a policy holds one statement of a Sid only (another role path or
// other operators on the same bucket): then synth warns, and the controllers confirm every file's
// end (CONTROL_PREFIX_PROTECTED "false", wake.go).
func addWriteDeny(scope constructs.Construct, what string, bucket awss3.IBucket, rolePath string, ops Operators) {
	if bucket == nil {
		return
	}
	a := &writeDenyAspect{scope: scope, what: what, bucket: bucket, rolePath: rolePath, ops: ops}
	// One aspect, or one warning, per app, bucket, role path and operators, however many
	// pipelines and pools share them.
	if _, loaded := denyAspects.LoadOrStore(denyKey{awscdk.Stage_Of(scope), bucketKey(bucket), rolePath, fmt.Sprint(ops)}, a); loaded {
		return
	}
	if _, owned := bucket.Node().DefaultChild().(awss3.CfnBucket); !owned {
		a.warn("is not created in this app, so CDK cannot change its policy")
		return
	}
	awscdk.Aspects_Of(bucket).Add(a, nil)
}

// denyAspects holds the aspects added, by denyKey. jsii hands back the same Go value for the same
// synthesis root, so its value tells apps apart (as apps does).
var denyAspects sync.Map

type denyKey struct {
	root     constructs.IConstruct
	bucket   string // bucketKey
	rolePath string
	ops      string
}

// writeDenyAspect adds one construct's BucketWriteDeny to its bucket's policy (addWriteDeny).
type writeDenyAspect struct {
	scope    constructs.Construct
	what     string
	bucket   awss3.IBucket
	rolePath string
	ops      Operators
	once     sync.Once
}

// Visit implements awscdk.IAspect: it acts on the bucket alone, not on its children.
func (a *writeDenyAspect) Visit(node constructs.IConstruct) {
	if *node.Node().Path() != *a.bucket.Node().Path() {
		return
	}
	a.once.Do(func() {
		if hasWriteDeny(a.bucket, a.rolePath, a.ops) {
			return
		}
		if sid := bucketWriteDeny(a.bucket, a.rolePath, a.ops).Sid; hasStatement(a.bucket, sid) {
			a.warn(fmt.Sprintf("has a policy whose statement %s is for another role path or other operators, and a policy holds one statement of a Sid", sid))
			return
		}
		a.bucket.AddToResourcePolicy(BucketWriteDeny(a.bucket, a.rolePath, a.ops))
	})
}

func (a *writeDenyAspect) warn(why string) {
	awscdk.Annotations_Of(a.scope).AddWarningV2(jsii.String(WarningBucketWriteDenyMissing), jsii.String(fmt.Sprintf(
		"%s: the ingest bucket %s %s: add the statement of BucketWriteDenyJSON, which keeps everyone but the pipeline's roles (IAM path %s) "+
			"and the operators from writing its %v prefixes, to the bucket's policy (docs/operations.md, \"Who may steer a tenant\"); "+
			"until then the controllers confirm every file's end with Step Functions", a.what, bucketLabel(a.bucket), why, a.rolePath, controlPrefixes)), nil)
}

// hasStatement reports whether the policy of bucket, created in this app, holds a statement sid.
func hasStatement(bucket awss3.IBucket, sid string) bool {
	policy := bucket.Policy()
	if policy == nil {
		return false
	}
	m, _ := awscdk.Stack_Of(bucket).Resolve(policy.Document()).(map[string]any)
	statements, _ := m["Statement"].([]any)
	for _, s := range statements {
		if st, ok := s.(map[string]any); ok && st["Sid"] == sid {
			return true
		}
	}
	return false
}

// bucketLabel names a bucket in a message: its name when known, else its construct path.
func bucketLabel(b awss3.IBucket) string {
	if name := b.BucketName(); name != nil && !unresolved(*name) {
		return *name
	}
	return *b.Node().Path()
}
