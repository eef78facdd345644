package records

import (
	"strings"
	"testing"

	"golang.org/x/text/encoding/japanese"
)

func cp932s(t *testing.T, s string) string {
	t.Helper()
	b, err := japanese.ShiftJIS.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ParseRawRange gives each record its bytes as they are in the range, in the file's encoding, and
// the line of the range it starts on: blank lines and line endings are not the record's.
func TestParseRawRange(t *testing.T) {
	type want struct {
		raw  string
		line int64
	}
	for _, tc := range []struct {
		name   string
		kind   string
		enc    string
		header []string
		in     string
		want   []want
	}{
		{"csv", "csv", "utf-8", []string{"a", "b"}, "1,x\n2,y\n", []want{{"1,x", 1}, {"2,y", 2}}},
		{"csv crlf, no final line end", "csv", "utf-8", []string{"a", "b"}, "1,x\r\n2,y", []want{{"1,x", 1}, {"2,y", 2}}},
		{"csv multi-line field and blank lines", "csv", "utf-8", []string{"a", "b"},
			"1,\"x\ny\"\n\n\r\n2,\"q\"\"\"\n", []want{{"1,\"x\ny\"", 1}, {"2,\"q\"\"\"", 5}}},
		{"csv cp932", "csv", "cp932", []string{"a", "b"}, cp932s(t, "1,表\n2,ソ\n"), []want{{cp932s(t, "1,表"), 1}, {cp932s(t, "2,ソ"), 2}}},
		{"jsonl blank lines", "jsonl", "utf-8", nil, "{\"a\":1}\n  \n\n{\"a\": 2}\r\n", []want{{`{"a":1}`, 1}, {`{"a": 2}`, 4}}},
		{"jsonl cp932", "jsonl", "cp932", nil, cp932s(t, "{\"a\":\"表\"}\n{\"a\":\"ソ\"}"), []want{{cp932s(t, `{"a":"表"}`), 1}, {cp932s(t, `{"a":"ソ"}`), 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mustFormat(t, tc.kind, tc.enc, "", 1024)
			recs, err := ParseRawRange([]byte(tc.in), f, tc.header, 7, 10)
			if err != nil {
				t.Fatalf("ParseRawRange: %v", err)
			}
			if len(recs) != len(tc.want) {
				t.Fatalf("got %d records, want %d", len(recs), len(tc.want))
			}
			for i, r := range recs {
				if string(r.Raw) != tc.want[i].raw || r.Line != tc.want[i].line || r.Number != int64(7+i) {
					t.Errorf("record %d: got %q line %d number %d, want %q line %d number %d", i, r.Raw, r.Line, r.Number, tc.want[i].raw, tc.want[i].line, 7+i)
				}
			}
			// The same records as ParseRange, which keeps no raw bytes.
			plain, err := ParseRange(strings.NewReader(tc.in), f, tc.header, 7, 10)
			if err != nil || len(plain) != len(recs) {
				t.Fatalf("ParseRange: got %d records (%v), want %d", len(plain), err, len(recs))
			}
			for i := range plain {
				if plain[i].Raw != nil || plain[i].Line != 0 {
					t.Errorf("ParseRange record %d: got raw %q line %d, want none", i, plain[i].Raw, plain[i].Line)
				}
			}
		})
	}
}
