package tenantpipeline

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Who may steer a tenant (docs/operations.md, "Who may steer a tenant: the operator set").
//
// A message on the tenant's queue starts, redrives or replays a file, and the objects under
// control/, work/ and quarantine/ decide what the controller and Register do. So the queues and
// those prefixes carry an explicit Deny for every principal but the EventBridge rule, the
// pipeline's own roles and the operators; an explicit Deny in a resource policy wins over any
// Allow of the caller's own policies
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).
//
// The IAM semantics these statements rest on:
//   - The conditions of one statement are ANDed, and the values listed for one condition key are
//     ORed; a negated operator (ArnNotLike, StringNotEquals) holds when the request's value matches
//     none of them. The Deny therefore applies only to a request that is from none of the exempt
//     principals.
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-logic-multiple-context-keys-or-values.html
//   - A negated operator also holds when the key is absent from the request: an anonymous caller
//     has no aws:PrincipalArn, a principal without the tag no aws:PrincipalTag, a direct call no
//     aws:SourceArn. Absence never exempts anybody.
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html
//   - aws:PrincipalArn of an assumed-role session (a Lambda function's role, an operator's role)
//     is the role's ARN, path included, not the session's assumed-role ARN; so a role ARN or an
//     ArnLike pattern over a role path names every session of those roles.
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn
//   - aws:PrincipalTag/<key> holds the tags attached to the calling user or role, and session tags.
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principaltag
//   - EventBridge sends to an SQS target as the events.amazonaws.com service, with aws:SourceArn
//     set to the rule's ARN; only the service sets that key.
//     https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-sourcearn

// Operators are the principals, besides the pipeline's own roles, that may steer a tenant: send to
// its queue (pipectl redrive under continue, replay, replay --from-dlq) and write under control/
// (pipectl skip), work/ and quarantine/ of the ingest bucket. Everybody else is denied by the
// queues' and the bucket's policies, whatever their own IAM policies allow. A principal is an
// operator when it carries the tag, or when its ARN matches one of PrincipalARNs.
type Operators struct {
	// TagKey and TagValue: IAM roles and users tagged TagKey=TagValue are operators
	// (aws:PrincipalTag). Whoever may tag IAM principals (iam:TagRole, iam:TagUser) can make an
	// operator: grant those actions as carefully as the operator role itself.
	// Default: tenantpipeline-operator=true.
	TagKey   string
	TagValue string
	// PrincipalARNs are operator role or user ARNs, matched with ArnLike on aws:PrincipalArn, so a
	// wildcard may stand for a path ("arn:aws:iam::123456789012:role/ops/*"). Use the role's ARN,
	// never an assumed-role session ARN. Default: none.
	PrincipalARNs []string
}

// Defaults of the operator set and of the pipeline's role path.
const (
	DefaultOperatorTagKey   = "tenantpipeline-operator"
	DefaultOperatorTagValue = "true"
	// DefaultRolePath is the IAM path of the functions' roles.
	DefaultRolePath = "/tenantpipeline/"
)

func (o Operators) withDefaults() Operators {
	if o.TagKey == "" && o.TagValue == "" {
		o.TagKey, o.TagValue = DefaultOperatorTagKey, DefaultOperatorTagValue
	}
	return o
}

// IAM's rules: tag keys 1-128 and values 0-256 characters of letters, digits, spaces and + - = . _ : / @
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/id_tags.html); a path is "/" or "/.../" of
// printable ASCII, at most 512 characters
// (https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html, Path).
var (
	tagKeyRe   = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]{1,128}$`)
	tagValueRe = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]{0,256}$`)
	rolePathRe = regexp.MustCompile(`^/([\x21-\x7E]*/)?$`)
	iamARNRe   = regexp.MustCompile(`^arn:[a-z*-]+:iam::(\d{12}|\*):(role|user)/\S+$`)
)

// validate reports problems in the operator set, each naming the field and the fix.
func (o Operators) validate(bad func(format string, args ...any)) {
	if !tagKeyRe.MatchString(o.TagKey) || strings.HasPrefix(strings.ToLower(o.TagKey), "aws:") {
		bad("Operators.TagKey %q is not an IAM tag key: use 1-128 letters, digits, spaces and + - = . _ : / @, not starting with aws:", o.TagKey)
	}
	if !tagValueRe.MatchString(o.TagValue) {
		bad("Operators.TagValue %q is not an IAM tag value: use at most 256 letters, digits, spaces and + - = . _ : / @", o.TagValue)
	}
	for _, a := range o.PrincipalARNs {
		if !iamARNRe.MatchString(a) {
			bad("Operators.PrincipalARNs: %q is not an IAM role or user ARN (arn:aws:iam::<account>:role/<path><name>); "+
				"an assumed-role session ARN (arn:aws:sts::…:assumed-role/…) never matches aws:PrincipalArn", a)
		}
	}
}

func validRolePath(p string) bool { return len(p) <= 512 && rolePathRe.MatchString(p) }

