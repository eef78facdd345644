package results

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
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

// files are RejectedFiles' output by name, and which Files field each is recorded in.
func files(t *testing.T, fs []File) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range fs {
		var where Files
		f.Record(&where, "uri")
		switch {
		case where == Files{Rejected: "uri"}:
			out[f.Name] = string(f.Body)
		case where == Files{RejectedNotCSV: "uri"}:
			out[f.Name+" (not CSV)"] = string(f.Body)
		default:
			t.Errorf("%s: recorded as %+v, want one field", f.Name, where)
		}
	}
	return out
}

func TestRejectedFiles(t *testing.T) {
	split := []Rejection{
		{Line: 3, Record: 2, Error: "has 1 field, want 2", Raw: []byte("b")},
		{Line: 9, Record: 8, Error: "has 3 fields, want 2", Raw: []byte("h,h,h")},
	}
	reg1 := []Rejection{{Line: 5, Record: 4, Error: "the core system answered 409", Status: 409, Raw: []byte("d,4")}}
	reg2 := []Rejection{{Line: 11, Record: 10, Error: "the core system answered 422", Status: 422, Raw: []byte("j,10")}}
	stray := []Rejection{{Line: 7, Record: 6, Error: "a quoted field has a stray quote", Raw: []byte(`f,"6"x`)}}
	tests := []struct {
		name   string
		format string
		parts  [][]Rejection
		want   map[string]string
	}{
		{"no parts, no file", pipeline.FormatCSV, nil, map[string]string{}},
		{"empty parts, no file", pipeline.FormatCSV, [][]Rejection{{}, {}}, map[string]string{}},
		{"csv in record order whatever the parts' order", pipeline.FormatCSV, [][]Rejection{reg2, split, reg1}, map[string]string{RejectedCSV: "_line,_record,_error,name,n\n" +
			"3,2,\"has 1 field, want 2\",b\n" +
			"5,4,the core system answered 409,d,4\n" +
			"9,8,\"has 3 fields, want 2\",h,h,h\n" +
			"11,10,the core system answered 422,j,10\n"}},
		{"a record rejected by two overlapping ranges once", pipeline.FormatCSV, [][]Rejection{reg1, reg1},
			map[string]string{RejectedCSV: "_line,_record,_error,name,n\n5,4,the core system answered 409,d,4\n"}},
		{"a row that is not CSV goes to rejected.jsonl", pipeline.FormatCSV, [][]Rejection{split, stray}, map[string]string{
			RejectedCSV:                  "_line,_record,_error,name,n\n3,2,\"has 1 field, want 2\",b\n9,8,\"has 3 fields, want 2\",h,h,h\n",
			RejectedJSONL + " (not CSV)": `{"line":7,"record":6,"error":"a quoted field has a stray quote","raw":"f,\"6\"x"}` + "\n"}},
		{"only rows that are not CSV: no rejected.csv", pipeline.FormatCSV, [][]Rejection{stray}, map[string]string{
			RejectedJSONL + " (not CSV)": `{"line":7,"record":6,"error":"a quoted field has a stray quote","raw":"f,\"6\"x"}` + "\n"}},
		{"jsonl", pipeline.FormatJSONL, [][]Rejection{
			{{Line: 4, Record: 4, Error: "not an object", Raw: []byte(`[1]`)}},
			{{Line: 2, Record: 2, Error: "not JSON", Raw: []byte(`{"a":`)}},
		}, map[string]string{RejectedJSONL: `{"line":2,"record":2,"error":"not JSON","value":"{\"a\":"}` + "\n" +
			`{"line":4,"record":4,"error":"not an object","value":[1]}` + "\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var decoded [][]Rejection
			for _, p := range tt.parts {
				decoded = append(decoded, part(t, p...))
			}
			got := files(t, RejectedFiles(tt.format, Merge(decoded...), []byte("name,n"), ',', pipeline.EncodingUTF8))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// rejected.csv reads back by its own header with encoding/csv, whatever each record's field
// count: every row's first three columns are _line, _record and _error, and after the third
// delimiter comes the record's bytes exactly.
func TestRejectedCSVReadsBackByItsHeader(t *testing.T) {
	rs := []Rejection{
		{Line: 2, Record: 1, Error: "has 1 field, want 3", Raw: []byte("a")},
		{Line: 3, Record: 2, Error: "has 4 fields, want 3", Raw: []byte("a,b,c,d")},
		{Line: 4, Record: 3, Error: "field x, is empty", Raw: []byte(`"",b,"c ""quoted"""`)},
		{Line: 5, Record: 4, Error: "two lines", Raw: []byte("\"multi\r\nline\",b,c")},
		{Line: 7, Record: 5, Error: "empty", Raw: nil},
	}
	fs := RejectedFiles(pipeline.FormatCSV, rs, []byte("x,y,z"), ',', pipeline.EncodingUTF8)
	if len(fs) != 1 || fs[0].Name != RejectedCSV {
		t.Fatalf("got files %v, want rejected.csv alone", fs)
	}
	r := csv.NewReader(bytes.NewReader(fs[0].Body))
	r.FieldsPerRecord = -1
	all, err := r.ReadAll()
	if err != nil {
		t.Fatalf("rejected.csv does not read back: %v\n%s", err, fs[0].Body)
	}
	if !slices.Equal(all[0], []string{ColumnLine, ColumnRecord, ColumnError, "x", "y", "z"}) {
		t.Errorf("got header %q", all[0])
	}
	if len(all) != 1+len(rs) {
		t.Fatalf("got %d rows, want the header and %d", len(all), len(rs))
	}
	for i, want := range rs {
		got := all[i+1]
		if got[0] != strconv.FormatInt(want.Line, 10) || got[1] != strconv.FormatInt(want.Record, 10) || got[2] != want.Error {
			t.Errorf("row %d: got _line %s _record %s _error %q, want %d %d %q", i+1, got[0], got[1], got[2], want.Line, want.Record, want.Error)
		}
		var fields []string
		if len(want.Raw) > 0 {
			rr := csv.NewReader(bytes.NewReader(want.Raw))
			if fields, err = rr.Read(); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got[3:], fields) {
			t.Errorf("row %d: got the record's fields %q, want %q", i+1, got[3:], fields)
		}
	}
	// Byte for byte: after the three columns and a delimiter, the record's bytes, then "\n".
	for i, want := range rs {
		if len(want.Raw) > 0 && !bytes.Contains(fs[0].Body, append(append([]byte(","), want.Raw...), '\n')) {
			t.Errorf("row %d: got %q, want the record's bytes %q as they were after the columns", i+1, fs[0].Body, want.Raw)
		}
	}
}

func TestRejectedFilesCP932(t *testing.T) {
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
	stray := []Rejection{{Line: 4, Record: 3, Error: "引用符", Raw: enc("\"ソ\"ニー")}}
	got := files(t, RejectedFiles(pipeline.FormatCSV, Merge(part(t, split...), part(t, reg...), part(t, stray...)), header, ',', pipeline.EncodingCP932))
	want := map[string]string{
		RejectedCSV: string(enc("_line,_record,_error,氏名,住所\n")) +
			string(enc("2,1,重複しています,")) + string(enc("山田,\"東京,港区\"")) + "\n" +
			string(enc("3,2,列が足りません,")) + string(enc("ソニー表示")) + "\n",
		RejectedJSONL + " (not CSV)": `{"line":4,"record":3,"error":"引用符","rawBase64":"` + base64.StdEncoding.EncodeToString(enc("\"ソ\"ニー")) + `"}` + "\n",
	}
	if !reflect.DeepEqual(got, want) {
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

func TestCountsAfterHalt(t *testing.T) {
	rej := func(records ...int64) []Rejection {
		var rs []Rejection
		for _, r := range records {
			rs = append(rs, Rejection{Record: r})
		}
		return rs
	}
	rr := func(firstLast ...int64) []pipeline.RecordRange {
		var rs []pipeline.RecordRange
		for i := 0; i+1 < len(firstLast); i += 2 {
			rs = append(rs, pipeline.RecordRange{First: firstLast[i], Last: firstLast[i+1]})
		}
		return rs
	}
	tests := []struct {
		name       string
		records    int64
		rejected   []Rejection
		next       int64
		after      []pipeline.RecordRange
		want       Counts
		wantRanges []pipeline.RecordRange
	}{
		{"none after the halt: CountsOf's", 10, rej(3), 6, nil, Counts{10, 4, 1, 5}, nil},
		{"registered after the halt count as registered", 10, nil, 4, rr(6, 7, 9, 9), Counts{10, 6, 0, 4}, rr(6, 7, 9, 9)},
		{"the record right after the halt", 10, nil, 4, rr(5, 5), Counts{10, 4, 0, 6}, rr(5, 5)},
		{"up to the file's last record", 10, nil, 4, rr(8, 10), Counts{10, 6, 0, 4}, rr(8, 10)},
		{"halted at the first record", 10, nil, 1, rr(2, 10), Counts{10, 9, 0, 1}, rr(2, 10)},
		{"a rejected record in a range is rejected, and cut out", 10, rej(7), 4, rr(6, 8), Counts{10, 5, 1, 4}, rr(6, 6, 8, 8)},
		{"rejections at a range's ends", 10, rej(2, 6, 8), 4, rr(6, 8), Counts{10, 3, 3, 4}, rr(7, 7)},
		{"a range of one rejected record is gone", 10, rej(6), 4, rr(6, 6), Counts{10, 3, 1, 6}, nil},
		{"clipped to the file", 10, nil, 4, rr(9, 12), Counts{10, 5, 0, 5}, rr(9, 10)},
		{"the halted record itself is never registered", 10, nil, 4, rr(4, 5), Counts{10, 4, 0, 6}, rr(5, 5)},
		{"a success: ranges before next are in registered already", 10, nil, 11, rr(5, 6), Counts{10, 10, 0, 0}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ranges := CountsAfterHalt(tt.records, tt.rejected, tt.next, tt.after)
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if !reflect.DeepEqual(ranges, tt.wantRanges) {
				t.Errorf("got ranges %+v, want %+v", ranges, tt.wantRanges)
			}
			if got.Registered+got.Rejected+got.Unprocessed != got.Records {
				t.Errorf("got registered %d + rejected %d + unprocessed %d, want records %d", got.Registered, got.Rejected, got.Unprocessed, got.Records)
			}
			var in int64
			for _, r := range ranges {
				in += r.Last - r.First + 1
			}
			if base := CountsOf(tt.records, tt.rejected, tt.next); got.Registered != base.Registered+in {
				t.Errorf("got registered %d, want CountsOf's %d + %d in the ranges", got.Registered, base.Registered, in)
			}
		})
	}
}

// TestSummaryRegisteredAfterHalt: the ranges read as {"first":…,"last":…} beside the counts, and
// a summary without them (file order, a success) has no such field, byte for byte as before.
func TestSummaryRegisteredAfterHalt(t *testing.T) {
	tests := []struct {
		name    string
		ranges  []pipeline.RecordRange
		want    string
		wantNot string
	}{
		{"keyed, halted", []pipeline.RecordRange{{First: 6, Last: 7}, {First: 9, Last: 9}},
			`"unprocessed":0,"registeredAfterHalt":[{"first":6,"last":7},{"first":9,"last":9}],"onInvalidRecord"`, ""},
		{"none", nil, `"unprocessed":0,"onInvalidRecord"`, "registeredAfterHalt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(Summary{RegisteredAfterHalt: tt.ranges})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tt.want) || tt.wantNot != "" && strings.Contains(string(b), tt.wantNot) {
				t.Errorf("got %s, want %s in it and no %q", b, tt.want, tt.wantNot)
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
