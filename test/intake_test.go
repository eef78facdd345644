package test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/localrun"
	"github.com/example/tenantpipeline/internal/stacks"
)

// intakeRule is one synthesized intake rule: its pattern, as the local run's EventBridge evaluator
// reads it (the bucket's name resolved), and its target's message group.
type intakeRule struct {
	id, group string
	pattern   *localrun.Pattern
}

const intakeBucket = "ingest-bucket"

// intakeRules reads the rules of tpl whose target is the pool's intake queue.
func intakeRules(t *testing.T, tpl map[string]any) []intakeRule {
	t.Helper()
	var intake string
	for id := range byType(tpl, "AWS::SQS::Queue") {
		if strings.HasPrefix(id, "PoolIntake") {
			intake = id
		}
	}
	var out []intakeRule
	for id, r := range byType(tpl, "AWS::Events::Rule") {
		for _, target := range props(r)["Targets"].([]any) {
			tg := target.(map[string]any)
			if asJSON(tg["Arn"]) != asJSON(map[string]any{"Fn::GetAtt": []any{intake, "Arn"}}) {
				continue
			}
			pattern := props(r)["EventPattern"].(map[string]any)
			get(t, pattern, "detail", "bucket").(map[string]any)["name"] = []any{intakeBucket}
			b, _ := json.Marshal(pattern)
			p, err := localrun.ParsePattern(b)
			if err != nil {
				t.Fatalf("rule %s: %v", id, err)
			}
			out = append(out, intakeRule{id: id, group: get(t, tg, "SqsParameters", "MessageGroupId").(string), pattern: p})
		}
	}
	return out
}

// matching returns the message groups of the intake rules that match an Object Created event of key.
func matching(rules []intakeRule, key string) []string {
	ev := map[string]any{"source": "aws.s3", "detail-type": "Object Created",
		"detail": map[string]any{"bucket": map[string]any{"name": intakeBucket}, "object": map[string]any{"key": key}}}
	var groups []string
	for _, r := range rules {
		if r.pattern.Match(ev) {
			groups = append(groups, r.group)
		}
	}
	return groups
}

// firstByteKeys are keys under prefix, one for every byte a UTF-8 key can have first after the
// prefix: each ASCII byte (upper and lower case, digits, '-', '%', '+', space, controls), and one
// character for each lead byte of a longer UTF-8 sequence (0xC2-0xF4). S3 keys are UTF-8
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html), so no key has a
// continuation byte (0x80-0xBF) or 0xC0, 0xC1, 0xF5-0xFF there.
func firstByteKeys(t *testing.T, prefix string) map[byte]string {
	t.Helper()
	keys := map[byte]string{}
	for b := range 0x100 {
		var r rune
		switch {
		case b < 0x80:
			r = rune(b)
		case b >= 0xC2 && b <= 0xDF:
			r = rune(b&0x1F) << 6
		case b >= 0xE0 && b <= 0xEF:
			r = max(rune(b&0x0F)<<12, 0x800)
		case b >= 0xF0 && b <= 0xF4:
			r = max(rune(b&0x07)<<18, 0x10000)
		default:
			continue
		}
		if s := string(r); !utf8.ValidRune(r) || s[0] != byte(b) {
			t.Fatalf("first byte %#x: rune %U encodes as % x", b, r, s)
		}
		keys[byte(b)] = prefix + string(r) + "x/1.csv"
	}
	return keys
}

