package tenantpipeline

import (
	"encoding/json"
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
//   - aws:PrincipalTag/<key> holds the tags attached to the calling user or role, and the session's
//     tags, which whoever may call sts:TagSession on some role sets as it likes. So no tag ever
//     exempts anybody: an operator is named by ARN.
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principaltag
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/id_session-tags.html
//   - EventBridge sends to an SQS target as the events.amazonaws.com service, with aws:SourceArn
//     set to the rule's ARN; only the service sets that key.
//     https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-sourcearn

// Operators are the principals, besides the pipeline's own roles, that may steer a tenant: send to
// its queue (pipectl redrive under continue, replay, replay --from-dlq) and write under control/
// (pipectl skip), work/, quarantine/ and results/ of the ingest bucket. Everybody else is denied by
// the queues' and the bucket's policies, whatever their own IAM policies allow. A principal is an
// operator when its ARN matches one of PrincipalARNs, never by a tag: a session's tags are
// aws:PrincipalTag too, and a session sets its own.
type Operators struct {
	// PrincipalARNs are operator role or user ARNs, matched with ArnLike on aws:PrincipalArn, so a
	// wildcard may stand for a path ("arn:aws:iam::123456789012:role/ops/*"). Use the role's ARN,
	// never an assumed-role session ARN. Whoever may create roles under a wildcard's path
	// (iam:CreateRole) can make an operator: grant that as carefully as the operator role itself.
	// Default: none; only the pipeline's own roles steer, and pipectl's skip, redrive (continue)
	// and replay are refused.
	PrincipalARNs []string
}

// DefaultRolePath is the IAM path of the functions' roles.
const DefaultRolePath = "/tenantpipeline/"

// iamARNRe is an IAM role or user ARN, the account and the name part possibly wildcards.
var iamARNRe = regexp.MustCompile(`^arn:[a-z*-]+:iam::(\d{12}|\*):(role|user)/(\S+)$`)

// IAM's rule for a path: "/" or "/.../" of printable ASCII, at most 512 characters
// (https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html, Path).
var rolePathRe = regexp.MustCompile(`^/([\x21-\x7E]*/)?$`)

// validate reports problems in the operator set, each naming the field and the fix.
func (o Operators) validate(bad func(format string, args ...any)) {
	for _, a := range o.PrincipalARNs {
		m := iamARNRe.FindStringSubmatch(a)
		switch {
		case m == nil:
			bad("Operators.PrincipalARNs: %q is not an IAM role or user ARN (arn:aws:iam::<account>:role/<path><name>); "+
				"an assumed-role session ARN (arn:aws:sts::…:assumed-role/…) never matches aws:PrincipalArn", a)
		case strings.ContainsAny(m[3][:1], "*?"):
			bad("Operators.PrincipalARNs: %q would make every %s of the account an operator: name the role, or a path of operator roles "+
				"(arn:aws:iam::<account>:role/ops/*)", a, m[2])
		}
	}
}

func validRolePath(p string) bool { return len(p) <= 512 && rolePathRe.MatchString(p) }

// exemptConditions is the condition block of a Deny that spares the principals whose ARN matches
// one of arns and the operators', by aws:PrincipalArn alone, and, with sourceARN, the requests a
// service makes on behalf of that resource.
func exemptConditions(arns []string, o Operators, sourceARNs ...string) map[string]any {
	c := map[string]any{
		"ArnNotLike": map[string]any{"aws:PrincipalArn": append(append([]string{}, arns...), o.PrincipalARNs...)},
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

// controlPrefixes are the ingest bucket's prefixes that steer the pipeline: skip markers and
// wake-up state (control/), manifests (work/) and quarantined messages (quarantine/), and the
// files' results (results/), which a tenant must be able to trust as the pipeline's own.
var controlPrefixes = []string{pipeline.ControlPrefix, pipeline.WorkPrefix, pipeline.QuarantinePrefix, pipeline.ResultsPrefix}

// ControlWriteActions are the S3 actions the bucket's Deny refuses under controlPrefixes: every
// object-level action of access level Write, Tagging or Permissions management that writes,
// replaces or removes an object, one of its versions, its ACL, tags, retention or legal hold.
// s3:PutObject also authorizes copies and the multipart upload's create, part and complete calls
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuAndPermissions.html); a replication
// writes objects, delete markers and tags with s3:ReplicateObject, s3:ReplicateDelete and
// s3:ReplicateTags; s3:RestoreObject writes a temporary copy of an archived object, and
// s3:AbortMultipartUpload ends another principal's upload. The pipeline never needs the last two
// under these prefixes, so they are refused to outsiders too (fail closed).
// https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html
var ControlWriteActions = []string{
	"s3:PutObject", "s3:PutObjectAcl", "s3:PutObjectVersionAcl",
	"s3:PutObjectTagging", "s3:PutObjectVersionTagging", "s3:DeleteObjectTagging", "s3:DeleteObjectVersionTagging",
	"s3:PutObjectRetention", "s3:PutObjectLegalHold",
	"s3:DeleteObject", "s3:DeleteObjectVersion",
	"s3:ReplicateObject", "s3:ReplicateDelete", "s3:ReplicateTags",
	"s3:RestoreObject", "s3:AbortMultipartUpload",
}

// BucketWriteDeny is the statement the ingest bucket's policy carries: ControlWriteActions under
// controlPrefixes are denied to everyone but the roles the app's pipelines and pools create under
// rolePath (Props.RolePath), each by its exact ARN, and the operators. The list is made when the
// template is rendered, so it names the roles of every pipeline and pool of the app, whichever
// stack they are in and whenever they were created; past what a bucket policy holds, or with
// SharedProps.ExemptRolePath, it is the path's pattern instead (roles.go). TenantPipeline
// and TenantPool add it to a bucket created in the app (bucketdeny.go), unless its policy holds it
// already; an app may also add it itself with bucket.AddToResourcePolicy. For a bucket it imports,
// CDK cannot change the policy, and the statement must be added by its owner (synth warns; this
// repository's app prints the statement as a stack output: internal/stacks).
func BucketWriteDeny(bucket awss3.IBucket, rolePath string, ops Operators) awsiam.PolicyStatement {
	return bucketWriteDeny(bucket, lazyExempt(bucket, rolePath, ops)).policyStatement()
}

// BucketWriteDenyJSON is BucketWriteDeny as the JSON text of one policy statement, for the owner
// of a bucket the app does not manage. Its partition, account and region are deploy-time tokens:
// use it as a stack output's value, and apply it again after a deploy that adds roles.
func BucketWriteDenyJSON(bucket awss3.IBucket, rolePath string, ops Operators) string {
	return lazyJSON(func() any { return bucketWriteDeny(bucket, exemptARNs(bucket, rolePath, ops)) })
}

// lazyJSON is the JSON text of the statement, or slice of them, that build returns, produced when
// the template is rendered (the roles the statements name are all created by then).
func lazyJSON(build func() any) string {
	return *awscdk.Lazy_String(&jsonProducer{build}, nil)
}

type jsonProducer struct{ build func() any }

// Produce implements awscdk.IStableStringProducer.
func (p *jsonProducer) Produce() *string {
	b, err := json.Marshal(p.build())
	if err != nil {
		panic(err) // plain strings and maps
	}
	return jsii.String(string(b))
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

// bucketWriteDeny is BucketWriteDeny's statement, sparing exempt (exemptARNs, or its lazyExempt).
func bucketWriteDeny(bucket awss3.IBucket, exempt []string) statement {
	var resources []string
	for _, p := range controlPrefixes {
		resources = append(resources, *bucket.ArnForObjects(jsii.String(p + "*")))
	}
	return statement{
		Sid:       "OnlyThePipelineAndOperatorsWriteControlWorkQuarantine",
		Effect:    "Deny",
		Principal: "*",
		Action:    ControlWriteActions,
		Resource:  resources,
		Condition: exemptConditions(exempt, Operators{}),
	}
}

func ptr[T any](v T) *T { return &v }
