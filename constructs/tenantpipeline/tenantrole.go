package tenantpipeline

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// How a pool keeps its tenants apart (docs/isolation.md). The pool's functions serve every tenant,
// so their own roles hold only what is pool-wide; everything that is one tenant's data is granted
// to the pool's tenant-scoped roles, one per function (TenantPool.TenantRole the controller's,
// SplitTenantRole and RegisterTenantRole, which alone adds the tenant's secret and table), whose
// policies name the tenant as ${aws:PrincipalTag/tenant}. Each function assumes its own for one
// tenant at a time, with the session tag tenant=<id> taken from the message group or the
// execution's input, and the tag pool=<its pool>, which the trust policy requires
// (internal/tenantcreds), so a request made for tenant A is refused on any key, secret or table of
// tenant B, a Split session reads no secret and writes no control key, and a controller session
// reads no file.
//
// https://docs.aws.amazon.com/IAM/latest/UserGuide/id_session-tags.html (session tags, the trust
// policy's sts:TagSession, aws:RequestTag and aws:TagKeys);
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principaltag;
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html (a policy
// variable in the Resource element);
// https://docs.aws.amazon.com/whitepapers/latest/saas-tenant-isolation-strategies/saas-tenant-isolation-strategies.html
// (pooled isolation with tenant-scoped credentials at run time).

// principalTenant is the policy variable of the session's tenant tag.
const principalTenant = "${aws:PrincipalTag/" + pipeline.TenantTag + "}"

// tenantOwner is the owner of the keys a session of the pool's tenant roles reaches: the tenant
// its tag names, in this pool.
func (t *TenantPool) tenantOwner() pipeline.Owner {
	return pipeline.PoolOwner(t.keysPool(), principalTenant)
}

// newTenantRole creates the tenant-scoped roles, one per function, each with only what its
// function does for a tenant: TenantRole, the controller's (control keys, quarantine, the results'
// summaries and event markers); SplitTenantRole, Split's (the tenant's files, work and results);
// and RegisterTenantRole, Register's, which alone adds the tenant's secret and table, so that
// Split, the function that parses untrusted files, never holds a core system's credentials nor
// writes a control key. Each function is named its role (pipeline.EnvTenantRoleARN).
func (t *TenantPool) newTenantRole() {
	p := t.Props
	t.TenantRole = t.tenantScopedRole("TenantRole", fmt.Sprintf("Pool %s: one tenant's control keys, quarantine and results, for the controller's sessions tagged %s=<tenant id>", p.Name, pipeline.TenantTag),
		t.Controller)
	t.SplitTenantRole = t.tenantScopedRole("SplitTenantRole", fmt.Sprintf("Pool %s: one tenant's files, work and results, for Split's sessions tagged %s=<tenant id>", p.Name, pipeline.TenantTag),
		t.Split)
	t.RegisterTenantRole = t.tenantScopedRole("RegisterTenantRole", fmt.Sprintf("Pool %s: one tenant's files, work, results, secret and table, for Register's sessions tagged %s=<tenant id>", p.Name, pipeline.TenantTag),
		t.bundled)
	t.grantControllerData(t.TenantRole)
	t.grantTenantFiles(t.SplitTenantRole)
	t.grantTenantFiles(t.RegisterTenantRole)
	t.grantTenantSecretAndTable(t.RegisterTenantRole)
	t.denySiloTenantSessions()
}

// tenantScopedRole creates a role that acting functions assume for one tenant at a time, lets
// them, and names it to them.
func (t *TenantPool) tenantScopedRole(id, description string, acting ...awslambda.Function) awsiam.Role {
	p := t.Props
	var principals []awsiam.IPrincipal
	for _, fn := range acting {
		principals = append(principals, awsiam.NewArnPrincipal(fn.Role().RoleArn()))
	}
	// The trust policy: only the acting functions' roles, only with the session tags tenant,
	// present, and pool, this pool's name, and no other tag. IAM's string conditions cannot say
	// the id's pattern; tenantcreds sends nothing but a tenant id (no "/", "*", "?" or "$").
	trust := awsiam.NewPrincipalWithConditions(awsiam.NewCompositePrincipal(principals...).WithSessionTags(), &map[string]any{
		"Null":                      map[string]any{"aws:RequestTag/" + pipeline.TenantTag: "false"},
		"StringLike":                map[string]any{"aws:RequestTag/" + pipeline.TenantTag: "?*"},
		"StringEquals":              map[string]any{"aws:RequestTag/" + pipeline.PoolTag: p.Name},
		"ForAllValues:StringEquals": map[string]any{"aws:TagKeys": []string{pipeline.TenantTag, pipeline.PoolTag}},
	})
	role := awsiam.NewRole(t.Construct, jsii.String(id), &awsiam.RoleProps{
		AssumedBy:   trust,
		Description: jsii.String(description),
		Path:        jsii.String(p.Shared.RolePath),
		// Role chaining caps a session at one hour whatever this says.
		MaxSessionDuration: awscdk.Duration_Hours(jsii.Number(1)),
	})
	nameRole(role, p.Shared.RolePath)
	for _, fn := range acting {
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("sts:AssumeRole", "sts:TagSession"),
			Resources: jsii.Strings(*role.RoleArn()),
		}))
		fn.AddEnvironment(jsii.String(pipeline.EnvTenantRoleARN), role.RoleArn(), nil)
		fn.AddEnvironment(jsii.String(pipeline.EnvTenantRolePool), jsii.String(p.Name), nil)
	}
	return role
}

