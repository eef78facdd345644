package tenantpipeline

import (
	"encoding/json"
	"strings"
	"testing"
)

// The key policy names exactly the services that call KMS in their own name, each scoped: the
// rules of the app's stacks for EventBridge, its log groups for CloudWatch Logs.
func TestKeyPolicyStatements(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy KeyPolicy
		want   []string
	}{
		{"app", AppKeyPolicy("aws", "eu-west-1", "111122223333", "TenantPipeline"), []string{
			`"Principal":{"Service":"events.amazonaws.com"}`,
			`"ArnLike":{"aws:SourceArn":["arn:aws:events:eu-west-1:111122223333:rule/TenantPipeline-*"]}`,
			`"StringEquals":{"aws:SourceAccount":"111122223333"}`,
			`"Principal":{"Service":"logs.eu-west-1.amazonaws.com"}`,
			`"kms:EncryptionContext:aws:logs:arn":["arn:aws:logs:eu-west-1:111122223333:log-group:TenantPipeline-*",` +
				`"arn:aws:logs:eu-west-1:111122223333:log-group:/aws/vendedlogs/states/TenantPipeline-*"]`,
		}},
		{"stack", StackKeyPolicy("aws-cn", "cn-north-1", "111122223333", "MyPipeline"), []string{
			`"arn:aws-cn:events:cn-north-1:111122223333:rule/MyPipeline-*"`,
			`"arn:aws-cn:logs:cn-north-1:111122223333:log-group:/aws/vendedlogs/states/MyPipeline/*"`,
			`"Principal":{"Service":"logs.cn-north-1.amazonaws.com"}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.policy.Statements())
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("got %s, want it to contain %s", b, w)
				}
			}
			var back []map[string]any
			if err := json.Unmarshal([]byte(tc.policy.JSON()), &back); err != nil || len(back) != 3 {
				t.Errorf("got JSON %s (%v), want the 3 statements", tc.policy.JSON(), err)
			}
			// No statement for EventBridge without its condition: the grant is scoped.
			for _, s := range tc.policy.Statements() {
				if p, _ := json.Marshal(s["Principal"]); strings.Contains(string(p), "events.") && s["Condition"] == nil {
					t.Errorf("got an unconditioned EventBridge statement %v", s)
				}
			}
		})
	}
}
