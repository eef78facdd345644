package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Record is one parsed record of a chunk.
type Record struct {
	Number int64           // 1-based within the file, data records only
	Fields []string        // CSV: the values, in header order
	JSON   json.RawMessage // JSON Lines: the line's object
}

// Object renders the record as a JSON object: a CSV record as {header: value, ...} in header order,
// a JSON Lines record as its own object.
func (r Record) Object(header []string) (json.RawMessage, error) {
	if r.Fields == nil {
		return r.JSON, nil
	}
	if len(r.Fields) != len(header) {
		return nil, fmt.Errorf("record %d has %d fields, the header has %d", r.Number, len(r.Fields), len(header))
	}
	b := []byte{'{'}
	for i, name := range header {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(r.Fields[i])
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// ErrTooManyRecords is a range that holds more records than the chunk may: the range and the
// record count disagree, which no retry can fix.
var ErrTooManyRecords = errors.New("the range holds more records than the chunk")

// ParseRange parses the records of one chunk: r holds the raw bytes of the byte range Split
// reported, header the file's CSV header (nil for JSON Lines), first the number of the range's
// first record. It reads at most max records and fails with ErrTooManyRecords if the range holds
// more, so a wrong range cannot make it buffer without limit. It checks every record as Split did, so a range of a
// changed object fails rather than registering different data.
func ParseRange(r io.Reader, f Format, header []string, first, max int64) ([]Record, error) {
	t, err := openText(r, f, false)
	if err != nil {
		return nil, err
	}
	if f.Kind == pipeline.FormatJSONL {
		return parseJSONL(t, f, first, max)
	}
	return parseCSV(t, f, header, first, max)
}

func parseCSV(t *text, f Format, header []string, first, max int64) ([]Record, error) {
	if len(header) == 0 {
		return nil, fmt.Errorf("a CSV range needs the file's header")
	}
	cr := newCSVReader(t.in, f, len(header))
	cr.ReuseRecord = false // the records outlive the loop
	recCap := f.recordCap(len(header))
	var recs []Record
	for n := first; ; n++ {
		t.in.setLimit(cr.InputOffset() + recCap + bufSize)
		rec, err := cr.Read()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			if errors.Is(err, errRecordTooLarge) {
				return nil, &Error{Record: n, Reason: fmt.Sprintf("record is longer than %d bytes", recCap)}
			}
			return nil, csvParseError(err, n)
		}
		if int64(len(recs)) == max {
			return nil, fmt.Errorf("%w: more than %d", ErrTooManyRecords, max)
		}
		for i, v := range rec {
			if len(v) > f.MaxFieldBytes {
				return nil, &Error{Record: n, Reason: fmt.Sprintf("field %d is %d bytes, over the %d-byte limit", i+1, len(v), f.MaxFieldBytes)}
			}
			if !f.validText(v) {
				return nil, &Error{Record: n, Reason: fmt.Sprintf("field %d has bytes that are not valid %s", i+1, f.Encoding)}
			}
		}
		recs = append(recs, Record{Number: n, Fields: rec})
	}
}

func parseJSONL(t *text, f Format, first, max int64) ([]Record, error) {
	lr := &lineReader{r: newBufReader(t.in), max: f.MaxFieldBytes}
	var recs []Record
	for n := first; ; {
		b, _, err := lr.next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return nil, lineError(err, 0, n, f)
		}
		if blank(b) {
			continue
		}
		if err := checkJSONLine(b, f, true); err != nil {
			return nil, lineError(err, 0, n, f)
		}
		if int64(len(recs)) == max {
			return nil, fmt.Errorf("%w: more than %d", ErrTooManyRecords, max)
		}
		recs = append(recs, Record{Number: n, JSON: append(json.RawMessage(nil), b...)})
		n++
	}
}
