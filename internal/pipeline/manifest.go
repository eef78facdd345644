package pipeline

import (
	"encoding/binary"
	"fmt"
	"path"
)

// A manifest is the list of chunk boundaries Split finds in one object version. Register reads the
// entries of its chunk with one ranged GET, so a file of any size costs Split one PUT and each chunk
// two small GETs. The manifest's Location carries its version:
//
//   - ManifestV1 (Version 0 or 1): Chunks+1 big-endian uint64 byte offsets into the source object,
//     so chunk i is the byte range [off[i], off[i+1]); every chunk but the last holds ChunkSize
//     records, so a chunk's records follow from its index.
//   - ManifestV2: Chunks+1 entries of two big-endian uint64, the offset and the number of the first
//     record at that offset (the last entry: Records+1). Chunks cut by bytes (batch mode) hold any
//     number of records, so the manifest, not the chunk index, says which.
const (
	manifestEntryBytes   = 8
	manifestV2EntryBytes = 16

	ManifestV1 = 1
	ManifestV2 = 2
)

// Boundary is one entry of a version 2 manifest: where a chunk starts, and its first record.
type Boundary struct {
	Offset      int64
	FirstRecord int64
	// Line is the physical line (from 1) at Offset: one more than the 0x0A bytes before it. Only
	// a scan asked for lines sets it (records.Cut.Lines); it goes to the lines object
	// (EncodeLines), never to a manifest.
	Line int64
}

// ChunkSpan is one chunk as a version 2 manifest gives it.
type ChunkSpan struct {
	Start, End  int64 // the byte range [Start, End) in the source object
	FirstRecord int64 // 1-based number of the chunk's first record
	Records     int64 // records in the chunk
}

// EncodeManifestV2 renders Chunks+1 boundaries as a version 2 manifest body.
func EncodeManifestV2(bs []Boundary) []byte {
	b := make([]byte, 0, len(bs)*manifestV2EntryBytes)
	for _, x := range bs {
		b = binary.BigEndian.AppendUint64(b, uint64(x.Offset))
		b = binary.BigEndian.AppendUint64(b, uint64(x.FirstRecord))
	}
	return b
}

// ManifestRangeV2 is the HTTP Range header value that reads chunk i's two entries of a version 2
// manifest.
func ManifestRangeV2(chunk int) string {
	start := int64(chunk) * manifestV2EntryBytes
	return fmt.Sprintf("bytes=%d-%d", start, start+2*manifestV2EntryBytes-1)
}

// DecodeChunkSpan turns the 32 bytes read with ManifestRangeV2 into the chunk's span. A chunk of a
// version 2 manifest is never empty.
func DecodeChunkSpan(b []byte) (ChunkSpan, error) {
	if len(b) != 2*manifestV2EntryBytes {
		return ChunkSpan{}, fmt.Errorf("manifest entry is %d bytes, want %d", len(b), 2*manifestV2EntryBytes)
	}
	u := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[i*manifestEntryBytes:])) }
	s := ChunkSpan{Start: u(0), FirstRecord: u(1), End: u(2)}
	next := u(3)
	switch {
	case s.End <= s.Start || s.Start < 0:
		return ChunkSpan{}, fmt.Errorf("manifest entry's byte range %d..%d is empty or decreasing", s.Start, s.End)
	case s.FirstRecord < 1 || next <= s.FirstRecord:
		return ChunkSpan{}, fmt.Errorf("manifest entry's records %d..%d are empty or decreasing", s.FirstRecord, next)
	}
	s.Records = next - s.FirstRecord
	return s, nil
}

// ManifestKey is where Split writes the manifest of one file execution.
func ManifestKey(o Owner, executionName string) string {
	return path.Join(WorkDir(o), executionName, "manifest")
}

// The lines object is the physical line (from 1) at which each chunk starts, one big-endian uint64
// per chunk (Chunks entries), which Split writes beside the manifest for a tenant whose records the
// core system can reject (Tenant.CanReject): a rejection's line is its line in the chunk plus the
// chunk's first line less one, so Register reads one 8-byte entry (LinesRange) instead of counting
// the lines of the source before the chunk. Split writes it before the manifest, so a manifest
// whose Location has Lines implies it.
const linesEntryBytes = 8

// LinesKey is where Split writes the lines object of one file execution, beside its manifest.
func LinesKey(o Owner, executionName string) string {
	return path.Join(WorkDir(o), executionName, "lines")
}

// EncodeLines renders each chunk's first line as a lines object body.
func EncodeLines(lines []int64) []byte {
	b := make([]byte, 0, len(lines)*linesEntryBytes)
	for _, l := range lines {
		b = binary.BigEndian.AppendUint64(b, uint64(l))
	}
	return b
}

// LinesRange is the HTTP Range header value that reads chunk i's entry of the lines object.
func LinesRange(chunk int) string {
	start := int64(chunk) * linesEntryBytes
	return fmt.Sprintf("bytes=%d-%d", start, start+linesEntryBytes-1)
}

// DecodeLine turns the 8 bytes read with LinesRange into the chunk's first line.
func DecodeLine(b []byte) (int64, error) {
	if len(b) != linesEntryBytes {
		return 0, fmt.Errorf("lines entry is %d bytes, want %d", len(b), linesEntryBytes)
	}
	line := int64(binary.BigEndian.Uint64(b))
	if line < 1 {
		return 0, fmt.Errorf("lines entry %d is not a line number", line)
	}
	return line, nil
}

// EncodeManifest renders chunk boundary offsets (chunks+1 of them) as a manifest body.
func EncodeManifest(offsets []int64) []byte {
	b := make([]byte, 0, len(offsets)*manifestEntryBytes)
	for _, o := range offsets {
		b = binary.BigEndian.AppendUint64(b, uint64(o))
	}
	return b
}

// ManifestRange is the HTTP Range header value that reads chunk i's two boundaries.
func ManifestRange(chunk int) string {
	start := int64(chunk) * manifestEntryBytes
	return fmt.Sprintf("bytes=%d-%d", start, start+2*manifestEntryBytes-1)
}

// DecodeChunkRange turns the 16 bytes read with ManifestRange into the chunk's byte range
// [start, end) in the source object.
func DecodeChunkRange(b []byte) (start, end int64, err error) {
	if len(b) != 2*manifestEntryBytes {
		return 0, 0, fmt.Errorf("manifest entry is %d bytes, want %d", len(b), 2*manifestEntryBytes)
	}
	start = int64(binary.BigEndian.Uint64(b))
	end = int64(binary.BigEndian.Uint64(b[manifestEntryBytes:]))
	if end < start {
		return 0, 0, fmt.Errorf("manifest entry is decreasing: %d..%d", start, end)
	}
	return start, end, nil
}

// Segments groups chunks into runs of at most SegmentChunks.
func Segments(chunks int) []Segment {
	segs := []Segment{}
	for first := 0; first < chunks; first += SegmentChunks {
		segs = append(segs, Segment{Index: len(segs), FirstChunk: first, LastChunk: min(first+SegmentChunks, chunks) - 1})
	}
	return segs
}
