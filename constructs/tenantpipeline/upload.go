package tenantpipeline

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// How customers upload (docs/isolation.md, "Uploads"). A tenant's files arrive under its prefix;
// an uploader may write there and nowhere else: no read, no list, nothing under control/, work/,
// results/ or quarantine/ (which the bucket's Deny refuses to anyone but the pipeline and the
// operators anyway), and only over TLS.
//
// UploadActions are what an upload takes: s3:PutObject authorizes PutObject and a multipart
// upload's CreateMultipartUpload, UploadPart and CompleteMultipartUpload; s3:AbortMultipartUpload
// and s3:ListMultipartUploadParts authorize its abort and ListParts. Listing a bucket's uploads in
// progress (s3:ListBucketMultipartUploads) is a list of the bucket, and is not granted.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuAndPermissions.html
var UploadActions = []string{"s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"}

// UploadKeyActions are what an upload takes of a customer-managed key that encrypts the bucket:
// kms:GenerateDataKey for the object's data key, and kms:Decrypt, which a multipart upload needs
// to complete.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuAndPermissions.html
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html
var UploadKeyActions = []string{"kms:GenerateDataKey", "kms:Decrypt"}

// tlsOnly is the condition of every upload statement: requests over TLS only.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-securetransport
func tlsOnly() map[string]any {
	return map[string]any{"Bool": map[string]any{"aws:SecureTransport": "true"}}
}

// GrantUpload lets grantee upload the tenant's files: UploadActions on the keys under the
// tenant's prefix, over TLS only, and, when the bucket is encrypted with a customer-managed key,
// UploadKeyActions on that key through S3 alone. grantee gets nothing else of the pipeline. The
// grant goes to grantee's policy, or, for a principal of another account, to the policy of a
// bucket created in the app (the aws-cdk grant rules: awsiam.Grant_AddToPrincipalOrResource).
func (t *TenantPipeline) GrantUpload(grantee awsiam.IGrantable) awsiam.Grant {
	return grantUpload(t.Construct, grantee, t.Props.Bucket, t.objects.keyOrNil(), t.Props.Tenant.Prefix)
}

// GrantUpload lets grantee upload the files of the pool's tenant tenantID, as
// TenantPipeline.GrantUpload does: under "<Prefix><tenantID>/" only. A tenantID that is not one of
// the pool's tenants panics with a *PropsError naming the pool's tenants (Synth returns it).
func (t *TenantPool) GrantUpload(tenantID string, grantee awsiam.IGrantable) awsiam.Grant {
	for _, tn := range t.Props.Tenants {
		if tn.ID == tenantID {
			return grantUpload(t.Construct, grantee, t.Props.Bucket, t.objects.keyOrNil(), tn.Prefix)
		}
	}
	var ids []string
	for _, tn := range t.Props.Tenants {
		ids = append(ids, tn.ID)
	}
	panic(&PropsError{Path: *t.Node().Path(), Err: fmt.Errorf("pool %q: GrantUpload: %q is not a tenant of the pool (its tenants: %v): "+
		"add the tenant to PoolProps.Tenants, or grant the pool it is in", t.Props.Name, tenantID, ids)})
}

// grantUpload grants UploadActions on the keys under prefix, and the key's UploadKeyActions when
// key is set, each to grantee's policy or, where that is not enough (an ArnPrincipal, a role of
// another account), to the bucket's or the key's own policy, as aws-cdk's grants decide
// (awsiam.Grant_AddToPrincipalOrResource). A part that lands in neither, because the bucket or the
// key is imported and so has a policy the app cannot change, fails synth through scope's
// validation, naming the grantee and the statement to add: an upload grant never succeeds
// silently and then fails at the first upload (kms:GenerateDataKey, AccessDenied).
func grantUpload(scope constructs.Construct, grantee awsiam.IGrantable, bucket awss3.IBucket, key awskms.IKey, prefix string) awsiam.Grant {
	objects := *bucket.ArnForObjects(jsii.String(prefix + "*"))
	g, ok := grantOn(grantee, UploadActions, []string{objects}, []string{objects}, tlsOnly(),
		&resourcePolicy{env: bucket.Env, add: bucket.AddToResourcePolicy})
	var problems []string
	if !ok {
		problems = append(problems, fmt.Sprintf("GrantUpload to %s: the grantee has no policy this app can change (an ArnPrincipal, or a role of another account) "+
			"and the bucket %s is not created in this app, so its bucket policy cannot be changed either: add to the bucket policy a statement allowing %s on %s "+
			"to that principal, with the condition aws:SecureTransport true, or grant a role created in this app",
			principalOf(scope, grantee), *bucket.Node().Path(), strings.Join(UploadActions, ", "), objects))
	}
	if key != nil {
		// In a key policy, "Resource": "*" is the key itself.
		// https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-overview.html
		kg, ok := grantOn(grantee, UploadKeyActions, []string{*key.KeyArn()}, []string{"*"}, uploadKeyConditions(bucket, prefix),
			&resourcePolicy{env: key.Env, add: func(st awsiam.PolicyStatement) *awsiam.AddToResourcePolicyResult {
				// allowNoOp: an imported key answers that nothing was added, which is reported
				// below, where it would fail synth with aws-cdk's own message.
				return key.AddToResourcePolicy(st, jsii.Bool(true))
			}})
		if !ok {
			problems = append(problems, fmt.Sprintf("GrantUpload to %s: the grantee has no policy this app can change (an ArnPrincipal, or a role of another account) "+
				"and the key %s is not created in this app, so its key policy cannot be changed either: add to the key policy a statement allowing %s to that principal, "+
				"with the conditions kms:ViaService s3.<region>.amazonaws.com and kms:EncryptionContext:aws:s3:arn like the bucket's objects under %q, or grant a role created in this app",
				principalOf(scope, grantee), *key.Node().Path(), strings.Join(UploadKeyActions, ", "), prefix))
		}
		g = g.Combine(kg)
	}
	if len(problems) > 0 {
		scope.Node().AddValidation(&propsValidation{scope, problems})
	}
	return g
}

