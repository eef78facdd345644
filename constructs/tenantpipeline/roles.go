package tenantpipeline

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// The bucket's Denies name the pipeline's roles one by one (docs/isolation.md, "The pipeline's
// roles, each by its ARN"). A pattern over the role path would exempt any role created under it, and
// whoever may call iam:CreateRole could then forge control records and read results. So every
// role the constructs create under RolePath gets a name of its own (nameRole), and the Denies list
// each one's exact ARN, which the ingest bucket's stack can write down without a reference to
// the role's stack (which depends on the bucket's: a reference back would be a cycle).
//
// A role's ARN is arn:<partition>:iam::<account>:role<path><name>, and aws:PrincipalArn of a
// role's session is that ARN, path included.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-arns
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn
//
// A name is unique in an account, in every region (IAM is global), and at most 64 characters
// (https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html, RoleName): the name
// is a hash of the stack's name and the role's construct path, and the stack's region, so that
// the same app deployed in two regions of one account gets two sets of roles.
//
// The exemption is exact while the three lists fit S3's 20 KB for a bucket policy
// (MaxBucketPolicyBytes, less what the bucket's other statements take: exactBudget): 55 roles of
// the app's path, a pool and about 16 silo tenants. Past that, or with SharedProps.ExemptRolePath, the Denies exempt the
// path, as they did before the roles had names, synth warns (WarningBucketDenyExemptsRolePath),
// and role creation under the path must be kept to the deployment (an SCP, docs/operations.md).

// roleNameHashChars is how many base32 characters of the hash a role's name keeps: 60 bits, so
// that two of an account's roles share a name with odds below 1 in 10^12 at 1,000 roles.
const roleNameHashChars = 12

// roleSetKey is one app's roles under one role path.
type roleSetKey struct {
	root     constructs.IConstruct // awscdk.Stage_Of: the same Go value for the same app (as denyKey)
	rolePath string
}

// roleSet is the roles an app creates under a role path, and whether its Denies exempt the path.
type roleSet struct {
	mu    sync.Mutex
	arns  map[string]exemptRoleARN // by the ARN
	path  bool                     // SharedProps.ExemptRolePath
	first string                   // the construct that set path first
	set   bool
}

// exemptRoleARN is one role the Denies exempt: its construct path, and its ARN's length with each
// deploy-time value at its longest (longestPseudo).
type exemptRoleARN struct {
	construct string
	bytes     int
}

// exactBudget is what the three Denies' lists of exact ARNs may take of a bucket policy's
// MaxBucketPolicyBytes, the rest left to the bucket's other statements (about 2.8 KB in this
// repository's app, with a customer-managed key).
const exactBudget = MaxBucketPolicyBytes - 4*1024

// byPath reports whether the Denies exempt the path: the app asked for it (ExemptRolePath), or
// the three lists of exact ARNs (each ARN quoted, with a comma) would take more than exactBudget.
// Caller holds s.mu.
func (s *roleSet) byPath() bool {
	if s.path {
		return true
	}
	n := 0
	for _, a := range s.arns {
		n += 3 * (a.bytes + 3)
	}
	return n > exactBudget
}

var roleSets sync.Map // roleSetKey → *roleSet

func rolesUnder(scope constructs.IConstruct, rolePath string) *roleSet {
	v, _ := roleSets.LoadOrStore(roleSetKey{awscdk.Stage_Of(scope), rolePath}, &roleSet{arns: map[string]exemptRoleARN{}})
	return v.(*roleSet)
}

// exemptPath records whether scope's construct wants the path exempted (SharedProps.ExemptRolePath),
// and fails synth when another construct of the app under the same path wants otherwise: a bucket's
// Denies have one exemption for the path.
func exemptPath(scope constructs.Construct, rolePath string, path bool) {
	s := rolesUnder(scope, rolePath)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.set {
		s.set, s.path, s.first = true, path, *scope.Node().Path()
		return
	}
	if s.path != path {
		awscdk.Annotations_Of(scope).AddError(jsii.String(fmt.Sprintf(
			"SharedProps.ExemptRolePath is %t here and %t for %s: every pipeline and pool under the role path %s must set it alike, "+
				"since the bucket's Denies have one exemption for the path", path, s.path, s.first, rolePath)))
	}
}

// nameRole gives role, which the constructs create under rolePath, its name (see above) and
// records its exact ARN among the roles the bucket's Denies exempt.
func nameRole(role awsiam.Role, rolePath string) {
	cfn := role.Node().DefaultChild().(awsiam.CfnRole)
	cfn.SetPath(jsii.String(rolePath))
	name := roleName(role)
	cfn.SetRoleName(jsii.String(name))
	exemptRole(role, rolePath, name)
}

