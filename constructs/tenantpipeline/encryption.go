package tenantpipeline

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/spec"
)

// Customer-managed key encryption (SharedProps.EncryptionKey, CoreSystemProps.EncryptionKey).
// With a key, every store a construct creates is encrypted with it: the queues (SSE-KMS), the log
// groups, the state machines' execution data and the DynamoDB tables. Each role gets only the KMS
// calls its service makes for it, conditioned on the encryption context the service sets (and on
// kms:ViaService where the service calls KMS with the caller's credentials), and the key policy lets
// EventBridge and CloudWatch Logs, which call KMS as service principals, use it for the
// construct's own rules and log groups. Without a key, every method here does nothing (a nil
// *encryption) and the templates are those of AWS-managed encryption.
//
// The key is a creation prop where the L2 construct takes it without widening a grant: the log
// groups (awslogs.LogGroupProps.EncryptionKey), the tables (awsdynamodb.TableProps.EncryptionKey)
// and the state machines (workflows.Props.Encryption). The queues are the exception (queue), and
// the grants below stay hand-written because no L2 grant is as narrow: the L2 grants of a queue, a
// table or a bucket give the key's calls without any encryption context or kms:ViaService, and
// the state machines' grants carry no key at all.

// DataKeyReusePeriod is how long SQS and Step Functions reuse a data key before they ask KMS for a
// new one (KmsDataKeyReusePeriodSeconds). SQS allows 1 minute to 24 hours, default 5 minutes;
// a longer period means fewer KMS calls (cheaper, and fewer requests against the account's KMS
// request quota) but a data key that protects more messages for longer. Five minutes is SQS's own
// default: at the pipeline's rates (one message per file, per principal) it costs a few KMS calls
// per hour, and revoking the key stops new messages within five minutes.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html
// https://docs.aws.amazon.com/step-functions/latest/dg/encryption-at-rest.html
const DataKeyReusePeriod = 5 * time.Minute

// encryption applies one key to a construct's resources and grants; nil for no key.
type encryption struct {
	scope constructs.Construct
	key   awskms.IKey
}

func newEncryption(scope constructs.Construct, key awskms.IKey) *encryption {
	if key == nil {
		return nil
	}
	return &encryption{scope: scope, key: key}
}

// keyOrNil is the key, as a creation prop takes it: nil for AWS-managed encryption.
func (e *encryption) keyOrNil() awskms.IKey {
	if e == nil {
		return nil
	}
	return e.key
}

// viaService is the kms:ViaService value of a service in the stack's region.
func (e *encryption) viaService(service string) string {
	return fmt.Sprintf("%s.%s.amazonaws.com", service, *awscdk.Stack_Of(e.scope).Region())
}

func (e *encryption) allow(grantee awsiam.IGrantable, actions []string, conditions map[string]any) {
	grantee.GrantPrincipal().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:    jsii.Strings(actions...),
		Resources:  jsii.Strings(*e.key.KeyArn()),
		Conditions: &conditions,
	}))
}

// queue encrypts a queue just created with the key (SSE-KMS) in place of SSE-SQS, through its
// CloudFormation properties rather than awssqs.QueueProps.EncryptionMasterKey, because the L2
// queue with a key widens three grants: GrantSendMessages and GrantConsumeMessages (which
// SqsEventSource calls) then give the key's calls with no encryption context (grantQueues gives
// them for the queue's ARN alone), and the EventBridge SqsQueue target of an encrypted queue drops
// the aws:SourceArn condition from the queue policy and grants events.amazonaws.com the key in its
// key policy with no rule named (KeyPolicy names the app's rules), so that any rule of the account
// could send to the queue and use the key.
// https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_events_targets.SqsQueue.html
func (e *encryption) queue(qs ...awssqs.Queue) {
	if e == nil {
		return
	}
	for _, q := range qs {
		cfn := q.Node().DefaultChild().(awssqs.CfnQueue)
		cfn.AddPropertyDeletionOverride(jsii.String("SqsManagedSseEnabled"))
		cfn.SetKmsMasterKeyId(e.key.KeyArn())
		cfn.SetKmsDataKeyReusePeriodSeconds(jsii.Number(DataKeyReusePeriod.Seconds()))
	}
}

