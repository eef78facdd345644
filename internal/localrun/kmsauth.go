package localrun

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/example/tenantpipeline/spec"
)

// The KMS calls S3 and SQS make for a caller: the local run makes no KMS call and stores nothing
// encrypted (encryption.go), but it judges the call the service would make, so a role that may write
// an object of a bucket under a customer-managed key, or send to a queue under one, and may not use
// the key is refused as AWS refuses it.
//
//   - S3: a PutObject or CreateMultipartUpload under SSE-KMS takes kms:GenerateDataKey, a GetObject
//     kms:Decrypt, with kms:ViaService s3.<region>.amazonaws.com and the encryption context
//     aws:s3:arn, the bucket's ARN with an S3 Bucket Key and the object's without.
//     https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html#aws-managed-customer-managed-keys
//     https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-key.html#bucket-key-encryption-context
//   - SQS: a SendMessage takes kms:GenerateDataKey and a ReceiveMessage kms:Decrypt, with
//     kms:ViaService sqs.<region>.amazonaws.com and the encryption context aws:sqs:arn, the queue's.
//     https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html
//   - DynamoDB: a read or write of an item of a table under a customer-managed key takes
//     kms:Decrypt of the table key, in the caller's name, with kms:ViaService
//     dynamodb.<region>.amazonaws.com and the encryption context aws:dynamodb:tableName and
//     aws:dynamodb:subscriberId (the account). DynamoDB caches a caller's table key for up to 5
//     minutes; the local run judges every request, which refuses no request AWS would allow.
//     https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/encryption.howitworks.html
//
// A key's use needs its key policy: an explicit Deny in it or the caller's policies refuses; an
// Allow in it that names the caller's role allows; one that names the account (the default key
// policy's root statement) leaves it to the caller's policies, which must allow the action on the
// key. Without such a statement no identity policy can use the key.
// https://docs.aws.amazon.com/kms/latest/developerguide/determining-access-key-policy.html
// An AWS managed key (alias/aws/s3, alias/aws/sqs) is not in the templates and is not judged.
// An imported key (the templates name it and do not create it) is judged by the policy synth asks
// its owner to write (importedKeyPolicy).

// kmsAllowed judges the KMS call action on key that service makes for s with the encryption
// context.
//
// The call is judged with the caller's request's aws:SecureTransport (secure): the service calls
// KMS in a forward access session, whose request context is the caller's.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/access_forward_access_sessions.html
func (a *tenantAuth) kmsAllowed(s tenantSession, action, key, service string, context map[string]string, secure bool) (bool, string) {
	keys := map[string]string{
		"aws:PrincipalArn":    s.role,
		"aws:SecureTransport": fmt.Sprint(secure),
		"kms:ViaService":      fmt.Sprintf("%s.%s.amazonaws.com", service, a.res.Region),
	}
	for k, v := range context {
		keys["kms:EncryptionContext:"+k] = v
	}
	for k, v := range s.tags {
		keys["aws:PrincipalTag/"+k] = v // the caller's session tags, as in decide
	}
	identity, err := a.roleStatements(s.role)
	if err != nil {
		return false, err.Error()
	}
	if id, ok := a.userID(s); ok {
		keys["aws:userid"] = id
	}
	policy, err := a.resourceStatements(key)
	if err != nil {
		return false, err.Error()
	}
	keyAllows, delegated, identityAllows := false, false, false
	for _, st := range identity {
		switch m := st.applies(s.tags, action, key, keys); {
		case st.Effect == "Deny" && m != noMatch:
			return false, fmt.Sprintf("explicit deny of %s in the identity policy of %s", action, s.role)
		case st.Effect == "Allow" && m == match:
			identityAllows = true
		}
	}
	for _, st := range policy {
		names, grants := st.namesPrincipal(s.role)
		if !names {
			continue
		}
		switch m := st.applies(s.tags, action, key, keys); {
		case st.Effect == "Deny" && m != noMatch:
			return false, fmt.Sprintf("explicit deny of %s in the key policy of %s (Sid %q)", action, key, st.Sid)
		case st.Effect == "Allow" && m == match && grants:
			keyAllows = true
		case st.Effect == "Allow" && m == match:
			delegated = true
		}
	}
	if keyAllows || delegated && identityAllows {
		return true, ""
	}
	if !delegated {
		return false, fmt.Sprintf("the key policy of %s allows %s to neither %s nor its account", key, action, s.role)
	}
	return false, fmt.Sprintf("no identity policy of %s allows %s on %s through %s", s.role, action, key, keys["kms:ViaService"])
}

// bucketKMS is the KMS key a write or read of the bucket uses and its encryption context for
// object: the key the request names (x-amz-server-side-encryption-aws-kms-key-id under aws:kms),
// else the bucket's default key; "" when the object is not under a key of the templates.
func (a *tenantAuth) bucketKMS(bucket, object string, keys map[string]string) (key string, context map[string]string) {
	bucketKey := false
	for _, b := range a.asm.OfType("AWS::S3::Bucket") {
		if a.asm.ReadBucket(a.res, b).Name != bucket {
			continue
		}
		var enc struct {
			ServerSideEncryptionConfiguration []struct {
				BucketKeyEnabled              bool
				ServerSideEncryptionByDefault struct{ SSEAlgorithm, KMSMasterKeyID string }
			}
		}
		a.asm.Prop(a.res, b, "BucketEncryption", &enc)
		for _, rule := range enc.ServerSideEncryptionConfiguration {
			if d := rule.ServerSideEncryptionByDefault; strings.HasPrefix(d.SSEAlgorithm, "aws:kms") {
				key, bucketKey = d.KMSMasterKeyID, rule.BucketKeyEnabled
			}
		}
	}
	if named := keys["s3:x-amz-server-side-encryption-aws-kms-key-id"]; keys["s3:x-amz-server-side-encryption"] == "aws:kms" && named != "" {
		key = named
	}
	if !strings.HasPrefix(key, "arn:aws:kms:") {
		return "", nil // none, or an AWS managed key
	}
	if bucketKey {
		return key, map[string]string{"aws:s3:arn": "arn:aws:s3:::" + bucket}
	}
	return key, map[string]string{"aws:s3:arn": object}
}

