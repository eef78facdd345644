package tenantpipeline

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"
)

// The bucket refuses what the pipeline cannot honour (docs/isolation.md, "Uploads"). An object the
// pipeline cannot read, or a file replaced after its event was queued, would stall or corrupt a
// tenant's ordered run, so the ingest bucket's policy refuses such writes up front, with an explicit
// Deny that wins over any Allow of the writer's own policies:
//
//   - SSE-C, always: S3 keeps no copy of a customer-provided key, so nobody but the uploader
//     could ever read the object.
//     https://docs.aws.amazon.com/AmazonS3/latest/userguide/ServerSideEncryptionCustomerKeys.html
//   - With a customer-managed key (the key of the bucket's objects: the default key of a bucket
//     created in the app, none for one without; for a bucket imported by name,
//     SharedProps.EncryptionKey): any encryption but SSE-KMS (SSE-S3,
//     DSSE-KMS) and any KMS key but that one (aws/s3, another key). The pipeline's roles may use
//     that key alone. DSSE-KMS ("aws:kms:dsse") would use the same key twice over, without S3
//     Bucket Keys, so a KMS call per object: the pipeline has no use for it, and it is refused.
//     https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html#require-sse-kms
//     https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingDSSEncryption.html
//   - Storage classes other than STANDARD and INTELLIGENT_TIERING: an archive class (GLACIER,
//     DEEP_ARCHIVE) cannot be read without a restore, and the infrequent-access and one-zone
//     classes bill a minimum duration and retrieval on objects the pipeline reads once.
//     https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html
//     https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-class-intro.html
//   - Writes that could replace an existing object, by anyone but the pipeline's roles and the
//     operators: S3's documented way to enforce conditional writes is a bucket policy that refuses
//     a PutObject or CompleteMultipartUpload without If-None-Match, exempting the multipart calls
//     that take no conditional header (CreateMultipartUpload, UploadPart, UploadPartCopy) by
//     s3:ObjectCreationOperation. A CopyObject into the bucket is refused too, as that page says.
//     https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html
//
// Every statement is on the bucket's objects ("<bucket>/*"), whatever the tenants: a bucket policy
// holds 20 KB, and a statement per tenant prefix would not fit a thousand tenants.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-iam-policies.html
// The first three refuse everybody, the pipeline's roles and the operators included: none of the
// pipeline's writes sends an SSE-C, encryption or storage-class header (its objects take the
// bucket's default encryption and STANDARD), and an object of that kind is as unreadable when an
// operator writes it. Only the overwrite Deny spares the pipeline's roles and the operators, by
// aws:PrincipalArn as BucketWriteDeny does: the pipeline replaces its own progress, wake-up and
// control records, and operators their markers.
//
// A condition on a header the request may leave out is written Null "false" AND the negated
// match: a negated operator, and any ...IfExists operator, holds when the key is absent, so
// StringNotEqualsIfExists alone would refuse every upload that relies on the bucket's default
// encryption and storage class.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html#Conditions_IfExists
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html#Conditions_Null

// UploadStorageClasses are the storage classes an object of the ingest bucket may be written in.
var UploadStorageClasses = []string{"STANDARD", "INTELLIGENT_TIERING"}

// The Sids of BucketUploadDenies' statements.
const (
	sidNoCustomerProvidedKeys = "NoObjectEncryptedWithACustomerProvidedKey"
	sidSSEKMSOnly             = "NoObjectEncryptionButSSEKMS"
	sidPipelineKeyOnly        = "NoObjectKMSKeyButThePipelines"
	sidStorageClasses         = "NoObjectStorageClassButStandardOrIntelligentTiering"
	sidNoOverwrite            = "OnlyThePipelineAndOperatorsWriteWithoutIfNoneMatch"
)

