package results

import (
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/pipeline"
)

func part(t *testing.T, rs ...Rejection) []Rejection {
	t.Helper()
	var b []byte
	for _, r := range rs {
		b = appendPartLine(t, b, r)
	}
	got, err := DecodePart(b)
	if err != nil {
		t.Fatalf("DecodePart: %v", err)
	}
	return got
}

func TestRejectedFile(t *testing.T) {
	split := []Rejection{
		{Line: 3, Record: 2, Error: "has 1 field, want 2", Raw: []byte("b")},
		{Line: 9, Record: 8, Error: "has 3 fields, want 2", Raw: []byte("h,h,h")},
	}
	reg1 := []Rejection{{Line: 5, Record: 4, Error: "the core system answered 409", Status: 409, Raw: []byte("d,4")}}
	reg2 := []Rejection{{Line: 11, Record: 10, Error: "the core system answered 422", Status: 422, Raw: []byte("j,10")}}
	tests := []struct {
		name   string
		format string
		parts  [][]Rejection
		want   string
	}{
		{"no parts, no file", pipeline.FormatCSV, nil, ""},
		{"empty parts, no file", pipeline.FormatCSV, [][]Rejection{{}, {}}, ""},
		{"csv in record order whatever the parts' order", pipeline.FormatCSV, [][]Rejection{reg2, split, reg1},
			"name,n,_line,_record,_error\n" +
				"b,3,2,\"has 1 field, want 2\"\n" +
				"d,4,5,4,the core system answered 409\n" +
				"h,h,h,9,8,\"has 3 fields, want 2\"\n" +
				"j,10,11,10,the core system answered 422\n"},
		{"a record rejected by two overlapping ranges once", pipeline.FormatCSV, [][]Rejection{reg1, reg1},
			"name,n,_line,_record,_error\nd,4,5,4,the core system answered 409\n"},
		{"jsonl", pipeline.FormatJSONL, [][]Rejection{
			{{Line: 4, Record: 4, Error: "not an object", Raw: []byte(`[1]`)}},
			{{Line: 2, Record: 2, Error: "not JSON", Raw: []byte(`{"a":`)}},
		}, `{"line":2,"record":2,"error":"not JSON","value":"{\"a\":"}` + "\n" +
			`{"line":4,"record":4,"error":"not an object","value":[1]}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var decoded [][]Rejection
			for _, p := range tt.parts {
				decoded = append(decoded, part(t, p...))
			}
			got := string(RejectedFile(tt.format, Merge(decoded...), []byte("name,n"), ',', pipeline.EncodingUTF8))
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRejectedFileCP932(t *testing.T) {
	enc := func(s string) []byte {
		b, err := japanese.ShiftJIS.NewEncoder().Bytes([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	header := enc("氏名,住所")
	// "ソ" (0x83 0x5C) and "表" (0x95 0x5C) end in the byte of "\": a round trip through UTF-8
	// or a CSV re-quote would change them; the rows must come back as they were.
	split := []Rejection{{Line: 3, Record: 2, Error: "列が足りません", Raw: enc("ソニー表示")}}
	reg := []Rejection{{Line: 2, Record: 1, Error: "重複しています", Status: 409, Raw: enc("山田,\"東京,港区\"")}}
	got := RejectedFile(pipeline.FormatCSV, Merge(part(t, split...), part(t, reg...)), header, ',', pipeline.EncodingCP932)
	want := string(enc("氏名,住所,_line,_record,_error\n")) +
		string(enc("山田,\"東京,港区\"")) + string(enc(",2,1,重複しています\n")) +
		string(enc("ソニー表示")) + string(enc(",3,2,列が足りません\n"))
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestDecodePartRejectsGarbage(t *testing.T) {
	_, err := DecodePart([]byte("{\"record\":1,\"raw\":\"YQ==\"}\nsecret,data\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") || strings.Contains(err.Error(), "secret") {
		t.Errorf("got %v, want an error naming line 2 without its contents", err)
	}
}

func TestCountsOf(t *testing.T) {
	rej := func(records ...int64) []Rejection {
		var rs []Rejection
		for _, r := range records {
			rs = append(rs, Rejection{Record: r})
		}
		return rs
	}
	tests := []struct {
		name     string
		records  int64
		rejected []Rejection
		next     int64
		want     Counts
	}{
		{"all registered", 10, nil, 11, Counts{10, 10, 0, 0}},
		{"all sent, two rejected", 10, rej(3, 7), 11, Counts{10, 8, 2, 0}},
		{"halted at record 6", 10, rej(3), 6, Counts{10, 4, 1, 5}},
		{"halted at 6, an invalid record after it is rejected, not unprocessed", 10, rej(3, 8), 6, Counts{10, 4, 2, 4}},
		{"nothing sent", 10, nil, 1, Counts{10, 0, 0, 10}},
		{"next past the end is the end", 10, nil, 99, Counts{10, 10, 0, 0}},
		{"empty file", 0, nil, 1, Counts{0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CountsOf(tt.records, tt.rejected, tt.next)
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got.Registered+got.Rejected+got.Unprocessed != got.Records {
				t.Errorf("got registered %d + rejected %d + unprocessed %d, want records %d", got.Registered, got.Rejected, got.Unprocessed, got.Records)
			}
		})
	}
}

func appendPartLine(t *testing.T, b []byte, r Rejection) []byte {
	t.Helper()
	line, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return append(append(b, line...), '\n')
}

func TestMerge(t *testing.T) {
	first := Rejection{Line: 5, Record: 4, Error: "the core system answered 503", Status: 503, Raw: []byte("d,4")}
	later := Rejection{Line: 5, Record: 4, Error: "the core system answered 409", Status: 409, Raw: []byte("d,4")}
	other := Rejection{Line: 3, Record: 2, Error: "has 1 field, want 2", Raw: []byte("b")}
	tests := []struct {
		name  string
		parts [][]Rejection
		want  []Rejection
	}{
		{"one record rejected by two parts: the later part's", [][]Rejection{{first}, {later}}, []Rejection{later}},
		{"the later part's whatever the records around it", [][]Rejection{{other, first}, {later}}, []Rejection{other, later}},
		{"the order given decides, not the error", [][]Rejection{{later}, {first}}, []Rejection{first}},
		{"three parts: the last one's", [][]Rejection{{first}, {later}, {first}}, []Rejection{first}},
		{"no overlap: all, in record order", [][]Rejection{{later}, {other}}, []Rejection{other, later}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Merge(tt.parts...)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d rejections %+v, want %d %+v", len(got), got, len(tt.want), tt.want)
			}
			for i := range got {
				if got[i].Record != tt.want[i].Record || got[i].Error != tt.want[i].Error || got[i].Status != tt.want[i].Status {
					t.Errorf("rejection %d: got record %d %q (%d), want record %d %q (%d)", i, got[i].Record, got[i].Error, got[i].Status, tt.want[i].Record, tt.want[i].Error, tt.want[i].Status)
				}
			}
		})
	}
}
