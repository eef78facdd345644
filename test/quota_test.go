package test

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/stacks"
)

// ruleQuotaWarnings finds the synth warnings about EventBridge's default rule quota.
func ruleQuotaWarnings(stack awscdk.Stack) int {
	msgs := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
		assertions.Match_StringLikeRegexp(jsii.String("EventBridge rules on the default event bus.*Service Quotas")))
	return len(*msgs)
}

// TestRuleQuotaWarning: more than 300 rules on the default event bus (EventBridge's default quota
// per event bus, https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html) is a synth
// warning, not an error; 300 is none. The 1,000-tenant synth (TestScale) checks it end to end.
func TestRuleQuotaWarning(t *testing.T) {
	for _, tc := range []struct {
		rules int
		want  int
	}{{1, 0}, {300, 0}, {301, 1}, {1000, 1}} {
		app := testApp(t)
		stack := awscdk.NewStack(app, jsii.String("S"), nil)
		stacks.WarnRuleQuota(stack, tc.rules)
		if got := ruleQuotaWarnings(stack); got != tc.want {
			t.Errorf("%d rules: got %d warnings, want %d", tc.rules, got, tc.want)
		}
	}
}
