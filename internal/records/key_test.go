package records

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestKeyer(t *testing.T) {
	header := []string{"id", "customer", "region", "amount"}
	csvRec := func(n int64, f ...string) Record { return Record{Number: n, Fields: f} }
	jsonRec := func(n int64, s string) Record { return Record{Number: n, JSON: json.RawMessage(s)} }
	for _, c := range []struct {
		name    string
		cols    []string
		header  []string
		rec     Record
		want    string
		wantErr string
	}{
		{"csv, one column", []string{"customer"}, header, csvRec(1, "1", "acme", "eu", "9"), `"acme"`, ""},
		{"csv, two columns in their order", []string{"region", "customer"}, header, csvRec(2, "1", "acme", "eu", "9"), `"eu","acme"`, ""},
		{"csv, one of two empty", []string{"customer", "region"}, header, csvRec(3, "1", "acme", "", "9"), `"acme",""`, ""},
		{"csv, a comma in a value stays one value", []string{"customer", "region"}, header, csvRec(4, "1", `a","b`, "", "9"), `"a\",\"b",""`, ""},
		{"csv, empty key", []string{"customer"}, header, csvRec(5, "1", "", "eu", "9"), "", "record 5 has an empty key"},
		{"jsonl, a string", []string{"customer"}, nil, jsonRec(6, `{"customer":"acme","n":1}`), `"acme"`, ""},
		{"jsonl, a number", []string{"n"}, nil, jsonRec(7, `{"customer":"acme","n":12.5}`), `"12.5"`, ""},
		{"jsonl, absent field", []string{"customer"}, nil, jsonRec(8, `{"n":1}`), "", "record 8 has an empty key"},
		{"jsonl, null", []string{"customer"}, nil, jsonRec(9, `{"customer":null}`), "", "record 9 has an empty key"},
		{"jsonl, an object", []string{"customer"}, nil, jsonRec(10, `{"customer":{"id":1}}`), "", `record 10: keyColumns field "customer" is an object or array`},
	} {
		k, err := NewKeyer(c.cols, c.header)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := k.Key(c.rec)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: got %q, %v; want an error containing %q", c.name, got, err, c.wantErr)
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestKeyerUnknownColumn(t *testing.T) {
	_, err := NewKeyer([]string{"customer", "shop"}, []string{"id", "customer"})
	if err == nil || !strings.Contains(err.Error(), `keyColumns: column "shop" is not in the file's header ("id", "customer")`) {
		t.Errorf("got %v", err)
	}
	if _, err := NewKeyer(nil, nil); err == nil {
		t.Error("no columns: got no error")
	}
}
