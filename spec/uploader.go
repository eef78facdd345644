package spec

import (
	"fmt"
	"regexp"
	"strings"
)

// CheckUploader refuses an uploader that is not an IAM role or user ARN (UploaderPattern): the
// tenants file's "uploaders" and the constructs' Uploaders are checked alike.
func CheckUploader(arn string) error {
	if !UploaderPattern.MatchString(arn) || strings.ContainsAny(arn, "*?") {
		return fmt.Errorf("%q is not an IAM role or user ARN: name the role your platform's service runs as, "+
			"e.g. \"arn:aws:iam::123456789012:role/platform\" (no wildcards: a trust policy names principals exactly; not an assumed-role session, not a whole account)", arn)
	}
	return nil
}

// UploaderPattern is an IAM role or user ARN as a trust policy's Principal names it: no wildcards,
// which a Principal element refuses, and not the account's root, which would trust every principal
// of the account its own policies allow
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html).
// Path and name characters: https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html.
var UploaderPattern = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:(role|user)/([\x21-\x7E]*/)?[\w+=,.@-]{1,64}$`)

// CheckKeyAdmin refuses a key administrator that is not an IAM role or user ARN
// (UploaderPattern): a key policy's Principal names principals exactly, and the account's root
// would hand deletion back to every principal its IAM policies allow. The tenants file's
// "encryption.admins" and the constructs' KeyProps.Admins are checked alike.
func CheckKeyAdmin(arn string) error {
	if !UploaderPattern.MatchString(arn) || strings.ContainsAny(arn, "*?") {
		return fmt.Errorf("%q is not an IAM role or user ARN: name the role your key administrators assume, "+
			"e.g. \"arn:aws:iam::123456789012:role/key-admin\" (no wildcards, not an assumed-role session, not a whole account)", arn)
	}
	return nil
}
