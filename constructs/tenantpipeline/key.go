package tenantpipeline

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/spec"
)

// KeyProps configure NewKey.
type KeyProps struct {
	// Description of the key.
	Description string
	// Alias, "alias/<name>"; empty: none.
	Alias string
	// Admins are the IAM role or user ARNs that administer the key: they alone may disable it,
	// turn its rotation off or schedule its deletion (KeyAdminOnlyActions), and they may not use
	// it to encrypt or decrypt. Each must exist when the key policy is written (KMS refuses a
	// policy naming a principal it cannot find). Empty: nobody may do those things until the key
	// policy is changed, and synth warns (WarningKeyWithoutAdmins).
	Admins []string
}

// KeyAdminOnlyActions are what the key policy's account statement leaves out, so that no IAM
// policy can grant them and only KeyProps.Admins may: each ends what the key encrypted (deleting
// the key makes every object, message and log event it encrypted unreadable for good; a disabled
// key stops every read and write) or weakens it (rotation off). The account keeps the rest,
// kms:PutKeyPolicy too: KMS refuses a policy that would lock out the principal that writes it,
// CloudFormation's role, which IAM allows through the account statement.
// https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html
// https://docs.aws.amazon.com/kms/latest/developerguide/deleting-keys.html
// https://docs.aws.amazon.com/kms/latest/APIReference/API_PutKeyPolicy.html (BypassPolicyLockoutSafetyCheck)
var KeyAdminOnlyActions = []string{"kms:ScheduleKeyDeletion", "kms:DisableKey", "kms:DisableKeyRotation", "kms:DeleteImportedKeyMaterial"}

// WarningKeyWithoutAdmins is the id of synth's warning for a key NewKey creates without Admins.
const WarningKeyWithoutAdmins = "tenantpipeline:KeyWithoutAdmins"

// KeyAccountStatementSid is the Sid of the key policy statement that lets the account's IAM
// policies use and manage the key, but for KeyAdminOnlyActions.
const KeyAccountStatementSid = "TenantPipelineAccountUsesTheKey"

// NewKey creates the pipeline's customer-managed key, as the tenants file's
// {"encryption": {"key": "create"}} does: symmetric, rotated automatically every year, kept when
// its stack is deleted (RETAIN). Its key policy separates administration from use. The account
// statement lets IAM policies grant every KMS action but KeyAdminOnlyActions (CDK's default key
// policy grants the account kms:*), and Admins get KMS's key administrator actions, those
// included, without encrypt or decrypt. Pass the key as SharedProps.EncryptionKey; the services'
// statements (StackKeyPolicy) are added by the pipelines and pools of the key's stack.
//
// An Admins entry that is not an IAM role or user ARN fails synth with CDK's validation error.
func NewKey(scope constructs.Construct, id string, p *KeyProps) awskms.Key {
	if p == nil {
		p = &KeyProps{}
	}
	var problems []string
	var admins []awsiam.IPrincipal
	seen := map[string]bool{}
	for _, a := range p.Admins {
		switch err := spec.CheckKeyAdmin(a); {
		case err != nil:
			problems = append(problems, fmt.Sprintf("KeyProps.Admins: %v", err))
		case seen[a]:
			problems = append(problems, fmt.Sprintf("KeyProps.Admins: %q is listed twice", a))
		default:
			seen[a] = true
			admins = append(admins, awsiam.NewArnPrincipal(jsii.String(a)))
		}
	}
	policy := awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{
		Statements: &[]awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String(KeyAccountStatementSid),
			Effect:     awsiam.Effect_ALLOW,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAccountRootPrincipal()},
			NotActions: jsii.Strings(KeyAdminOnlyActions...),
			Resources:  jsii.Strings("*"),
		})},
	})
	props := &awskms.KeyProps{
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
		// With CDK v2's default key policies, a given policy replaces the default one (whose
		// account statement grants kms:*), and Admins are added to it.
		Policy: policy,
		Admins: &admins,
	}
	if p.Description != "" {
		props.Description = jsii.String(p.Description)
	}
	if p.Alias != "" {
		props.Alias = jsii.String(p.Alias)
	}
	key := awskms.NewKey(scope, jsii.String(id), props)
	if len(problems) > 0 {
		key.Node().AddValidation(&propsValidation{key, problems})
	}
	if len(p.Admins) == 0 {
		awscdk.Annotations_Of(key).AddWarningV2(jsii.String(WarningKeyWithoutAdmins), jsii.String(
			"the key has no administrators (encryption.admins, KeyProps.Admins): no IAM policy can let anyone disable it, turn its rotation off or schedule its deletion "+
				"until its key policy is changed; name the role your key administrators assume"), nil)
	}
	return key
}
