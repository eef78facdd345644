package records

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// splitCut splits data with cut and parses every chunk back as Register does from a version 2
// manifest: its byte range, first record and count.
func splitCut(t *testing.T, data []byte, f Format, cut Cut) (Summary, []pipeline.Boundary, [][]Record, error) {
	t.Helper()
	var bs []pipeline.Boundary
	sum, err := SplitCut(bytes.NewReader(data), f, cut, func(b pipeline.Boundary) error {
		bs = append(bs, b)
		return nil
	})
	if err != nil {
		return sum, bs, nil, err
	}
	if len(bs) != sum.Chunks+1 {
		t.Fatalf("got %d boundaries, want %d", len(bs), sum.Chunks+1)
	}
	var chunks [][]Record
	for i := range sum.Chunks {
		first, n := bs[i].FirstRecord, bs[i+1].FirstRecord-bs[i].FirstRecord
		recs, err := ParseRange(bytes.NewReader(data[bs[i].Offset:bs[i+1].Offset]), f, sum.Header, first, n)
		if err != nil {
			t.Fatalf("chunk %d: ParseRange: %v", i, err)
		}
		if int64(len(recs)) != n {
			t.Fatalf("chunk %d: got %d records, want %d", i, len(recs), n)
		}
		chunks = append(chunks, recs)
	}
	return sum, bs, chunks, nil
}

// firsts is each chunk's first record number, and Records+1 last.
func firsts(bs []pipeline.Boundary) []int64 {
	var r []int64
	for _, b := range bs {
		r = append(r, b.FirstRecord)
	}
	return r
}

