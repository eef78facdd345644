package test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

var sinks struct {
	built    *stacks.App
	template map[string]any
}

// sinksApp is the app of testdata/sinks.json: DynamoDB tenants with a created table (partition
// key; partition and sort key) and with an existing table by name.
func sinksApp(t *testing.T) map[string]any {
	t.Helper()
	if sinks.template == nil {
		_, built := synthApp(t, "sinks.json", stacks.Options{})
		sinks.built = built
		sinks.template = stackTemplate(t, built.TenantStacks[0])
	}
	return sinks.template
}

// tenantSetting returns the TENANT variable of the tenant's controller, parsed.
func tenantSetting(t *testing.T, tpl map[string]any, tenant string) pipeline.Tenant {
	t.Helper()
	fn := tenantResources(t, tpl, "AWS::Lambda::Function", tenant)[controllerID(t, tpl, tenant)]
	var s pipeline.Tenant
	flattenJSON(t, get(t, props(fn), "Environment", "Variables", "TENANT"), &s)
	return s
}

// TestDynamoDBTableCreated: without a table name the construct creates the table:
// partition key = key[0], sort key = key[1], both strings; on demand; point-in-time recovery;
// AWS-managed encryption (SSEEnabled without a key of our own); retained on removal.
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-dynamodb-table.html
// (SSEEnabled true without KMSMasterKeyId is the AWS managed key:
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-dynamodb-table-ssespecification.html)
func TestDynamoDBTableCreated(t *testing.T) {
	tpl := sinksApp(t)
	for _, tc := range []struct {
		tenant string
		keys   string
		attrs  string
	}{
		{"ledger", `[{"AttributeName":"id","KeyType":"HASH"}]`, `[{"AttributeName":"id","AttributeType":"S"}]`},
		{"orders", `[{"AttributeName":"customer","KeyType":"HASH"},{"AttributeName":"orderId","KeyType":"RANGE"}]`,
			`[{"AttributeName":"customer","AttributeType":"S"},{"AttributeName":"orderId","AttributeType":"S"}]`},
	} {
		t.Run(tc.tenant, func(t *testing.T) {
			id, table := only(t, tpl, "AWS::DynamoDB::Table", tc.tenant)
			if !strings.HasPrefix(id, "Tenant"+tc.tenant+"Table") {
				t.Errorf("logical id: got %s, want Tenant%sTable + hash (construct id Table)", id, tc.tenant)
			}
			p := props(table)
			for k, want := range map[string]string{
				"KeySchema":                        tc.keys,
				"AttributeDefinitions":             tc.attrs,
				"BillingMode":                      `"PAY_PER_REQUEST"`,
				"PointInTimeRecoverySpecification": `{"PointInTimeRecoveryEnabled":true}`,
				"SSESpecification":                 `{"SSEEnabled":true}`,
			} {
				if got := asJSON(p[k]); got != want {
					t.Errorf("%s: got %s, want %s", k, got, want)
				}
			}
			for _, k := range []string{"TableName", "ProvisionedThroughput", "GlobalSecondaryIndexes"} {
				if _, ok := p[k]; ok {
					t.Errorf("%s: got %v, want none", k, p[k])
				}
			}
			if table["DeletionPolicy"] != "Retain" || table["UpdateReplacePolicy"] != "Retain" {
				t.Errorf("got DeletionPolicy %v, UpdateReplacePolicy %v, want Retain", table["DeletionPolicy"], table["UpdateReplacePolicy"])
			}
			if got := tenantSetting(t, tpl, tc.tenant).DynamoDB; got == nil || got.Table != "<Ref:"+id+">" {
				t.Errorf("TENANT dynamodb: got %+v, want table <Ref:%s>", got, id)
			}
		})
	}
	if n := len(tenantResources(t, tpl, "AWS::DynamoDB::Table", "stock")); n != 0 {
		t.Errorf("stock: got %d tables, want none (it names an existing table)", n)
	}
}

