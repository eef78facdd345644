package tenantpipeline

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// WarningBucketWriteDenyMissing is the id of the warning for an ingest bucket whose policy the
// construct cannot give BucketWriteDeny or BucketUploadDenies: API, the id an app passes to
// Annotations.AcknowledgeWarning.
const WarningBucketWriteDenyMissing = "tenantpipeline:BucketWriteDenyMissing"

// addBucketDenies puts BucketWriteDeny and BucketReadDeny for rolePath and ops, and
// BucketUploadDenies for key, rolePath and ops, in the policy of an ingest bucket this app creates, so that no app goes without
// them by forgetting them, each unless the policy holds it already: the app added it, before or
// after the construct, or another pipeline or pool on the bucket did. They are added by an aspect,
// when the app is complete. A bucket the app imports has a policy CDK cannot change, and a policy
// holds one statement of a Sid only (another role path, other operators or another key on the same
// bucket): then synth warns, and the controllers confirm every file's end
// (CONTROL_PREFIX_PROTECTED "false", wake.go).
func addBucketDenies(scope constructs.Construct, what string, bucket awss3.IBucket, key awskms.IKey, rolePath string, ops Operators) {
	if bucket == nil {
		return
	}
	_, owned := bucket.Node().DefaultChild().(awss3.CfnBucket)
	if owned {
		// A bucket of the app is refused another key than its own default's: with none (SSE-S3),
		// the pipeline reads what it is sent, and a statement naming a key of another stack could
		// make the bucket's stack depend on one that depends on it.
		key = bucket.EncryptionKey()
	}
	a := &bucketDenyAspect{scope: scope, what: what, bucket: bucket, key: key, rolePath: rolePath, ops: ops}
	// One aspect, or one warning, per app, bucket, key, role path and operators, however many
	// pipelines and pools share them.
	k := denyKey{awscdk.Stage_Of(scope), bucketKey(bucket), "", rolePath, fmt.Sprint(ops)}
	if key != nil {
		k.key = *key.Node().Path()
	}
	if _, loaded := denyAspects.LoadOrStore(k, a); loaded {
		return
	}
	if !owned {
		a.warn("is not created in this app, so CDK cannot change its policy", true)
		// Its owner adds the statements of the …JSON outputs, which name the roles as the
		// aspect would: the aspect only warns when they exempt the path (warnIfByPath).
		a.imported = true
	}
	awscdk.Aspects_Of(bucket).Add(a, nil)
}

// denyAspects holds the aspects added, by denyKey. jsii hands back the same Go value for the same
// synthesis root, so its value tells apps apart (as apps does).
var denyAspects sync.Map

type denyKey struct {
	root     constructs.IConstruct
	bucket   string // bucketKey
	key      string // the key's construct path; "" for none
	rolePath string
	ops      string
}

// bucketDenyAspect adds one construct's BucketWriteDeny, BucketReadDeny and BucketUploadDenies to
// its bucket's policy (addBucketDenies).
type bucketDenyAspect struct {
	scope    constructs.Construct
	what     string
	bucket   awss3.IBucket
	key      awskms.IKey
	rolePath string
	ops      Operators
	imported bool // a bucket of another app: nothing to add, only warnIfByPath
	once     sync.Once
}

// Visit implements awscdk.IAspect: it acts on the bucket alone, not on its children.
func (a *bucketDenyAspect) Visit(node constructs.IConstruct) {
	if *node.Node().Path() != *a.bucket.Node().Path() {
		return
	}
	a.once.Do(func() {
		if a.imported {
			warnIfByPath(a.scope, a.what, a.rolePath)
			return
		}
		exempt := lazyExempt(a.bucket, a.rolePath, a.ops)
		want := append([]statement{bucketWriteDeny(a.bucket, exempt), bucketReadDeny(a.bucket, exempt)},
			bucketUploadDenies(a.bucket, a.key, exempt)...)
		var clashes []string
		for _, s := range want {
			switch {
			case policyHolds(a.bucket, s.policyStatement()):
			case hasStatement(a.bucket, s.Sid):
				clashes = append(clashes, s.Sid)
			default:
				a.bucket.AddToResourcePolicy(s.policyStatement())
			}
		}
		checkPolicySize(awscdk.Stack_Of(a.bucket), a.what, a.bucket, a.rolePath)
		warnIfByPath(a.scope, a.what, a.rolePath)
		if len(clashes) > 0 {
			a.warn(fmt.Sprintf("has a policy whose statements %v are for another role path, other operators or another key, and a policy holds one statement of a Sid", clashes),
				clashes[0] == want[0].Sid)
		}
	})
}

// warn says which statements the bucket's policy lacks, and, when the write Deny is one of them
// (writeDeny), that the controllers confirm every file's end until it is there.
func (a *bucketDenyAspect) warn(why string, writeDeny bool) {
	until := ""
	if writeDeny {
		until = "; until BucketWriteDeny's is there the controllers confirm every file's end with Step Functions"
	}
	awscdk.Annotations_Of(a.scope).AddWarningV2(jsii.String(WarningBucketWriteDenyMissing), jsii.String(fmt.Sprintf(
		"%s: the ingest bucket %s %s: add the statement of BucketWriteDenyJSON, which keeps everyone but the pipeline's roles (under IAM path %s, each by its ARN) "+
			"and the operators from writing its %v prefixes, the statement of BucketReadDenyJSON, which keeps them from reading its objects, "+
			"and the statements of BucketUploadDeniesJSON, which refuse SSE-C, another key, "+
			"another storage class and writes without If-None-Match, to the bucket's policy (docs/operations.md, \"Who may steer a tenant\", "+
			"and docs/isolation.md, \"Uploads\")%s",
		a.what, bucketLabel(a.bucket), why, a.rolePath, controlPrefixes, until)), nil)
}

// policyHolds reports whether bucket is created in this app and its policy holds exactly the
// statement want.
func policyHolds(bucket awss3.IBucket, want awsiam.PolicyStatement) bool {
	if bucket == nil {
		return false
	}
	if _, ok := bucket.Node().DefaultChild().(awss3.CfnBucket); !ok {
		return false // imported: its policy is not in this app
	}
	policy := bucket.Policy()
	if policy == nil {
		return false
	}
	// Both sides resolved as documents, so that they render alike.
	statements := func(doc awsiam.PolicyDocument) []any {
		m, _ := awscdk.Stack_Of(bucket).Resolve(doc).(map[string]any)
		s, _ := m["Statement"].([]any)
		return s
	}
	w := statements(awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{want}}))
	if len(w) != 1 {
		return false
	}
	for _, s := range statements(policy.Document()) {
		if reflect.DeepEqual(s, w[0]) {
			return true
		}
	}
	return false
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
