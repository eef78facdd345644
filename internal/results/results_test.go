package results

import (
	"encoding/json"
	"testing"

	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/pipeline"
)

func TestAppendCSV(t *testing.T) {
	tests := []struct {
		name      string
		r         Rejection
		delimiter rune
		encoding  string
		want      string // "": not valid CSV, nothing appended
	}{
		{"plain", Rejection{Line: 3, Record: 2, Error: "has 2 fields, want 3", Raw: []byte(`a,b`)}, ',', pipeline.EncodingUTF8, "3,2,\"has 2 fields, want 3\",a,b\n"},
		{"a short row keeps _line first", Rejection{Line: 14, Record: 13, Error: "has 1 field, want 2", Raw: []byte(`13`)}, ',', pipeline.EncodingUTF8, "14,13,\"has 1 field, want 2\",13\n"},
		{"quoted raw kept byte for byte", Rejection{Line: 4, Record: 3, Error: `field "x" is empty`, Raw: []byte("\"a\r\nb\",c")}, ',', pipeline.EncodingUTF8, "4,3,\"field \"\"x\"\" is empty\",\"a\r\nb\",c\n"},
		{"semicolon", Rejection{Line: 2, Record: 1, Error: "a; b", Raw: []byte("x;y")}, ';', pipeline.EncodingUTF8, "2;1;\"a; b\";x;y\n"},
		{"an empty record: the three columns", Rejection{Line: 2, Record: 1, Error: "empty", Raw: nil}, ',', pipeline.EncodingUTF8, "2,1,empty\n"},
		{"a stray quote is not CSV", Rejection{Line: 32, Record: 31, Error: "stray quote", Raw: []byte(`31,"x"y`)}, ',', pipeline.EncodingUTF8, ""},
		{"a quote never closed is not CSV", Rejection{Line: 5, Record: 4, Error: "missing quote", Raw: []byte(`4,"abc`)}, ',', pipeline.EncodingUTF8, ""},
		{"bytes not UTF-8 are not CSV text", Rejection{Line: 5, Record: 4, Error: "not UTF-8", Raw: []byte{'4', ',', 0xff}}, ',', pipeline.EncodingUTF8, ""},
		{"bytes CP932 cannot decode are not CSV text", Rejection{Line: 5, Record: 4, Error: "not CP932", Raw: []byte{'4', ',', 0x85, 0x40}}, ',', pipeline.EncodingCP932, ""},
		{"a line end outside quotes would be two rows", Rejection{Line: 5, Record: 4, Error: "x", Raw: []byte("a\nb")}, ',', pipeline.EncodingUTF8, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := AppendCSV([]byte("before\n"), tt.r, tt.delimiter, tt.encoding)
			if string(got) != "before\n"+tt.want || ok != (tt.want != "") {
				t.Errorf("got %q (%v), want %q (%v)", got, ok, "before\n"+tt.want, tt.want != "")
			}
		})
	}
}

