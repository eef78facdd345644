package records

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/pipeline"
)

func mustFormat(t testing.TB, kind, encoding, delim string, maxField int) Format {
	t.Helper()
	f, err := FormatOf(pipeline.Tenant{Tenant: spec.Tenant{Format: kind, Encoding: encoding, Delimiter: delim, MaxFieldBytes: maxField}})
	if err != nil {
		t.Fatalf("FormatOf: %v", err)
	}
	return f
}

// chunked is a file split and parsed back chunk by chunk, the way Split and Register see it.
type chunked struct {
	sum     Summary
	offsets []int64
	chunks  [][]Record
}

func splitAndParse(t testing.TB, data []byte, f Format, chunkSize int) (chunked, error) {
	t.Helper()
	var c chunked
	sum, err := Split(bytes.NewReader(data), f, chunkSize, func(off int64) error {
		c.offsets = append(c.offsets, off)
		return nil
	})
	if err != nil {
		return c, err
	}
	c.sum = sum
	if got, want := len(c.offsets), sum.Chunks+1; got != want {
		t.Fatalf("got %d boundaries, want %d", got, want)
	}
	for i := 0; i < sum.Chunks; i++ {
		start, end := c.offsets[i], c.offsets[i+1]
		if start > end || end > int64(len(data)) {
			t.Fatalf("chunk %d: got range [%d,%d) in a file of %d bytes", i, start, end, len(data))
		}
		req := pipeline.ChunkRequest{Tenant: pipeline.Tenant{Tenant: spec.Tenant{ChunkSize: chunkSize}}, Records: sum.Records, Chunk: i}
		recs, err := ParseRange(bytes.NewReader(data[start:end]), f, sum.Header, req.FirstRecord(), req.RecordCount())
		if err != nil {
			t.Fatalf("chunk %d [%d,%d): ParseRange: %v", i, start, end, err)
		}
		if got, want := int64(len(recs)), req.RecordCount(); got != want {
			t.Fatalf("chunk %d: got %d records, want %d", i, got, want)
		}
		c.chunks = append(c.chunks, recs)
	}
	return c, nil
}

// whole parses a file in one go with encoding/csv or line by line, independently of Split's
// offsets: the reference the chunks must add up to.
func whole(t testing.TB, data []byte, f Format) (header []string, recs [][]string) {
	t.Helper()
	if f.Encoding == pipeline.EncodingCP932 {
		var err error
		if data, err = japanese.ShiftJIS.NewDecoder().Bytes(data); err != nil {
			t.Fatalf("decode: %v", err)
		}
	} else {
		data = bytes.TrimPrefix(data, utf8BOM)
	}
	if f.Kind == pipeline.FormatJSONL {
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSuffix(line, "\r")
			if strings.Trim(line, " \t\r") == "" {
				continue
			}
			recs = append(recs, []string{line})
		}
		return nil, recs
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comma = f.Delimiter
	all, err := cr.ReadAll()
	if err != nil {
		t.Fatalf("reference parse of a file Split accepted: %v", err)
	}
	if len(all) == 0 {
		return nil, nil
	}
	return all[0], all[1:]
}

