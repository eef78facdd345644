package localrun

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dyntypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

// A KMS call S3 makes for a caller is judged by the key's policy and the caller's: the default key
// policy's root statement lets the caller's own Allow (through S3, for the bucket's objects) use the
// key; without it no identity policy can; a key policy that names the role allows by itself; an
// explicit Deny refuses; the service and the encryption context must be those the Allow names.
func TestKMSCallsJudgedByTheKeyPolicy(t *testing.T) {
	r := newTenantAuthRig(t)
	const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	root := mustStatement(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"kms:*","Resource":"*"}`)
	rootButDeletion := mustStatement(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"NotAction":["kms:ScheduleKeyDeletion","kms:DisableKey"],"Resource":"*"}`)
	use := mustStatement(`{"Effect":"Allow","Action":["kms:GenerateDataKey","kms:Decrypt"],"Resource":"` + key + `",
		"Condition":{"StringEquals":{"kms:ViaService":"s3.us-east-1.amazonaws.com"},"StringLike":{"kms:EncryptionContext:aws:s3:arn":"arn:aws:s3:::ingest/pools/p/${aws:PrincipalTag/tenant}/*"}}}`)
	object := map[string]string{"aws:s3:arn": "arn:aws:s3:::ingest/pools/p/a/x.csv"}
	for i, tc := range []struct {
		name      string
		keyPolicy []statement
		identity  []statement
		service   string
		context   map[string]string
		want      bool
	}{
		{"the root statement and the role's Allow", []statement{root}, []statement{use}, "s3", object, true},
		{"another tenant's object", []statement{root}, []statement{use}, "s3", map[string]string{"aws:s3:arn": "arn:aws:s3:::ingest/pools/p/b/x.csv"}, false},
		{"through another service", []statement{root}, []statement{use}, "sqs", object, false},
		{"without the root statement", nil, []statement{use}, "s3", object, false},
		{"the root statement, no Allow of the role", []statement{root}, nil, "s3", object, false},
		{"a key policy naming the role", []statement{mustStatement(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:role/kms5"},"Action":"kms:GenerateDataKey","Resource":"*"}`)}, nil, "s3", object, true},
		{"the role's own Deny", []statement{root}, []statement{use, deny([]string{"kms:*"}, []string{"*"}, nil)}, "s3", object, false},
		{"the key policy's Deny", []statement{root, mustStatement(`{"Effect":"Deny","Principal":"*","Action":"kms:*","Resource":"*","Condition":{"StringNotEquals":{"kms:ViaService":"sqs.us-east-1.amazonaws.com"}}}`)}, []statement{use}, "s3", object, false},
		{"the account statement that holds back deletion", []statement{rootButDeletion}, []statement{use}, "s3", object, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := r.synthetic(t, fmt.Sprintf("kms%d", i), tc.identity)
			r.auth.mu.Lock()
			r.auth.resourcePolicies = map[string][]statement{key: tc.keyPolicy}
			r.auth.mu.Unlock()
			if got, why := r.auth.kmsAllowed(s, "kms:GenerateDataKey", key, tc.service, tc.context, true); got != tc.want {
				t.Errorf("got %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}

// The account statement of a key NewKey creates leaves out what only the key's administrators may
// do: a role whose own policy allows kms:* may use the key, and may not schedule its deletion.
func TestKMSAccountStatementHoldsBackDeletion(t *testing.T) {
	r := newTenantAuthRig(t)
	const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	account := mustStatement(`{"Sid":"TenantPipelineAccountUsesTheKey","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},
		"NotAction":["kms:ScheduleKeyDeletion","kms:DisableKey","kms:DisableKeyRotation","kms:DeleteImportedKeyMaterial"],"Resource":"*"}`)
	s, _ := r.synthetic(t, "kmsall", []statement{mustStatement(`{"Effect":"Allow","Action":"kms:*","Resource":"*"}`)})
	r.auth.mu.Lock()
	r.auth.resourcePolicies = map[string][]statement{key: {account}}
	r.auth.mu.Unlock()
	for action, want := range map[string]bool{"kms:GenerateDataKey": true, "kms:Decrypt": true, "kms:ScheduleKeyDeletion": false, "kms:DisableKey": false} {
		if got, why := r.auth.kmsAllowed(s, action, key, "s3", nil, true); got != want {
			t.Errorf("%s: got %v (%s), want %v", action, got, why, want)
		}
	}
}

// A read or write of an item of a table under a customer-managed key is DynamoDB's kms:Decrypt of
// the table key in the caller's name: a role allowed the item but not the key is refused with
// DynamoDB's AccessDeniedException, as is one whose key grant names another table; a table
// without a key of the templates needs no key grant.
func TestKMSDynamoDBItemsNeedTheTableKey(t *testing.T) {
	r := newTenantAuthRig(t)
	const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	for _, tr := range r.auth.asm.OfType("AWS::DynamoDB::Table") {
		name := map[string]string{"EncryptedTable": "admission", "PlainTable": "plain"}[tr.LogicalID]
		r.auth.res.Set(tr, deploy.Identity{Ref: name})
	}
	r.setKeyPolicy(key, mustStatement(rootKeyStatement))
	db := serveGuarded(t, r.auth.guardDynamoDB, "application/x-amz-json-1.0", "{}")
	items := allow([]string{"dynamodb:GetItem", "dynamodb:PutItem"}, []string{"arn:aws:dynamodb:us-east-1:123456789012:table/*"}, nil)
	tableKey := func(table string) statement {
		return mustStatement(`{"Effect":"Allow","Action":"kms:Decrypt","Resource":"` + key + `","Condition":{"StringEquals":{
			"kms:ViaService":"dynamodb.us-east-1.amazonaws.com","kms:EncryptionContext:aws:dynamodb:tableName":"` + table + `"}}}`)
	}
	for i, tc := range []struct {
		name     string
		identity []statement
		table    string
		want     bool
	}{
		{"the item and the table's key", []statement{items, tableKey("admission")}, "admission", true},
		{"the item, not the key", []statement{items}, "admission", false},
		{"the key of another table", []statement{items, tableKey("other")}, "admission", false},
		{"a table without a key", []statement{items}, "plain", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := r.sessionConfig(t, fmt.Sprintf("ddb%d", i), tc.identity)
			c := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(db) })
			for _, call := range []func() error{
				func() error {
					_, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(tc.table),
						Key: map[string]dyntypes.AttributeValue{"pk": &dyntypes.AttributeValueMemberS{Value: "queue#a"}}})
					return err
				},
				func() error {
					_, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(tc.table),
						Item: map[string]dyntypes.AttributeValue{"pk": &dyntypes.AttributeValueMemberS{Value: "queue#a"}}})
					return err
				},
			} {
				wantAllowed(t, call(), tc.want, "AccessDeniedException")
			}
		})
	}
}

