package tenantpipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/example/tenantpipeline/internal/tenants"
)

// A pool's intake is sharded over IntakeGroups message groups of one FIFO queue, so that Lambda
// runs one router invocation per group at once instead of one for the whole pool
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html). An EventBridge rule's
// SQS target takes one static MessageGroupId
// (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_SqsParameters.html), so each
// group has its own rule, and the rules split the pool's keys by the character after the pool's
// prefix: a rule's key filter lists one "prefix" matcher per character of its group, and a list of
// matchers matches when any of them does
// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html).
// A tenant's prefix goes on past the pool's prefix (tenants validation), so every file of a tenant
// lands in the same group and keeps its order; the rules list characters, never tenants, so the
// pool's size does not grow with its tenants.
//
// What the rules can and cannot cover. Every printable ASCII character (0x20-0x7E: letters of
// both cases, digits, space, '-', '%', '+', ...) is in exactly one group, and the pool's prefix
// itself (a "folder" object) is in group 0. Control characters are left out: CloudFormation
// templates are parsed as YAML, which takes no raw DEL (0x7F) and CDK writes it unescaped. A key
// whose character after the pool's prefix is a control character or not ASCII matches none of the
// sharded rules, and no rule can take exactly those keys: a filter lists matchers that are ORed, the only negation is "anything-but" with a single
// prefix (same page, "Anything-but (begins with)"), and "prefix under the pool AND none of these
// prefixes" needs an AND on one field that patterns do not have. A rule on the whole pool prefix
// would deliver every key twice. Such a key belongs to no tenant (tenants validation), so no
// tenant's file is lost; the object is not counted as UnroutedObjects. IntakeGroups 1 keeps the one
// rule on the whole prefix (docs/controller.md, "Pooled tier").

// IntakeMessageGroup is the message group of an intake with one group, and group 0 of a sharded
// intake, so that a pool with IntakeGroups 1 is the same as before the intake was sharded.
const IntakeMessageGroup = "intake"

// IntakeMessageGroupOf is the message group of intake group g.
func IntakeMessageGroupOf(g int) string {
	if g == 0 {
		return IntakeMessageGroup
	}
	return IntakeMessageGroup + "-" + strconv.Itoa(g)
}

// IntakeGroupOf is the intake group of the keys whose byte after the pool's prefix is b: a
// printable ASCII byte's value modulo groups, so that consecutive characters (tenant ids a, b, c,
// ...) spread over the groups. ok is false for a byte no sharded rule lists (tenants.IntakeByte).
func IntakeGroupOf(b byte, groups int) (g int, ok bool) {
	if groups <= 1 {
		return 0, true
	}
	if !tenants.IntakeByte(b) {
		return 0, false
	}
	return int(b) % groups, true
}

// intakeKeyFilters returns each intake group's key filter, for the rule of that group.
func intakeKeyFilters(prefix string, groups int) [][]any {
	if groups <= 1 {
		return [][]any{{map[string]any{"prefix": prefix}}}
	}
	filters := make([][]any, groups)
	filters[0] = append(filters[0], prefix) // the key that is the pool's prefix itself
	for b := range 0x80 {
		if g, ok := IntakeGroupOf(byte(b), groups); ok {
			filters[g] = append(filters[g], map[string]any{"prefix": prefix + string(rune(b))})
		}
	}
	return filters
}

// MaxEventPatternChars is the size of an event pattern EventBridge accepts by default ("Event
// pattern size", adjustable to 4,096: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html).
const MaxEventPatternChars = 2048

// maxBucketNameChars is the longest S3 bucket name, for a bucket whose name is not known at synth.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html
const maxBucketNameChars = 63

// intakePattern is the event pattern of one intake group's rule.
func intakePattern(bucket any, filter []any) map[string]any {
	return map[string]any{
		"source":      []any{"aws.s3"},
		"detail-type": []any{"Object Created"},
		"detail": map[string]any{
			"bucket": map[string]any{"name": []any{bucket}},
			"object": map[string]any{"key": filter},
		},
	}
}

// intakePatternChars is the length of the largest intake rule's pattern as JSON, with a bucket name
// of the longest size when it is not known yet, and the group that has it.
func intakePatternChars(prefix string, groups int, bucket string) (chars, group int) {
	if bucket == "" {
		bucket = string(bytes.Repeat([]byte("b"), maxBucketNameChars))
	}
	for g, f := range intakeKeyFilters(prefix, groups) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(intakePattern(bucket, f)); err != nil {
			panic(fmt.Sprintf("intake pattern: %v", err))
		}
		if n := len([]rune(b.String())) - 1; n > chars { // less the encoder's newline
			chars, group = n, g
		}
	}
	return chars, group
}

// MaxMessageGroupIDLength is SQS's bound on a message group id: 128 characters, alphanumeric and
// punctuation (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html).
const MaxMessageGroupIDLength = 128

// IntakeRequestTemplate is the request mapping template of an API Gateway integration with SQS
// SendMessage (the query API's form body) that puts an "Object Created" event under the pool's
// prefix in a message group of its own tenant: the event's key, split on "/", has the tenant in
// the segment after the prefix's (a prefix has no empty segment, spec.CheckPrefix). The segment
// is URL-encoded, so whatever the key holds the group has only characters SQS takes, and cut to
// MaxMessageGroupIDLength; an empty one is "-". The deduplication id is the event's id, so a
// delivery EventBridge repeats is stored once. The template is one line: the form body has
// nothing around its parameters.
// https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-mapping-template-reference.html
func IntakeRequestTemplate(prefix string) string {
	n := strconv.Itoa(strings.Count(prefix, "/"))
	return `#set($parts = $input.path('$.detail.object.key').split('/'))` +
		`#if($parts.size() > ` + n + `)#set($group = $util.urlEncode($parts.get(` + n + `)))#{else}#set($group = '')#{end}` +
		`#if($group.length() == 0)#set($group = '-')#{end}` +
		`#if($group.length() > ` + strconv.Itoa(MaxMessageGroupIDLength) + `)#set($group = $group.substring(0, ` + strconv.Itoa(MaxMessageGroupIDLength) + `))#{end}` +
		`Action=SendMessage&MessageGroupId=$util.urlEncode($group)&MessageDeduplicationId=$util.urlEncode($input.path('$.id'))&MessageBody=$util.urlEncode($input.body)`
}