// checkTooLong asserts that a file Split rejected as holding a record too long to be valid does
// hold a field over the limit, whenever a whole-file parse reads it and its header has at most the
// 16 fields Split bounds a header by. Blank lines, which are not records, must never cause it.
func checkTooLong(t testing.TB, data []byte, f Format) {
	t.Helper()
	if f.Encoding == pipeline.EncodingCP932 {
		var err error
		if data, err = japanese.ShiftJIS.NewDecoder().Bytes(data); err != nil {
			return
		}
	} else {
		data = bytes.TrimPrefix(data, utf8BOM)
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comma = f.Delimiter
	all, err := cr.ReadAll()
	if err != nil || len(all) == 0 || len(all[0]) > 16 {
		return
	}
	for _, rec := range all {
		for _, v := range rec {
			if len(v) > f.MaxFieldBytes {
				return
			}
		}
	}
	t.Fatalf("Split rejected a record as too long, but every field is within %d bytes", f.MaxFieldBytes)
}

// checkRoundTrip asserts that the chunks' records, concatenated, are the whole file's records:
// none lost, duplicated or reordered, numbered 1… in file order, every chunk but the last full.
func checkRoundTrip(t testing.TB, data []byte, f Format, chunkSize int) {
	t.Helper()
	checkLines(t, data, f, chunkSize)
	c, err := splitAndParse(t, data, f, chunkSize)
	var fe *Error
	if errors.As(err, &fe) {
		if strings.HasPrefix(fe.Reason, "record is longer") {
			checkTooLong(t, data, f)
		}
		return // an invalid file; the validation tests pin which
	}
	if err != nil {
		t.Fatalf("Split: %v", err)
	}
	header, want := whole(t, data, f)
	if !reflect.DeepEqual(c.sum.Header, header) {
		t.Fatalf("got header %q, want %q", c.sum.Header, header)
	}
	var got [][]string
	for i, chunk := range c.chunks {
		if i < len(c.chunks)-1 && len(chunk) != chunkSize {
			t.Fatalf("chunk %d: got %d records, want a full chunk of %d", i, len(chunk), chunkSize)
		}
		for _, r := range chunk {
			if r.Number != int64(len(got))+1 {
				t.Fatalf("got record number %d, want %d", r.Number, len(got)+1)
			}
			if f.Kind == pipeline.FormatJSONL {
				got = append(got, []string{string(r.JSON)})
			} else {
				got = append(got, r.Fields)
			}
			for _, v := range r.Fields {
				if len(v) > f.MaxFieldBytes {
					t.Fatalf("record %d: got a field of %d bytes accepted, over the %d-byte limit", r.Number, len(v), f.MaxFieldBytes)
				}
			}
			if len(r.JSON) > f.MaxFieldBytes {
				t.Fatalf("record %d: got a line of %d bytes accepted, over the %d-byte limit", r.Number, len(r.JSON), f.MaxFieldBytes)
			}
		}
	}
	if int64(len(got)) != c.sum.Records || len(want) != len(got) {
		t.Fatalf("got %d records from chunks, Split counted %d, whole-file parse %d", len(got), c.sum.Records, len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d: chunks and whole-file parse differ", i+1)
		}
	}
}

func TestFixtures(t *testing.T) {
	tests := []struct {
		file, kind, encoding, delim string
		wantHeader                  []string
		want                        [][]string // CSV values or one JSON object per record
	}{
		{"cp932.csv", "csv", "cp932", "", []string{"番号", "品名", "数量", "備考"}, [][]string{
			{"1", "丸数字①", "10", "～波ダッシュ～"},
			{"2", "面積㎡", "2,5", `"引用"付き`},
			{"3", `ソ\表`, "3", "改行\nあり"},
			{"4", "ポ|ン", "4", "髙﨑"},
		}},
		{"cp932_pipe.csv", "csv", "cp932", "|", []string{"番号", "品名", "数量", "備考"}, [][]string{
			{"1", "丸数字①", "10", "～波ダッシュ～"},
			{"2", "面積㎡", "2,5", `"引用"付き`},
			{"3", `ソ\表`, "3", "改行\nあり"},
			{"4", "ポ|ン", "4", "髙﨑"},
		}},
		{"cp932_backslash.csv", "csv", "cp932", `\`, []string{"番号", "品名", "数量", "備考"}, [][]string{
			{"1", "丸数字①", "10", "～波ダッシュ～"},
			{"2", "面積㎡", "2,5", `"引用"付き`},
			{"3", `ソ\表`, "3", "改行\nあり"},
			{"4", "ポ|ン", "4", "髙﨑"},
		}},
		{"utf8_bom.csv", "csv", "utf-8", "", []string{"番号", "品名", "数量", "備考"}, [][]string{
			{"1", "丸数字①", "10", "～波ダッシュ～"},
			{"2", "面積㎡", "2,5", `"引用"付き`},
			{"3", `ソ\表`, "3", "改行\nあり"},
			{"4", "ポ|ン", "4", "髙﨑"},
		}},
		{"utf8.tsv", "csv", "utf-8", "\t", []string{"番号", "品名", "数量", "備考"}, [][]string{
			{"1", "丸数字①", "10", "～波ダッシュ～"},
			{"2", "面積㎡", "2,5", `"引用"付き`},
			{"3", `ソ\表`, "3", "改行\nあり"},
			{"4", "ポ|ン", "4", "髙﨑"},
		}},
		{"cp932.jsonl", "jsonl", "cp932", "", nil, [][]string{
			{`{"番号": 1, "品名": "丸数字①", "備考": "～"}`},
			{`{"番号": 2, "nested": {"a": [1, 2]}, "s": "quote \" and \\n"}`},
			{`{"番号": 3, "面積": "㎡"}`},
		}},
		{"utf8_bom.jsonl", "jsonl", "utf-8", "", nil, [][]string{
			{`{"番号": 1, "品名": "丸数字①", "備考": "～"}`},
			{`{"番号": 2, "nested": {"a": [1, 2]}, "s": "quote \" and \\n"}`},
			{`{"番号": 3, "面積": "㎡"}`},
		}},
	}
	for _, tt := range tests {
		for _, chunkSize := range []int{1, 3, 100} {
			t.Run(fmt.Sprintf("%s/chunk%d", tt.file, chunkSize), func(t *testing.T) {
				data, err := os.ReadFile(filepath.Join("testdata", tt.file))
				if err != nil {
					t.Fatal(err)
				}
				f := mustFormat(t, tt.kind, tt.encoding, tt.delim, 0)
				c, err := splitAndParse(t, data, f, chunkSize)
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				if !reflect.DeepEqual(c.sum.Header, tt.wantHeader) {
					t.Errorf("got header %q, want %q", c.sum.Header, tt.wantHeader)
				}
				if got, want := c.sum.Chunks, (len(tt.want)+chunkSize-1)/chunkSize; got != want {
					t.Errorf("got %d chunks, want %d", got, want)
				}
				var got [][]string
				for _, chunk := range c.chunks {
					for _, r := range chunk {
						if tt.kind == "jsonl" {
							got = append(got, []string{string(r.JSON)})
						} else {
							got = append(got, r.Fields)
						}
					}
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got records %q, want %q", got, tt.want)
				}
				checkRoundTrip(t, data, f, chunkSize)
			})
		}
	}
}

// TestFirstChunkOffset pins that chunk 0 starts after the BOM and the header, in raw bytes.
func TestFirstChunkOffset(t *testing.T) {
	tests := []struct {
		name, kind, encoding string
		data                 []byte
		want                 []int64
	}{
		{"utf-8 BOM csv", "csv", "utf-8", []byte("\xEF\xBB\xBFa,b\r\n1,2\r\n"), []int64{8, 13}},
		{"utf-8 csv", "csv", "utf-8", []byte("a,b\n1,2"), []int64{4, 7}},
		// "名,値\r\n" is 7 raw CP932 bytes (10 in UTF-8).
		{"cp932 csv", "csv", "cp932", []byte("\x96\xbc,\x92\x6c\r\n\x87\x40,\x81\x60\r\n"), []int64{7, 14}},
		{"utf-8 BOM jsonl", "jsonl", "utf-8", []byte("\xEF\xBB\xBF{}\n{}"), []int64{3, 8}},
		{"cp932 jsonl", "jsonl", "cp932", []byte("{\"\x87\x40\":1}\n"), []int64{0, 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int64
			if _, err := Split(bytes.NewReader(tt.data), mustFormat(t, tt.kind, tt.encoding, "", 0), 100, func(off int64) error {
				got = append(got, off)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got offsets %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCP932Windows pins that x/text's ShiftJIS maps the characters Windows users type the way
// code page 932 does (Python's cp932 codec gives the same bytes).
func TestCP932Windows(t *testing.T) {
	tests := []struct {
		char string
		cp   []byte
	}{
		{"①", []byte{0x87, 0x40}},
		{"～", []byte{0x81, 0x60}}, // U+FF5E FULLWIDTH TILDE, not U+301C WAVE DASH as in JIS
		{"㎡", []byte{0x87, 0x75}},
		{"－", []byte{0x81, 0x7C}}, // U+FF0D, not U+2212
		{"∥", []byte{0x81, 0x61}},
		{"￢", []byte{0x81, 0xCA}},
		{"髙", []byte{0xFB, 0xFC}}, // IBM extension (Windows writes the IBM form)
		{"Ⅰ", []byte{0x87, 0x54}},
	}
	for _, tt := range tests {
		t.Run(tt.char, func(t *testing.T) {
			got, err := japanese.ShiftJIS.NewDecoder().Bytes(tt.cp)
			if err != nil || string(got) != tt.char {
				t.Errorf("decode % X: got %q (%v), want %q", tt.cp, got, err, tt.char)
			}
		})
	}
}

func TestEmptyFiles(t *testing.T) {
	tests := []struct {
		name, kind, encoding string
		data                 string
		wantHeader           []string
		wantStart            int64
	}{
		{"empty csv", "csv", "utf-8", "", nil, 0},
		{"BOM only", "csv", "utf-8", "\xEF\xBB\xBF", nil, 3},
		{"header only", "csv", "utf-8", "a,b\r\n", []string{"a", "b"}, 5},
		{"header only, no newline", "csv", "utf-8", "a,b", []string{"a", "b"}, 3},
		{"header and blank lines", "csv", "utf-8", "a,b\n\n\r\n", []string{"a", "b"}, 4},
		{"cp932 header only", "csv", "cp932", "\x96\xbc\r\n", []string{"名"}, 4},
		{"empty jsonl", "jsonl", "utf-8", "", nil, 0},
		{"blank jsonl", "jsonl", "utf-8", "\n \n\t\r\n", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var offsets []int64
			sum, err := Split(strings.NewReader(tt.data), mustFormat(t, tt.kind, tt.encoding, "", 0), 100, func(off int64) error {
				offsets = append(offsets, off)
				return nil
			})
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if sum.Chunks != 0 || sum.Records != 0 {
				t.Errorf("got %d chunks, %d records, want 0, 0", sum.Chunks, sum.Records)
			}
			if !reflect.DeepEqual(sum.Header, tt.wantHeader) {
				t.Errorf("got header %q, want %q", sum.Header, tt.wantHeader)
			}
			if !reflect.DeepEqual(offsets, []int64{tt.wantStart}) {
				t.Errorf("got offsets %v, want [%d]", offsets, tt.wantStart)
			}
		})
	}
}

// secret appears in every invalid record below; no error message may repeat it.
const secret = "SECRET"

func TestValidationErrors(t *testing.T) {
	long := strings.Repeat("x", 40)
	var wide []string // 2,100 columns: ["c0000","c0001",…] is 2,100 × 8 + 1 = 16,801 bytes as JSON
	for i := range 2100 {
		wide = append(wide, fmt.Sprintf("c%04d", i))
	}
	tests := []struct {
		name, kind, encoding, delim string
		maxField                    int
		data                        string
		wantLine                    int64
		wantReason                  string
	}{
		{"empty header name", "csv", "utf-8", "", 0, "a,,c\n1,2,3\n", 1, "header column 2 has an empty name"},
		{"blank header name", "csv", "utf-8", "", 0, "a, ,c\n", 1, "header column 2 has an empty name"},
		{"duplicate header", "csv", "utf-8", "", 0, "id,name,id\n", 1, "header columns 1 and 3 have the same name"},
		{"duplicate header after BOM", "csv", "utf-8", "", 0, "\xEF\xBB\xBFid,id\n", 1, "header columns 1 and 2 have the same name"},
		{"too few fields", "csv", "utf-8", "", 0, "a,b,c\n1,2,3\n" + secret + ",2\n", 3, "record has 2 fields, the header has 3"},
		{"too many fields", "csv", "utf-8", "", 0, "a,b\n1,2\n3,4\n5,6," + secret + "\n", 4, "record has 3 fields, the header has 2"},
		{"too many fields after quoted newline", "csv", "utf-8", "", 0, "a,b\n\"1\n2\",3\n4,5,6\n", 4, "record has 3 fields, the header has 2"},
		{"field count after blank line", "csv", "utf-8", "", 0, "a,b\n1,2\n\n" + secret + "\n", 4, "record has 1 fields, the header has 2"},
		{"invalid utf-8", "csv", "utf-8", "", 0, "a,b\n1,2\n3," + secret + "\xff\n", 3, "field 2 has bytes that are not valid utf-8"},
		{"invalid utf-8 inside quoted newlines", "csv", "utf-8", "", 0, "a,b\n1,\"" + secret + "\n\n\xc3(\"\n", 4, "field 2 has bytes that are not valid utf-8"},
		{"truncated utf-8 at end", "csv", "utf-8", "", 0, "a,b\n1,\xe3\x81", 2, "field 2 has bytes that are not valid utf-8"},
		{"invalid utf-8 in header", "csv", "utf-8", "", 0, "a,\xff\n", 1, "field 2 has bytes that are not valid utf-8"},
		{"undecodable cp932", "csv", "cp932", "", 0, "a,b\r\n1,\x87\x40" + secret + "\xa0\r\n", 2, "field 2 has bytes that are not valid cp932"},
		{"cp932 lead byte before newline", "csv", "cp932", "", 0, "a,b\r\n1,\"x\x81\r\ny\"\r\n", 2, "field 2 has bytes that are not valid cp932"},
		{"cp932 lead byte at end", "csv", "cp932", "", 0, "a,b\r\n1,2\r\n3,\x81", 3, "field 2 has bytes that are not valid cp932"},
		{"field over limit", "csv", "utf-8", "", 16, "a,b\n1,2\n" + secret + long + ",2\n", 3, "field 1 is 46 bytes, over the 16-byte limit"},
		{"header over limit", "csv", "utf-8", "", 16, long + ",b\n", 1, "field 1 is 40 bytes, over the 16-byte limit"},
		{"header over the JSON size limit", "csv", "utf-8", "", 0, strings.Join(wide, ",") + "\n" + secret + "\n", 1,
			"the header is 16801 bytes as JSON, over the 16384-byte limit: it travels in every Step Functions payload; shorten the column names"},
		{"one-column header one byte over the JSON size limit", "csv", "utf-8", "", 0, strings.Repeat("h", 16381) + "\n", 1,
			"the header is 16385 bytes as JSON, over the 16384-byte limit: it travels in every Step Functions payload; shorten the column names"},
		{"record far over limit", "csv", "utf-8", "", 16, "a,b\n1,2\n\"" + strings.Repeat(secret, 50000) + "\",2\n", 3, "record is longer than 72 bytes, so a field is over the 16-byte limit"},
		{"bare quote", "csv", "utf-8", "", 0, "a,b\n1,x\"" + secret + "\n", 2, `an unquoted field holds a '"'`},
		{"unterminated quote", "csv", "utf-8", "", 0, "a,b\n1,2\n3,\"" + secret + "\n", 3, `a quoted field has a stray or missing '"'`},
		{"text after closing quote", "csv", "utf-8", "", 0, "a,b\n1,\"" + secret + "\"x\n", 2, `a quoted field has a stray or missing '"'`},
		// A quoted field's error names the line where the field opens, not where the reader gave up.
		{"stray quote on the second line of a field", "csv", "utf-8", "", 0, "a,b\n1,\"" + secret + "\ny\"z\n2,3\n", 2, `a quoted field has a stray or missing '"'`},
		{"stray quote after CRLF in a field", "csv", "utf-8", "", 0, "a,b\r\n1,\"" + secret + "\r\ny\"z\r\n2,3\r\n", 2, `a quoted field has a stray or missing '"'`},
		{"quote never closed before more lines", "csv", "utf-8", "", 0, "a,b\n1,\"" + secret + "\n4,5\n6,7\n", 2, `a quoted field has a stray or missing '"'`},
		{"stray quote in a field after a multi-line field", "csv", "utf-8", "", 0, "a,b,c\n\"p\nq\",\"" + secret + "\ny\"z,3\n", 3, `a quoted field has a stray or missing '"'`},
		{"stray quote in the header", "csv", "utf-8", "", 0, "a,\"b\nc\"d\n1,2\n", 1, `a quoted field has a stray or missing '"'`},
		{"jsonl invalid JSON", "jsonl", "utf-8", "", 0, "{\"a\":1}\n{\"a\":\"" + secret + "\"\n", 2, "line is not valid JSON"},
		{"jsonl array", "jsonl", "utf-8", "", 0, "{}\n\n[\"" + secret + "\"]\n", 3, "line is valid JSON but not an object"},
		{"jsonl invalid utf-8", "jsonl", "utf-8", "", 0, "{}\n{\"a\":\"" + secret + "\xff\"}\n", 2, "line has bytes that are not valid utf-8"},
		{"jsonl undecodable cp932", "jsonl", "cp932", "", 0, "{}\r\n{}\r\n{\"a\":\"\xa0" + secret + "\"}\r\n", 3, "line has bytes that are not valid cp932"},
		{"jsonl line over limit", "jsonl", "utf-8", "", 16, "{}\n{\"a\":\"" + secret + long + "\"}\n", 2, "line is over the 16-byte limit"},
		{"jsonl line far over limit", "jsonl", "utf-8", "", 16, "{}\n{\"a\":\"" + strings.Repeat(secret, 50000) + "\"}\n", 2, "line is over the 16-byte limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			boundaries := 0
			_, err := Split(strings.NewReader(tt.data), mustFormat(t, tt.kind, tt.encoding, tt.delim, tt.maxField), 1, func(int64) error {
				boundaries++
				return nil
			})
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("got error %v (%T), want *records.Error", err, err)
			}
			if fe.Line != tt.wantLine || fe.Reason != tt.wantReason {
				t.Errorf("got line %d %q, want line %d %q", fe.Line, fe.Reason, tt.wantLine, tt.wantReason)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "xxx") {
				t.Errorf("got message %q, want no record contents", err)
			}
		})
	}
}

// TestHeaderAtJSONSizeLimit: a header of exactly pipeline.MaxHeaderBytes as JSON is accepted
// (["h…h"] is the name plus 4 bytes).
func TestHeaderAtJSONSizeLimit(t *testing.T) {
	name := strings.Repeat("h", pipeline.MaxHeaderBytes-4)
	sum, err := Split(strings.NewReader(name+"\n1\n"), mustFormat(t, "csv", "utf-8", "", 0), 1, func(int64) error { return nil })
	if err != nil || sum.Records != 1 {
		t.Fatalf("got %+v, %v, want 1 record", sum, err)
	}
	if b, _ := json.Marshal(sum.Header); len(b) != pipeline.MaxHeaderBytes {
		t.Errorf("got a header of %d bytes as JSON, want %d", len(b), pipeline.MaxHeaderBytes)
	}
}

func TestFormatOf(t *testing.T) {
	tests := []struct {
		name    string
		tenant  pipeline.Tenant
		want    Format
		wantErr string
	}{
		{"defaults", pipeline.Tenant{Tenant: spec.Tenant{Format: "csv", Encoding: "utf-8"}}, Format{Kind: "csv", Encoding: "utf-8", Delimiter: ',', MaxFieldBytes: pipeline.DefaultMaxFieldBytes}, ""},
		{"tab and limit", pipeline.Tenant{Tenant: spec.Tenant{Format: "csv", Encoding: "cp932", Delimiter: "\t", MaxFieldBytes: 10}}, Format{Kind: "csv", Encoding: "cp932", Delimiter: '\t', MaxFieldBytes: 10}, ""},
		{"backslash in cp932", pipeline.Tenant{Tenant: spec.Tenant{Format: "csv", Encoding: "cp932", Delimiter: `\`}}, Format{Kind: "csv", Encoding: "cp932", Delimiter: '\\', MaxFieldBytes: pipeline.DefaultMaxFieldBytes}, ""},
		{"bad format", pipeline.Tenant{Tenant: spec.Tenant{Format: "xml", Encoding: "utf-8"}}, Format{}, `format "xml" is not "csv" or "jsonl"`},
		{"bad encoding", pipeline.Tenant{Tenant: spec.Tenant{Format: "csv", Encoding: "latin1"}}, Format{}, `encoding "latin1" is not "utf-8" or "cp932"`},
		{"two-char delimiter", pipeline.Tenant{Tenant: spec.Tenant{Format: "csv", Encoding: "utf-8", Delimiter: ";;"}}, Format{}, `delimiter ";;" is invalid: use exactly one character`},
		{"quote delimiter", pipeline.Tenant{Tenant: spec.Tenant{Format: "csv", Encoding: "utf-8", Delimiter: `"`}}, Format{}, `delimiter "\"" is invalid: it cannot be NUL, a quote`},
		{"negative limit", pipeline.Tenant{Tenant: spec.Tenant{Format: "csv", Encoding: "utf-8", MaxFieldBytes: -1}}, Format{}, "maxFieldBytes -1 must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FormatOf(tt.tenant)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, %v, want %+v", got, err, tt.want)
			}
		})
	}
}

func TestParseRangeErrors(t *testing.T) {
	f := mustFormat(t, "csv", "utf-8", "", 8)
	tests := []struct {
		name       string
		data       string
		max        int64
		wantRecord int64
		wantReason string
	}{
		{"wrong field count", "1,2\n3\n", 2, 11, "wrong number of fields"},
		{"field over limit", "1,123456789\n", 2, 10, "field 2 is 9 bytes, over the 8-byte limit"},
		{"invalid utf-8", "1,2\n\xff,2\n", 2, 11, "field 1 has bytes that are not valid utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRange(strings.NewReader(tt.data), f, []string{"a", "b"}, 10, tt.max)
			var fe *Error
			if !errors.As(err, &fe) || fe.Record != tt.wantRecord || fe.Reason != tt.wantReason {
				t.Errorf("got %v, want record %d: %s", err, tt.wantRecord, tt.wantReason)
			}
		})
	}
}

func TestParseRangeTooManyRecords(t *testing.T) {
	for _, kind := range []string{"csv", "jsonl"} {
		_, err := ParseRange(strings.NewReader("{}\n{}\n{}\n"), mustFormat(t, kind, "utf-8", "", 0), []string{"a"}, 1, 2)
		if !errors.Is(err, ErrTooManyRecords) {
			t.Errorf("%s: got %v, want ErrTooManyRecords", kind, err)
		}
	}
}

func TestObject(t *testing.T) {
	header := []string{"名前", "a b", "x+y%z", "<tag>"}
	got, err := Record{Number: 1, Fields: []string{"①", "", "\"q\"\n", "&"}}.Object(header)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	want := map[string]string{"名前": "①", "a b": "", "x+y%z": "\"q\"\n", "<tag>": "&"}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got %v, want %v", m, want)
	}
	if !strings.HasPrefix(string(got), `{"名前":"①","a b"`) {
		t.Errorf("got %s, want keys in header order", got)
	}
}

// TestChunkBoundaries checks counts and numbering on generated files of every size around the
// chunk size, in both encodings, with quoted newlines and CRLF.
func TestChunkBoundaries(t *testing.T) {
	for _, enc := range []string{"utf-8", "cp932"} {
		for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 7, 99, 100, 101} {
			for _, chunkSize := range []int{1, 3, 100} {
				t.Run(fmt.Sprintf("%s/%d/%d", enc, n, chunkSize), func(t *testing.T) {
					var b strings.Builder
					b.WriteString("id,\"値\r\n2\",note\r\n")
					for i := range n {
						fmt.Fprintf(&b, "%d,\"①,%d\r\n～\",㎡\r\n", i, i)
						if i%4 == 0 {
							b.WriteString("\r\n")
						}
					}
					data := []byte(b.String())
					if enc == "cp932" {
						var err error
						if data, err = japanese.ShiftJIS.NewEncoder().Bytes(data); err != nil {
							t.Fatal(err)
						}
					}
					f := mustFormat(t, "csv", enc, "", 0)
					c, err := splitAndParse(t, data, f, chunkSize)
					if err != nil {
						t.Fatal(err)
					}
					if c.sum.Records != int64(n) {
						t.Errorf("got %d records, want %d", c.sum.Records, n)
					}
					checkRoundTrip(t, data, f, chunkSize)
				})
			}
		}
	}
}

func TestBoundaryError(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	_, err := Split(strings.NewReader("a\n1\n2\n3\n"), mustFormat(t, "csv", "utf-8", "", 0), 1, func(int64) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Errorf("got %v after %d calls, want stop after 3", err, calls)
	}
}

// failingReader fails after n bytes, like an S3 body whose connection drops.
type failingReader struct {
	r io.Reader
	n int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	p = p[:min(len(p), f.n)]
	n, err := f.r.Read(p)
	f.n -= n
	return n, err
}

func TestReadError(t *testing.T) {
	for _, enc := range []string{"utf-8", "cp932"} {
		t.Run(enc, func(t *testing.T) {
			data := "a,b\n" + strings.Repeat("1,2\n", 100000)
			_, err := Split(&failingReader{r: strings.NewReader(data), n: 200000}, mustFormat(t, "csv", enc, "", 0), 100, func(int64) error { return nil })
			var fe *Error
			if !errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &fe) {
				t.Errorf("got %v, want the read error, not a validation error", err)
			}
		})
	}
}

// TestBlankLinesCostNothing: blank lines are not records, so a long run of them must not count
// against maxFieldBytes. encoding/csv skips blank lines inside one Read, so before they were
// credited a valid file with more blank lines in a row than the record bound (here 2 × 35 + 2
// bytes plus the 64 KiB read buffer) failed as "record is longer than …". Chunk size 1 makes
// every chunk's range start with a run of blank lines, so Register's ParseRange is covered too.
// Inside a quoted field line ends are content: a field of many line ends still breaks the limit.
func TestBlankLinesCostNothing(t *testing.T) {
	run := func(s string, n int) string { return strings.Repeat(s, n) }
	tests := []struct {
		name, encoding string
		data           string
		wantRecords    int64
		wantReason     string // "" for success
	}{
		{"LF blank lines", "utf-8", "a,b\n1,2\n" + run("\n", 200_000) + "3,4\n" + run("\n", 100_000) + "5,6\n", 3, ""},
		{"CRLF blank lines", "utf-8", "a,b\r\n1,2\r\n" + run("\r\n", 150_000) + "3,4\r\n", 2, ""},
		{"blank lines before the header", "utf-8", run("\n", 100_000) + "a,b\n1,2\n", 1, ""},
		{"blank lines at the end", "utf-8", "a,b\n1,2\n" + run("\r\n", 100_000), 1, ""},
		{"cp932 blank lines", "cp932", "a,b\r\n\x83\x5c,2\r\n" + run("\r\n", 150_000) + "3,\x83\x7c\r\n", 2, ""},
		{"blank lines after a quoted line break", "utf-8", "a,b\n\"x\ny\",2\n" + run("\n", 200_000) + "3,4\n", 2, ""},
		{"line ends inside quotes still count", "utf-8", "a,b\n1,\"" + run("\n", 200_000) + "\"\n", 0,
			"record is longer than 72 bytes, so a field is over the 16-byte limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustFormat(t, "csv", tt.encoding, "", 16)
			c, err := splitAndParse(t, []byte(tt.data), f, 1)
			if tt.wantReason != "" {
				var fe *Error
				if !errors.As(err, &fe) || fe.Reason != tt.wantReason {
					t.Fatalf("got %v, want %q", err, tt.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want %d records", err, tt.wantRecords)
			}
			if c.sum.Records != tt.wantRecords {
				t.Errorf("got %d records, want %d", c.sum.Records, tt.wantRecords)
			}
		})
	}
}

// TestBlankLinesScan pins the blank-line count on known answers, fed in every split of the text
// so that state carried across reads is covered.
func TestBlankLinesScan(t *testing.T) {
	tests := []struct {
		text string
		want int64
	}{
		{"\n\n", 2},
		{"\r\n\r\n", 4},
		{"a\n\nb\n", 1},
		{"a\r\n\r\nb\r\n", 2},
		{"\r\r\n", 0},       // "\r" then a line end: a record, not a blank line
		{" \n", 0},          // a space is a field
		{"\"\n\n\"\n\n", 1}, // line ends inside quotes are content
		{"\"a\"\"\n\n\"\n\n", 1},
		{"a,\"\"\n\n", 1}, // an empty quoted field closes at once
	}
	for _, tt := range tests {
		for cut := 0; cut <= len(tt.text); cut++ {
			var s blankLines
			s.scan([]byte(tt.text[:cut]))
			s.scan([]byte(tt.text[cut:]))
			if s.n != tt.want {
				t.Errorf("%q split at %d: got %d blank bytes, want %d", tt.text, cut, s.n, tt.want)
			}
		}
	}
}

// TestCP932DoubleByteDelimiter: CheckDelimiter accepts any character CP932 encodes, a double-byte
// one included, because parsing works on decoded text.
func TestCP932DoubleByteDelimiter(t *testing.T) {
	data, err := japanese.ShiftJIS.NewEncoder().Bytes([]byte("aソb\r\n①ソ～\r\nポソ\\\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := mustFormat(t, "csv", "cp932", "ソ", 0)
	c, err := splitAndParse(t, data, f, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"①", "～"}, {"ポ", `\`}}
	for i, w := range want {
		if got := c.chunks[i][0].Fields; !reflect.DeepEqual(got, w) {
			t.Errorf("record %d: got %q, want %q", i+1, got, w)
		}
	}
	checkRoundTrip(t, data, f, 1)
}