// TestPoolIntakeRulesCoverEveryFirstByte checks the synthesized intake rules with the local run's
// EventBridge evaluator: every key under the pool's prefix whose first character after it is
// printable ASCII matches exactly one rule, the one of its group; the pool's prefix itself matches
// group 0; keys outside the prefix match none. A key with a control or non-ASCII character there
// matches none of the sharded rules (no pattern can take exactly those keys:
// constructs/tenantpipeline/intake.go; no tenant's prefix has one there), and exactly one with
// IntakeGroups 1.
func TestPoolIntakeRulesCoverEveryFirstByte(t *testing.T) {
	_, tpl := poolTemplate(t)
	const prefix = "pools/default/"
	rules := intakeRules(t, tpl)
	if len(rules) != 16 {
		t.Fatalf("got %d intake rules, want 16", len(rules))
	}
	keys := firstByteKeys(t, prefix)
	if len(keys) != 0x80+0xF4-0xC2+1 {
		t.Fatalf("got keys for %d first bytes, want %d", len(keys), 0x80+0xF4-0xC2+1)
	}
	for _, want := range []byte{'A', 'Z', 'a', 'z', '0', '9', '-', '%', '+', ' ', '/', 0, 0x7F, 0xC3, 0xE6, 0xF0} {
		if _, ok := keys[want]; !ok {
			t.Errorf("no key with first byte %#x", want)
		}
	}
	for b, key := range keys {
		got := matching(rules, key)
		g, ascii := tenantpipeline.IntakeGroupOf(b, 16)
		switch {
		case ascii && (len(got) != 1 || got[0] != tenantpipeline.IntakeMessageGroupOf(g)):
			t.Errorf("key %q (first byte %#x): got groups %v, want exactly [%s]", key, b, got, tenantpipeline.IntakeMessageGroupOf(g))
		case !ascii && len(got) != 0:
			t.Errorf("key %q (first byte %#x): got groups %v, want none", key, b, got)
		}
	}
	for key, want := range map[string][]string{
		prefix:                    {tenantpipeline.IntakeMessageGroup},
		"pools/default":           nil,
		"pools/defaults/a/1.csv":  nil,
		"pools/other/a/1.csv":     nil,
		"control/hooli/wake.json": nil,
		"POOLS/DEFAULT/a/1.csv":   nil,
	} {
		if got := matching(rules, key); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("key %q: got groups %v, want %v", key, got, want)
		}
	}
	// Every file of a tenant, whatever its name, is in the tenant's one group.
	for _, tenant := range []string{"hooli", "umbrella"} {
		var seen []string
		for _, file := range []string{"a.csv", "Z b+c%2F.csv", "日本/x.csv", "sub/dir/1.csv", ""} {
			seen = append(seen, matching(rules, prefix+tenant+"/"+file)...)
		}
		if len(seen) != 5 || strings.Count(strings.Join(seen, " "), seen[0]) != 5 {
			t.Errorf("tenant %s: its files went to groups %v, want one group", tenant, seen)
		}
	}

	// One intake group: the one rule on the whole prefix takes every key under it.
	app := testApp(t)
	stack := awscdk.NewStack(app, jsii.String("OneGroup"), nil)
	tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
		Name: "one", Bucket: stacks.NewIngestBucket(stack, "Bucket"), IntakeGroups: 1,
		Tenants: []tenantpipeline.Tenant{{ID: "a", RegisterURL: "https://core.example.com/a"}},
	})
	one := intakeRules(t, templateJSON(assertions.Template_FromStack(stack, nil)))
	if len(one) != 1 || one[0].group != tenantpipeline.IntakeMessageGroup {
		t.Fatalf("IntakeGroups 1: got rules %v, want one in group %q", one, tenantpipeline.IntakeMessageGroup)
	}
	for b, key := range firstByteKeys(t, "pools/one/") {
		if got := matching(one, key); len(got) != 1 {
			t.Errorf("IntakeGroups 1: key %q (first byte %#x): got groups %v, want exactly one", key, b, got)
		}
	}
}

// onlyOf returns the one resource of typ in tpl whose logical id starts with prefix.
func onlyOf(t *testing.T, tpl map[string]any, typ, prefix string) (string, map[string]any) {
	t.Helper()
	var id string
	var found map[string]any
	for k, r := range byType(tpl, typ) {
		if strings.HasPrefix(k, prefix) {
			if found != nil {
				t.Fatalf("two %s resources %s and %s", typ, id, k)
			}
			id, found = k, r
		}
	}
	if found == nil {
		t.Fatalf("no %s resource %s*", typ, prefix)
	}
	return id, found
}

// roleStatements returns the statements of the AWS::IAM::Policy attached to role.
func roleStatements(t *testing.T, tpl map[string]any, role string) []any {
	t.Helper()
	var out []any
	for _, p := range byType(tpl, "AWS::IAM::Policy") {
		if asJSON(props(p)["Roles"]) == asJSON([]any{map[string]any{"Ref": role}}) {
			out = append(out, get(t, props(p), "PolicyDocument", "Statement").([]any)...)
		}
	}
	return out
}