// BucketUploadDenies are the statements that make the ingest bucket refuse what the pipeline cannot
// honour: SSE-C, always; with key (the customer-managed key of the bucket's objects; nil for none),
// any encryption but SSE-KMS with that key; a storage class other than UploadStorageClasses; and,
// for everyone but the app's roles under rolePath (each by its ARN, as BucketWriteDeny names them)
// and the operators, a write
// without If-None-Match, which could replace an existing object. TenantPipeline and TenantPool add
// them to a bucket created in the app, next to BucketWriteDeny (bucketdeny.go); an app that imports
// its bucket adds them to the bucket's policy itself, as the example of BucketUploadDeniesJSON
// shows. Uploaders must then send "If-None-Match: *" on PutObject and CompleteMultipartUpload.
func BucketUploadDenies(bucket awss3.IBucket, key awskms.IKey, rolePath string, ops Operators) []awsiam.PolicyStatement {
	var out []awsiam.PolicyStatement
	for _, d := range bucketUploadDenies(bucket, key, lazyExempt(bucket, rolePath, ops)) {
		out = append(out, d.policyStatement())
	}
	return out
}

// BucketUploadDeniesJSON is BucketUploadDenies as the JSON text of an array of policy statements,
// for the owner of a bucket the app does not manage. Its partition, account and key ARN may be
// deploy-time tokens: use it as a stack output's value.
func BucketUploadDeniesJSON(bucket awss3.IBucket, key awskms.IKey, rolePath string, ops Operators) string {
	return lazyJSON(func() any { return bucketUploadDenies(bucket, key, exemptARNs(bucket, rolePath, ops)) })
}

// bucketUploadDenies is BucketUploadDenies' statements, the overwrite Deny sparing exempt
// (exemptARNs, or its lazyExempt).
func bucketUploadDenies(bucket awss3.IBucket, key awskms.IKey, exempt []string) []statement {
	objects := []string{*bucket.ArnForObjects(jsii.String("*"))}
	put := func(sid string, condition map[string]any) statement {
		return statement{Sid: sid, Effect: "Deny", Principal: "*", Action: []string{"s3:PutObject"}, Resource: objects, Condition: condition}
	}
	// present is a header the request carries, whose value is none of values.
	present := func(header string, values ...string) map[string]any {
		var v any = values
		if len(values) == 1 {
			v = values[0]
		}
		return map[string]any{"Null": map[string]any{header: "false"}, "StringNotEquals": map[string]any{header: v}}
	}
	out := []statement{put(sidNoCustomerProvidedKeys, map[string]any{
		"Null": map[string]any{"s3:x-amz-server-side-encryption-customer-algorithm": "false"},
	})}
	if key != nil {
		out = append(out,
			put(sidSSEKMSOnly, present("s3:x-amz-server-side-encryption", "aws:kms")),
			// S3 compares the key the request names with the key's ARN: a request naming it by id or
			// alias is refused, one that names no key takes the bucket's default.
			put(sidPipelineKeyOnly, present("s3:x-amz-server-side-encryption-aws-kms-key-id", *key.KeyArn())))
	}
	out = append(out, put(sidStorageClasses, present("s3:x-amz-storage-class", UploadStorageClasses...)))
	noOverwrite := exemptConditions(exempt, Operators{})
	noOverwrite["Null"] = map[string]any{"s3:if-none-match": "true"}
	noOverwrite["Bool"] = map[string]any{"s3:ObjectCreationOperation": "true"}
	return append(out, put(sidNoOverwrite, noOverwrite))
}

// policyStatement is s, a Deny, as an awsiam.PolicyStatement.
func (s statement) policyStatement() awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(s.Sid),
		Effect:     awsiam.Effect_DENY, // every statement of the bucket's is a Deny
		Principals: &[]awsiam.IPrincipal{awsiam.NewStarPrincipal()},
		Actions:    jsii.Strings(s.Action...),
		Resources:  jsii.Strings(s.Resource...),
		Conditions: &s.Condition,
	})
}
