package pipeline

import (
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"testing"
)

func fmtSscanf(s string, first, last *int64) (int, error) {
	return fmt.Sscanf(s, "bytes=%d-%d", first, last)
}

func TestManifestRoundTrip(t *testing.T) {
	offsets := []int64{3, 120, 4_000_000_000, 4_000_000_100}
	m := EncodeManifest(offsets)
	if len(m) != 8*len(offsets) {
		t.Fatalf("manifest is %d bytes, want %d", len(m), 8*len(offsets))
	}
	for chunk := range len(offsets) - 1 {
		var first, last int64
		if _, err := fmtSscanf(ManifestRange(chunk), &first, &last); err != nil {
			t.Fatal(err)
		}
		start, end, err := DecodeChunkRange(m[first : last+1])
		if err != nil {
			t.Fatal(err)
		}
		if start != offsets[chunk] || end != offsets[chunk+1] {
			t.Errorf("chunk %d: got [%d, %d), want [%d, %d)", chunk, start, end, offsets[chunk], offsets[chunk+1])
		}
	}
}

func TestDecodeChunkRangeRejects(t *testing.T) {
	for name, b := range map[string][]byte{
		"short":      make([]byte, 15),
		"decreasing": EncodeManifest([]int64{10, 5}),
	} {
		if _, _, err := DecodeChunkRange(b); err == nil {
			t.Errorf("%s: got no error, want one", name)
		}
	}
}

func TestSegments(t *testing.T) {
	for _, tc := range []struct {
		chunks int
		want   []Segment
	}{
		{0, []Segment{}},
		{1, []Segment{{Index: 0, FirstChunk: 0, LastChunk: 0}}},
		{1000, []Segment{{Index: 0, FirstChunk: 0, LastChunk: 999}}},
		{1001, []Segment{{Index: 0, FirstChunk: 0, LastChunk: 999}, {Index: 1, FirstChunk: 1000, LastChunk: 1000}}},
		{20000, nil},
	} {
		got := Segments(tc.chunks)
		if tc.want != nil && !equalSegments(got, tc.want) {
			t.Errorf("Segments(%d): got %v, want %v", tc.chunks, got, tc.want)
		}
		covered := 0
		for i, s := range got {
			if s.Index != i || s.FirstChunk != covered || s.LastChunk-s.FirstChunk+1 > SegmentChunks {
				t.Errorf("Segments(%d)[%d] = %+v: not contiguous or too long", tc.chunks, i, s)
			}
			covered = s.LastChunk + 1
		}
		if covered != tc.chunks {
			t.Errorf("Segments(%d) covers %d chunks", tc.chunks, covered)
		}
	}
}

func equalSegments(a, b []Segment) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestChunkRecordNumbers(t *testing.T) {
	for _, tc := range []struct {
		records            int64
		chunk, size        int
		wantFirst, wantLen int64
	}{
		{250, 0, 100, 1, 100},
		{250, 2, 100, 201, 50},
		{250, 3, 100, 301, 0},
		{2_000_000, 19_999, 100, 1_999_901, 100},
	} {
		r := ChunkRequest{Tenant: Tenant{Tenant: spec.Tenant{ChunkSize: tc.size}}, Records: tc.records, Chunk: tc.chunk}
		if got := r.FirstRecord(); got != tc.wantFirst {
			t.Errorf("%+v FirstRecord: got %d, want %d", tc, got, tc.wantFirst)
		}
		if got := r.RecordCount(); got != tc.wantLen {
			t.Errorf("%+v RecordCount: got %d, want %d", tc, got, tc.wantLen)
		}
	}
}

