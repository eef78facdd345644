package spec

import (
	"encoding/json"
	"fmt"
)

// VendedLogsPrefix starts the name of every workflow log group. Step Functions delivers logs as
// vended logs, and each log group outside this prefix adds an entry to the account's single
// CloudWatch Logs resource policy (at most 5,120 characters): deploys fail after a few dozen
// tenants. Under this prefix, one policy entry covers every group.
// https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html
// It is API: a key policy written outside the app names the workflow log groups by it (KeyPolicy).
const VendedLogsPrefix = "/aws/vendedlogs/states/"

// KeyPolicy is what the pipeline's key policy must allow the AWS services that call KMS in their
// own name, besides the account's IAM policies: EventBridge, delivering the rules' events to the
// encrypted queues, and CloudWatch Logs, encrypting the log groups (and delivering the state
// machines' vended logs). S3 sends the bucket's events to EventBridge, not to SQS, so S3 needs no
// statement.
type KeyPolicy struct {
	// Partition, Region and Account of the pipeline.
	Partition, Region, Account string
	// RuleARNs are the EventBridge rules that send to the encrypted queues: ARNs, or ArnLike
	// patterns.
	RuleARNs []string
	// LogGroupARNs are the log groups encrypted with the key, as CloudWatch Logs names them in
	// the encryption context ("arn:…:log-group:<name>", no ":*"): ARNs, or ArnLike patterns.
	LogGroupARNs []string
}

// AppKeyPolicy is the key policy of an app whose every stack's name starts with stackPrefix and
// "-". The policy cannot name the rules and log groups themselves: they are created after the key
// (a log group names the key, a rule the bucket that names it), so naming them would be a
// dependency cycle. It names them by their stacks instead: CloudFormation names a rule or log group
// that has no name "<stack name>-<logical id>-<random>", and the workflow log groups are
// "/aws/vendedlogs/states/<stack name>/…" (VendedLogsPrefix).
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-name.html
func AppKeyPolicy(partition, region, account, stackPrefix string) KeyPolicy {
	return stackKeyPolicy(partition, region, account, stackPrefix+"-", stackPrefix+"-")
}

// StackKeyPolicy is the key policy for the constructs of one stack, by its name.
func StackKeyPolicy(partition, region, account, stackName string) KeyPolicy {
	return stackKeyPolicy(partition, region, account, stackName+"-", stackName+"/")
}

func stackKeyPolicy(partition, region, account, generated, vended string) KeyPolicy {
	return KeyPolicy{
		Partition: partition, Region: region, Account: account,
		RuleARNs: []string{fmt.Sprintf("arn:%s:events:%s:%s:rule/%s*", partition, region, account, generated)},
		LogGroupARNs: []string{
			fmt.Sprintf("arn:%s:logs:%s:%s:log-group:%s*", partition, region, account, generated),
			fmt.Sprintf("arn:%s:logs:%s:%s:log-group:%s%s*", partition, region, account, VendedLogsPrefix, vended),
		},
	}
}

// Statements are the key policy statements, as JSON objects.
//   - EventBridge: kms:GenerateDataKey and kms:Decrypt, only for the rules (aws:SourceArn)
//     https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-troubleshooting.html#eb-sqs-encrypted
//   - CloudWatch Logs (logs.<region>.amazonaws.com), only for the log groups
//     (kms:EncryptionContext:aws:logs:arn)
//     https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
//   - vended log delivery (delivery.logs.amazonaws.com), kms:Decrypt, which Step Functions'
//     logging with a customer-managed key needs
//     (https://docs.aws.amazon.com/step-functions/latest/dg/encryption-at-rest.html), only for the
//     key's own account's logs: the data keys of a state machine's log delivery are made under the
//     encryption context SourceArn arn:<partition>:logs:<region>:<account>:* (the context Step
//     Functions documents for the state machine role's kms:GenerateDataKey, and which CDK's state
//     machine grants by), and a Decrypt must name the context its data key was made with. CDK's
//     state machine adds its own Allow for the service with no condition to a key it can change;
//     a Deny of kms:Decrypt* under any other context (or none) beats it, so the key serves no
//     other account's delivery. Were the context ever absent, the Deny refuses: the workflows'
//     logs stop, never their executions.
func (k KeyPolicy) Statements() []map[string]any {
	var out []map[string]any
	if len(k.RuleARNs) > 0 {
		out = append(out, map[string]any{
			"Sid":       "TenantPipelineEventBridgeToEncryptedQueues",
			"Effect":    "Allow",
			"Principal": map[string]any{"Service": "events.amazonaws.com"},
			"Action":    []string{"kms:Decrypt", "kms:GenerateDataKey"},
			"Resource":  "*",
			"Condition": map[string]any{
				"ArnLike":      map[string]any{"aws:SourceArn": k.RuleARNs},
				"StringEquals": map[string]any{"aws:SourceAccount": k.Account},
			},
		})
	}
	if len(k.LogGroupARNs) > 0 {
		out = append(out, map[string]any{
			"Sid":       "TenantPipelineCloudWatchLogs",
			"Effect":    "Allow",
			"Principal": map[string]any{"Service": fmt.Sprintf("logs.%s.amazonaws.com", k.Region)},
			"Action":    []string{"kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"},
			"Resource":  "*",
			"Condition": map[string]any{"ArnLike": map[string]any{"kms:EncryptionContext:aws:logs:arn": k.LogGroupARNs}},
		},
			k.delivery("TenantPipelineVendedLogDelivery", "Allow", "StringEquals"),
			k.delivery("TenantPipelineVendedLogDeliveryOnlyForThisAccount", "Deny", "StringNotEquals"))
	}
	return out
}

// delivery is a statement of vended log delivery's kms:Decrypt* under the account's delivery
// context, compared by operator: the Allow (StringEquals), and the Deny of any other context.
func (k KeyPolicy) delivery(sid, effect, operator string) map[string]any {
	return map[string]any{
		"Sid":       sid,
		"Effect":    effect,
		"Principal": map[string]any{"Service": "delivery.logs.amazonaws.com"},
		"Action":    "kms:Decrypt*",
		"Resource":  "*",
		"Condition": map[string]any{operator: map[string]any{"kms:EncryptionContext:SourceArn": k.deliverySource()}},
	}
}

// deliverySource is the encryption context SourceArn of the account's vended log delivery.
func (k KeyPolicy) deliverySource() string {
	return fmt.Sprintf("arn:%s:logs:%s:%s:*", k.Partition, k.Region, k.Account)
}

// JSON is Statements as an indented JSON array, to paste into a key policy's "Statement".
func (k KeyPolicy) JSON() string {
	b, err := json.MarshalIndent(k.Statements(), "", "  ")
	if err != nil {
		panic(err) // maps of strings always encode
	}
	return string(b)
}
