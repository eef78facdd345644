package tenants

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/example/tenantpipeline/spec"
)

// Encryption is the file's "encryption": the customer-managed KMS key that encrypts what the
// pipeline stores (the ingest bucket, the queues, log groups, state machines' execution data and
// the tables the app creates). Exactly one of its fields is set. Without "encryption" every store
// keeps its AWS-owned or AWS-managed encryption.
type Encryption struct {
	// Key "create" makes the app create one key, with yearly automatic rotation, that is kept
	// when the stack is deleted (RETAIN): deleting a key makes every object it encrypted
	// unreadable.
	Key string `json:"key,omitempty"`
	// KeyARN imports an existing symmetric key, "arn:<partition>:kms:<region>:<account>:key/<id>".
	// The app cannot change its key policy: synth prints the statements its owner must add.
	KeyARN string `json:"keyArn,omitempty"`
	// Admins are the IAM role or user ARNs that administer a created key: only they may disable
	// it, turn its rotation off or schedule its deletion (tenantpipeline.NewKey). Only with
	// "key": "create"; an imported key's policy is its owner's.
	Admins []string `json:"admins,omitempty"`
}

// EncryptionCreate is the value of "key" that makes the app create the key.
const EncryptionCreate = "create"

// keyARNPattern is a KMS key ARN (not an alias: SQS, Step Functions and CloudWatch Logs need the
// key itself in a key policy's grants). Key ids are UUIDs, or "mrk-" and 32 hex digits for a
// multi-Region key.
// https://docs.aws.amazon.com/kms/latest/developerguide/concepts.html#key-id-key-ARN
var keyARNPattern = regexp.MustCompile(`^arn:aws[a-z-]*:kms:[a-z]{2}(-[a-z]+)+-\d:\d{12}:key/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$`)

// KeyARNParts returns the partition, region and account of a key ARN that CheckKeyARN accepts.
func KeyARNParts(arn string) (partition, region, account string) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 {
		return "", "", ""
	}
	return parts[1], parts[3], parts[4]
}

// CheckKeyARN reports whether arn is a KMS key ARN, naming field in the message.
func CheckKeyARN(field, arn string) error {
	if !keyARNPattern.MatchString(arn) {
		return fmt.Errorf("%s %q is not a KMS key ARN: use arn:aws:kms:<region>:<account>:key/<key id> (an alias ARN is not accepted)", field, arn)
	}
	return nil
}

// parseEncryption decodes and checks the "encryption" object.
func (f *File) parseEncryption(raw json.RawMessage) []error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return []error{fmt.Errorf(`"encryption": %s`, typeProblem(err))}
	}
	if fields == nil {
		return nil // null: absent
	}
	e := &Encryption{}
	u := map[string]bool{}
	errs := decodeFields("encryption", "", fields, reflect.ValueOf(e).Elem(), u)
	if len(errs) > 0 {
		return errs
	}
	switch {
	case e.Key != "" && e.KeyARN != "":
		errs = append(errs, errors.New(`encryption: "key" and "keyArn" are both set: use {"key": "create"} for a key the app creates, or {"keyArn": "arn:aws:kms:…"} for your own, not both`))
	case e.Key == "" && e.KeyARN == "":
		errs = append(errs, errors.New(`encryption: set {"key": "create"} for a key the app creates, or {"keyArn": "arn:aws:kms:<region>:<account>:key/<id>"}; leave "encryption" out for the AWS-managed encryption`))
	case e.Key != "" && e.Key != EncryptionCreate:
		errs = append(errs, fmt.Errorf(`encryption.key %q is invalid: use "create", or "keyArn" for an existing key`, e.Key))
	case e.KeyARN != "":
		if err := CheckKeyARN("encryption.keyArn", e.KeyARN); err != nil {
			errs = append(errs, err)
		}
		if len(e.Admins) > 0 {
			errs = append(errs, errors.New(`encryption.admins is set with "keyArn": the app cannot change an existing key's policy; name its administrators in the key policy yourself`))
		}
	}
	seen := map[string]bool{}
	for i, a := range e.Admins {
		switch err := spec.CheckKeyAdmin(a); {
		case err != nil:
			errs = append(errs, fmt.Errorf("encryption.admins[%d]: %w", i, err))
		case seen[a]:
			errs = append(errs, fmt.Errorf("encryption.admins[%d]: %q is listed twice", i, a))
		}
		seen[a] = true
	}
	if len(errs) == 0 {
		f.Encryption = e
	}
	return errs
}
