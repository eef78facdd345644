package cost

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDynamoDBUnits checks the rounding against answers worked out by hand from DynamoDB's
// read-write page: per read, per Query, per write, transactional.
func TestDynamoDBUnits(t *testing.T) {
	const kb = 1024
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"a 5 KB strongly consistent GetItem is 2 RRU", ReadUnits(5*kb, true), 2},
		{"a 5 KB eventually consistent GetItem is 1 RRU (2 × 0.5)", ReadUnits(5*kb, false), 1},
		{"a 3,500-byte strongly consistent read is 1 RRU", ReadUnits(3500, true), 1},
		{"exactly 4 KB is 1 RRU", ReadUnits(4*kb, true), 1},
		{"4 KB and one byte is 2 RRU", ReadUnits(4*kb+1, true), 2},
		{"an absent item still costs a read: 1 RRU", ReadUnits(0, true), 1},
		{"an absent item, eventually consistent: 0.5 RRU", ReadUnits(0, false), 0.5},
		{"a Query of 3 items of 1.5 KB is 2 RRU (4.5 KB rounded up once)", QueryReadUnits([]int{1536, 1536, 1536}, true), 2},
		{"the same Query eventually consistent is 1 RRU", QueryReadUnits([]int{1536, 1536, 1536}, false), 1},
		{"a Query that reads nothing: 1 RRU", QueryReadUnits(nil, true), 1},
		{"a 1.5 KB PutItem is 2 WRU", WriteUnits(1536), 2},
		{"a 1 KB PutItem is 1 WRU", WriteUnits(kb), 1},
		{"a 100-byte write is 1 WRU", WriteUnits(100), 1},
		{"a 1.5 KB transactional write is 4 WRU", TransactionalWriteUnits(1536), 4},
		{"a 5 KB transactional read is 4 RRU", TransactionalReadUnits(5 * kb), 4},
		{"a 100-byte transactional read is 2 RRU", TransactionalReadUnits(100), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

// TestItemSize checks the item size rules against sizes worked out by hand from DynamoDB's
// item-size page.
func TestItemSize(t *testing.T) {
	for _, tc := range []struct {
		name, item string
		want       int
	}{
		{"string: name and UTF-8 bytes", `{"pk": {"S": "slot#1"}}`, 2 + 6},
		{"multi-byte string", `{"n": {"S": "日本"}}`, 1 + 6},
		{"number: 2 bytes per 2 digits + 1", `{"n": {"N": "1234"}}`, 1 + 3},
		{"number: odd digits round up", `{"n": {"N": "12345"}}`, 1 + 4},
		{"number: zeroes trimmed", `{"n": {"N": "1200"}}`, 1 + 2},
		{"number: zero is 1 byte", `{"n": {"N": "0"}}`, 1 + 1},
		{"binary: raw bytes", `{"b": {"B": "AQID"}}`, 1 + 3},
		{"bool and null: 1 byte", `{"t": {"BOOL": true}, "z": {"NULL": true}}`, 1 + 1 + 1 + 1},
		{"string set: sum of elements", `{"ss": {"SS": ["ab", "cde"]}}`, 2 + 5},
		{"empty map: 3 bytes", `{"m": {"M": {}}}`, 1 + 3},
		{"map: 3 + per element 1 + name + value", `{"m": {"M": {"a": {"S": "xy"}, "bc": {"N": "7"}}}}`, 1 + 3 + (1 + 1 + 2) + (1 + 2 + 2)},
		{"list: 3 + per element 1 + value", `{"l": {"L": [{"S": "x"}, {"BOOL": false}]}}`, 1 + 3 + (1 + 1) + (1 + 1)},
		{"a 1.5 KB item", `{"pk": {"S": "` + strings.Repeat("x", 1534) + `"}}`, 1536},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var item map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.item), &item); err != nil {
				t.Fatal(err)
			}
			got, err := ItemSize(item)
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	var bad map[string]json.RawMessage
	json.Unmarshal([]byte(`{"x": {"Q": "1"}}`), &bad)
	if _, err := ItemSize(bad); err == nil {
		t.Error("unknown type: got no error, want one")
	}
}
