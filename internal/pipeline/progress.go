package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
)

// ProgressV1 is the version of a segment's progress object.
const ProgressV1 = 1

// MaxProgressBytes bounds a progress object as Register reads it; one is about 25 bytes, 45 with
// a record.
const MaxProgressBytes = 256

// Progress is how far the bundled Register has registered one segment of one file execution:
// every chunk of the segment before Next is registered. Register writes it in the work bucket
// after each successful invocation and reads it when a new segment execution (a redrive of the
// file starts one, named -r<n>) begins the segment, so that execution starts where the failed one
// stopped instead of re-sending the whole segment.
type Progress struct {
	Version int `json:"version"`
	Next    int `json:"next"`
	// Record is the first record of chunk Next not yet registered, when an invocation stopped
	// inside that chunk (ChunkResult.NextRecord); absent (0): chunk Next from its first record.
	Record int64 `json:"record,omitempty"`
}

// ProgressKey is where Register keeps the progress of one segment of a file execution, beside the
// manifest Split wrote for it (ManifestKey).
func ProgressKey(tenantID, executionName string, segment int) string {
	return path.Join(WorkPrefix, tenantID, executionName, "progress-s"+strconv.Itoa(segment)+".json")
}

// EncodeProgress renders the progress of a segment whose next chunk to register is next, from its
// record record (0: from its first).
func EncodeProgress(next int, record int64) []byte {
	b, err := json.Marshal(Progress{Version: ProgressV1, Next: next, Record: record})
	if err != nil {
		panic(err) // two ints always encode
	}
	return b
}

// DecodeProgress decodes a progress object strictly: unknown fields, data after the object, a
// version other than ProgressV1 and a negative next or record are errors. The error never quotes the body.
// Whether next lies inside the segment is the reader's to check.
func DecodeProgress(body []byte) (Progress, error) {
	var p Progress
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Progress{}, fmt.Errorf("progress: %s", JSONProblem(err, ""))
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return Progress{}, errors.New("progress: data after the object")
	}
	if p.Version != ProgressV1 {
		return Progress{}, fmt.Errorf("progress: version %d is not %d", p.Version, ProgressV1)
	}
	if p.Next < 0 {
		return Progress{}, fmt.Errorf("progress: next %d is negative", p.Next)
	}
	if p.Record < 0 {
		return Progress{}, fmt.Errorf("progress: record %d is negative", p.Record)
	}
	return p, nil
}
