package tenantpipeline

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// sidReadDeny is the Sid of BucketReadDeny's statement.
const sidReadDeny = "OnlyThePipelineAndOperatorsReadObjects"

// ReadActions are the S3 actions BucketReadDeny refuses: reading an object's bytes, current or of
// a version (s3:GetObject also authorizes HeadObject and a ranged GET:
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions").
var ReadActions = []string{"s3:GetObject", "s3:GetObjectVersion"}

// BucketReadDeny is the statement that keeps the ingest bucket's objects (the tenants' files, and
// what the pipeline writes of them under work/, results/, quarantine/ and control/) from being read
// by anyone but the roles the app's pipelines and pools create under rolePath (the functions and
// the pools' tenant roles, Props.RolePath), each by its exact ARN as BucketWriteDeny names them,
// and the operators: an identity policy of the account that
// allows s3:GetObject on "*" reads none of them. It is on "<bucket>/*": a bucket policy holds
// 20 KB, and a statement per tenant prefix would not fit a thousand tenants
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-iam-policies.html), so a bucket
// that holds other data as well is no place for it unless its owner narrows the Resource to the
// pipeline's prefixes. Uploaders never read (GrantUpload and the uploader roles grant none), and a
// register function of your own (Props.RegisterFunction) must have a role of the app under rolePath
// (then named exactly too), or be an operator, to read the file and its manifest (synth warns
// otherwise).
//
// TenantPipeline and TenantPool add it to a bucket created in the app beside BucketWriteDeny
// (bucketdeny.go); for a bucket the app imports, its owner adds BucketReadDenyJSON.
func BucketReadDeny(bucket awss3.IBucket, rolePath string, ops Operators) awsiam.PolicyStatement {
	return bucketReadDeny(bucket, lazyExempt(bucket, rolePath, ops)).policyStatement()
}

// BucketReadDenyJSON is BucketReadDeny as the JSON text of one policy statement, for the owner of
// a bucket the app does not manage. Its partition and account may be deploy-time tokens: use it as
// a stack output's value.
func BucketReadDenyJSON(bucket awss3.IBucket, rolePath string, ops Operators) string {
	return lazyJSON(func() any { return bucketReadDeny(bucket, exemptARNs(bucket, rolePath, ops)) })
}

// bucketReadDeny is BucketReadDeny's statement, sparing exempt (exemptARNs, or its lazyExempt).
func bucketReadDeny(bucket awss3.IBucket, exempt []string) statement {
	return statement{
		Sid:       sidReadDeny,
		Effect:    "Deny",
		Principal: "*",
		Action:    ReadActions,
		Resource:  []string{*bucket.ArnForObjects(jsii.String("*"))},
		Condition: exemptConditions(exempt, Operators{}),
	}
}

// WarningOwnRegisterRole is the id of the warning for a register function of your own whose role
// is not under the pipeline's role path: API, the id an app passes to Annotations.AcknowledgeWarning.
const WarningOwnRegisterRole = "tenantpipeline:OwnRegisterRole"

// warnOwnRegisterRole warns at synth when a register function of your own (fn; nil: the bundled
// one) has a role the construct cannot see under rolePath: BucketReadDeny refuses it the file and
// its manifest, and every file fails, unless the role is one of the operators. A role of the app's
// under rolePath is exempted by its exact ARN: its RoleName, or one the construct gives it
// (nameRole's).
func warnOwnRegisterRole(scope constructs.Construct, fn awslambda.IFunction, rolePath string) {
	if fn == nil {
		return
	}
	if role, ok := fn.Role().(awsiam.Role); ok {
		if cfn, ok := role.Node().DefaultChild().(awsiam.CfnRole); ok && cfn.Path() != nil && *cfn.Path() == rolePath {
			// Exempt by its exact ARN, as the construct's own roles are: by the name it has, or
			// one the construct gives it.
			name := cfn.RoleName()
			if name == nil {
				name = jsii.String(roleName(role))
				cfn.SetRoleName(name)
			}
			exemptRole(role, rolePath, *name)
			return
		}
	}
	awscdk.Annotations_Of(scope).AddWarningV2(jsii.String(WarningOwnRegisterRole), jsii.String(fmt.Sprintf(
		"the register function %s has no role under the pipeline's role path %s that this app creates: the ingest bucket's read Deny "+
			"(BucketReadDeny) refuses it the files and their manifests unless its role is under that path (awsiam.RoleProps.Path) "+
			"or one of the operators (docs/isolation.md, \"Who reads the bucket\")", *fn.Node().Path(), rolePath)), nil)
}
