package localrun

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// TestDynamoTables: the tables the local run creates, read from hand-made templates
// (testdata/dynamodb): a template's AWS::DynamoDB::Table by its KeySchema, named by its logical id
// when it has no TableName (CloudFormation would generate one), and a table a tenant names that no
// template creates, keyed by the tenant's dynamodb.key as strings.
func TestDynamoTables(t *testing.T) {
	for _, tc := range []struct {
		dir        string
		wantTables string // name(from): key:type:attrtype, ...
		wantNeeded bool
		wantErr    string
	}{
		{"tables", "orders(tenant b): pk:HASH:S; tenantatable1a2b3c4d(TenantaTable1A2B3C4D): id:HASH:S ts:RANGE:S", true, ""},
		{"none", "", false, ""},
		{"emptytable", "", false, `tenant d: dynamodb.table is empty`},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			asm, err := deploy.LoadAssembly(filepath.Join("testdata/dynamodb", tc.dir))
			if err != nil {
				t.Fatal(err)
			}
			res, err := deploy.NewResolver(asm, emulate.Region, emulate.Account)
			if err != nil {
				t.Fatal(err)
			}
			tables, needed, err := dynamoTables(asm, res)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tb := range tables {
				var keys []string
				for i, k := range tb.KeySchema {
					keys = append(keys, fmt.Sprintf("%s:%s:%s", aws.ToString(k.AttributeName), k.KeyType, tb.AttributeDefinitions[i].AttributeType))
				}
				got = append(got, fmt.Sprintf("%s(%s): %s", tb.Name, tb.From, strings.Join(keys, " ")))
			}
			if g := strings.Join(got, "; "); g != tc.wantTables || needed != tc.wantNeeded {
				t.Errorf("got tables %q, needed %v; want %q, %v", g, needed, tc.wantTables, tc.wantNeeded)
			}
			if tc.dir != "tables" {
				return
			}
			// The template's table resolves where a TENANT refers to it.
			var env struct{ Variables map[string]string }
			if err := asm.Prop(res, asm.Stacks[0].Resources["TenantaController"], "Environment", &env); err != nil {
				t.Fatal(err)
			}
			if want := `"table":"tenantatable1a2b3c4d"`; !strings.Contains(env.Variables["TENANT"], want) {
				t.Errorf("TENANT of tenant a: got %s, want it to contain %s", env.Variables["TENANT"], want)
			}
		})
	}
}
