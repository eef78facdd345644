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
		want      string
	}{
		{"plain", Rejection{Line: 3, Record: 2, Error: "has 2 fields, want 3", Raw: []byte(`a,b`)}, ',', pipeline.EncodingUTF8, "a,b,3,2,\"has 2 fields, want 3\"\n"},
		{"quoted raw kept byte for byte", Rejection{Line: 4, Record: 3, Error: `field "x" is empty`, Raw: []byte("\"a\r\nb\",c")}, ',', pipeline.EncodingUTF8, "\"a\r\nb\",c,4,3,\"field \"\"x\"\" is empty\"\n"},
		{"semicolon", Rejection{Line: 2, Record: 1, Error: "a; b", Raw: []byte("x;y")}, ';', pipeline.EncodingUTF8, "x;y;2;1;\"a; b\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendCSV(nil, tt.r, tt.delimiter, tt.encoding)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAppendCSVCP932(t *testing.T) {
	raw, _ := japanese.ShiftJIS.NewEncoder().Bytes([]byte("山田,太郎"))
	got := AppendCSV(nil, Rejection{Line: 2, Record: 1, Error: "列が足りません", Raw: raw}, ',', pipeline.EncodingCP932)
	want, _ := japanese.ShiftJIS.NewEncoder().Bytes([]byte("山田,太郎,2,1,列が足りません\n"))
	if string(got) != string(want) {
		t.Errorf("got %q, want %q: the row in CP932, the record's bytes unchanged", got, want)
	}
	// A character CP932 cannot hold becomes "?" rather than losing the row.
	got = AppendCSV(nil, Rejection{Line: 2, Record: 1, Error: "bad 😀", Raw: raw}, ',', pipeline.EncodingCP932)
	want = append(append([]byte{}, raw...), []byte(",2,1,bad ?\n")...)
	if string(got) != string(want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if h := string(CSVHeader(nil, []byte("a,b"), ',', pipeline.EncodingCP932)); h != "a,b,_line,_record,_error\n" {
		t.Errorf("got header %q", h)
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
	if got, want := Key("acme", "exec-1", SummaryFile), "results/acme/exec-1/summary.json"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := Dir("acme", "exec-1"), "results/acme/exec-1/"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if RejectedName(pipeline.FormatJSONL) != RejectedJSONL || RejectedName(pipeline.FormatCSV) != RejectedCSV {
		t.Error("rejected names")
	}
}