// exemptConditions is the condition block of a Deny that spares the principals whose ARN matches
// one of arns and the operators, and, with sourceARN, the requests a service makes on behalf of
// that resource.
func exemptConditions(arns []string, o Operators, sourceARNs ...string) map[string]any {
	c := map[string]any{
		"ArnNotLike":      map[string]any{"aws:PrincipalArn": append(append([]string{}, arns...), o.PrincipalARNs...)},
		"StringNotEquals": map[string]any{"aws:PrincipalTag/" + o.TagKey: o.TagValue},
	}
	switch len(sourceARNs) {
	case 0:
	case 1:
		c["ArnNotEquals"] = map[string]any{"aws:SourceArn": sourceARNs[0]}
	default:
		// A negated operator with several values matches a value equal to none of them.
		// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-logic-multiple-context-keys-or-values.html
		c["ArnNotEquals"] = map[string]any{"aws:SourceArn": sourceARNs}
	}
	return c
}

// denyForeignSends denies sqs:SendMessage (which also authorizes SendMessageBatch) on the tenant's
// queue and on the rule's dead-letter queue to everyone but the tenant's rule (by aws:SourceArn),
// the controller's role and the operators.
func (t *TenantPipeline) denyForeignSends() {
	for _, q := range []awssqs.Queue{t.Queue, t.RuleDeadLetterQueue} {
		q.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("OnlyTheRuleThePipelineAndOperatorsSend"),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewStarPrincipal()},
			Actions:    jsii.Strings("sqs:SendMessage"),
			Resources:  jsii.Strings(*q.QueueArn()),
			Conditions: ptr(exemptConditions([]string{*t.Controller.Role().RoleArn()}, t.Props.Operators, *t.Rule.RuleArn())),
		}))
	}
}

// ControlPrefixes are the ingest bucket's prefixes that steer the pipeline: skip markers and
// wake-up state (control/), manifests (work/) and quarantined messages (quarantine/), and the
// files' results (results/), which a tenant must be able to trust as the pipeline's own.
var ControlPrefixes = []string{pipeline.ControlPrefix, pipeline.WorkPrefix, pipeline.QuarantinePrefix, pipeline.ResultsPrefix}

// BucketWriteDeny is the statement the ingest bucket's policy carries: s3:PutObject (which also
// authorizes copies and multipart uploads), s3:DeleteObject and s3:DeleteObjectVersion under
// ControlPrefixes are denied to everyone but the roles under rolePath in the bucket's account (the
// pipeline's functions, Props.RolePath) and the operators. The bucket's tenants may live in many
// stacks and a bucket policy is limited to 20 KB, so the pipeline's roles are named by their IAM
// path, not one by one. TenantPipeline and TenantPool add it to a bucket created in the app
// (bucketdeny.go), unless its policy holds it already; an app may also add it itself with
// bucket.AddToResourcePolicy. For a bucket it imports, CDK cannot change the policy, and the
// statement must be added by its owner (synth warns; this repository's app prints the statement as
// a stack output: internal/stacks).
func BucketWriteDeny(bucket awss3.IBucket, rolePath string, ops Operators) awsiam.PolicyStatement {
	d := bucketWriteDeny(bucket, rolePath, ops)
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(d.Sid),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewStarPrincipal()},
		Actions:    jsii.Strings(d.Action...),
		Resources:  jsii.Strings(d.Resource...),
		Conditions: &d.Condition,
	})
}

// BucketWriteDenyJSON is BucketWriteDeny as the JSON text of one policy statement, for the owner
// of a bucket the app does not manage. Its partition and account are deploy-time tokens: use it as
// a stack output's value.
func BucketWriteDenyJSON(bucket awss3.IBucket, rolePath string, ops Operators) string {
	b, err := json.Marshal(bucketWriteDeny(bucket, rolePath, ops))
	if err != nil {
		panic(err) // plain strings and maps
	}
	return string(b)
}

// statement is one IAM policy statement in IAM's JSON shape.
type statement struct {
	Sid       string         `json:"Sid"`
	Effect    string         `json:"Effect"`
	Principal string         `json:"Principal"`
	Action    []string       `json:"Action"`
	Resource  []string       `json:"Resource"`
	Condition map[string]any `json:"Condition"`
}

func bucketWriteDeny(bucket awss3.IBucket, rolePath string, ops Operators) statement {
	ops = ops.withDefaults()
	var resources []string
	for _, p := range ControlPrefixes {
		resources = append(resources, *bucket.ArnForObjects(jsii.String(p + "*")))
	}
	roles := fmt.Sprintf("arn:%s:iam::%s:role%s*", *awscdk.Aws_PARTITION(), *awscdk.Aws_ACCOUNT_ID(), rolePath)
	return statement{
		Sid:       "OnlyThePipelineAndOperatorsWriteControlWorkQuarantine",
		Effect:    "Deny",
		Principal: "*",
		Action:    []string{"s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"},
		Resource:  resources,
		Condition: exemptConditions([]string{roles}, ops),
	}
}

func ptr[T any](v T) *T { return &v }