// tenantObjects adds to role one statement of actions on the bucket's objects matching patterns.
func (t *TenantPool) tenantObjects(role awsiam.Role, actions []string, patterns ...string) {
	var arns []string
	for _, pt := range patterns {
		arns = append(arns, *t.Props.Bucket.ArnForObjects(jsii.String(pt)))
	}
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{Actions: jsii.Strings(actions...), Resources: jsii.Strings(arns...)}))
}

// tenantList lets role list the tenant's prefixes under prefixes (each ending in "/"): S3 then
// answers a missing key with 404, not 403
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions"), so an
// absent object is told from a refused one. Each tenant role calls it once, and it also tells
// cdk-nag why the role's wildcards stay inside one tenant's names.
func (t *TenantPool) tenantList(role awsiam.Role, prefixes ...string) {
	var like []string
	for _, p := range prefixes {
		like = append(like, p+"*")
	}
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:    jsii.Strings("s3:ListBucket"),
		Resources:  jsii.Strings(*t.Props.Bucket.BucketArn()),
		Conditions: &map[string]any{"StringLike": map[string]any{"s3:prefix": like}},
	}))
	// cdk-nag shows ${aws:PrincipalTag/tenant} as <aws:PrincipalTag/tenant>.
	cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("Every wildcard is inside one tenant's names: the keys under <pool prefix>${aws:PrincipalTag/tenant}/ and " +
			"work/, results/, control/ and quarantine/ followed by " + t.tenantOwner().Root() + "/, and the " +
			"six random characters Secrets Manager appends to the secret <secretPrefix>${aws:PrincipalTag/tenant}; the session's tag is the tenant."),
		AppliesTo: &[]any{&cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::.*<aws:PrincipalTag\/tenant>\/.*\*.*$/`)}},
	}}, jsii.Bool(true))
}

// grantTenantFiles gives role (Split's, Register's) the tenant's files, work and results, each
// under ${aws:PrincipalTag/tenant}, and no control or quarantine key.
func (t *TenantPool) grantTenantFiles(role awsiam.Role) {
	tenantPrefix := t.Props.Prefix + principalTenant + "/"
	work := pipeline.WorkDir(t.tenantOwner())
	resultsDir := pipeline.ResultsDir(t.tenantOwner())
	// The tenant's files, the exact version the event named.
	t.tenantObjects(role, []string{"s3:GetObject", "s3:GetObjectVersion"}, tenantPrefix+"*")
	// Split writes the manifest, Register reads it and reads and writes the segments' progress.
	// Register reads the manifest by the version id Split's write returned, which takes
	// s3:GetObjectVersion (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html,
	// "Permissions").
	t.tenantObjects(role, []string{"s3:GetObject", "s3:GetObjectVersion", "s3:PutObject"}, work+"*")
	// The results task (Split's function) and Register: the rejection parts, the results files.
	t.tenantObjects(role, []string{"s3:GetObject", "s3:PutObject"}, resultsDir+"*")
	t.tenantList(role, tenantPrefix, work, resultsDir)
}

// grantControllerData gives role (the controller's) the tenant's control keys, quarantine records
// and results' summaries and event markers, each under ${aws:PrincipalTag/tenant}: no file, no
// work object, and no results file but those.
func (t *TenantPool) grantControllerData(role awsiam.Role) {
	control := pipeline.ControlDir(t.tenantOwner())
	resultsDir := pipeline.ResultsDir(t.tenantOwner())
	// The tenant's quarantine records, skip markers, wake-up state, order counter and pause marker
	// (read only: an operator writes it).
	t.tenantObjects(role, []string{"s3:PutObject"}, pipeline.QuarantineDir(t.tenantOwner())+"*")
	t.tenantObjects(role, []string{"s3:GetObject"}, control+"skip/*", control+"paused.json")
	// The operator's record of each redrive, replay or sequence request (pipeline.NeedsRecord),
	// which the controller reads before it performs one, and the record of the gap skip a sequenced
	// tenant's controller asks for itself.
	t.tenantObjects(role, []string{"s3:GetObject", "s3:PutObject"}, control+"requests/*")
	t.tenantObjects(role, []string{"s3:GetObject", "s3:PutObject"}, control+"wake*.json", control+"order.json")
	// A sequenced tenant's state and held files (internal/sequence), which the controller reads,
	// writes and deletes; it sends held files and the tick to the pool queue with its own role
	// (grantBacklog). A pool's tenants may gain a sequence at any time, so this does not depend on
	// its tenants.
	t.tenantObjects(role, []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, pipeline.SequencePrefix(t.tenantOwner())+"*")
	// The File Processed event's counts from summary.json, and the summary.json of a file a
	// sequenced tenant's controller refuses; the marker of each event put.
	tenantResults := pipeline.ResultsDir(t.tenantOwner()) + "*/"
	t.tenantObjects(role, []string{"s3:GetObject", "s3:PutObject"}, tenantResults+results.SummaryFile)
	t.tenantObjects(role, []string{"s3:GetObject", "s3:PutObject"}, tenantResults+"event-*.json")
	t.tenantList(role, control, resultsDir)
}

// grantTenantSecretAndTable gives role the tenant's secret and DynamoDB table: Register's alone.
func (t *TenantPool) grantTenantSecretAndTable(role awsiam.Role) {
	p := t.Props
	stack := awscdk.Stack_Of(t.Construct)
	if p.SecretPrefix != "" {
		// The secret <secretPrefix><id>, whose ARN ends in "-" and six random characters: "??????"
		// matches exactly those, so tenant "a" never matches tenant "a-b"'s secret
		// (https://docs.aws.amazon.com/secretsmanager/latest/userguide/auth-and-access_examples.html).
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings("secretsmanager:GetSecretValue"),
			Resources: jsii.Strings(fmt.Sprintf("arn:%s:secretsmanager:%s:%s:secret:%s%s-??????",
				*stack.Partition(), *stack.Region(), *stack.Account(), p.SecretPrefix, principalTenant)),
		}))
	}
	if p.TablePrefix != "" {
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings("dynamodb:PutItem"),
			Resources: jsii.Strings(fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s%s",
				*stack.Partition(), *stack.Region(), *stack.Account(), p.TablePrefix, principalTenant)),
		}))
	}
}