// queueKMS is the KMS key of the queue named name (its KmsMasterKeyId), "" for none or an AWS
// managed key.
func (a *tenantAuth) queueKMS(name string) string {
	var key string
	if q := a.queue(name); q != nil {
		a.asm.Prop(a.res, q, "KmsMasterKeyId", &key)
	}
	if !strings.HasPrefix(key, "arn:aws:kms:") {
		return ""
	}
	return key
}

// tableKMS is the KMS key of the table named name (its SSESpecification's KMSMasterKeyId), ""
// for none, DynamoDB's own key or an AWS managed key.
func (a *tenantAuth) tableKMS(name string) string {
	return a.storeKey("table/"+name, func() string { return a.findTableKMS(name) })
}

// findTableKMS reads tableKMS's answer from the templates.
func (a *tenantAuth) findTableKMS(name string) string {
	for _, t := range a.asm.OfType("AWS::DynamoDB::Table") {
		if ref, err := a.res.ResolveString(t.Stack, json.RawMessage(fmt.Sprintf(`{"Ref":%q}`, t.LogicalID))); err != nil || ref != name {
			continue
		}
		var sse struct {
			SSEEnabled     bool
			SSEType        string
			KMSMasterKeyId string
		}
		a.asm.Prop(a.res, t, "SSESpecification", &sse)
		if sse.SSEEnabled && sse.SSEType == "KMS" && strings.HasPrefix(sse.KMSMasterKeyId, "arn:aws:kms:") {
			return sse.KMSMasterKeyId
		}
	}
	return ""
}

// itemOps are the DynamoDB operations on a table's items that name one table: each uses the
// table key.
var itemOps = []string{"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan"}

// keyProperties are the properties by which the templates' stores name their KMS key.
var keyProperties = map[string]string{
	"AWS::S3::Bucket": "BucketEncryption", "AWS::SQS::Queue": "KmsMasterKeyId", "AWS::Logs::LogGroup": "KmsKeyId",
	"AWS::DynamoDB::Table": "SSESpecification", "AWS::StepFunctions::StateMachine": "EncryptionConfiguration",
}

// namesKey reports whether a store of the templates names key: a key the templates create, or
// one they import (a tenants file's keyArn, a construct user's imported key).
func (a *tenantAuth) namesKey(key string) bool {
	for typ, prop := range keyProperties {
		for _, r := range a.asm.OfType(typ) {
			var v any
			if a.asm.Prop(a.res, r, prop, &v) != nil {
				continue
			}
			if b, _ := json.Marshal(v); strings.Contains(string(b), `"`+key+`"`) {
				return true
			}
		}
	}
	return false
}

// importedKeyPolicy is the policy the local run judges an imported key by: a key the templates
// name and do not create has its owner's policy, which the run cannot read, so it judges the key
// as synth asked the owner to write it (the tenantpipeline:ImportedKeyPolicy warning): the
// default key policy's statement for the account, which leaves the key's use to the callers' IAM
// policies, and the statements the services that call KMS in their own name need for each stack's
// rules and log groups (spec.StackKeyPolicy). The account is the run's, whatever the key's ARN
// says: the local account is never the one the key lives in.
// https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html
func (a *tenantAuth) importedKeyPolicy(key string) []statement {
	policy := []any{map[string]any{"Sid": "DefaultKeyPolicyAccount", "Effect": "Allow",
		"Principal": map[string]any{"AWS": fmt.Sprintf("arn:aws:iam::%s:root", a.res.Account)}, "Action": "kms:*", "Resource": "*"}}
	for _, s := range a.asm.Stacks {
		for _, st := range spec.StackKeyPolicy("aws", a.res.Region, a.res.Account, s.Name).Statements() {
			policy = append(policy, st)
		}
	}
	b, _ := json.Marshal(policy)
	var out []statement
	json.Unmarshal(b, &out)
	return out
}

// logsMayUse judges CloudWatch Logs' use of key for the log group logGroupARN (its ARN without
// ":*"), as the service makes it when a log group is created with the key and as it ingests and
// reads its events: kms:GenerateDataKey and kms:Decrypt by the service principal
// logs.<region>.amazonaws.com, under the encryption context aws:logs:arn, the log group's ARN. The
// key policy alone decides (a service principal has no identity policy).
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
func (a *tenantAuth) logsMayUse(key, logGroupARN string) (bool, string) {
	policy, err := a.resourceStatements(key)
	if err != nil {
		return false, err.Error()
	}
	service := fmt.Sprintf("logs.%s.amazonaws.com", a.res.Region)
	keys := map[string]string{"kms:EncryptionContext:aws:logs:arn": logGroupARN, "aws:SecureTransport": "true"}
	for _, action := range []string{"kms:GenerateDataKey", "kms:Decrypt"} {
		if ok, why := serviceAllowed(service, action, key, policy, keys, "the key policy of "+key+" for "+logGroupARN); !ok {
			return false, why
		}
	}
	return true, ""
}