// grantQueues lets grantee receive (kms:Decrypt) or also send (kms:GenerateDataKey) messages of
// the queues: SQS calls KMS with the caller's credentials and the queue's ARN as encryption
// context (aws:sqs:arn).
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html
func (e *encryption) grantQueues(grantee awsiam.IGrantable, send bool, qs ...awssqs.IQueue) {
	if e == nil {
		return
	}
	actions := []string{"kms:Decrypt"}
	if send {
		actions = append(actions, "kms:GenerateDataKey")
	}
	var arns []string
	for _, q := range qs {
		arns = append(arns, *q.QueueArn())
	}
	e.allow(grantee, actions, map[string]any{"StringEquals": map[string]any{
		"kms:ViaService":                    e.viaService("sqs"),
		"kms:EncryptionContext:aws:sqs:arn": arns,
	}})
}

// table sets a table's encryption, before it is created: the key (SSE type KMS), or, without
// one, the AWS managed key (aws/dynamodb), whose key policy lets any principal of the account
// that may use the table use the key through DynamoDB, so that no KMS grant is needed.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/encryption.howitworks.html
func (e *encryption) table(props *awsdynamodb.TableProps) {
	props.Encryption = awsdynamodb.TableEncryption_AWS_MANAGED
	if e != nil {
		props.Encryption, props.EncryptionKey = awsdynamodb.TableEncryption_CUSTOMER_MANAGED, e.key
	}
}

// grantTables lets grantee read (and, with write, write) the tables through DynamoDB, whose
// encryption context names the table (aws:dynamodb:tableName).
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/encryption.howitworks.html
func (e *encryption) grantTables(grantee awsiam.IGrantable, write bool, ts ...awsdynamodb.ITable) {
	if e == nil {
		return
	}
	actions := []string{"kms:Decrypt"}
	if write {
		actions = append(actions, "kms:Encrypt", "kms:GenerateDataKey")
	}
	var names []string
	for _, t := range ts {
		names = append(names, *t.TableName())
	}
	e.allow(grantee, actions, map[string]any{"StringEquals": map[string]any{
		"kms:ViaService": e.viaService("dynamodb"),
		"kms:EncryptionContext:aws:dynamodb:tableName": names,
	}})
	// DescribeKey carries no encryption context.
	e.allow(grantee, []string{"kms:DescribeKey"}, map[string]any{"StringEquals": map[string]any{"kms:ViaService": e.viaService("dynamodb")}})
}

// grantBucket lets grantee read and write objects of bucket encrypted with the key: S3 calls KMS
// with the caller's credentials, with the bucket's ARN as encryption context when S3 Bucket Keys
// are on and the object's ARN when they are off.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html#encryption-context
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-key.html
func (e *encryption) grantBucket(bucket awss3.IBucket, grantees ...awsiam.IGrantable) {
	if e == nil {
		return
	}
	for _, g := range grantees {
		e.allow(g, []string{"kms:Decrypt", "kms:GenerateDataKey"}, map[string]any{
			"StringEquals": map[string]any{"kms:ViaService": e.viaService("s3")},
			"StringLike":   map[string]any{"kms:EncryptionContext:aws:s3:arn": []string{*bucket.BucketArn(), *bucket.BucketArn() + "/*"}},
		})
	}
}

// objectKey is the key of the ingest bucket's objects: the bucket's own (a bucket created with
// one), or the construct's key, for a bucket imported by name that its owner encrypts with it.
func objectKey(bucket awss3.IBucket, key awskms.IKey) awskms.IKey {
	if k := bucket.EncryptionKey(); k != nil {
		return k
	}
	return key
}

// stateMachineEncryption encrypts the state machines' execution data (input, output, history)
// with the key; nil without one. With it, the state machine's role gets the kms:GenerateDataKey
// that CloudWatch Logs' vended log delivery of its logs needs, whose encryption context is the
// delivery source (kms:EncryptionContext:SourceArn, the account's log resources), and the key's
// policy lets delivery.logs.amazonaws.com decrypt, as Step Functions documents for a
// customer-managed key with logging on. The role also gets a statement for the context of the
// state machine's own ARN built from its name, which, for a state machine that CloudFormation
// names, names no state machine: stateMachineRole grants its own executions instead.
// https://docs.aws.amazon.com/step-functions/latest/dg/encryption-at-rest.html
func (e *encryption) stateMachineEncryption() awsstepfunctions.EncryptionConfiguration {
	if e == nil {
		return nil
	}
	return awsstepfunctions.NewCustomerManagedEncryptionConfiguration(e.key, seconds(DataKeyReusePeriod))
}

