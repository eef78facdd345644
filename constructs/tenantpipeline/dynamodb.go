package tenantpipeline

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// sinkTable finds or creates the table of the tenant's DynamoDB sink: Props.DynamoDBTable, the
// table Tenant.DynamoDB.Table names, or a new table (TenantPipeline.Table). Nil without a sink.
func (t *TenantPipeline) sinkTable() awsdynamodb.ITable {
	d := t.Props.Tenant.DynamoDB
	switch {
	case d == nil:
		return nil
	case t.Props.DynamoDBTable != nil:
		return t.Props.DynamoDBTable
	case d.Table != "":
		return awsdynamodb.Table_FromTableName(t.Construct, jsii.String("ExistingTable"), jsii.String(d.Table))
	}
	key := func(name string) *awsdynamodb.Attribute {
		return &awsdynamodb.Attribute{Name: jsii.String(name), Type: awsdynamodb.AttributeType_STRING}
	}
	props := &awsdynamodb.TableProps{
		// Register stores every key field as a string (docs/data-path.md, "DynamoDB sink").
		PartitionKey: key(d.Key[0]),
		// On demand: a tenant's writes come in bursts, one file at a time.
		BillingMode: awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		// The registered records: removing the tenant must never delete them.
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	}
	if len(d.Key) > 1 {
		props.SortKey = key(d.Key[1])
	}
	// The pipeline's key, else the AWS managed key (encryption.table). The pipeline is built after
	// the table, whose name its controller's TENANT variable holds.
	newEncryption(t.Construct, t.Props.EncryptionKey).table(props)
	t.Table = awsdynamodb.NewTable(t.Construct, jsii.String("Table"), props)
	return t.Table
}

// allowPutItem grants fn exactly dynamodb:PutItem on the table: the sink's conditional upsert is
// its only call.
func allowPutItem(fn awslambda.IFunction, table awsdynamodb.ITable) {
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:PutItem"),
		Resources: jsii.Strings(*table.TableArn()),
	}))
}