// CloudWatch Logs' use of a key for a log group is judged by the key policy alone, under the
// encryption context aws:logs:arn: the statement the constructs write (ArnLike on the stack's log
// groups) allows the stack's log groups and no other's; the root statement, which delegates to
// identity policies, does not name the service; a Deny refuses.
func TestKMSLogGroupsNeedTheLogsStatement(t *testing.T) {
	r := newTenantAuthRig(t)
	const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	const group = "arn:aws:logs:us-east-1:123456789012:log-group:"
	root := mustStatement(rootKeyStatement)
	logs := mustStatement(`{"Sid":"TenantPipelineCloudWatchLogs","Effect":"Allow","Principal":{"Service":"logs.us-east-1.amazonaws.com"},
		"Action":["kms:Encrypt*","kms:Decrypt*","kms:ReEncrypt*","kms:GenerateDataKey*","kms:Describe*"],"Resource":"*",
		"Condition":{"ArnLike":{"kms:EncryptionContext:aws:logs:arn":["` + group + `ops-acme-*"]}}}`)
	decryptOnly := mustStatement(`{"Effect":"Allow","Principal":{"Service":"logs.us-east-1.amazonaws.com"},"Action":"kms:Decrypt*","Resource":"*"}`)
	denyLogs := mustStatement(`{"Effect":"Deny","Principal":{"Service":"logs.us-east-1.amazonaws.com"},"Action":"kms:*","Resource":"*"}`)
	for _, tc := range []struct {
		name      string
		keyPolicy []statement
		logGroup  string
		want      bool
	}{
		{"the stack's log group", []statement{root, logs}, group + "ops-acme-AcmeControllerLogs-1A2B3C4D5E6F", true},
		{"another stack's log group", []statement{root, logs}, group + "other-AcmeControllerLogs-1A2B3C4D5E6F", false},
		{"the root statement alone", []statement{root}, group + "ops-acme-AcmeControllerLogs-1A2B3C4D5E6F", false},
		{"decrypt only", []statement{root, decryptOnly}, group + "ops-acme-AcmeControllerLogs-1A2B3C4D5E6F", false},
		{"a Deny of the service", []statement{root, logs, denyLogs}, group + "ops-acme-AcmeControllerLogs-1A2B3C4D5E6F", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.setKeyPolicy(key, tc.keyPolicy...)
			if got, why := r.auth.logsMayUse(key, tc.logGroup); got != tc.want {
				t.Errorf("got %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}
