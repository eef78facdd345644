package pipeline

import (
	"encoding/binary"
	"fmt"
	"path"
)

// A manifest is the list of chunk boundaries Split finds in one object version: Chunks+1 big-endian
// uint64 byte offsets into the source object, so chunk i is the byte range [off[i], off[i+1]).
// Register reads the 16 bytes it needs with one ranged GET, so a file of any size costs Split one
// PUT and each chunk two small GETs.
const manifestEntryBytes = 8

// ManifestKey is where Split writes the manifest of one file execution.
func ManifestKey(tenantID, executionName string) string {
	return path.Join(WorkPrefix, tenantID, executionName, "manifest")
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
