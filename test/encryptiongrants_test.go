package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"

	"github.com/example/tenantpipeline/internal/stacks"
)

// storeNeeds is what a role that calls a store's API needs of the key, by the action's prefix:
// the KMS actions the service makes for it and the encryption context key they carry (the
// service's own, as the grants scope them). A role that sends to an encrypted queue but cannot
// make a data key fails at the first message: only a grant per role, checked for every role,
// shows that none was left out.
var storeNeeds = []struct {
	action, kmsAction, context string
}{
	{"sqs:SendMessage", "kms:GenerateDataKey", "kms:EncryptionContext:aws:sqs:arn"},
	{"sqs:ReceiveMessage", "kms:Decrypt", "kms:EncryptionContext:aws:sqs:arn"},
	{"s3:GetObject", "kms:Decrypt", "kms:EncryptionContext:aws:s3:arn"},
	{"s3:PutObject", "kms:GenerateDataKey", "kms:EncryptionContext:aws:s3:arn"},
	{"states:StartExecution", "kms:GenerateDataKey", "kms:EncryptionContext:aws:states:stateMachineArn"},
	{"dynamodb:GetItem", "kms:Decrypt", "kms:EncryptionContext:aws:dynamodb:tableName"},
	{"dynamodb:Query", "kms:Decrypt", "kms:EncryptionContext:aws:dynamodb:tableName"},
	{"dynamodb:PutItem", "kms:Decrypt", "kms:EncryptionContext:aws:dynamodb:tableName"},
	{"dynamodb:UpdateItem", "kms:Decrypt", "kms:EncryptionContext:aws:dynamodb:tableName"},
	{"dynamodb:TransactWriteItems", "kms:Decrypt", "kms:EncryptionContext:aws:dynamodb:tableName"},
}

// TestEncryptionEveryRoleThatTouchesAStoreHoldsTheKey: in every stack of an app with both tiers,
// a core system and a created key, every role with a policy that sends to or receives from a
// queue, reads or writes objects, starts an execution or reads or writes a table also holds the
// KMS action that call needs, under the store's encryption context. It reads every policy of the
// templates, not a list of roles, so a role added later is checked too.
func TestEncryptionEveryRoleThatTouchesAStoreHoldsTheKey(t *testing.T) {
	_, all := encryptedApp(t, "", stacks.Options{})
	var checked int
	for _, stack := range all {
		missing, n := rolesMissingTheKey(stack)
		checked += n
		for _, m := range missing {
			t.Error(m)
		}
	}
	if checked < 30 {
		t.Errorf("checked %d role needs, want at least 30: the test would check little", checked)
	}
	t.Logf("checked %d role needs", checked)
}

// rolesMissingTheKey reads every IAM policy of stack's template and names each role that calls a
// store (storeNeeds) without the KMS action that call needs under the store's encryption context;
// checked is how many such needs it found.
func rolesMissingTheKey(stack awscdk.Stack) (missing []string, checked int) {
	tpl := templateJSON(assertions.Template_FromStack(stack, nil))
	type grant struct{ action, condition string }
	holds := map[string][]grant{}  // role → its KMS actions with their conditions
	needs := map[string][]string{} // role → the store actions it has
	for _, pol := range byType(tpl, "AWS::IAM::Policy") {
		var roles []string
		rs, _ := dig(pol, "Properties", "Roles").([]any)
		for _, r := range rs {
			if ref, ok := dig(r, "Ref").(string); ok {
				roles = append(roles, ref)
			}
		}
		sts, _ := dig(pol, "Properties", "PolicyDocument", "Statement").([]any)
		for _, st := range sts {
			if dig(st, "Effect") != "Allow" {
				continue
			}
			var actions []string
			switch a := dig(st, "Action").(type) {
			case string:
				actions = []string{a}
			case []any:
				for _, x := range a {
					actions = append(actions, fmt.Sprint(x))
				}
			}
			cond, _ := json.Marshal(dig(st, "Condition"))
			for _, role := range roles {
				for _, a := range actions {
					if strings.HasPrefix(a, "kms:") {
						holds[role] = append(holds[role], grant{a, string(cond)})
					} else {
						needs[role] = append(needs[role], a)
					}
				}
			}
		}
	}
	for _, role := range slices.Sorted(maps.Keys(needs)) {
		for _, n := range storeNeeds {
			if !slices.ContainsFunc(needs[role], func(a string) bool { return strings.HasPrefix(a, n.action) }) {
				continue
			}
			checked++
			ok := slices.ContainsFunc(holds[role], func(g grant) bool {
				return (g.action == n.kmsAction || g.action == "kms:*") && strings.Contains(g.condition, `"`+n.context+`"`)
			})
			if !ok {
				missing = append(missing, fmt.Sprintf("%s %s: has %s but no %s under %s", *stack.StackName(), role, n.action, n.kmsAction, n.context))
			}
		}
	}
	return missing, checked
}
