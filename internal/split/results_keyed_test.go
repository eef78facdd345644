package split

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

func keyedTenant() pipeline.Tenant {
	tn := tenant()
	tn.ChunkSize, tn.RecordOrder, tn.KeyColumns = 3, pipeline.RecordOrderKey, []string{"id"}
	return tn
}

func ranges(firstLast ...int64) []pipeline.RecordRange {
	var rs []pipeline.RecordRange
	for i := 0; i+1 < len(firstLast); i += 2 {
		rs = append(rs, pipeline.RecordRange{First: firstLast[i], Last: firstLast[i+1]})
	}
	return rs
}

// jsonlFile is a JSON Lines file of n records, record i {"id":i,...}, with LF line ends.
func jsonlFile(n int) []byte {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "{\"id\":%d,\"name\":\"名前 %d\"}\n", i, i)
	}
	return []byte(b.String())
}

// jsonlRecords are the lines of records from..to of jsonlFile.
func jsonlRecords(data []byte, from, to int) string {
	lines := strings.SplitAfter(string(data), "\n")
	return strings.Join(lines[from-1:to], "")
}

// keyedResult runs the results task for a halted file whose segments' progress is progress, and
// returns the summary and the unprocessed file (nil when none was written).
func keyedResult(t *testing.T, tn pipeline.Tenant, data []byte, status string, progress map[int][]byte, parts map[string][]results.Rejection) (results.Summary, []byte) {
	t.Helper()
	fake := sourcetest.NewFakeS3()
	sp := splitFor(t, fake, tn, data)
	for seg, body := range progress {
		fake.Put(work, pipeline.ProgressKey(pipeline.SiloOwner("t1"), "exec", seg), &sourcetest.Object{Data: body})
	}
	for name, rs := range parts {
		fake.Put(work, results.PartKey(pipeline.SiloOwner("t1"), "exec", name), &sourcetest.Object{Data: partBody(t, rs...)})
	}
	st := pipeline.ResultsState{Tenant: tn, Source: sp.Source, Split: &sp,
		Error: &pipeline.TaskError{Error: "PermanentError", Cause: `{"errorMessage":"record 5: 400","errorType":"PermanentError"}`}}
	if status == pipeline.StatusSucceeded {
		st.Error = nil
	}
	err := newHandler(fake).Results(context.Background(), pipeline.ResultsRequest{Kind: pipeline.TaskResults, Status: status,
		ExecutionName: "exec", RedriveCount: 1, State: st})
	if err != nil {
		t.Fatalf("got %v, want success", err)
	}
	var sum results.Summary
	if err := json.Unmarshal(fake.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), "exec", results.SummaryFile)], &sum); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	name := results.UnprocessedName(tn.Format)
	body, ok := fake.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), "exec", name)]
	if ok != (sum.Files.Unprocessed != "") {
		t.Errorf("got %s written %v, summary names %q", name, ok, sum.Files.Unprocessed)
	}
	if !ok {
		return sum, nil
	}
	return sum, body
}

func checkKeyed(t *testing.T, sum results.Summary, unprocessed []byte, wantCounts results.Counts, wantRanges []pipeline.RecordRange, wantUnproc []byte) {
	t.Helper()
	got := results.Counts{Records: sum.Records, Registered: sum.Registered, Rejected: sum.Rejected, Unprocessed: sum.Unprocessed}
	if got != wantCounts {
		t.Errorf("got counts %+v, want %+v", got, wantCounts)
	}
	if got.Records != got.Registered+got.Rejected+got.Unprocessed {
		t.Errorf("got records %d, want registered + rejected + unprocessed = %d", got.Records, got.Registered+got.Rejected+got.Unprocessed)
	}
	if !reflect.DeepEqual(sum.RegisteredAfterHalt, wantRanges) {
		t.Errorf("got registeredAfterHalt %+v, want %+v", sum.RegisteredAfterHalt, wantRanges)
	}
	if !bytes.Equal(unprocessed, wantUnproc) {
		t.Errorf("got unprocessed file %q, want %q", unprocessed, wantUnproc)
	}
}

