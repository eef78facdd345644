package stacks

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/tenants"
)

// appKey is the app's customer-managed key (the tenants file's "encryption"), as each stack sees
// it. Nil without "encryption".
type appKey struct {
	// Key is the key the app created, in its stack (nil for an imported key).
	Key awskms.Key
	arn string
	// imported holds an imported key by the path of the scope it was imported in, once each.
	imported map[string]awskms.IKey
}

// newAppKey creates or imports the tenants file's key. A created key lives in stack (the ingest
// stack, or a stack of its own with an existing bucket): symmetric, rotated automatically every
// year, and kept when its stack is deleted (RETAIN), since deleting a key makes everything it
// encrypted unreadable for good. Its policy separates administration from use
// (tenantpipeline.NewKey: only "encryption.admins" may disable it or schedule its deletion),
// and gets the statements EventBridge and CloudWatch Logs need for every rule and log group of the app's stacks (tenantpipeline.AppKeyPolicy); an
// imported key's policy cannot be changed, so synth warns with those statements.
// https://docs.aws.amazon.com/kms/latest/developerguide/rotate-keys.html
// https://docs.aws.amazon.com/kms/latest/developerguide/deleting-keys.html
func newAppKey(app awscdk.App, stack awscdk.Stack, file *tenants.File, o Options) *appKey {
	e := file.Encryption
	switch {
	case e == nil:
		return nil
	case e.KeyARN != "":
		return &appKey{arn: e.KeyARN, imported: map[string]awskms.IKey{}}
	}
	if stack == nil {
		stack = awscdk.NewStack(app, jsii.String(o.StackPrefix+"-Encryption"), &awscdk.StackProps{
			Description: jsii.String("Ordered per-tenant file pipeline: the customer-managed key"),
		})
	}
	key := tenantpipeline.NewKey(stack, "EncryptionKey", &tenantpipeline.KeyProps{
		Description: "Ordered per-tenant file pipeline " + o.StackPrefix + ": the ingest bucket, queues, log groups, workflows and tables",
		Alias:       "alias/" + o.StackPrefix,
		Admins:      e.Admins,
	})
	tenantpipeline.AppKeyPolicy(*stack.Partition(), *stack.Region(), *stack.Account(), o.StackPrefix).AddTo(stack, key)
	return &appKey{Key: key, arn: *key.KeyArn()}
}

// in is the key as scope's stack uses it: the created key itself (its ARN is a cross-stack
// reference), or the imported key.
func (k *appKey) in(scope constructs.Construct) awskms.IKey {
	switch {
	case k == nil:
		return nil
	case k.Key != nil:
		return k.Key
	}
	path := *scope.Node().Path()
	if i, ok := k.imported[path]; ok {
		return i
	}
	i := awskms.Key_FromKeyArn(scope, jsii.String("EncryptionKey"), jsii.String(k.arn))
	k.imported[path] = i
	return i
}

// ImportedKeyPolicy warns at synth that an imported key's owner must add the statements the
// pipeline's services need, naming them exactly, in the key's partition, region and account.
func ImportedKeyPolicy(stack awscdk.Stack, keyARN, stackPrefix string) string {
	partition, region, account := tenants.KeyARNParts(keyARN)
	statements := tenantpipeline.AppKeyPolicy(partition, region, account, stackPrefix).JSON()
	msg := fmt.Sprintf("the encryption key %s is not managed by this app, so CDK cannot change its key policy: until its owner adds these statements "+
		"to the key policy, EventBridge cannot deliver files' events to the encrypted queues and CloudWatch Logs cannot write the encrypted log groups "+
		"(docs/configuration.md, \"encryption\"): %s", keyARN, statements)
	awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("tenantpipeline:ImportedKeyPolicy"), jsii.String(msg), nil)
	return statements
}
