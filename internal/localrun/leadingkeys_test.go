package localrun

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// dynamodb:LeadingKeys is read from each operation's key, item or key condition, through the
// expression's names and values, whichever order its terms take; what cannot be read has no value.
func TestLeadingKeys(t *testing.T) {
	st := &deploy.Stack{Name: "S", Resources: map[string]*deploy.Resource{}}
	table := &deploy.Resource{Stack: st, LogicalID: "Admission", Type: "AWS::DynamoDB::Table", Properties: map[string]json.RawMessage{
		"KeySchema": json.RawMessage(`[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]`)}}
	st.Resources["Admission"] = table
	asm := &deploy.Assembly{Stacks: []*deploy.Stack{st}}
	res, err := deploy.NewResolver(asm, emulate.Region, emulate.Account)
	if err != nil {
		t.Fatal(err)
	}
	res.Set(table, deploy.Identity{Ref: "admission"})
	a := newTenantAuth(asm, res)
	for _, tc := range []struct {
		name, op, table, body string
		want                  string
		wantOK                bool
	}{
		{"GetItem", "GetItem", "admission", `{"Key": {"pk": {"S": "queue#p"}, "sk": {"S": "x"}}}`, "queue#p", true},
		{"DeleteItem", "DeleteItem", "admission", `{"Key": {"pk": {"S": "backlog"}}}`, "backlog", true},
		{"UpdateItem", "UpdateItem", "admission", `{"Key": {"pk": {"N": "7"}}}`, "7", true},
		{"PutItem", "PutItem", "admission", `{"Item": {"pk": {"S": "backlog#t"}, "n": {"N": "1"}}}`, "backlog#t", true},
		{"Query", "Query", "admission", `{"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "queue#q"}}}`, "queue#q", true},
		{"Query by names, sort key first, lower-case and", "Query", "admission",
			`{"KeyConditionExpression": "#s > :s and #p = :p", "ExpressionAttributeNames": {"#p": "pk", "#s": "sk"}, "ExpressionAttributeValues": {":p": {"S": "queue#q"}, ":s": {"S": "a"}}}`, "queue#q", true},
		{"Query on the sort key only", "Query", "admission", `{"KeyConditionExpression": "sk = :s", "ExpressionAttributeValues": {":s": {"S": "a"}}}`, "", false},
		{"Scan: no value", "Scan", "admission", `{}`, "", true},
		{"another operation", "BatchWriteItem", "admission", `{}`, "", false},
		{"a table the templates do not give", "GetItem", "other", `{"Key": {"pk": {"S": "queue#p"}}}`, "", false},
		{"a key without the partition key", "GetItem", "admission", `{"Key": {"sk": {"S": "x"}}}`, "", false},
	} {
		got, ok := a.leadingKeys(tc.op, tc.table, []byte(tc.body))
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: got %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

// The set operators on dynamodb:LeadingKeys, as the pool's router's statement on the admission
// table uses them: ForAllValues holds when every value matches (and, as AWS documents, for none,
// a Scan); ForAnyValue when one does; a value the emulation could not read fails closed.
func TestPolicySetOperators(t *testing.T) {
	r := newTenantAuthRig(t)
	router := mustStatement(`{"Effect":"Allow","Action":["dynamodb:GetItem","dynamodb:Query","dynamodb:Scan"],"Resource":"arn:aws:dynamodb:us-east-1:123456789012:table/admission",
		"Condition":{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["queue#*","backlog#*","backlog"]}}}`)
	anyOf := mustStatement(`{"Effect":"Allow","Action":"dynamodb:Scan","Resource":"*","Condition":{"ForAnyValue:StringLike":{"dynamodb:LeadingKeys":["queue#*"]}}}`)
	table := "arn:aws:dynamodb:us-east-1:123456789012:table/admission"
	for _, tc := range []struct {
		name   string
		stmt   statement
		action string
		keys   map[string]string
		want   bool
	}{
		{"a queue item", router, "dynamodb:GetItem", map[string]string{"dynamodb:LeadingKeys": "queue#p"}, true},
		{"the backlog", router, "dynamodb:GetItem", map[string]string{"dynamodb:LeadingKeys": "backlog"}, true},
		{"a gate's item", router, "dynamodb:GetItem", map[string]string{"dynamodb:LeadingKeys": "gate#core"}, false},
		{"one of two values outside", router, "dynamodb:GetItem", map[string]string{"dynamodb:LeadingKeys": "queue#p" + valueSeparator + "gate#core"}, false},
		{"a value not read", router, "dynamodb:Query", map[string]string{}, false},
		{"ForAllValues of none (a Scan)", router, "dynamodb:Scan", map[string]string{"dynamodb:LeadingKeys": ""}, true},
		{"ForAnyValue of none", anyOf, "dynamodb:Scan", map[string]string{"dynamodb:LeadingKeys": ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := r.synthetic(t, fmt.Sprintf("set%x", tc.name), []statement{tc.stmt})
			if got, why := r.auth.decide(s, tc.action, table, tc.keys); got != tc.want {
				t.Errorf("got allowed %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}