// arrayBytes is a chunk as the JSON array a batch POST carries, measured by encoding/json itself.
func arrayBytes(t *testing.T, recs []Record, header []string) int {
	t.Helper()
	var objs []json.RawMessage
	for _, r := range recs {
		o, err := r.Object(header)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	b, err := json.Marshal(struct {
		Records []json.RawMessage `json:"records"`
	}{objs})
	if err != nil {
		t.Fatal(err)
	}
	return len(b) - len(`{"records":}`)
}

func TestSplitCutByBytes(t *testing.T) {
	// Each record of csv5 is {"id":"1","v":"a"}: 18 bytes, so n records make an array of 1+19n.
	csv5 := []byte("id,v\n1,a\n2,b\n3,c\n4,d\n5,e\n")
	// JSON lines as encoding/json embeds them: {"a":"\u003c"} (14 bytes, HTML-escaped) and
	// {"a":1} (7 bytes, compacted): both together are an array of 1+15+8 = 24 bytes.
	jsonl := []byte("{\"a\":\"<\"}\n\n{ \"a\" : 1 }\n")
	for _, tc := range []struct {
		name   string
		data   []byte
		kind   string
		cut    Cut
		firsts []int64
	}{
		{"no byte limit is record mode", csv5, "csv", Cut{Records: 2}, []int64{1, 3, 5, 6}},
		{"two records fit exactly", csv5, "csv", Cut{Records: 100, Bytes: 39}, []int64{1, 3, 5, 6}},
		{"one byte more still two", csv5, "csv", Cut{Records: 100, Bytes: 57}, []int64{1, 3, 5, 6}},
		{"three fit exactly", csv5, "csv", Cut{Records: 100, Bytes: 58}, []int64{1, 4, 6}},
		{"one byte less than two", csv5, "csv", Cut{Records: 100, Bytes: 38}, []int64{1, 2, 3, 4, 5, 6}},
		{"records cut before bytes", csv5, "csv", Cut{Records: 2, Bytes: 1000}, []int64{1, 3, 5, 6}},
		{"bytes and records together", csv5, "csv", Cut{Records: 4, Bytes: 58}, []int64{1, 4, 6}},
		{"all in one", csv5, "csv", Cut{Records: 1000, Bytes: 1 << 20}, []int64{1, 6}},
		{"jsonl measured as sent", jsonl, "jsonl", Cut{Records: 100, Bytes: 24}, []int64{1, 3}},
		{"jsonl one byte less", jsonl, "jsonl", Cut{Records: 100, Bytes: 23}, []int64{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mustFormat(t, tc.kind, "utf-8", "", 0)
			sum, bs, chunks, err := splitCut(t, tc.data, f, tc.cut)
			if err != nil {
				t.Fatal(err)
			}
			if got := firsts(bs); fmt.Sprint(got) != fmt.Sprint(tc.firsts) {
				t.Errorf("got first records %v, want %v", got, tc.firsts)
			}
			for i, c := range chunks {
				if n := arrayBytes(t, c, sum.Header); tc.cut.Bytes > 0 && int64(n) > tc.cut.Bytes {
					t.Errorf("chunk %d: got %d bytes of records, want at most %d", i, n, tc.cut.Bytes)
				}
			}
		})
	}
}

// TestSplitCutMatchesEncoding: over files with multi-line, quoted, escaped, CP932 and HTML-special
// fields, every byte-cut chunk stays within the limit as encoding/json measures it, and the chunk
// would have overflowed with its next record: the cut is as late as it may be.
func TestSplitCutMatchesEncoding(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,\"値\r\n2\",note\r\n")
	for i := range 60 {
		fmt.Fprintf(&b, "%d,\"①<&>,%s\r\n～\",\"㎡\"\"%d\"\r\n", i, strings.Repeat("x", i*7%23), i)
	}
	for _, enc := range []string{"utf-8", "cp932"} {
		data := []byte(b.String())
		if enc == "cp932" {
			var err error
			if data, err = japanese.ShiftJIS.NewEncoder().Bytes(data); err != nil {
				t.Fatal(err)
			}
		}
		for _, limit := range []int64{200, 333, 1024, 4096} {
			t.Run(fmt.Sprint(enc, "/", limit), func(t *testing.T) {
				f := mustFormat(t, "csv", enc, "", 0)
				sum, _, chunks, err := splitCut(t, data, f, Cut{Records: 1000, Bytes: limit})
				if err != nil {
					t.Fatal(err)
				}
				if sum.Records != 60 {
					t.Fatalf("got %d records, want 60", sum.Records)
				}
				for i, c := range chunks {
					if n := arrayBytes(t, c, sum.Header); int64(n) > limit {
						t.Errorf("chunk %d: got %d bytes, want at most %d", i, n, limit)
					}
					if i+1 < len(chunks) {
						grown := append(append([]Record(nil), c...), chunks[i+1][0])
						if n := arrayBytes(t, grown, sum.Header); int64(n) <= limit {
							t.Errorf("chunk %d: cut early: with the next record it is %d bytes, within %d", i, n, limit)
						}
					}
				}
			})
		}
	}
}

func TestSplitCutRecordTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name, kind, data string
		limit            int64
		want             string
	}{
		// {"id":"1","v":"a"} is 18 bytes: alone in a batch, 20.
		{"csv fits alone exactly", "csv", "id,v\n1,a\n", 20, ""},
		{"csv one byte over", "csv", "id,v\n1,a\n", 19, "line 2: record is 18 bytes as JSON, so a batch holding it alone is over the maxBatchBytes limit of 19"},
		{"csv multi-line record names its first line", "csv", "id,v\n1,a\n2,\"b\nbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"\n", 40, "line 3: record is"},
		{"jsonl", "jsonl", "{\"a\":1}\n\n{\"a\":\"" + strings.Repeat("y", 50) + "\"}\n", 40, "line 3: record is 58 bytes as JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := splitCut(t, []byte(tc.data), mustFormat(t, tc.kind, "utf-8", "", 0), Cut{Records: 1000, Bytes: tc.limit})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			var fe *Error
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an *Error containing %q", err, tc.want)
			}
		})
	}
}