// grantOn grants actions on resourceArns to grantee as aws-cdk's
// awsiam.Grant_AddToPrincipalOrResource does: to grantee's own policy when grantee is of the
// resource's account, and to the resource's policy (Resource selfArns) otherwise, or when grantee
// has no policy the app can change (an ArnPrincipal). ok reports whether the grant holds, which
// aws-cdk's Grant.Success does not: it is true for a statement the resource's policy could not
// take (an imported bucket or key). Where the accounts cannot be compared (one of them a token),
// grantee's own statement is taken as enough, as aws-cdk takes it for two tokens.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic-cross-account.html
func grantOn(grantee awsiam.IGrantable, actions, resourceArns, selfArns []string, cond map[string]any, r *resourcePolicy) (g awsiam.Grant, ok bool) {
	pg := awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: grantee, Actions: jsii.Strings(actions...), ResourceArns: jsii.Strings(resourceArns...), Conditions: conditions(cond),
	})
	onPrincipal := *pg.Success()
	cmp := awscdk.TokenComparison_DIFFERENT()
	if account := grantee.GrantPrincipal().PrincipalAccount(); account != nil {
		cmp = awscdk.Token_CompareStrings(r.Env().Account, account)
	}
	if onPrincipal && (cmp == awscdk.TokenComparison_SAME() || cmp == awscdk.TokenComparison_BOTH_UNRESOLVED()) {
		return pg, true
	}
	st := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings(actions...), Resources: jsii.Strings(selfArns...),
		Principals: &[]awsiam.IPrincipal{grantee.GrantPrincipal()}, Conditions: &cond,
	})
	rg := awsiam.Grant_AddStatementToResourcePolicy(&awsiam.GrantPolicyWithResourceOptions{
		Grantee: grantee, Actions: jsii.Strings(actions...), ResourceArns: jsii.Strings(resourceArns...), Resource: r, Statement: st,
	})
	return pg.Combine(rg), r.added || onPrincipal && cmp == awscdk.TokenComparison_ONE_UNRESOLVED()
}

// resourcePolicy is a bucket's or a key's policy for aws-cdk's grants, recording whether it took
// the statement.
type resourcePolicy struct {
	env   func() *interfaces.ResourceEnvironment
	add   func(awsiam.PolicyStatement) *awsiam.AddToResourcePolicyResult
	added bool
}

// Env implements awsiam.IResourceWithPolicyV2.
func (r *resourcePolicy) Env() *interfaces.ResourceEnvironment { return r.env() }

// AddToResourcePolicy implements awsiam.IResourceWithPolicyV2.
func (r *resourcePolicy) AddToResourcePolicy(st awsiam.PolicyStatement) *awsiam.AddToResourcePolicyResult {
	res := r.add(st)
	r.added = res != nil && res.StatementAdded != nil && *res.StatementAdded
	return res
}

// principalOf is grantee's principal as a policy names it, for a message.
func principalOf(scope constructs.Construct, grantee awsiam.IGrantable) string {
	return principalString(awscdk.Stack_Of(scope).Resolve(grantee.GrantPrincipal().PolicyFragment().PrincipalJson()))
}

// uploadKeyConditions scope an uploader's use of the key to S3 (kms:ViaService) and to the
// objects under prefix of bucket (the encryption context S3 sets, aws:s3:arn). With S3 Bucket Keys
// on, S3 uses the bucket's ARN as the encryption context instead of the object's, so the bucket's
// ARN is allowed too: the S3 statement alone then keeps the upload under prefix.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html#encryption-context
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-key.html
// https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-via-service
func uploadKeyConditions(bucket awss3.IBucket, prefix string) map[string]any {
	return map[string]any{
		"Bool":         map[string]any{"aws:SecureTransport": "true"},
		"StringEquals": map[string]any{"kms:ViaService": "s3." + *awscdk.Aws_REGION() + ".amazonaws.com"},
		"StringLike": map[string]any{"kms:EncryptionContext:aws:s3:arn": []string{
			*bucket.BucketArn(), *bucket.ArnForObjects(jsii.String(prefix + "*")),
		}},
	}
}