// TestResultsKeyed: a keyed file that halted lists the records registered after its halt as
// registered, and its unprocessed file holds exactly the others, byte for byte (the header of a
// CSV file first). A list that does not fit the file counts as none: more unprocessed, never fewer.
func TestResultsKeyed(t *testing.T) {
	data := resultsFile(10) // chunks of 3: records 1-3, 4-6, 7-9, 10; record 5 spans two lines
	const header = "id,name\r\n"
	recs := func(fromTo ...int) []byte {
		s := header
		for i := 0; i+1 < len(fromTo); i += 2 {
			s += recordBytes(data, fromTo[i], fromTo[i+1])
		}
		return []byte(s)
	}
	tests := []struct {
		name       string
		fileOrder  bool
		status     string
		progress   []byte
		parts      map[string][]results.Rejection
		wantCounts results.Counts
		wantRanges []pipeline.RecordRange
		wantUnproc []byte // nil: none written
	}{
		{name: "halted inside a chunk, records of other keys registered after it",
			progress:   pipeline.EncodeKeyedProgress(1, 5, ranges(6, 7, 9, 9)),
			wantCounts: results.Counts{Records: 10, Registered: 7, Unprocessed: 3}, wantRanges: ranges(6, 7, 9, 9),
			wantUnproc: recs(5, 5, 8, 8, 10, 10)},
		{name: "a range right after the mark, the mark at its chunk's start",
			progress:   pipeline.EncodeKeyedProgress(1, 0, ranges(5, 5)),
			wantCounts: results.Counts{Records: 10, Registered: 4, Unprocessed: 6}, wantRanges: ranges(5, 5),
			wantUnproc: recs(4, 4, 6, 10)},
		{name: "a range up to the file's last record",
			progress:   pipeline.EncodeKeyedProgress(1, 5, ranges(8, 10)),
			wantCounts: results.Counts{Records: 10, Registered: 7, Unprocessed: 3}, wantRanges: ranges(8, 10),
			wantUnproc: recs(5, 7)},
		{name: "halted at the first record, a range from the second",
			progress:   pipeline.EncodeKeyedProgress(0, 0, ranges(2, 3)),
			wantCounts: results.Counts{Records: 10, Registered: 2, Unprocessed: 8}, wantRanges: ranges(2, 3),
			wantUnproc: recs(1, 1, 4, 10)},
		{name: "a range across three chunks, from the two-line record",
			progress:   pipeline.EncodeKeyedProgress(0, 2, ranges(4, 7)),
			wantCounts: results.Counts{Records: 10, Registered: 5, Unprocessed: 5}, wantRanges: ranges(4, 7),
			wantUnproc: recs(2, 3, 8, 10)},
		{name: "every record after the mark registered",
			progress:   pipeline.EncodeKeyedProgress(2, 8, ranges(9, 10)),
			wantCounts: results.Counts{Records: 10, Registered: 9, Unprocessed: 1}, wantRanges: ranges(9, 10),
			wantUnproc: recs(8, 8)},
		{name: "timed out: the ranges too", status: "TIMED_OUT",
			progress:   pipeline.EncodeKeyedProgress(1, 5, ranges(7, 7)),
			wantCounts: results.Counts{Records: 10, Registered: 5, Unprocessed: 5}, wantRanges: ranges(7, 7),
			wantUnproc: recs(5, 6, 8, 10)},
		{name: "a record registered after the halt but rejected is rejected",
			progress: pipeline.EncodeKeyedProgress(1, 5, ranges(6, 7)),
			parts: map[string][]results.Rejection{
				results.RegisterPart(1, 4): {{Line: 8, Record: 6, Error: "the core system answered 422", Status: 422, Raw: []byte("6,名前 6")}},
			},
			wantCounts: results.Counts{Records: 10, Registered: 5, Rejected: 1, Unprocessed: 4}, wantRanges: ranges(7, 7),
			wantUnproc: recs(5, 5, 8, 10)},
		{name: "a range past the file's end: none",
			progress:   []byte(`{"version":1,"next":1,"record":5,"registered":[{"first":7,"last":7},{"first":9,"last":11}]}`),
			wantCounts: results.Counts{Records: 10, Registered: 4, Unprocessed: 6}, wantUnproc: recs(5, 10)},
		{name: "a range at or before the mark of a chunk's start: none",
			progress:   pipeline.EncodeKeyedProgress(1, 0, ranges(3, 3, 6, 6)),
			wantCounts: results.Counts{Records: 10, Registered: 3, Unprocessed: 7}, wantUnproc: recs(4, 10)},
		{name: "the mark itself in a range: none",
			progress:   pipeline.EncodeKeyedProgress(1, 0, ranges(4, 5)),
			wantCounts: results.Counts{Records: 10, Registered: 3, Unprocessed: 7}, wantUnproc: recs(4, 10)},
		{name: "ranges Register never writes (touching) make the progress unreadable: the segment from its start",
			progress:   []byte(`{"version":1,"next":1,"record":5,"registered":[{"first":6,"last":6},{"first":7,"last":7}]}`),
			wantCounts: results.Counts{Records: 10, Unprocessed: 10}, wantUnproc: data},
		{name: "a range before the progress's record: the segment from its start",
			progress:   []byte(`{"version":1,"next":1,"record":5,"registered":[{"first":5,"last":6}]}`),
			wantCounts: results.Counts{Records: 10, Unprocessed: 10}, wantUnproc: data},
		{name: "a file in file order: ranges are none", fileOrder: true,
			progress:   pipeline.EncodeKeyedProgress(1, 5, ranges(6, 7)),
			wantCounts: results.Counts{Records: 10, Registered: 4, Unprocessed: 6}, wantUnproc: recs(5, 10)},
		{name: "a later run that succeeded: a stale list is not read", status: pipeline.StatusSucceeded,
			progress:   pipeline.EncodeKeyedProgress(1, 5, ranges(6, 7)),
			wantCounts: results.Counts{Records: 10, Registered: 10}},
		{name: "a later run that completed the segment: a stale list is not read",
			progress:   pipeline.EncodeKeyedProgress(4, 0, ranges(6, 7)),
			wantCounts: results.Counts{Records: 10, Registered: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := keyedTenant()
			if tt.fileOrder {
				tn.RecordOrder, tn.KeyColumns = pipeline.RecordOrderFile, nil
			}
			if len(tt.parts) > 0 {
				tn.OnInvalidRecord = pipeline.OnInvalidSkipRecord
			}
			sum, unproc := keyedResult(t, tn, data, cmpOr(tt.status, pipeline.StatusFailed), map[int][]byte{0: tt.progress}, tt.parts)
			checkKeyed(t, sum, unproc, tt.wantCounts, tt.wantRanges, tt.wantUnproc)
		})
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestResultsKeyedFormats: the records cut out of a JSON Lines file and of a CP932 file are whole
// lines and whole characters: what is left is the file's own bytes.
func TestResultsKeyedFormats(t *testing.T) {
	enc := func(s string) []byte {
		b, err := japanese.ShiftJIS.NewEncoder().Bytes([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	jsonl := jsonlFile(8)
	// "ソ" and "表" end in 0x5C, the byte of "\".
	cp932 := enc("番号,名前\r\n1,ソニー\r\n2,\"表\r\n示\"\r\n3,山田\r\n\r\n4,田中\r\n5,表示\r\n")
	tests := []struct {
		name       string
		format     string
		encoding   string
		key        string
		data       []byte
		progress   []byte
		wantCounts results.Counts
		wantRanges []pipeline.RecordRange
		wantUnproc []byte
	}{
		{name: "JSON Lines", format: pipeline.FormatJSONL, key: "id", data: jsonl,
			progress:   pipeline.EncodeKeyedProgress(0, 2, ranges(3, 3, 5, 6)),
			wantCounts: results.Counts{Records: 8, Registered: 4, Unprocessed: 4}, wantRanges: ranges(3, 3, 5, 6),
			wantUnproc: []byte(jsonlRecords(jsonl, 2, 2) + jsonlRecords(jsonl, 4, 4) + jsonlRecords(jsonl, 7, 8))},
		{name: "JSON Lines, the last record registered", format: pipeline.FormatJSONL, key: "id", data: jsonl,
			progress:   pipeline.EncodeKeyedProgress(2, 7, ranges(8, 8)),
			wantCounts: results.Counts{Records: 8, Registered: 7, Unprocessed: 1}, wantRanges: ranges(8, 8),
			wantUnproc: []byte(jsonlRecords(jsonl, 7, 7))},
		{name: "CP932, a blank line before a registered record goes with it", encoding: pipeline.EncodingCP932, key: "番号", data: cp932,
			progress:   pipeline.EncodeKeyedProgress(0, 2, ranges(4, 4)),
			wantCounts: results.Counts{Records: 5, Registered: 2, Unprocessed: 3}, wantRanges: ranges(4, 4),
			wantUnproc: enc("番号,名前\r\n2,\"表\r\n示\"\r\n3,山田\r\n5,表示\r\n")},
		{name: "CP932, the two-line record registered", encoding: pipeline.EncodingCP932, key: "番号", data: cp932,
			progress:   pipeline.EncodeKeyedProgress(0, 0, ranges(2, 2, 5, 5)),
			wantCounts: results.Counts{Records: 5, Registered: 2, Unprocessed: 3}, wantRanges: ranges(2, 2, 5, 5),
			wantUnproc: enc("番号,名前\r\n1,ソニー\r\n3,山田\r\n\r\n4,田中\r\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := keyedTenant()
			tn.Format, tn.Encoding, tn.KeyColumns = cmpOr(tt.format, pipeline.FormatCSV), cmpOr(tt.encoding, pipeline.EncodingUTF8), []string{tt.key}
			sum, unproc := keyedResult(t, tn, tt.data, pipeline.StatusFailed, map[int][]byte{0: tt.progress}, nil)
			checkKeyed(t, sum, unproc, tt.wantCounts, tt.wantRanges, tt.wantUnproc)
		})
	}
}

// TestResultsKeyedSegments: the list of the segment that halted is read, and only while it lies in
// that segment and within pipeline.MaxKeyedLead records of the mark (Register sends no further).
func TestResultsKeyedSegments(t *testing.T) {
	const n = pipeline.SegmentChunks + 30 // one record a chunk: segment 0 holds records 1-1000, segment 1 the rest
	data := resultsFile(n)
	recs := func(fromTo ...int) []byte {
		s := "id,name\r\n"
		for i := 0; i+1 < len(fromTo); i += 2 {
			s += recordBytes(data, fromTo[i], fromTo[i+1])
		}
		return []byte(s)
	}
	tests := []struct {
		name       string
		progress   map[int][]byte
		wantCounts results.Counts
		wantRanges []pipeline.RecordRange
		wantUnproc []byte
	}{
		{name: "halted in segment 1",
			progress: map[int][]byte{0: pipeline.EncodeProgress(pipeline.SegmentChunks, 0),
				1: pipeline.EncodeKeyedProgress(pipeline.SegmentChunks+4, 0, ranges(1010, 1012))},
			wantCounts: results.Counts{Records: n, Registered: 1004 + 3, Unprocessed: n - 1007}, wantRanges: ranges(1010, 1012),
			wantUnproc: recs(1005, 1009, 1013, n)},
		{name: "segment 0 done, its stale list not read, segment 1 not started",
			progress:   map[int][]byte{0: pipeline.EncodeKeyedProgress(pipeline.SegmentChunks, 0, ranges(1003, 1004))},
			wantCounts: results.Counts{Records: n, Registered: 1000, Unprocessed: n - 1000},
			wantUnproc: recs(1001, n)},
		{name: "halted in segment 0, a range into segment 1: none",
			progress:   map[int][]byte{0: pipeline.EncodeKeyedProgress(990, 0, ranges(995, 995, 1000, 1001))},
			wantCounts: results.Counts{Records: n, Registered: 990, Unprocessed: n - 990},
			wantUnproc: recs(991, n)},
		{name: "halted in segment 0, a range up to its last record",
			progress:   map[int][]byte{0: pipeline.EncodeKeyedProgress(990, 0, ranges(995, 995, 999, 1000))},
			wantCounts: results.Counts{Records: n, Registered: 993, Unprocessed: n - 993}, wantRanges: ranges(995, 995, 999, 1000),
			wantUnproc: recs(991, 994, 996, 998, 1001, n)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := keyedTenant()
			tn.ChunkSize = 1
			sum, unproc := keyedResult(t, tn, data, pipeline.StatusFailed, tt.progress, nil)
			checkKeyed(t, sum, unproc, tt.wantCounts, tt.wantRanges, tt.wantUnproc)
		})
	}
}

// TestResultsKeyedLead: a range more than pipeline.MaxKeyedLead records past the mark is one
// Register never sends: the list counts as none.
func TestResultsKeyedLead(t *testing.T) {
	const n = pipeline.MaxKeyedLead + 10
	data := resultsFile(n)
	const lead = 1 + pipeline.MaxKeyedLead // the furthest record Register sends with the mark at record 1
	tests := []struct {
		name       string
		progress   []byte
		wantCounts results.Counts
		wantRanges []pipeline.RecordRange
		wantUnproc string
	}{
		{name: "the furthest record the lead allows",
			progress:   pipeline.EncodeKeyedProgress(0, 0, ranges(500, 500, lead, lead)),
			wantCounts: results.Counts{Records: n, Registered: 2, Unprocessed: n - 2}, wantRanges: ranges(500, 500, lead, lead),
			wantUnproc: recordBytes(data, 1, 499) + recordBytes(data, 501, lead-1) + recordBytes(data, lead+1, n)},
		{name: "one further: none",
			progress:   pipeline.EncodeKeyedProgress(0, 0, ranges(500, 500, lead, lead+1)),
			wantCounts: results.Counts{Records: n, Unprocessed: n}, wantUnproc: recordBytes(data, 1, n)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum, unproc := keyedResult(t, keyedTenant(), data, pipeline.StatusFailed, map[int][]byte{0: tt.progress}, nil)
			checkKeyed(t, sum, unproc, tt.wantCounts, tt.wantRanges, []byte("id,name\r\n"+tt.wantUnproc))
		})
	}
}

// TestResultsSkippedRecordBeforeTheMark: the offsets are found as Split found them, skipping an
// invalid record of a skipRecord file on the way, in both orders.
func TestResultsSkippedRecordBeforeTheMark(t *testing.T) {
	data := []byte(strings.Replace(string(resultsFile(10)), "4,名前 4\r\n", "4\r\n", 1)) // record 4: one field
	const header = "id,name\r\n"
	tests := []struct {
		name       string
		order      string
		progress   []byte
		wantCounts results.Counts
		wantRanges []pipeline.RecordRange
		wantUnproc string
	}{
		{name: "key order", order: pipeline.RecordOrderKey, progress: pipeline.EncodeKeyedProgress(1, 5, ranges(6, 6)),
			wantCounts: results.Counts{Records: 10, Registered: 4, Rejected: 1, Unprocessed: 5}, wantRanges: ranges(6, 6),
			wantUnproc: header + recordBytes(data, 5, 5) + recordBytes(data, 7, 10)},
		{name: "file order", order: pipeline.RecordOrderFile, progress: pipeline.EncodeProgress(1, 5),
			wantCounts: results.Counts{Records: 10, Registered: 3, Rejected: 1, Unprocessed: 6},
			wantUnproc: header + recordBytes(data, 5, 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := keyedTenant()
			tn.RecordOrder, tn.OnInvalidRecord = tt.order, pipeline.OnInvalidSkipRecord
			sum, unproc := keyedResult(t, tn, data, pipeline.StatusFailed, map[int][]byte{0: tt.progress}, nil)
			checkKeyed(t, sum, unproc, tt.wantCounts, tt.wantRanges, []byte(tt.wantUnproc))
		})
	}
}

// TestSpanReader: the kept spans of a stream, read in pieces of any size, and a stream that ends
// inside a span is an unexpected EOF, never a short file taken for whole.
func TestSpanReader(t *testing.T) {
	const stream = "0123456789abcdefghij" // offsets 100-119
	tests := []struct {
		name  string
		spans []span
		want  string
		err   error
	}{
		{"one span: all", []span{{100, 120}}, stream, nil},
		{"a gap inside", []span{{100, 103}, {105, 120}}, "012" + "56789abcdefghij", nil},
		{"gaps at both ends", []span{{102, 104}, {110, 118}}, "23" + "abcdefgh", nil},
		{"empty spans are skipped", []span{{100, 100}, {101, 102}, {110, 110}, {119, 120}}, "1j", nil},
		{"nothing kept", []span{{120, 120}}, "", nil},
		{"the stream ends inside a span", []span{{100, 103}, {115, 125}}, "012fghij", io.ErrUnexpectedEOF},
		{"the stream ends inside a gap", []span{{100, 101}, {130, 131}}, "0", io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		for _, one := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/one byte at a time %v", tt.name, one), func(t *testing.T) {
				var r io.Reader = strings.NewReader(stream)
				if one {
					r = iotest.OneByteReader(r)
				}
				got, err := io.ReadAll(&spanReader{r: r, at: 100, spans: tt.spans})
				if string(got) != tt.want || !errors.Is(err, tt.err) {
					t.Errorf("got %q, %v, want %q, %v", got, err, tt.want, tt.err)
				}
			})
		}
	}
}

// TestKeptSpans: the tail from the mark less each registered range, and the kept length the
// upload declares.
func TestKeptSpans(t *testing.T) {
	tests := []struct {
		name      string
		off, size int64
		cuts      []int64
		want      []span
		wantLen   int64
	}{
		{"no cuts", 10, 100, nil, []span{{10, 100}}, 90},
		{"one range inside", 10, 100, []int64{20, 30}, []span{{10, 20}, {30, 100}}, 80},
		{"a range right at the mark", 10, 100, []int64{10, 30}, []span{{10, 10}, {30, 100}}, 70},
		{"a range to the end", 10, 100, []int64{20, 30, 50, 100}, []span{{10, 20}, {30, 50}, {100, 100}}, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n := keptSpans(tt.off, tt.size, tt.cuts)
			if !reflect.DeepEqual(got, tt.want) || n != tt.wantLen {
				t.Errorf("got %v (%d bytes), want %v (%d)", got, n, tt.want, tt.wantLen)
			}
		})
	}
}

