package cost

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// DynamoDB's request units, as DynamoDB rounds them
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html):
//   - a strongly consistent read of an item up to 4 KB is one read unit, an eventually consistent
//     one half a unit, a transactional one two units; item sizes are rounded up to the next 4 KB;
//   - a Query (or Scan) is one read of the total size of the items it reads, rounded up to 4 KB;
//   - a write of an item up to 1 KB is one write unit, a transactional one two; item sizes are
//     rounded up to the next 1 KB. PutItem and UpdateItem bill the larger of the item before and
//     after, DeleteItem the deleted item; a conditional write whose condition fails still consumes
//     the units of the item as it is, at least one
//     (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/WorkingWithItems.html#WorkingWithItems.ConditionalUpdate).
//
// A read of an absent item, and a Query that reads nothing, are billed the minimum of one 4 KB
// read; the read-write page says so for items that do not exist and is silent on empty Query
// results, so they are counted the same, the higher of the two possibilities.

const (
	readUnitBytes  = 4 * 1024
	writeUnitBytes = 1024
)

// ReadUnits are the read request units of one read of an item of `bytes` bytes (0 for an absent
// item): strongly consistent or not. A transactional read is TransactionalReadUnits.
func ReadUnits(bytes int, consistent bool) float64 {
	units := float64(max(1, ceilDiv(bytes, readUnitBytes)))
	if !consistent {
		return units / 2
	}
	return units
}

// QueryReadUnits are the read request units of one Query or Scan call that read items of these
// sizes: their total, rounded up to 4 KB, as one read.
func QueryReadUnits(sizes []int, consistent bool) float64 {
	total := 0
	for _, s := range sizes {
		total += s
	}
	return ReadUnits(total, consistent)
}

// TransactionalReadUnits are the read request units of an item of `bytes` bytes read by
// TransactGetItems: twice a strongly consistent read.
func TransactionalReadUnits(bytes int) float64 { return 2 * ReadUnits(bytes, true) }

// WriteUnits are the write request units of one write whose billed item (the larger of before
// and after) has `bytes` bytes.
func WriteUnits(bytes int) float64 { return float64(max(1, ceilDiv(bytes, writeUnitBytes))) }

// TransactionalWriteUnits are the write request units of one action of TransactWriteItems: twice
// a standard write.
func TransactionalWriteUnits(bytes int) float64 { return 2 * WriteUnits(bytes) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// ItemSize is the size DynamoDB bills for an item in DynamoDB's JSON wire form ({"name": {"S":
// "value"}, ...}): the UTF-8 bytes of each attribute name plus the size of its value
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
//   - S: its UTF-8 bytes; B: its raw bytes (the wire form is base64);
//   - N: one byte per two significant digits, plus one (leading and trailing zeroes do not count);
//   - BOOL and NULL: one byte;
//   - SS, NS, BS: the sum of their elements' sizes;
//   - M and L: three bytes, plus one byte and the size of each element (a map's element also
//     counts its name).
func ItemSize(item map[string]json.RawMessage) (int, error) {
	n := 0
	for name, raw := range item {
		v, err := valueSize(raw)
		if err != nil {
			return 0, fmt.Errorf("attribute %q: %w", name, err)
		}
		n += len(name) + v
	}
	return n, nil
}

func valueSize(raw json.RawMessage) (int, error) {
	var av map[string]json.RawMessage
	if err := json.Unmarshal(raw, &av); err != nil || len(av) != 1 {
		return 0, fmt.Errorf("not an attribute value with one type")
	}
	for typ, v := range av {
		switch typ {
		case "S":
			var s string
			err := json.Unmarshal(v, &s)
			return len(s), err
		case "N":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return 0, err
			}
			return numberSize(s), nil
		case "B":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return 0, err
			}
			b, err := base64.StdEncoding.DecodeString(s)
			return len(b), err
		case "BOOL", "NULL":
			return 1, nil
		case "SS", "NS", "BS":
			var els []string
			if err := json.Unmarshal(v, &els); err != nil {
				return 0, err
			}
			n := 0
			for _, e := range els {
				switch typ {
				case "SS":
					n += len(e)
				case "NS":
					n += numberSize(e)
				case "BS":
					b, err := base64.StdEncoding.DecodeString(e)
					if err != nil {
						return 0, err
					}
					n += len(b)
				}
			}
			return n, nil
		case "L":
			var els []json.RawMessage
			if err := json.Unmarshal(v, &els); err != nil {
				return 0, err
			}
			n := 3
			for _, e := range els {
				s, err := valueSize(e)
				if err != nil {
					return 0, err
				}
				n += 1 + s
			}
			return n, nil
		case "M":
			var m map[string]json.RawMessage
			if err := json.Unmarshal(v, &m); err != nil {
				return 0, err
			}
			s, err := ItemSize(m)
			return 3 + len(m) + s, err
		default:
			return 0, fmt.Errorf("unknown attribute type %q", typ)
		}
	}
	return 0, nil
}

// numberSize is the size of a number: one byte per two significant digits, rounded up, plus one.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	mantissa, _, _ := strings.Cut(strings.ToLower(s), "e")
	digits := strings.Trim(strings.Replace(mantissa, ".", "", 1), "0")
	if digits == "" {
		return 1 // zero
	}
	return int(math.Ceil(float64(len(digits))/2)) + 1
}
