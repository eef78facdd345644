package opsfake

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/internal/schema"
)

// dynamoFake is the admission tables pipectl reads: GetItem by key, and Query of one partition by
// sort key prefix (the only key conditions admission uses). Items are written with AddLease,
// AddWaiter and SetAdaptiveLimit, in internal/admission's layout.
type dynamoFake World

type item = map[string]ddbtypes.AttributeValue

func s(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
func n(v int64) ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func str(it item, k string) string {
	v, _ := it[k].(*ddbtypes.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

func (w *World) put(table string, it item) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Tables == nil {
		w.Tables = map[string][]item{}
	}
	w.Tables[table] = append(w.Tables[table], it)
}

// AddLease writes a running file's lease at index of the gate, last renewed at renewed.
func (w *World) AddLease(table, gate string, index int, execution, tenant string, renewed time.Time) {
	w.put(table, item{schema.AttrPK: s(gate), schema.AttrSK: s(schema.SlotSK(index)),
		"execution": s(execution), "tenant": s(tenant), "acquiredAt": n(renewed.UnixMilli()), "renewedAt": n(renewed.UnixMilli())})
}

// AddWaiter writes a waiting file's entry in the gate's queue: waiting since since, last asked at
// renewed, with the next ticket of its weight.
func (w *World) AddWaiter(table, gate, tenant string, weight int, since, renewed time.Time) {
	w.mu.Lock()
	w.tickets++
	ticket := w.tickets
	w.mu.Unlock()
	w.put(table, item{schema.AttrPK: s(schema.GateQueue(gate)), schema.AttrSK: s(schema.EntrySK(weight, ticket)),
		"tenant": s(tenant), "execution": s(tenant + "-waiting"), "ticket": n(ticket), "weight": n(int64(weight)),
		"since": n(since.UnixMilli()), "renewedAt": n(renewed.UnixMilli())})
}

// SetAdaptiveLimit writes the core system's adaptive limit item.
func (w *World) SetAdaptiveLimit(table, gate string, limit int) {
	w.put(table, item{schema.AttrPK: s(gate), schema.AttrSK: s(schema.LimitSK), schema.AttrLimit: n(int64(limit))})
}

// SetBacklog writes a pooled tenant's backlog item (internal/backlog's layout): the ids of its
// messages counted in the pool queue, and its parked files' slots from nextUnpark to nextPark-1.
func (w *World) SetBacklog(table, tenant string, queued []string, nextUnpark, nextPark int64) {
	m := map[string]ddbtypes.AttributeValue{}
	for _, id := range queued {
		m[id] = n(0)
	}
	w.put(table, item{schema.AttrPK: s(schema.BacklogKey(tenant)), schema.AttrSK: s(schema.BacklogSK),
		"queued": &ddbtypes.AttributeValueMemberM{Value: m}, "nextPark": n(nextPark), "nextUnpark": n(nextUnpark)})
}

func (f *dynamoFake) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := (*World)(f).fail("GetItem"); err != nil {
		return nil, err
	}
	pk, sk := str(in.Key, schema.AttrPK), str(in.Key, schema.AttrSK)
	for _, it := range f.Tables[aws.ToString(in.TableName)] {
		if str(it, schema.AttrPK) == pk && str(it, schema.AttrSK) == sk {
			return &dynamodb.GetItemOutput{Item: it}, nil
		}
	}
	return &dynamodb.GetItemOutput{}, nil
}

// Query answers "#pk = :pk AND begins_with(#sk, :x)" one item per page, to exercise paging.
func (f *dynamoFake) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := (*World)(f).fail("Query"); err != nil {
		return nil, err
	}
	var pk, prefix string
	for k, v := range in.ExpressionAttributeValues {
		if k == ":pk" {
			pk = v.(*ddbtypes.AttributeValueMemberS).Value
		} else if sv, ok := v.(*ddbtypes.AttributeValueMemberS); ok && strings.Contains(aws.ToString(in.KeyConditionExpression), "begins_with(#sk, "+k+")") {
			prefix = sv.Value
		}
	}
	var match []item
	for _, it := range f.Tables[aws.ToString(in.TableName)] {
		if str(it, schema.AttrPK) == pk && strings.HasPrefix(str(it, schema.AttrSK), prefix) {
			match = append(match, it)
		}
	}
	start := 0
	if in.ExclusiveStartKey != nil {
		start, _ = strconv.Atoi(str(in.ExclusiveStartKey, "page"))
	}
	out := &dynamodb.QueryOutput{}
	if start < len(match) {
		out.Items = match[start : start+1]
	}
	if start+1 < len(match) {
		out.LastEvaluatedKey = item{"page": s(strconv.Itoa(start + 1))}
	}
	return out, nil
}

var errReadOnly = errors.New("opsfake: pipectl only reads admission tables, but for a core system's control and audit items")

// PutItem writes a core system's control item (sk schema.ControlSK, conditional on its version)
// or an audit item (sk under schema.AuditPrefix, conditional on its absence), as pipectl core
// does; any other write is refused.
func (f *dynamoFake) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := (*World)(f).fail("PutItem"); err != nil {
		return nil, err
	}
	table, sk := aws.ToString(in.TableName), str(in.Item, schema.AttrSK)
	if sk != schema.ControlSK && !strings.HasPrefix(sk, schema.AuditPrefix) {
		return nil, errReadOnly
	}
	idx := -1
	for i, it := range f.Tables[table] {
		if str(it, schema.AttrPK) == str(in.Item, schema.AttrPK) && str(it, schema.AttrSK) == sk {
			idx = i
		}
	}
	switch cond := aws.ToString(in.ConditionExpression); cond {
	case "attribute_not_exists(#sk)":
		if idx >= 0 {
			return nil, &ddbtypes.ConditionalCheckFailedException{Message: aws.String("exists")}
		}
	case "attribute_not_exists(#v) OR #v = :v":
		if idx >= 0 {
			cur, _ := f.Tables[table][idx]["version"].(*ddbtypes.AttributeValueMemberN)
			want := in.ExpressionAttributeValues[":v"].(*ddbtypes.AttributeValueMemberN)
			if cur != nil && cur.Value != want.Value {
				return nil, &ddbtypes.ConditionalCheckFailedException{Message: aws.String("version")}
			}
		}
	default:
		return nil, fmt.Errorf("opsfake: PutItem with an unexpected condition %q", cond)
	}
	if f.Tables == nil {
		f.Tables = map[string][]item{}
	}
	if idx >= 0 {
		f.Tables[table][idx] = in.Item
	} else {
		f.Tables[table] = append(f.Tables[table], in.Item)
	}
	return &dynamodb.PutItemOutput{}, nil
}

func (f *dynamoFake) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, errReadOnly
}

func (f *dynamoFake) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, errReadOnly
}
