package localrun

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// dynamodb:LeadingKeys, the partition key values a DynamoDB request touches, for policies that
// scope a role to some of a table's partitions (ForAllValues:StringLike, as the pool's router is
// scoped to the admission table's queue and backlog items).
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html
//
// The values are read from the request: GetItem, DeleteItem and UpdateItem's Key, PutItem's Item,
// and Query's KeyConditionExpression (its partition key's equality, through its expression names
// and values). A Scan touches no one partition: the key has no value, which ForAllValues holds for
// and ForAnyValue does not. A request whose values the emulation cannot read (another operation, an
// expression it cannot parse, a table whose key schema the templates do not give) has no such key,
// and a condition on it fails closed.

// valueSeparator joins the values of a multi-valued condition key in the request's keys.
const valueSeparator = "\x1f"

// multiValuedKeys are the condition keys whose value is a set, which the set operators
// (ForAllValues:, ForAnyValue:) take: a DynamoDB request's partition keys, and the keys of
// AssumeRole's session tags (sts.go).
var multiValuedKeys = []string{"dynamodb:LeadingKeys", "aws:TagKeys"}

// leadingKeys returns the request's partition key values, joined by valueSeparator; ok is false
// when they cannot be read.
func (a *tenantAuth) leadingKeys(op, table string, body []byte) (string, bool) {
	if op == "Scan" {
		return "", true
	}
	hash, ok := a.hashKey(table)
	if !ok {
		return "", false
	}
	var in struct {
		Key, Item                 map[string]map[string]any
		KeyConditionExpression    string
		ExpressionAttributeNames  map[string]string
		ExpressionAttributeValues map[string]map[string]any
	}
	if json.Unmarshal(body, &in) != nil {
		return "", false
	}
	var v map[string]any
	switch op {
	case "GetItem", "DeleteItem", "UpdateItem":
		v = in.Key[hash]
	case "PutItem":
		v = in.Item[hash]
	case "Query":
		for name, value := range keyEqualities(in.KeyConditionExpression) {
			if n, ok := in.ExpressionAttributeNames[name]; ok {
				name = n
			}
			if name == hash {
				v = in.ExpressionAttributeValues[value]
			}
		}
	default:
		return "", false
	}
	for _, typ := range []string{"S", "N", "B"} {
		if s, ok := v[typ].(string); ok {
			return s, true
		}
	}
	return "", false
}

// andTerms splits an expression at its AND keyword, which DynamoDB reads in any case.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html
var andTerms = regexp.MustCompile(`(?i)\s+AND\s+`)

// keyEquality is one "name = :value" of a key condition expression, either way round.
var keyEquality = regexp.MustCompile(`^\s*\(?\s*([#A-Za-z0-9_.]+)\s*=\s*(:[A-Za-z0-9_]+)\s*\)?\s*$`)

// keyEqualities are the "name = :value" terms of a key condition expression's ANDed terms, by
// name (the partition key's, and a sort key's equality if it has one).
func keyEqualities(expr string) map[string]string {
	out := map[string]string{}
	for _, term := range andTerms.Split(expr, -1) {
		if m := keyEquality.FindStringSubmatch(term); m != nil {
			out[m[1]] = m[2]
		}
	}
	return out
}

// hashKey is the partition key's attribute name of the table, from its AWS::DynamoDB::Table.
func (a *tenantAuth) hashKey(table string) (string, bool) {
	attr := a.storeKey("hash/"+table, func() string { return a.findHashKey(table) })
	return attr, attr != ""
}

// findHashKey reads the partition key of the table named table from the templates; "" if no
// template declares it.
func (a *tenantAuth) findHashKey(table string) string {
	for _, t := range a.asm.OfType("AWS::DynamoDB::Table") {
		name, err := a.res.ResolveString(t.Stack, json.RawMessage(fmt.Sprintf(`{"Ref":%q}`, t.LogicalID)))
		if err != nil || name != table {
			continue
		}
		var schema []struct{ AttributeName, KeyType string }
		if err := a.asm.Prop(a.res, t, "KeySchema", &schema); err != nil {
			return ""
		}
		for _, k := range schema {
			if k.KeyType == "HASH" {
				return k.AttributeName
			}
		}
	}
	return ""
}
