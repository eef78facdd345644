package tenantpipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// With a customer-managed key, the rules that send to the encrypted queues get names of their own.
// The key policy names them by pattern, rule/<stack name or prefix>-* (KeyPolicy), because it
// cannot name rules created after the key. A rule CloudFormation names is
// "<stack name>-<logical id>-<random>", and an EventBridge rule's name has at most 64 characters
// (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutRule.html); CloudFormation
// shortens a longer name, and names seen in the field keep the logical id and cut the stack name
// (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-name.html says
// nothing of how). A tenant id of some 20 characters makes the logical id long enough to cut the
// stack name below the pattern's prefix: EventBridge could then not make the data key for the
// tenant's events, nor for the dead-letter queue, and every file of the tenant would be lost.
// So the name is set, "<stack name>-<construct id>-<hash of its path>", within 64 characters,
// and the stack name is checked to leave room for it (keyedRuleNameProblems).

// MaxRuleName is EventBridge's limit on a rule's name.
const MaxRuleName = 64

// ruleNameSuffix is "-" and 8 hex characters of the rule's path hash, at least, after the stack
// name and its "-": the rest of the 64 characters.
const ruleNameSuffix = 1 + 8

// MaxKeyedStackName is the longest stack name that leaves a keyed rule room for its suffix:
// "<stack name>-" and ruleNameSuffix in 64 characters.
const MaxKeyedStackName = MaxRuleName - 1 - ruleNameSuffix

var ruleNameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// keyedRuleName is the name of the rule id under scope when the stack's queues are encrypted with a
// customer-managed key; nil (CloudFormation names it) without one, or when the stack name is a
// token or too long (keyedRuleNameProblems reports that).
func keyedRuleName(scope constructs.Construct, id string, keyed bool) *string {
	if !keyed {
		return nil
	}
	stack := awscdk.Stack_Of(scope)
	name := *stack.StackName()
	if *awscdk.Token_IsUnresolved(stack.StackName()) || len(name) > MaxKeyedStackName {
		return nil
	}
	sum := sha256.Sum256([]byte(*scope.Node().Path() + "/" + id))
	hash := hex.EncodeToString(sum[:4])
	room := MaxRuleName - len(name) - 1 - len(hash) - 1 // for the readable part, and its "-"
	readable := ruleNameUnsafe.ReplaceAllString(id, "")
	if room <= 0 || readable == "" {
		return jsii.String(name + "-" + hash)
	}
	if len(readable) > room {
		readable = readable[:room]
	}
	return jsii.String(name + "-" + readable + "-" + hash)
}

// keyedRuleNameProblems reports a stack whose name leaves a keyed rule no room, or cannot be read
// at synth: the key policy names the rules by their stack's name.
func keyedRuleNameProblems(scope constructs.Construct, keyed bool) []string {
	if !keyed {
		return nil
	}
	stack := awscdk.Stack_Of(scope)
	if *awscdk.Token_IsUnresolved(stack.StackName()) {
		return []string{fmt.Sprintf("stack %s: its name is not known at synth, and with EncryptionKey the key policy names the rules that send to the encrypted queues by their stack's name: give the stack a name", *stack.Node().Path())}
	}
	if n := len(*stack.StackName()); n > MaxKeyedStackName {
		return []string{fmt.Sprintf("stack name %q has %d characters: with EncryptionKey it may have at most %d, so that its rules' names (\"<stack name>-…\", at most %d characters) keep it whole for the key policy's pattern rule/<stack name>-*",
			*stack.StackName(), n, MaxKeyedStackName, MaxRuleName)}
	}
	return nil
}