func TestAppendCSVCP932(t *testing.T) {
	raw, _ := japanese.ShiftJIS.NewEncoder().Bytes([]byte("山田,太郎"))
	got, ok := AppendCSV(nil, Rejection{Line: 2, Record: 1, Error: "列が足りません", Raw: raw}, ',', pipeline.EncodingCP932)
	want, _ := japanese.ShiftJIS.NewEncoder().Bytes([]byte("2,1,列が足りません,山田,太郎\n"))
	if !ok || string(got) != string(want) {
		t.Errorf("got %q, want %q: the row in CP932, the record's bytes unchanged", got, want)
	}
	// A character CP932 cannot hold becomes "?" rather than losing the row.
	got, ok = AppendCSV(nil, Rejection{Line: 2, Record: 1, Error: "bad 😀", Raw: raw}, ',', pipeline.EncodingCP932)
	want = append([]byte("2,1,bad ?,"), raw...)
	if want = append(want, '\n'); !ok || string(got) != string(want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if h := string(CSVHeader(nil, []byte("a,b"), ',', pipeline.EncodingCP932)); h != "_line,_record,_error,a,b\n" {
		t.Errorf("got header %q", h)
	}
	if h := string(CSVHeader(nil, []byte("a|b"), '|', pipeline.EncodingUTF8)); h != "_line|_record|_error|a|b\n" {
		t.Errorf("got header %q", h)
	}
}

func TestAppendNotCSV(t *testing.T) {
	cp932, _ := japanese.ShiftJIS.NewEncoder().Bytes([]byte(`"ソニー`))
	tests := []struct {
		name     string
		r        Rejection
		encoding string
		want     string
	}{
		{"UTF-8: the bytes as a string", Rejection{Line: 32, Record: 31, Error: "stray quote", Raw: []byte(`31,"x"y`)}, pipeline.EncodingUTF8,
			`{"line":32,"record":31,"error":"stray quote","raw":"31,\"x\"y"}`},
		{"not UTF-8: base64", Rejection{Line: 5, Record: 4, Error: "not UTF-8", Raw: []byte{'4', ',', 0xff}}, pipeline.EncodingUTF8,
			`{"line":5,"record":4,"error":"not UTF-8","rawBase64":"NCz/"}`},
		{"CP932 beyond ASCII: base64", Rejection{Line: 3, Record: 2, Error: "missing quote", Raw: cp932}, pipeline.EncodingCP932,
			`{"line":3,"record":2,"error":"missing quote","rawBase64":"IoNcg2qBWw=="}`},
		{"CP932 in ASCII: a string", Rejection{Line: 3, Record: 2, Error: "missing quote", Status: 0, Raw: []byte(`"abc`)}, pipeline.EncodingCP932,
			`{"line":3,"record":2,"error":"missing quote","raw":"\"abc"}`},
		{"a core system's status", Rejection{Line: 3, Record: 2, Error: "core system answered 422", Status: 422, Raw: []byte(`"abc`)}, pipeline.EncodingUTF8,
			`{"line":3,"record":2,"error":"core system answered 422","status":422,"raw":"\"abc"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendNotCSV(nil, tt.r, tt.encoding)
			if string(got) != tt.want+"\n" {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			// Either field gives back the original bytes exactly.
			var l struct {
				Raw       *string
				RawBase64 []byte
			}
			if err := json.Unmarshal(got, &l); err != nil {
				t.Fatal(err)
			}
			back := l.RawBase64
			if l.Raw != nil {
				back = []byte(*l.Raw)
			}
			if string(back) != string(tt.r.Raw) || (l.Raw != nil) == (l.RawBase64 != nil) {
				t.Errorf("got raw back %q (raw %v, base64 %v), want %q from exactly one field", back, l.Raw != nil, l.RawBase64 != nil, tt.r.Raw)
			}
		})
	}
}

func TestAppendJSONL(t *testing.T) {
	tests := []struct {
		name string
		r    Rejection
		want string
	}{
		{"an object", Rejection{Line: 2, Record: 2, Error: "field id is empty", Raw: []byte(`{"id": ""}`)}, `{"line":2,"record":2,"error":"field id is empty","value":{"id":""}}`},
		{"a malformed line is a string", Rejection{Line: 5, Record: 4, Error: "not JSON", Raw: []byte(`{"id":`)}, `{"line":5,"record":4,"error":"not JSON","value":"{\"id\":"}`},
		{"a core system's status", Rejection{Line: 1, Record: 1, Error: "core system answered 422", Status: 422, Raw: []byte(`{"a":1}`)}, `{"line":1,"record":1,"error":"core system answered 422","status":422,"value":{"a":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendJSONL(nil, tt.r)
			if string(got) != tt.want+"\n" {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("got invalid JSON %s", got)
			}
		})
	}
}

func TestKeys(t *testing.T) {
	if got, want := Key(pipeline.SiloOwner("acme"), "exec-1", SummaryFile), "results/acme/exec-1/summary.json"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := Dir(pipeline.SiloOwner("acme"), "exec-1"), "results/acme/exec-1/"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if RejectedName(pipeline.FormatJSONL) != RejectedJSONL || RejectedName(pipeline.FormatCSV) != RejectedCSV {
		t.Error("rejected names")
	}
}
