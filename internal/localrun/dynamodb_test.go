package localrun

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// tableAccount is an account that keeps the tables a deploy creates: a template's, and those
// the functions' tenants name (tenantTable), as the cloud creates them.
type tableAccount struct {
	deploy.Account // nil: any other call panics
	tables         []string
	env            map[string]map[string]string // each function's variables, by logical id
}

func (a *tableAccount) CreateBucket(context.Context, *deploy.Resource, deploy.Bucket) error {
	return nil
}
func (a *tableAccount) CreateQueue(_ context.Context, _ *deploy.Resource, q deploy.Queue) (string, error) {
	return q.Name, nil
}
func (a *tableAccount) CreateStateMachine(context.Context, *deploy.Resource, deploy.StateMachine) error {
	return nil
}
func (a *tableAccount) CreateTable(_ context.Context, r *deploy.Resource, t deploy.Table) error {
	var keys []string
	for i, k := range t.KeySchema {
		keys = append(keys, fmt.Sprintf("%s:%s:%s", k.AttributeName, k.KeyType, t.AttributeDefinitions[i].AttributeType))
	}
	a.tables = append(a.tables, fmt.Sprintf("%s(%s): %s", t.Name, r.LogicalID, strings.Join(keys, " ")))
	return nil
}
func (a *tableAccount) CreateFunction(_ context.Context, r *deploy.Resource, f deploy.Function) error {
	a.env[r.LogicalID] = f.Variables
	t, err := tenantTable(f.Variables["TENANT"])
	if t != nil && !slices.ContainsFunc(a.tables, func(s string) bool { return strings.HasPrefix(s, t.Name+"(") }) { // created once (createTable)
		var keys []string
		for i, k := range t.KeySchema {
			keys = append(keys, fmt.Sprintf("%s:%s:%s", aws.ToString(k.AttributeName), k.KeyType, t.AttributeDefinitions[i].AttributeType))
		}
		a.tables = append(a.tables, fmt.Sprintf("%s(%s): %s", t.Name, t.From, strings.Join(keys, " ")))
	}
	return err
}
func (a *tableAccount) CreateEventSourceMapping(context.Context, *deploy.Resource, deploy.Mapping) (string, error) {
	return "uuid", nil
}

// TestDynamoTables: the tables the local run creates, read from hand-made templates
// (testdata/dynamodb): a template's AWS::DynamoDB::Table by its KeySchema, named by its logical id
// when it has no TableName (CloudFormation would generate one), and a table a tenant names that no
// template creates, keyed by the tenant's dynamodb.key as strings.
func TestDynamoTables(t *testing.T) {
	for _, tc := range []struct {
		dir        string
		wantTables string // name(from): key:type:attrtype, ...
		wantErr    string
	}{
		{"tables", "tenantatable1a2b3c4d(TenantaTable1A2B3C4D): id:HASH:S ts:RANGE:S; orders(tenant b): pk:HASH:S", ""},
		{"none", "", ""},
		{"emptytable", "", `tenant d: dynamodb.table is empty`},
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
			acct := &tableAccount{env: map[string]map[string]string{}}
			err = deploy.Apply(t.Context(), asm, res, acct)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g := strings.Join(acct.tables, "; "); g != tc.wantTables {
				t.Errorf("got tables %q; want %q", g, tc.wantTables)
			}
			if tc.dir != "tables" {
				return
			}
			// The template's table resolves where a TENANT refers to it.
			if want := `"table":"tenantatable1a2b3c4d"`; !strings.Contains(acct.env["TenantaController"]["TENANT"], want) {
				t.Errorf("TENANT of tenant a: got %s, want it to contain %s", acct.env["TenantaController"]["TENANT"], want)
			}
		})
	}
}