// stateMachineStatement allows the KMS calls on the executions of the state machines, whose
// encryption context is the state machine's ARN (aws:states:stateMachineArn): Decrypt to read an
// execution (DescribeExecution, GetExecutionHistory), GenerateDataKey to start or redrive one.
func (e *encryption) stateMachineStatement(sms ...awsstepfunctions.IStateMachine) awsiam.PolicyStatement {
	var arns []string
	for _, sm := range sms {
		arns = append(arns, *sm.StateMachineArn())
	}
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey"),
		Resources:  jsii.Strings(*e.key.KeyArn()),
		Conditions: &map[string]any{"StringEquals": map[string]any{"kms:EncryptionContext:aws:states:stateMachineArn": arns}},
	})
}

// grantStateMachines lets grantee start, read and stop executions of the state machines.
func (e *encryption) grantStateMachines(grantee awsiam.IGrantable, sms ...awsstepfunctions.IStateMachine) {
	if e == nil {
		return
	}
	grantee.GrantPrincipal().AddToPrincipalPolicy(e.stateMachineStatement(sms...))
}

// stateMachineRole lets a state machine's role use the key for the executions of the state
// machines it starts (startsToo, by ARN) and for its own. Its own executions are named by the
// account's state machine ARNs (ArnLike stateMachine:*), not by its own ARN: the state machine
// depends on its role's policy, so the policy naming the state machine would be a dependency
// cycle, and a separate policy would add a resource per state machine, past the 500 a stack of 11
// tenants can hold. The role is assumable only by Step Functions for a state machine of the
// account (its trust policy's aws:SourceArn), so it decrypts nothing else.
func (e *encryption) stateMachineRole(sm awsstepfunctions.StateMachine, startsToo ...awsstepfunctions.IStateMachine) {
	if e == nil {
		return
	}
	stack := awscdk.Stack_Of(e.scope)
	own := fmt.Sprintf("arn:%s:states:%s:%s:stateMachine:*", *stack.Partition(), *stack.Region(), *stack.Account())
	if len(startsToo) > 0 {
		sm.AddToRolePolicy(e.stateMachineStatement(startsToo...))
	}
	sm.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey"),
		Resources:  jsii.Strings(*e.key.KeyArn()),
		Conditions: &map[string]any{"ArnLike": map[string]any{"kms:EncryptionContext:aws:states:stateMachineArn": own}},
	}))
}

// grantSecrets lets grantee read secrets encrypted with the key through Secrets Manager, whose
// encryption context names the secret (SecretARN); arnPattern may end in a wildcard (StringLike).
// The app creates no secret; a tenant's registerAuthSecretArn encrypted with the pipeline's key
// is readable by the role that reads the secret, and by no other.
// https://docs.aws.amazon.com/secretsmanager/latest/userguide/security-encryption.html
func (e *encryption) grantSecrets(grantee awsiam.IGrantable, arnPattern string) {
	if e == nil {
		return
	}
	e.allow(grantee, []string{"kms:Decrypt"}, map[string]any{
		"StringEquals": map[string]any{"kms:ViaService": e.viaService("secretsmanager")},
		"StringLike":   map[string]any{"kms:EncryptionContext:SecretARN": arnPattern},
	})
}

// KeyPolicy is what the pipeline's key policy must allow the AWS services that call KMS in their
// own name (spec.KeyPolicy: its statements and their JSON), and how a key of the app gets them
// (AddTo).
type KeyPolicy struct{ spec.KeyPolicy }

// AppKeyPolicy is the key policy of an app whose every stack's name starts with stackPrefix and
// "-" (spec.AppKeyPolicy).
func AppKeyPolicy(partition, region, account, stackPrefix string) KeyPolicy {
	return KeyPolicy{spec.AppKeyPolicy(partition, region, account, stackPrefix)}
}

// StackKeyPolicy is the key policy for the constructs of one stack, by its name
// (spec.StackKeyPolicy).
func StackKeyPolicy(partition, region, account, stackName string) KeyPolicy {
	return KeyPolicy{spec.StackKeyPolicy(partition, region, account, stackName)}
}

