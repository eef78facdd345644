package records

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// checkLines: a scan with Cut.Lines reports the boundaries of one without, with or without a Skip,
// and each boundary's line is one more than the 0x0A bytes of the raw object before its offset,
// which is how Register counts them when no lines object exists.
func checkLines(t testing.TB, data []byte, f Format, chunkSize int) {
	t.Helper()
	for _, skip := range []Skip{nil, func(Invalid) error { return nil }} {
		scan := func(lines bool) ([]pipeline.Boundary, error) {
			var bs []pipeline.Boundary
			_, err := SplitCutSkip(bytes.NewReader(data), f, Cut{Records: chunkSize, Lines: lines}, func(b pipeline.Boundary) error {
				bs = append(bs, b)
				return nil
			}, skip)
			return bs, err
		}
		plain, perr := scan(false)
		lined, lerr := scan(true)
		if (perr == nil) != (lerr == nil) || perr != nil && perr.Error() != lerr.Error() {
			t.Fatalf("skip %t: got error %v with lines, %v without", skip != nil, lerr, perr)
		}
		if perr != nil {
			continue
		}
		if len(plain) != len(lined) {
			t.Fatalf("skip %t: got %d boundaries with lines, %d without", skip != nil, len(lined), len(plain))
		}
		for i, b := range lined {
			if p := plain[i]; b.Offset != p.Offset || b.FirstRecord != p.FirstRecord || p.Line != 0 {
				t.Fatalf("skip %t: boundary %d: got %+v with lines, %+v without", skip != nil, i, b, p)
			}
			if want := 1 + int64(bytes.Count(data[:b.Offset], []byte{'\n'})); b.Line != want {
				t.Fatalf("skip %t: boundary %d at byte %d: got line %d, want %d", skip != nil, i, b.Offset, b.Line, want)
			}
		}
	}
}

func TestBoundaryLines(t *testing.T) {
	tests := []struct {
		name      string
		kind      string
		encoding  string
		data      []byte
		chunkSize int
		skip      bool
		want      []int64 // each boundary's line, the end's last
	}{
		{"quoted line breaks", "csv", "utf-8", []byte("id,v\n1,\"a\nb\nc\"\n2,x\n3,\"d\r\ne\"\n4,y\n"), 1, false, []int64{2, 5, 6, 8, 9}},
		{"blank lines before a chunk's first record", "csv", "utf-8", []byte("id,v\n\n1,a\n\n\n2,b\n\r\n3,c\n"), 2, false, []int64{2, 7, 9}},
		{"BOM and CRLF", "csv", "utf-8", []byte("\xef\xbb\xbfid,v\r\n1,a\r\n2,\"b\r\nc\"\r\n3,d"), 2, false, []int64{2, 5, 5}},
		{"CP932 with a multi-line record", "csv", "cp932", cp932(t, "番号,品名\n1,\"改行\nあり\"\n2,①\n3,～\n"), 2, false, []int64{2, 5, 6}},
		{"a skipped record of three lines", "csv", "utf-8", []byte("id,v\n1,a\n2,\"b\nc\nd\",extra\n3,e\n4,f\n"), 2, true, []int64{2, 6, 8}},
		{"JSON Lines with blank lines", "jsonl", "utf-8", []byte("{\"a\":1}\n\n{\"a\":2}\n\n\n{\"a\":3}\n{\"a\":4}\n"), 2, false, []int64{1, 4, 8}},
		{"JSON Lines, an invalid line skipped", "jsonl", "utf-8", []byte("{\"a\":1}\nnot json\n\n{\"a\":3}\n"), 2, true, []int64{1, 3, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustFormat(t, tc.kind, tc.encoding, "", 0)
			var skip Skip
			if tc.skip {
				skip = func(Invalid) error { return nil }
			}
			var got []int64
			if _, err := SplitCutSkip(bytes.NewReader(tc.data), f, Cut{Records: tc.chunkSize, Lines: true}, func(b pipeline.Boundary) error {
				got = append(got, b.Line)
				return nil
			}, skip); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got lines %v, want %v", got, tc.want)
			}
			checkLines(t, tc.data, f, tc.chunkSize)
		})
	}
}
