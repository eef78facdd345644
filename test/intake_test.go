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