// exemptRole records the role named name under rolePath among the roles the Denies exempt.
func exemptRole(role constructs.IConstruct, rolePath, name string) {
	stack := awscdk.Stack_Of(role)
	partition, account := *awscdk.Aws_PARTITION(), *stack.Account()
	arn := fmt.Sprintf("arn:%s:iam::%s:role%s%s", partition, account, rolePath, name)
	bytes := len(arn)
	for _, t := range []struct{ value, longest string }{
		{partition, longestPseudo["AWS::Partition"]}, {account, longestPseudo["AWS::AccountId"]}, {*stack.Region(), longestPseudo["AWS::Region"]},
	} {
		if unresolved(t.value) && strings.Contains(arn, t.value) {
			bytes += len(t.longest) - len(t.value)
		}
	}
	s := rolesUnder(role, rolePath)
	s.mu.Lock()
	s.arns[arn] = exemptRoleARN{*role.Node().Path(), bytes}
	s.mu.Unlock()
}

// roleName is the name of role: 12 characters of a hash of its stack's name and its construct
// path, "-", and its stack's region (a deploy-time token for a stack without an environment).
func roleName(role constructs.IConstruct) string {
	stack := awscdk.Stack_Of(role)
	sum := sha256.Sum256([]byte(*stack.StackName() + "\x00" + *role.Node().Path()))
	h := strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:roleNameHashChars]
	return h + "-" + *stack.Region()
}

// exemptARNs is what the bucket's Denies exempt by aws:PrincipalArn for the roles under rolePath
// of scope's app and the operators: each role's exact ARN, or the path's pattern when the app set
// ExemptRolePath or the exact lists would not fit (byPath), then the operators' ARNs. With no role (an app that adds the statements before,
// or without, any pipeline) it names the path itself, which is no role's ARN, so the Deny spares
// the operators alone.
func exemptARNs(scope constructs.IConstruct, rolePath string, ops Operators) []string {
	s := rolesUnder(scope, rolePath)
	s.mu.Lock()
	var out []string
	if s.byPath() {
		out = []string{pipelineRoles(rolePath)}
	} else {
		for arn := range s.arns {
			out = append(out, arn)
		}
		slices.Sort(out)
	}
	s.mu.Unlock()
	if len(out) == 0 {
		out = []string{fmt.Sprintf("arn:%s:iam::%s:role%s", *awscdk.Aws_PARTITION(), *awscdk.Aws_ACCOUNT_ID(), rolePath)}
	}
	return append(out, ops.PrincipalARNs...)
}

// lazyExempt is exemptARNs as a list token, produced when the template is rendered: by then every
// pipeline and pool of the app has named its roles, whichever was created first.
func lazyExempt(scope constructs.IConstruct, rolePath string, ops Operators) []string {
	var out []string
	for _, v := range *awscdk.Lazy_List(&exemptProducer{scope, rolePath, ops}, nil) {
		out = append(out, *v) // one encoded list token
	}
	return out
}

type exemptProducer struct {
	scope    constructs.IConstruct
	rolePath string
	ops      Operators
}

// Produce implements awscdk.IStableListProducer.
func (p *exemptProducer) Produce() *[]*string {
	return jsii.Strings(exemptARNs(p.scope, p.rolePath, p.ops)...)
}

// pipelineRoles is the ArnLike pattern of the roles under rolePath in the stack's account: the
// exemption of SharedProps.ExemptRolePath.
func pipelineRoles(rolePath string) string {
	return fmt.Sprintf("arn:%s:iam::%s:role%s*", *awscdk.Aws_PARTITION(), *awscdk.Aws_ACCOUNT_ID(), rolePath)
}

// WarningBucketDenyExemptsRolePath is the id of the warning for an app whose bucket Denies exempt
// the role path instead of each role's ARN: API, the id an app passes to
// Annotations.AcknowledgeWarning once role creation under the path is kept to the deployment.
const WarningBucketDenyExemptsRolePath = "tenantpipeline:BucketDenyExemptsRolePath"

// warnIfByPath warns at synth, on scope, when the Denies of the roles under rolePath exempt the path.
func warnIfByPath(scope constructs.IConstruct, what, rolePath string) {
	s := rolesUnder(scope, rolePath)
	s.mu.Lock()
	byPath, asked, roles := s.byPath(), s.path, len(s.arns)
	s.mu.Unlock()
	if !byPath {
		return
	}
	why := "SharedProps.ExemptRolePath is set"
	if !asked {
		why = fmt.Sprintf("the app's %d roles under it do not fit a bucket policy's 20 KB three times over (3 a silo tenant, 7 a pool): "+
			"move silo tenants into a pool or give some another ingest bucket, and each role is named again", roles)
	}
	awscdk.Annotations_Of(scope).AddWarningV2(jsii.String(WarningBucketDenyExemptsRolePath), jsii.String(fmt.Sprintf(
		"%s: the ingest bucket's Denies exempt every role under the path %s, not each of the pipeline's roles by its ARN, because %s; "+
			"whoever may create a role under the path (iam:CreateRole) may then write the pipeline's control records and read every tenant's files: "+
			"keep that to the deployment with an SCP (docs/operations.md, \"Who may steer a tenant\")", what, rolePath, why)), nil)
}