func TestManifestKey(t *testing.T) {
	if got, want := ManifestKey(SiloOwner("acme"), "f-123"), "work/acme/f-123/manifest"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestLinesKey(t *testing.T) {
	if got, want := LinesKey(SiloOwner("acme"), "f-123"), "work/acme/f-123/lines"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// The lines object holds one 8-byte entry per chunk, and LinesRange reads exactly chunk i's.
func TestLinesRoundTrip(t *testing.T) {
	lines := []int64{2, 1_002, 5_000_000_000}
	b := EncodeLines(lines)
	if len(b) != 8*len(lines) {
		t.Fatalf("lines object is %d bytes, want %d", len(b), 8*len(lines))
	}
	for chunk, want := range lines {
		var first, last int64
		if _, err := fmtSscanf(LinesRange(chunk), &first, &last); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeLine(b[first : last+1])
		if err != nil || got != want {
			t.Errorf("chunk %d: got %d, %v, want %d", chunk, got, err, want)
		}
	}
}

func TestDecodeLineRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"short", make([]byte, 7)},
		{"two entries", EncodeLines([]int64{1, 2})},
		{"line zero", EncodeLines([]int64{0})},
		{"negative", EncodeLines([]int64{-1})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := DecodeLine(tc.b); err == nil {
				t.Errorf("got %d and no error, want an error", got)
			}
		})
	}
}

func TestManifestV2RoundTrip(t *testing.T) {
	// Chunks of 2, 1 and 3 records (cut by bytes), the last offsets above 2^32.
	bs := []Boundary{{Offset: 3, FirstRecord: 1}, {Offset: 120, FirstRecord: 3}, {Offset: 4_000_000_000, FirstRecord: 4}, {Offset: 4_000_000_100, FirstRecord: 7}}
	want := []ChunkSpan{{3, 120, 1, 2}, {120, 4_000_000_000, 3, 1}, {4_000_000_000, 4_000_000_100, 4, 3}}
	m := EncodeManifestV2(bs)
	if len(m) != 16*len(bs) {
		t.Fatalf("manifest is %d bytes, want %d", len(m), 16*len(bs))
	}
	for chunk, w := range want {
		t.Run(fmt.Sprint("chunk ", chunk), func(t *testing.T) {
			var first, last int64
			if _, err := fmtSscanf(ManifestRangeV2(chunk), &first, &last); err != nil {
				t.Fatal(err)
			}
			got, err := DecodeChunkSpan(m[first : last+1])
			if err != nil {
				t.Fatal(err)
			}
			if got != w {
				t.Errorf("got %+v, want %+v", got, w)
			}
		})
	}
}

func TestDecodeChunkSpanRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"short", make([]byte, 31)},
		{"v1 entry", EncodeManifest([]int64{0, 10})},
		{"empty range", EncodeManifestV2([]Boundary{{Offset: 10, FirstRecord: 1}, {Offset: 10, FirstRecord: 2}})},
		{"no records", EncodeManifestV2([]Boundary{{Offset: 0, FirstRecord: 1}, {Offset: 10, FirstRecord: 1}})},
		{"record zero", EncodeManifestV2([]Boundary{{Offset: 0, FirstRecord: 0}, {Offset: 10, FirstRecord: 2}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := DecodeChunkSpan(tc.b); err == nil {
				t.Errorf("got %+v and no error, want an error", got)
			}
		})
	}
}

func TestBatchDefaults(t *testing.T) {
	for _, tc := range []struct {
		name      string
		t         Tenant
		batch     bool
		batchSize int
	}{
		{"record mode by default", Tenant{}, false, 5 * 1024 * 1024},
		{"batch", Tenant{Tenant: spec.Tenant{RegisterMode: "batch", MaxBatchBytes: 2048}}, true, 2048},
		{"dynamodb is never batch", Tenant{Tenant: spec.Tenant{RegisterMode: "batch", DynamoDB: &DynamoDBSink{Key: []string{"id"}}}}, false, 5 * 1024 * 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.t.BatchMode(); got != tc.batch {
				t.Errorf("BatchMode: got %v, want %v", got, tc.batch)
			}
			if got := tc.t.BatchBytes(); got != tc.batchSize {
				t.Errorf("BatchBytes: got %d, want %d", got, tc.batchSize)
			}
		})
	}
}