// AddTo adds the statements to key's policy and reports whether it could: only a key created in
// the app (not imported) can change, and only from its own stack, since a statement naming
// another stack's rules would make the key's stack depend on it.
func (k KeyPolicy) AddTo(scope constructs.Construct, key awskms.IKey) bool {
	if *awscdk.Stack_Of(key).Node().Path() != *awscdk.Stack_Of(scope).Node().Path() {
		return false
	}
	for _, s := range k.Statements() {
		r := key.AddToResourcePolicy(awsiam.PolicyStatement_FromJson(s), jsii.Bool(true))
		if r == nil || r.StatementAdded == nil || !*r.StatementAdded {
			return false
		}
	}
	return true
}

// keyPolicy lets the services use the key for the construct's rules and log groups, named by
// the stack's name (StackKeyPolicy): it adds the statements to a key of the construct's own
// stack, or, unless covered (the app's key policy already allows them,
// SharedProps.KeyPolicyCovered), warns at synth with the statements the key's owner must add.
func (e *encryption) keyPolicy(covered bool) {
	if e == nil {
		return
	}
	stack := awscdk.Stack_Of(e.scope)
	if covered || StackKeyPolicy(*stack.Partition(), *stack.Region(), *stack.Account(), *stack.StackName()).AddTo(e.scope, e.key) {
		return
	}
	partition, region, account := "<partition>", "<region>", "<account>"
	if arn := *e.key.KeyArn(); !*awscdk.Token_IsUnresolved(arn) {
		if p := strings.SplitN(arn, ":", 6); len(p) == 6 {
			partition, region, account = p[1], p[3], p[4]
		}
	}
	awscdk.Annotations_Of(e.scope).AddWarningV2(jsii.String("tenantpipeline:KeyPolicy"), jsii.String(
		"the encryption key's policy cannot be changed from this stack (an imported key, or one of another stack): "+
			"until its owner adds these statements, EventBridge cannot deliver to the encrypted queues and CloudWatch Logs cannot write the log groups "+
			"(docs/constructs.md, \"Customer-managed key\"): "+StackKeyPolicy(partition, region, account, *stack.StackName()).JSON()), nil)
}

// encrypt grants the KMS calls of the tenant's own resources and grants (the pipeline's are
// newPipeline's): Split's and the bundled Register's reads and writes of the bucket, the rule's
// dead-letter queue, the sink's table and secret, and the core system's table, which is its own
// key's (CoreSystemProps.EncryptionKey).
func (t *TenantPipeline) encrypt() {
	p, register := t.Props, t.bundled
	t.objects.grantBucket(p.Bucket, t.Split)
	if register != nil {
		t.objects.grantBucket(p.Bucket, register)
	}
	if cs := t.coreSystem; cs != nil {
		ce := newEncryption(t.Construct, cs.Props.EncryptionKey)
		ce.grantTables(t.Controller, true, cs.Table)
		if register != nil && cs.registerKeepsItems(p.RequestShares) {
			ce.grantTables(register, true, cs.Table)
		}
	}
	t.enc.queue(t.RuleDeadLetterQueue)
	if register != nil && t.Table != nil {
		t.enc.grantTables(register, true, t.Table)
	}
	if register != nil && p.Tenant.RegisterAuthSecretARN != "" {
		t.enc.grantSecrets(register, p.Tenant.RegisterAuthSecretARN)
	}
}

// encrypt grants the KMS calls of the pool's own resources and roles, the tenant role's
// included; each core system's table is its own key's. The router's and the controller's grants
// on the queues' key are next to their SQS grants (build, grantBacklog).
func (t *TenantPool) encrypt() {
	p := t.Props
	t.objects.grantBucket(p.Bucket, t.Router, t.TenantRole, t.SplitTenantRole, t.RegisterTenantRole)
	for _, cs := range t.CoreSystems {
		ce := newEncryption(t.Construct, cs.Props.EncryptionKey)
		ce.grantTables(t.Controller, true, cs.Table)
		if cs.registerKeepsItems(p.Shared.RequestShares) {
			ce.grantTables(t.Register, true, cs.Table)
		}
	}
	t.enc.grantTables(t.Controller, true, t.AdmissionTable)
	t.enc.grantTables(t.Router, true, t.AdmissionTable)
	if p.SecretPrefix != "" && t.enc != nil {
		stack := awscdk.Stack_Of(t.Construct)
		t.enc.grantSecrets(t.RegisterTenantRole, fmt.Sprintf("arn:%s:secretsmanager:%s:%s:secret:%s%s-??????",
			*stack.Partition(), *stack.Region(), *stack.Account(), p.SecretPrefix, principalTenant))
	}
}