// sourceReads counts the bytes read from the source bucket's GetObject bodies.
type sourceReads struct {
	*sourcetest.FakeS3
	n int64
}

func (s *sourceReads) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	out, err := s.FakeS3.GetObject(ctx, in, opts...)
	if err == nil && aws.ToString(in.Bucket) == ingest {
		out.Body = io.NopCloser(&countingReader{r: out.Body, n: &s.n})
	}
	return out, err
}

type countingReader struct {
	r io.Reader
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// TestResultsKeyedReadsOnce: finding the registered records' offsets scans only up to the last
// of them, so a big file's tail is read once, streamed to the upload, and not a second time.
func TestResultsKeyedReadsOnce(t *testing.T) {
	data := csvRows(150_000) // about 3 MB
	fake := sourcetest.NewFakeS3()
	tn := keyedTenant()
	tn.ChunkSize = 100
	sp := splitFor(t, fake, tn, data)
	fake.Put(work, pipeline.ProgressKey(pipeline.SiloOwner("t1"), "exec", 0), &sourcetest.Object{Data: pipeline.EncodeKeyedProgress(0, 2, ranges(3, 3, 900, 1000))})
	reads := &sourceReads{FakeS3: fake}
	h := newHandler(fake)
	h.S3 = reads
	err := h.Results(context.Background(), pipeline.ResultsRequest{Kind: pipeline.TaskResults, Status: pipeline.StatusFailed, ExecutionName: "exec",
		State: pipeline.ResultsState{Tenant: tn, Source: sp.Source, Split: &sp, Error: &pipeline.TaskError{Error: "PermanentError", Cause: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	const scanBound = 1 << 20 // the records up to 1,001 and the scan's read buffers
	t.Logf("read %d bytes from the source for a file of %d bytes", reads.n, len(data))
	if limit := int64(len(data)) + scanBound; reads.n > limit {
		t.Errorf("got %d bytes read from the source, want at most the file's %d and %d for the scan", reads.n, len(data), scanBound)
	}
	lines := strings.SplitAfter(string(data), "\r\n")
	want := lines[0] + lines[2] + strings.Join(lines[4:900], "") + strings.Join(lines[1001:], "")
	if got := fake.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), "exec", results.UnprocessedCSV)]; string(got) != want {
		t.Errorf("got unprocessed.csv of %d bytes, want %d", len(got), len(want))
	}
}
