package records

import (
	"bytes"
	"errors"
	"github.com/example/tenantpipeline/spec"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// skipped is a file scanned as Split does under skipRecord, then parsed chunk by chunk as
// Register does.
type skipped struct {
	sum       Summary
	invalid   []Invalid // Split's
	valid     []int64   // the numbers Register parsed, in order
	rangeSkip []int64   // the numbers Register skipped, in order
	rangeRaw  [][]byte
}

func scanSkip(t *testing.T, data []byte, f Format, chunkSize int) skipped {
	t.Helper()
	var s skipped
	var bounds []pipeline.Boundary
	sum, err := SplitCutSkip(bytes.NewReader(data), f, Cut{Records: chunkSize}, func(b pipeline.Boundary) error {
		bounds = append(bounds, b)
		return nil
	}, func(v Invalid) error {
		s.invalid = append(s.invalid, v)
		return nil
	})
	if err != nil {
		t.Fatalf("SplitCutSkip: %v", err)
	}
	s.sum = sum
	for i := 0; i+1 < len(bounds); i++ {
		a, b := bounds[i], bounds[i+1]
		recs, err := ParseRangeSkip(bytes.NewReader(data[a.Offset:b.Offset]), f, sum.Header, a.FirstRecord, b.FirstRecord-a.FirstRecord, func(v Invalid) error {
			s.rangeSkip = append(s.rangeSkip, v.Record)
			s.rangeRaw = append(s.rangeRaw, v.Raw)
			return nil
		})
		if err != nil {
			t.Fatalf("chunk %d [%d,%d): ParseRangeSkip: %v", i, a.Offset, b.Offset, err)
		}
		for _, r := range recs {
			s.valid = append(s.valid, r.Number)
		}
	}
	return s
}

func cp932(t *testing.T, s string) []byte {
	t.Helper()
	b, err := japanese.ShiftJIS.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSkipInvalidRecords(t *testing.T) {
	csvUTF8 := mustFormat(t, pipeline.FormatCSV, pipeline.EncodingUTF8, "", 0)
	csvCP932 := mustFormat(t, pipeline.FormatCSV, pipeline.EncodingCP932, "", 0)
	jsonl := mustFormat(t, pipeline.FormatJSONL, pipeline.EncodingUTF8, "", 0)
	small := mustFormat(t, pipeline.FormatCSV, pipeline.EncodingUTF8, "", 4)
	type want struct {
		lines   []int64
		numbers []int64
		raw     []string
		valid   []int64
	}
	cases := []struct {
		name  string
		f     Format
		data  []byte
		chunk int
		want  want
	}{
		{"csv field count", csvUTF8, []byte("a,b\n1,2\n3\n4,5\n6,7,8\n9,10\n"), 2,
			want{[]int64{3, 5}, []int64{2, 4}, []string{"3", "6,7,8"}, []int64{1, 3, 5}}},
		{"csv bad utf-8", csvUTF8, []byte("a,b\r\n1,2\r\nx\xff,3\r\n4,5\r\n"), 1,
			want{[]int64{3}, []int64{2}, []string{"x\xff,3"}, []int64{1, 3}}},
		{"csv quoted newlines keep the lines", csvUTF8, []byte("a,b\n\"x\ny\",1\nbad\n\"p\nq\nr\",2\n3,4,5\n6,7\n"), 2,
			want{[]int64{4, 8}, []int64{2, 4}, []string{"bad", "3,4,5"}, []int64{1, 3, 5}}},
		{"csv stray quote resumes on the next line", csvUTF8, []byte("a,b\n1,2\nx\"y,3\n4,5\n"), 3,
			want{[]int64{3}, []int64{2}, []string{"x\"y,3"}, []int64{1, 3}}},
		{"csv blank lines before a bad record", csvUTF8, []byte("a,b\n1,2\n\n\n3\n4,5\n"), 2,
			want{[]int64{5}, []int64{2}, []string{"3"}, []int64{1, 3}}},
		{"csv field over the limit", small, []byte("a,b\n1,2\n12345,3\n4,5\n"), 2,
			want{[]int64{3}, []int64{2}, []string{"12345,3"}, []int64{1, 3}}},
		{"csv a whole chunk invalid", csvUTF8, []byte("a,b\n1,2\n3\n4\n5,6\n"), 1,
			want{[]int64{3, 4}, []int64{2, 3}, []string{"3", "4"}, []int64{1, 4}}},
		{"csv cp932 raw bytes", csvCP932, append(cp932(t, "名,値\r\n表,1\r\n"), append(cp932(t, "ソ,ポ,余\r\n"), cp932(t, "能,2\r\n")...)...), 2,
			want{[]int64{3}, []int64{2}, []string{string(cp932(t, "ソ,ポ,余"))}, []int64{1, 3}}},
		{"csv cp932 bad bytes", csvCP932, append(cp932(t, "名,値\n表,1\n"), []byte("\x85\x40,2\n3,4\n")...), 5,
			want{[]int64{3}, []int64{2}, []string{"\x85\x40,2"}, []int64{1, 3}}},
		{"jsonl malformed line", jsonl, []byte("{\"a\":1}\n\n{\"a\":\n[1]\n{\"a\":2}\n"), 2,
			want{[]int64{3, 4}, []int64{2, 3}, []string{"{\"a\":", "[1]"}, []int64{1, 4}}},
		{"jsonl bad utf-8, no final newline", jsonl, []byte("{\"a\":1}\r\n{\"a\":\"\xff\"}"), 1,
			want{[]int64{2}, []int64{2}, []string{"{\"a\":\"\xff\"}"}, []int64{1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := scanSkip(t, c.data, c.f, c.chunk)
			var lines, numbers []int64
			var raw []string
			for _, v := range s.invalid {
				lines, numbers, raw = append(lines, v.Line), append(numbers, v.Record), append(raw, string(v.Raw))
				if v.Reason == "" {
					t.Errorf("record %d: got no reason", v.Record)
				}
			}
			if !reflect.DeepEqual(lines, c.want.lines) {
				t.Errorf("got lines %v, want %v", lines, c.want.lines)
			}
			if !reflect.DeepEqual(numbers, c.want.numbers) {
				t.Errorf("got records %v, want %v", numbers, c.want.numbers)
			}
			if !reflect.DeepEqual(raw, c.want.raw) {
				t.Errorf("got raw %q, want %q", raw, c.want.raw)
			}
			if !reflect.DeepEqual(s.valid, c.want.valid) {
				t.Errorf("Register parsed records %v, want %v", s.valid, c.want.valid)
			}
			if !reflect.DeepEqual(s.rangeSkip, c.want.numbers) {
				t.Errorf("Register skipped records %v, want Split's %v", s.rangeSkip, c.want.numbers)
			}
			for i, r := range s.rangeRaw {
				if string(r) != c.want.raw[i] {
					t.Errorf("Register's raw of record %d: got %q, want %q", s.rangeSkip[i], r, c.want.raw[i])
				}
			}
			if got, want := s.sum.Records, int64(len(c.want.valid)+len(c.want.numbers)); got != want {
				t.Errorf("got %d records, want %d (valid and invalid)", got, want)
			}
			if got, want := s.sum.Invalid, int64(len(c.want.numbers)); got != want {
				t.Errorf("got %d invalid, want %d", got, want)
			}
		})
	}
}

// The modes differ only in invalid records: a valid file splits to the same boundaries.
func TestSkipSameBoundaries(t *testing.T) {
	f := mustFormat(t, pipeline.FormatCSV, pipeline.EncodingCP932, "", 0)
	var b strings.Builder
	b.WriteString("名,値\r\n")
	for i := 0; i < 250; i++ {
		b.WriteString("表ソ,\"ポ\n能\"\r\n")
	}
	data := cp932(t, b.String())
	collect := func(skip Skip) ([]pipeline.Boundary, Summary) {
		var bounds []pipeline.Boundary
		sum, err := SplitCutSkip(bytes.NewReader(data), f, Cut{Records: 7}, func(b pipeline.Boundary) error {
			bounds = append(bounds, b)
			return nil
		}, skip)
		if err != nil {
			t.Fatal(err)
		}
		return bounds, sum
	}
	a, sa := collect(nil)
	b2, sb := collect(func(Invalid) error { return errors.New("no record is invalid") })
	if !reflect.DeepEqual(a, b2) {
		t.Errorf("got boundaries %v under skip, want %v", b2, a)
	}
	if got, want := string(sb.RawHeader), string(cp932(t, "名,値")); got != want {
		t.Errorf("got raw header %q, want %q", got, want)
	}
	sb.RawHeader = nil
	if !reflect.DeepEqual(sa, sb) {
		t.Errorf("got summary %+v under skip, want %+v", sb, sa)
	}
}

// What no record boundary contains fails the file in both modes.
func TestSkipFileErrors(t *testing.T) {
	csvUTF8 := mustFormat(t, pipeline.FormatCSV, pipeline.EncodingUTF8, "", 0)
	jsonl := mustFormat(t, pipeline.FormatJSONL, pipeline.EncodingUTF8, "", 8)
	cases := []struct {
		name string
		f    Format
		data string
		line int64
	}{
		{"duplicate header", csvUTF8, "a,a\n1,2\n", 1},
		{"json line over the limit", jsonl, "{}\n{\"a\":\"123456789\"}\n", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := SplitCutSkip(strings.NewReader(c.data), c.f, Cut{Records: 10}, func(pipeline.Boundary) error { return nil },
				func(Invalid) error { return nil })
			var e *Error
			if !errors.As(err, &e) || e.Line != c.line {
				t.Errorf("got %v, want an *Error on line %d", err, c.line)
			}
		})
	}
}

func TestScanThreshold(t *testing.T) {
	f := mustFormat(t, pipeline.FormatCSV, pipeline.EncodingUTF8, "", 0)
	data := "a,b\n1,2\nx\n3,4\ny\nz\n"
	cases := []struct {
		name    string
		p       Policy
		wantErr string
		invalid int
	}{
		{"failFile fails at the first", Policy{}, "line 3: record has 1 fields, the header has 2", 0},
		{"skip within the limit", Policy{Skip: true, Max: 3}, "", 3},
		{"skip over the limit counts them all", Policy{Skip: true, Max: 1}, "3 invalid records, more than maxInvalidRecords 1; first at line 3: record has 1 fields, the header has 2", 2},
		{"skip with a limit of 0", Policy{Skip: true, Max: 0}, "3 invalid records, more than maxInvalidRecords 0; first at line 3: record has 1 fields, the header has 2", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, invalid, err := Scan(strings.NewReader(data), f, Cut{Records: 2}, c.p, func(pipeline.Boundary) error { return nil })
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.wantErr {
				t.Errorf("got error %q, want %q", got, c.wantErr)
			}
			if len(invalid) != c.invalid {
				t.Errorf("got %d invalid records held, want %d", len(invalid), c.invalid)
			}
		})
	}
}

func TestPolicyOf(t *testing.T) {
	cases := []struct {
		t    pipeline.Tenant
		want Policy
	}{
		{pipeline.Tenant{}, Policy{}},
		{pipeline.Tenant{Tenant: spec.Tenant{OnInvalidRecord: pipeline.OnInvalidFailFile}}, Policy{}},
		{pipeline.Tenant{Tenant: spec.Tenant{OnInvalidRecord: pipeline.OnInvalidSkipRecord}}, Policy{Skip: true, Max: pipeline.DefaultMaxInvalidRecords}},
		{pipeline.Tenant{Tenant: spec.Tenant{OnInvalidRecord: pipeline.OnInvalidSkipRecord, MaxInvalidRecords: 5}}, Policy{Skip: true, Max: 5}},
	}
	for _, c := range cases {
		if got := PolicyOf(c.t); got != c.want {
			t.Errorf("PolicyOf(%+v): got %+v, want %+v", c.t, got, c.want)
		}
	}
}
