package tenantpipeline

import (
	"encoding/json"
	"strings"
	"testing"
)

// The key policy names exactly the services that call KMS in their own name, each scoped: the
// rules of the app's stacks for EventBridge, its log groups for CloudWatch Logs, the key's
// account for vended log delivery.
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
			`"Principal":{"Service":"delivery.logs.amazonaws.com"}`,
		}},
		{"stack", StackKeyPolicy("aws-cn", "cn-north-1", "111122223333", "MyPipeline"), []string{
			`"arn:aws-cn:events:cn-north-1:111122223333:rule/MyPipeline-*"`,
			`"arn:aws-cn:logs:cn-north-1:111122223333:log-group:/aws/vendedlogs/states/MyPipeline/*"`,
			`"Principal":{"Service":"logs.cn-north-1.amazonaws.com"}`,
			`"Condition":{"StringEquals":{"kms:EncryptionContext:SourceArn":"arn:aws-cn:logs:cn-north-1:111122223333:*"}}`,
			`"Condition":{"StringNotEquals":{"kms:EncryptionContext:SourceArn":"arn:aws-cn:logs:cn-north-1:111122223333:*"}},"Effect":"Deny"`,
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
			if err := json.Unmarshal([]byte(tc.policy.JSON()), &back); err != nil || len(back) != 4 {
				t.Errorf("got JSON %s (%v), want the 4 statements", tc.policy.JSON(), err)
			}
			// No service statement without its condition: every grant is scoped.
			for _, s := range tc.policy.Statements() {
				if s["Condition"] == nil {
					t.Errorf("got an unconditioned statement %v", s)
				}
			}
		})
	}
}