// TestPoolPerTenantIntake: with the per-tenant intake (pool big of pool.json, the default), the
// pool has one rule on its whole prefix, whose target is POST /events of the intake REST API,
// signed with the rule's own role; the API takes AWS_IAM requests of that role alone (its policy
// denies every other principal); its SQS integration sends to the intake queue with the
// integration's role, whose only grant is that SendMessage, the request template
// (IntakeRequestTemplate) putting each event in its tenant's message group, and answers anything
// but SQS's 2xx with a 500, which EventBridge retries. The intake queue's Deny exempts that role.
// Every key under the prefix, whatever its first byte, matches the rule.
func TestPoolPerTenantIntake(t *testing.T) {
	built, _ := poolTemplate(t)
	tpl := stackTemplate(t, built.PoolStacks[0]) // big
	api, restAPI := onlyOf(t, tpl, "AWS::ApiGateway::RestApi", "PoolIntakeApi")
	eventRole, _ := onlyOf(t, tpl, "AWS::IAM::Role", "PoolIntakeApiEventRole")
	apiRole, _ := onlyOf(t, tpl, "AWS::IAM::Role", "PoolIntakeApiRole")
	intake, _ := onlyOf(t, tpl, "AWS::SQS::Queue", "PoolIntake")
	_, method := onlyOf(t, tpl, "AWS::ApiGateway::Method", "PoolIntakeApi")
	_, stage := onlyOf(t, tpl, "AWS::ApiGateway::Stage", "PoolIntakeApi")

	var intakeRules []string
	for id, r := range byType(tpl, "AWS::Events::Rule") {
		if strings.Contains(asJSON(props(r)["EventPattern"]), `"aws.s3"`) {
			intakeRules = append(intakeRules, id)
		}
	}
	if len(intakeRules) != 1 {
		t.Fatalf("got intake rules %v, want one", intakeRules)
	}
	rule := props(byType(tpl, "AWS::Events::Rule")[intakeRules[0]])
	targets := rule["Targets"].([]any)
	if len(targets) != 1 {
		t.Fatalf("got %d targets, want 1", len(targets))
	}
	target := targets[0].(map[string]any)
	if got, want := flatten(t, target["Arn"]), "arn:<Ref:AWS::Partition>:execute-api:<Ref:AWS::Region>:<Ref:AWS::AccountId>:<Ref:"+api+">/"+
		tenantpipeline.IntakeAPIStage+"/POST/"+tenantpipeline.IntakeAPIPath; got != want {
		t.Errorf("target ARN %s, want %s", got, want)
	}
	if got := asJSON(target["RoleArn"]); got != asJSON(getAtt(eventRole)) {
		t.Errorf("target role %s, want the rule's role %s", got, eventRole)
	}
	if got := asJSON(target["RetryPolicy"]); got != fmt.Sprintf(`{"MaximumEventAgeInSeconds":%d,"MaximumRetryAttempts":%d}`, int(tenantpipeline.RuleMaxEventAge.Seconds()), tenantpipeline.RuleRetryAttempts) {
		t.Errorf("retry policy %s, want the silo rule's", got)
	}
	if _, ok := target["DeadLetterConfig"]; !ok {
		t.Error("the target has no dead-letter queue")
	}
	if got := asJSON(get(t, rule, "EventPattern", "detail", "object", "key")); got != `[{"prefix":"big/"}]` {
		t.Errorf("key filter %s, want the pool's whole prefix", got)
	}

	// The rule's role may invoke that method and nothing else.
	if got, want := asJSON(roleStatements(t, tpl, eventRole)), asJSON([]any{map[string]any{"Action": "execute-api:Invoke", "Effect": "Allow",
		"Resource": target["Arn"]}}); got != want {
		t.Errorf("the rule's role holds %s, want %s", got, want)
	}
	// The API: named after its stack, Regional, and only the rule's role may invoke it.
	if name, _ := props(restAPI)["Name"].(string); !strings.HasSuffix(name, "-Pool-big-intake") {
		t.Errorf("API name %q, want <stack>-intake", name)
	}
	if got := asJSON(get(t, props(restAPI), "EndpointConfiguration", "Types")); got != `["REGIONAL"]` {
		t.Errorf("endpoint types %s, want REGIONAL", got)
	}
	policy := asJSON(get(t, props(restAPI), "Policy", "Statement"))
	for _, want := range []string{
		asJSON(map[string]any{"Action": "execute-api:Invoke", "Effect": "Allow", "Principal": map[string]any{"AWS": getAtt(eventRole)}, "Resource": "execute-api:/*"}),
		asJSON(map[string]any{"Action": "execute-api:Invoke", "Condition": map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": getAtt(eventRole)}},
			"Effect": "Deny", "Principal": "*", "Resource": "execute-api:/*", "Sid": "OnlyThePoolsRule"}),
	} {
		if !strings.Contains(policy, want) {
			t.Errorf("the API's policy %s lacks %s", policy, want)
		}
	}
	if got := get(t, props(stage), "StageName"); got != tenantpipeline.IntakeAPIStage {
		t.Errorf("stage %v, want %s", got, tenantpipeline.IntakeAPIStage)
	}
	// The method: AWS_IAM, an SQS integration of the intake with the integration's role.
	m := props(method)
	if m["AuthorizationType"] != "AWS_IAM" || m["HttpMethod"] != "POST" {
		t.Errorf("method %s %v, want POST with AWS_IAM", m["HttpMethod"], m["AuthorizationType"])
	}
	integration := m["Integration"].(map[string]any)
	for k, want := range map[string]string{
		"Type": `"AWS"`, "IntegrationHttpMethod": `"POST"`, "PassthroughBehavior": `"NEVER"`, "Credentials": asJSON(getAtt(apiRole)),
		"RequestTemplates":     asJSON(map[string]any{"application/json": tenantpipeline.IntakeRequestTemplate("big/")}),
		"RequestParameters":    `{"integration.request.header.Content-Type":"'application/x-www-form-urlencoded'"}`,
		"IntegrationResponses": `[{"StatusCode":"500"},{"SelectionPattern":"2\\d{2}","StatusCode":"200"}]`,
	} {
		if got := asJSON(integration[k]); got != want {
			t.Errorf("integration %s: %s, want %s", k, got, want)
		}
	}
	if got, want := flatten(t, integration["Uri"]), "arn:<Ref:AWS::Partition>:apigateway:<Ref:AWS::Region>:sqs:path/<Ref:AWS::AccountId>/<GetAtt:"+intake+".QueueName>"; got != want {
		t.Errorf("integration URI %s, want %s", got, want)
	}
	// The integration's role: SendMessage on the intake, nothing else.
	if got, want := asJSON(roleStatements(t, tpl, apiRole)), asJSON([]any{map[string]any{"Action": "sqs:SendMessage", "Effect": "Allow", "Resource": getAtt(intake)}}); got != want {
		t.Errorf("the integration's role holds %s, want %s", got, want)
	}
	// The intake's Deny exempts the integration's role, and no rule.
	var deny map[string]any
	for _, p := range byType(tpl, "AWS::SQS::QueuePolicy") {
		for _, st := range get(t, props(p), "PolicyDocument", "Statement").([]any) {
			s := st.(map[string]any)
			if s["Effect"] == "Deny" && asJSON(s["Resource"]) == asJSON(getAtt(intake)) && s["Action"] == "sqs:SendMessage" {
				deny = s
			}
		}
	}
	if deny == nil {
		t.Fatal("the intake has no SendMessage Deny")
	}
	if cond := asJSON(deny["Condition"]); !strings.Contains(cond, asJSON(getAtt(apiRole))) || strings.Contains(cond, "aws:SourceArn") {
		t.Errorf("the intake's Deny exempts %s, want the integration's role and no rule", cond)
	}
	// The router reads the intake's groups at most RouterConcurrency at once, not one invocation per
	// tenant with new files.
	var routerMappings []string
	for _, m := range byType(tpl, "AWS::Lambda::EventSourceMapping") {
		if asJSON(props(m)["EventSourceArn"]) == asJSON(getAtt(intake)) {
			routerMappings = append(routerMappings, asJSON(props(m)["ScalingConfig"]))
		}
	}
	if want := fmt.Sprintf(`{"MaximumConcurrency":%d}`, tenantpipeline.RouterConcurrency); len(routerMappings) != 1 || routerMappings[0] != want {
		t.Errorf("the router's mappings of the intake have %v, want one with %s", routerMappings, want)
	}
	// Every key under the prefix reaches the one rule, and none outside it.
	pattern := rule["EventPattern"].(map[string]any)
	get(t, pattern, "detail", "bucket").(map[string]any)["name"] = []any{intakeBucket}
	b, _ := json.Marshal(pattern)
	p, err := localrun.ParsePattern(b)
	if err != nil {
		t.Fatal(err)
	}
	one := []intakeRule{{id: intakeRules[0], group: "api", pattern: p}}
	for fb, key := range firstByteKeys(t, "big/") {
		if got := matching(one, key); len(got) != 1 {
			t.Errorf("key %q (first byte %#x): matched %d rules, want 1", key, fb, len(got))
		}
	}
	for _, key := range []string{"big", "bigger/a/1.csv", "pools/default/a/1.csv"} {
		if got := matching(one, key); len(got) != 0 {
			t.Errorf("key %q: matched the rule, want no match", key)
		}
	}
}