// TestRegisterPutItemOnly: Register is granted exactly dynamodb:PutItem on the sink's
// table ARN, in one statement; tenants without the sink get no DynamoDB permission at all.
func TestRegisterPutItemOnly(t *testing.T) {
	tpl := sinksApp(t)
	tableArn := func(tenant string) string {
		id, _ := only(t, tpl, "AWS::DynamoDB::Table", tenant)
		return `{"Fn::GetAtt":["` + id + `","Arn"]}`
	}
	for _, tc := range []struct {
		tenant string
		want   func() string
	}{
		{"ledger", func() string { return tableArn("ledger") }},
		{"orders", func() string { return tableArn("orders") }},
		{"stock", func() string {
			return `{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":dynamodb:",{"Ref":"AWS::Region"},":",{"Ref":"AWS::AccountId"},":table/existing-stock"]]}`
		}},
	} {
		t.Run(tc.tenant, func(t *testing.T) {
			var ddb []map[string]any
			for _, s := range statementsOf(t, tpl, tc.tenant, "Register") {
				if strings.Contains(asJSON(s["Action"]), "dynamodb:") {
					ddb = append(ddb, s)
				}
			}
			if len(ddb) != 1 {
				t.Fatalf("got %d DynamoDB statements, want 1: %s", len(ddb), asJSON(ddb))
			}
			s := ddb[0]
			if s["Action"] != "dynamodb:PutItem" || s["Effect"] != "Allow" || asJSON(s["Resource"]) != tc.want() {
				t.Errorf("got %s, want Allow dynamodb:PutItem on %s", asJSON(s), tc.want())
			}
			for _, other := range []string{"Controller", "Split"} {
				if got := asJSON(statementsOf(t, tpl, tc.tenant, other)); strings.Contains(got, "dynamodb:") {
					t.Errorf("%s has DynamoDB permissions: %s", other, got)
				}
			}
		})
	}
	if got := tenantSetting(t, tpl, "stock").DynamoDB; got == nil || got.Table != "existing-stock" || !slices.Equal(got.Key, []string{"sku"}) {
		t.Errorf("stock TENANT dynamodb: got %+v, want table existing-stock, key [sku]", got)
	}
	if got := tenantSetting(t, tpl, "orders").DynamoDB; got == nil || got.Concurrency != 4 || !slices.Equal(got.Key, []string{"customer", "orderId"}) {
		t.Errorf("orders TENANT dynamodb: got %+v, want key [customer orderId], concurrency 4", got)
	}
	sharedApp(t)
	for _, tenant := range sampleTenants {
		if got := asJSON(statementsOf(t, shared.template, tenant, "")); strings.Contains(got, "dynamodb:") {
			t.Errorf("tenant %s without a DynamoDB sink has DynamoDB permissions", tenant)
		}
		if strings.Contains(asJSON(tenantSetting(t, shared.template, tenant)), "dynamodb") {
			t.Errorf("tenant %s: TENANT carries a dynamodb sink", tenant)
		}
	}
}

// TestDynamoDBTableProp: Props.DynamoDBTable, a table the app owns, is the one Register
// writes: no table is created, PutItem is granted on it, and TENANT names it.
func TestDynamoDBTableProp(t *testing.T) {
	app := testApp(t)
	stack := awscdk.NewStack(app, jsii.String("Own"), nil)
	table := awsdynamodb.NewTable(stack, jsii.String("Mine"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("id"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
	})
	tp := tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
		Tenant:        tenantpipeline.Tenant{ID: "acme", DynamoDB: &tenantpipeline.DynamoDB{Key: []string{"id"}}},
		Bucket:        stacks.NewIngestBucket(stack, "Bucket"),
		DynamoDBTable: table,
	})
	if tp.Table != nil {
		t.Errorf("TenantPipeline.Table: got a table, want nil (the app's own table is used)")
	}
	tpl := templateJSON(assertions.Template_FromStack(stack, nil))
	var tables []string
	for id, r := range tpl["Resources"].(map[string]any) {
		if r.(map[string]any)["Type"] == "AWS::DynamoDB::Table" {
			tables = append(tables, id)
		}
	}
	if len(tables) != 1 || !strings.HasPrefix(tables[0], "Mine") {
		t.Fatalf("got tables %v, want only the app's Mine", tables)
	}
	var got []string
	for _, s := range statementsOf(t, tpl, "acme", "Register") {
		if strings.Contains(asJSON(s["Action"]), "dynamodb:") {
			got = append(got, asJSON(s))
		}
	}
	if want := `{"Action":"dynamodb:PutItem","Effect":"Allow","Resource":{"Fn::GetAtt":["` + tables[0] + `","Arn"]}}`; len(got) != 1 || got[0] != want {
		t.Errorf("got %v, want [%s]", got, want)
	}
	if s := tenantSetting(t, tpl, "acme"); s.DynamoDB == nil || s.DynamoDB.Table != "<Ref:"+tables[0]+">" {
		b, _ := json.Marshal(s)
		t.Errorf("TENANT: got %s, want dynamodb.table <Ref:%s>", b, tables[0])
	}
}

// TestControllerOrderCounterGrant: a DynamoDB tenant's controller reads and writes exactly its
// order counter, control/<tenant>/order.json, in one statement (docs/data-path.md, "DynamoDB
// sink"); a tenant without the sink gets no such grant.
func TestControllerOrderCounterGrant(t *testing.T) {
	tpl := sinksApp(t)
	for _, tenant := range []string{"ledger", "orders", "stock"} {
		t.Run(tenant, func(t *testing.T) {
			var order []map[string]any
			for _, s := range statementsOf(t, tpl, tenant, "Controller") {
				if strings.Contains(asJSON(s["Resource"]), "order.json") {
					order = append(order, s)
				}
			}
			if len(order) != 1 {
				t.Fatalf("got %d statements on the order counter, want 1: %s", len(order), asJSON(order))
			}
			if got := actionsOf(order); !slices.Equal(got, []string{"s3:GetObject", "s3:PutObject"}) {
				t.Errorf("actions: got %v, want [s3:GetObject s3:PutObject]", got)
			}
			f := flatten(t, order[0]["Resource"])
			if key := f[strings.Index(f, "/")+1:]; key != "control/"+tenant+"/order.json" {
				t.Errorf("resource: got key %q (%s), want control/%s/order.json", key, f, tenant)
			}
		})
	}
	sharedApp(t)
	for _, tenant := range sampleTenants {
		if got := asJSON(statementsOf(t, shared.template, tenant, "Controller")); strings.Contains(got, "order.json") {
			t.Errorf("tenant %s without a DynamoDB sink may touch an order counter: %s", tenant, got)
		}
	}
}