// conditions converts a condition block to the shape the grant options take.
func conditions(c map[string]any) *map[string]*map[string]any {
	out := map[string]*map[string]any{}
	for op, v := range c {
		m := v.(map[string]any)
		out[op] = &m
	}
	return &out
}

// newUploaderRole creates the pool's UploaderRole when PoolProps.Uploaders names who may assume
// it: a platform that authenticates its customers itself (a token vending machine) assumes it for
// one tenant at a time with the session tag tenant=<id>, and the session may upload under
// "<Prefix><id>/" only (README, "Customers upload").
//
// The trust policy: only the Uploaders, and only with exactly one session tag, tenant, present and
// non-empty, without "/" (which would reach into a subfolder of another tenant's prefix) and no
// longer than a tenant id. IAM's string conditions cannot say the rest of the id's pattern; a tag
// of other characters names a prefix of no tenant, whose files the router sets aside as of no
// tenant.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/id_session-tags.html (sts:TagSession,
// aws:RequestTag, aws:TagKeys);
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html
// (ForAllValues holds for an empty set, hence the Null check).
func (t *TenantPool) newUploaderRole() {
	p := t.Props
	if len(p.Uploaders) == 0 {
		return
	}
	tag := "aws:RequestTag/" + pipeline.TenantTag
	trust := awsiam.NewPrincipalWithConditions(awsiam.NewCompositePrincipal(p.Uploaders...).WithSessionTags(), &map[string]any{
		"Null":                      map[string]any{tag: "false"},
		"StringLike":                map[string]any{tag: "?*"},
		"StringNotLike":             map[string]any{tag: []string{"*/*", tooLongTenantID}},
		"ForAllValues:StringEquals": map[string]any{"aws:TagKeys": []string{pipeline.TenantTag}},
	})
	// Not under Shared.RolePath: a role there is exempt from the bucket's Deny.
	t.UploaderRole = awsiam.NewRole(t.Construct, jsii.String("UploaderRole"), &awsiam.RoleProps{
		AssumedBy:   trust,
		Description: jsii.String(fmt.Sprintf("Pool %s: uploads of one tenant's files, for a session tagged %s=<tenant id>", p.Name, pipeline.TenantTag)),
		// A presigned URL signed with the session's credentials lasts at most as long as they do.
		// https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html
		MaxSessionDuration: awscdk.Duration_Hours(jsii.Number(1)),
	})
	grantUpload(t.Construct, t.UploaderRole, p.Bucket, t.objects.keyOrNil(), p.Prefix+principalTenant+"/")
	cdknag.NagSuppressions_AddResourceSuppressions(t.UploaderRole, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("Uploads only, over TLS, to the keys under <pool prefix>${aws:PrincipalTag/tenant}/, object names the customer chooses; " +
			"the session's tag is the tenant, set by the trusted uploaders alone."),
		AppliesTo: &[]any{&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::.*<aws:PrincipalTag\/tenant>\/\*$/`)}},
	}}, jsii.Bool(true))
}

// newUploaderRole creates a silo tenant's UploaderRole when Props.Uploaders names who may assume
// it: the same uploads as the pool's role (newUploaderRole of TenantPool), under the tenant's own
// prefix. The role is the tenant's alone, so the trust policy is sts:AssumeRole by exactly the
// Uploaders, without sts:TagSession: a session of it carries no tag the role's policy reads, and
// the uploaders need no permission to tag.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_terms-and-concepts.html (trust policy)
func (t *TenantPipeline) newUploaderRole() {
	p := t.Props
	if len(p.Uploaders) == 0 {
		return
	}
	// Not under RolePath: a role there is exempt from the bucket's Deny.
	t.UploaderRole = awsiam.NewRole(t.Construct, jsii.String("UploaderRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewCompositePrincipal(p.Uploaders...),
		Description: jsii.String(fmt.Sprintf("Tenant %s: uploads of its files under %s", p.Tenant.ID, p.Tenant.Prefix)),
		// As the pool's: a presigned URL lasts at most as long as the session's credentials.
		// https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html
		MaxSessionDuration: awscdk.Duration_Hours(jsii.Number(1)),
	})
	t.GrantUpload(t.UploaderRole)
	cdknag.NagSuppressions_AddResourceSuppressions(t.UploaderRole, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("Uploads only, over TLS, to the keys under the tenant's prefix, object names the customer chooses; " +
			"the role is the tenant's alone, assumed by its trusted uploaders."),
		AppliesTo: &[]any{&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::.+\/` + regexp.QuoteMeta(p.Tenant.Prefix) + `\*$/`)}},
	}}, jsii.Bool(true))
}

// tooLongTenantID matches a value longer than a tenant id's 32 characters.
var tooLongTenantID = func() string {
	s := ""
	for range 33 {
		s += "?"
	}
	return s + "*"
}()
