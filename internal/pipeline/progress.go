package pipeline

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"time"
)

// ProgressV1 is the version of a segment's progress object.
const ProgressV1 = 1

// MaxProgressBytes bounds a progress object as Register and the results task read it; one is
// about 25 bytes, 45 with a record, 95 with a sentAt, 110 with a window, and a keyed file's lists at most MaxKeyedLead records past
// Record as ranges of at most 50 bytes each ({"first":…,"last":…}, with two 15-digit numbers, and a comma).
const MaxProgressBytes = 256 + MaxKeyedLead*50

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
	// Registered are records after Record that are registered already, in ascending order, with
	// no two ranges touching: a keyed file (Tenant.KeyedOrder) acknowledges records of other keys
	// past its low-water mark. The results task lists them as registered, not unprocessed. Absent
	// in file order.
	Registered []RecordRange `json:"registered,omitempty"`
	// SentAt is when the records from the cursor (Next, Record) on were first sent, in RFC 3339
	// with nanoseconds: Register writes it before it sends them, for a core system with an
	// idempotencyRetention, so that a Retry or a redrive that would send them again after the
	// core system may have forgotten their keys looks them up first (docs/data-path.md, "The
	// idempotency horizon"). Absent: none of them was sent.
	SentAt string `json:"sentAt,omitempty"`
	// Window is the keyed file's window (Tenant.KeyedOrder) when its last invocation ended below
	// its maxRecordsInFlight, after slow-down answers: the next invocation starts there rather
	// than at maxRecordsInFlight, so that the core system's 429s are not learned again every
	// invocation. Absent: maxRecordsInFlight (and in file order, and in progress written before it).
	Window int `json:"window,omitempty"`
}

// Sent is SentAt parsed; zero when absent.
func (p Progress) Sent() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, p.SentAt)
	return t
}

// Encode renders p (its Version set to ProgressV1).
func (p Progress) Encode() []byte {
	p.Version = ProgressV1
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // ints and strings always encode
	}
	return b
}

// RecordRange is the records First through Last of a file, both included.
type RecordRange struct {
	First int64 `json:"first"`
	Last  int64 `json:"last"`
}

// Contains reports whether record n lies in one of rs (ascending, as Progress.Registered).
func Contains(rs []RecordRange, n int64) bool {
	i, _ := slices.BinarySearchFunc(rs, n, func(r RecordRange, n int64) int { return cmp.Compare(r.Last, n) })
	return i < len(rs) && rs[i].First <= n
}

// RangesOf returns the ascending, merged ranges of the record numbers ns, in any order.
func RangesOf(ns []int64) []RecordRange {
	s := slices.Clone(ns)
	slices.Sort(s)
	s = slices.Compact(s)
	var rs []RecordRange
	for _, n := range s {
		if k := len(rs); k > 0 && rs[k-1].Last+1 == n {
			rs[k-1].Last = n
			continue
		}
		rs = append(rs, RecordRange{First: n, Last: n})
	}
	return rs
}

// ProgressKey is where Register keeps the progress of one segment of a file execution, beside the
// manifest Split wrote for it (ManifestKey).
func ProgressKey(o Owner, executionName string, segment int) string {
	return path.Join(WorkDir(o), executionName, "progress-s"+strconv.Itoa(segment)+".json")
}

// EncodeProgress renders the progress of a segment whose next chunk to register is next, from its
// record record (0: from its first).
func EncodeProgress(next int, record int64) []byte {
	return EncodeKeyedProgress(next, record, nil)
}

// EncodeKeyedProgress is EncodeProgress with the records past record already registered
// (Progress.Registered), as RangesOf returns them.
func EncodeKeyedProgress(next int, record int64, registered []RecordRange) []byte {
	return Progress{Next: next, Record: record, Registered: registered}.Encode()
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
	if p.Window < 0 || p.Window > MaxMaxRecordsInFlight {
		return Progress{}, fmt.Errorf("progress: window %d is outside 0..%d", p.Window, MaxMaxRecordsInFlight)
	}
	if len(p.Registered) > MaxKeyedLead {
		return Progress{}, fmt.Errorf("progress: %d registered ranges, more than %d", len(p.Registered), MaxKeyedLead)
	}
	for i, r := range p.Registered {
		if r.First <= p.Record || r.Last < r.First || i > 0 && r.First <= p.Registered[i-1].Last+1 {
			return Progress{}, fmt.Errorf("progress: registered range %d (%d-%d) is not ascending past record %d", i, r.First, r.Last, p.Record)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, p.SentAt); p.SentAt != "" && err != nil {
		return Progress{}, errors.New("progress: sentAt is not an RFC 3339 time")
	}
	return p, nil
}

// AcceptDuplicatesKey is the marker an operator writes (pipectl redrive --accept-duplicates)
// to let Register re-send, without looking them up, records of the file execution whose first
// send is older than its core system's idempotencyRetention, when the core system has no
// lookupUrl: beside the file's progress, under work/, which Register reads already and only the
// pipeline's roles and the operators may write. Its body is the audit record.
func AcceptDuplicatesKey(o Owner, executionName string) string {
	return path.Join(WorkDir(o), executionName, "accept-duplicates.json")
}
