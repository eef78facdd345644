package records

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Keyer gives a record's key under key order (pipeline.RecordOrderKey): the values of the
// tenant's keyColumns, CSV columns by header name or JSON Lines fields of the record's object.
// Records of one key are sent in file order, one at a time; records of different keys may be in
// flight together.
type Keyer struct {
	cols []string
	idx  []int // CSV: each column's index in the header; nil for JSON Lines
}

// NewKeyer returns the Keyer of cols for a file with header (nil for JSON Lines). A CSV column
// that is not in the header is an error naming it and the keyColumns field.
func NewKeyer(cols, header []string) (*Keyer, error) {
	if len(cols) == 0 {
		return nil, fmt.Errorf("keyColumns is empty")
	}
	k := &Keyer{cols: slices.Clone(cols)}
	if header == nil {
		return k, nil
	}
	for _, c := range cols {
		i := slices.Index(header, c)
		if i < 0 {
			return nil, fmt.Errorf("keyColumns: column %q is not in the file's header (%s)", c, quoteNames(header, 10))
		}
		k.idx = append(k.idx, i)
	}
	return k, nil
}

// Key returns the record's key: its keyColumns' values, each quoted, joined by commas, so that two
// keys are equal exactly when every value is. A record whose key is empty (every value empty or
// missing), or whose JSON field is not a string, number or boolean, is an error naming the
// record, never its values.
func (k *Keyer) Key(r Record) (string, error) {
	vals := make([]string, len(k.cols))
	if k.idx != nil {
		for j, i := range k.idx {
			if i >= len(r.Fields) {
				return "", fmt.Errorf("record %d has no column %q of keyColumns", r.Number, k.cols[j])
			}
			vals[j] = r.Fields[i]
		}
	} else {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(r.JSON, &obj); err != nil {
			return "", fmt.Errorf("record %d is not a JSON object, so it has no keyColumns fields", r.Number)
		}
		for j, c := range k.cols {
			v, ok := obj[c]
			if !ok {
				continue // an absent field is an empty value
			}
			s, err := scalar(v)
			if err != nil {
				return "", fmt.Errorf("record %d: keyColumns field %q %v", r.Number, c, err)
			}
			vals[j] = s
		}
	}
	empty := true
	var b strings.Builder
	for j, v := range vals {
		if v != "" {
			empty = false
		}
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(v))
	}
	if empty {
		return "", fmt.Errorf("record %d has an empty key (keyColumns %s)", r.Number, quoteNames(k.cols, len(k.cols)))
	}
	return b.String(), nil
}

// keyer is the Keyer of f's Keys for a file with header (nil for JSON Lines); nil without keys.
func (f Format) keyer(header []string) (*Keyer, error) {
	if len(f.Keys) == 0 {
		return nil, nil
	}
	return NewKeyer(f.Keys, header)
}

// scalar is a JSON value as key text: a string's contents, a number's or boolean's literal, "" for
// null; an object or array is an error.
func scalar(v json.RawMessage) (string, error) {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || string(v) == "null":
		return "", nil
	case v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("is not a valid JSON string")
		}
		return s, nil
	case v[0] == '{' || v[0] == '[':
		return "", fmt.Errorf("is an object or array, not a string, number or boolean")
	}
	return string(v), nil
}

func quoteNames(names []string, most int) string {
	q := make([]string, 0, min(len(names), most))
	for _, n := range names[:min(len(names), most)] {
		q = append(q, strconv.Quote(n))
	}
	s := strings.Join(q, ", ")
	if len(names) > most {
		s += fmt.Sprintf(", and %d more", len(names)-most)
	}
	return s
}
