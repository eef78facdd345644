package records

import (
	"bytes"
	"encoding/csv"
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
	// Raw and Line are set by ParseRawRange only: Raw is the record's original bytes in the file's
	// encoding, without its line ending (a slice of the range, not a copy); Line is the physical
	// line of the range (from 1) where the record starts.
	Raw  []byte
	Line int64
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

// BatchJSON is the record exactly as a batch POST's "records" array holds it: Object, compacted
// and escaped as encoding/json embeds a json.RawMessage. Split measures chunks with it, so the
// bytes Split counts are the bytes Register sends.
func (r Record) BatchJSON(header []string) (json.RawMessage, error) {
	obj, err := r.Object(header)
	if err != nil {
		return nil, err
	}
	return json.Marshal(obj)
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
	return ParseRangeSkip(r, f, header, first, max, nil)
}

// ParseRangeSkip is ParseRange that, when skip is set, reports each invalid record to skip (with
// Line 0) and goes on, as SplitCutSkip does: the records it returns are the valid ones, with their
// numbers in the file, and max bounds the valid and the skipped together.
func ParseRangeSkip(r io.Reader, f Format, header []string, first, max int64, skip Skip) ([]Record, error) {
	t, err := openText(r, f, false)
	if err != nil {
		return nil, err
	}
	if skip != nil {
		t.keep()
	}
	p := &ranger{text: t, skip: skip}
	if f.Kind == pipeline.FormatJSONL {
		return p.parseJSONL(f, first, max)
	}
	return p.parseCSV(f, header, first, max)
}

// ParseRawRange is ParseRange over the range's bytes in memory, and gives each record its Raw
// bytes and its Line in the range: what a rejected record's row needs. ParseRange keeps neither,
// so the common path holds no more than the parsed values.
func ParseRawRange(raw []byte, f Format, header []string, first, max int64) ([]Record, error) {
	return ParseRawRangeSkip(raw, f, header, first, max, nil)
}

// ParseRawRangeSkip is ParseRawRange with ParseRangeSkip's skip.
func ParseRawRangeSkip(raw []byte, f Format, header []string, first, max int64, skip Skip) ([]Record, error) {
	t, err := openText(bytes.NewReader(raw), f, false)
	if err != nil {
		return nil, err
	}
	if skip != nil {
		t.keep()
	}
	p := &ranger{text: t, skip: skip, spans: &rawSpans{raw: raw, offsets: t.offsets}}
	if f.Kind == pipeline.FormatJSONL {
		return p.parseJSONL(f, first, max)
	}
	return p.parseCSV(f, header, first, max)
}

// ranger is the state of one ParseRangeSkip.
type ranger struct {
	*text
	skip    Skip
	skipped int64
	end     int64     // decoded offset of the last record's end
	spans   *rawSpans // ParseRawRange's: each valid record's Raw and Line
}

// reject reports record n, which failed with e and ends at decoded offset off, or fails the range
// with e without a Skip.
func (p *ranger) reject(e *Error, off int64) error {
	if p.skip == nil {
		return e
	}
	raw, err := p.rawBetween(p.end, off)
	if err != nil {
		return err
	}
	p.skipped++
	if err := p.skip(Invalid{Record: e.Record, Reason: e.Reason, Raw: trimRecord(raw)}); err != nil {
		return err
	}
	if p.spans != nil {
		if err := p.spans.skip(off); err != nil {
			return err
		}
	}
	return p.done(off)
}

// done notes a record end at decoded offset off.
func (p *ranger) done(off int64) error {
	p.end = off
	if p.skip == nil {
		return nil
	}
	return p.release(off)
}

func (p *ranger) parseCSV(f Format, header []string, first, max int64) ([]Record, error) {
	t := p.text
	if len(header) == 0 {
		return nil, fmt.Errorf("a CSV range needs the file's header")
	}
	keyer, err := f.keyer(header)
	if err != nil {
		return nil, &Error{Record: first, Reason: err.Error()}
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
		if int64(len(recs))+p.skipped == max && (err == nil || p.skip != nil && errors.As(err, new(*csv.ParseError))) {
			return nil, fmt.Errorf("%w: more than %d", ErrTooManyRecords, max)
		}
		if err != nil {
			if errors.Is(err, errRecordTooLarge) {
				return nil, &Error{Record: n, Reason: fmt.Sprintf("record is longer than %d bytes", recCap)}
			}
			err = csvParseError(err, n)
			var e *Error
			if !errors.As(err, &e) {
				return nil, err
			}
			if err := p.reject(e, cr.InputOffset()); err != nil {
				return nil, err
			}
			continue
		}
		if e := f.checkRecord(rec, n); e != nil {
			if err := p.reject(e, cr.InputOffset()); err != nil {
				return nil, err
			}
			continue
		}
		r := Record{Number: n, Fields: rec}
		if e := checkKey(keyer, r); e != nil {
			if err := p.reject(e, cr.InputOffset()); err != nil {
				return nil, err
			}
			continue
		}
		if p.spans != nil {
			if err := p.spans.next(&r, cr.InputOffset()); err != nil {
				return nil, err
			}
		}
		if err := p.done(cr.InputOffset()); err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
}

// checkKey checks record r's key as Split does: an empty key makes it invalid. A nil keyer (no
// keys) accepts every record.
func checkKey(k *Keyer, r Record) *Error {
	if k == nil {
		return nil
	}
	if _, err := k.Key(r); err != nil {
		return &Error{Record: r.Number, Reason: err.Error()}
	}
	return nil
}

// checkRecord checks the fields of CSV record n as Split does.
func (f Format) checkRecord(rec []string, n int64) *Error {
	for i, v := range rec {
		if len(v) > f.MaxFieldBytes {
			return &Error{Record: n, Reason: fmt.Sprintf("field %d is %d bytes, over the %d-byte limit", i+1, len(v), f.MaxFieldBytes)}
		}
		if !f.validText(v) {
			return &Error{Record: n, Reason: fmt.Sprintf("field %d has bytes that are not valid %s", i+1, f.Encoding)}
		}
	}
	return nil
}

func (p *ranger) parseJSONL(f Format, first, max int64) ([]Record, error) {
	keyer, err := f.keyer(nil)
	if err != nil {
		return nil, &Error{Record: first, Reason: err.Error()}
	}
	lr := &lineReader{r: newBufReader(p.in), max: f.MaxFieldBytes}
	var recs []Record
	var off int64
	for n := first; ; {
		b, size, err := lr.next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return nil, lineError(err, 0, n, f)
		}
		start := off
		off += int64(size)
		if blank(b) {
			if p.spans != nil {
				if err := p.spans.skip(off); err != nil {
					return nil, err
				}
			}
			continue
		}
		full := int64(len(recs))+p.skipped == max
		if err := checkJSONLine(b, f, true); err != nil {
			if p.skip == nil {
				return nil, lineError(err, 0, n, f)
			}
			if full {
				return nil, fmt.Errorf("%w: more than %d", ErrTooManyRecords, max)
			}
			p.end = start // the record's bytes start at its own line
			if err := p.reject(lineError(err, 0, n, f).(*Error), off); err != nil {
				return nil, err
			}
			n++
			continue
		}
		if full {
			return nil, fmt.Errorf("%w: more than %d", ErrTooManyRecords, max)
		}
		r := Record{Number: n, JSON: append(json.RawMessage(nil), b...)}
		if e := checkKey(keyer, r); e != nil {
			if p.skip == nil {
				return nil, e
			}
			p.end = start
			if err := p.reject(e, off); err != nil {
				return nil, err
			}
			n++
			continue
		}
		if p.spans != nil {
			if err := p.spans.next(&r, off); err != nil {
				return nil, err
			}
		}
		if err := p.done(off); err != nil {
			return nil, err
		}
		recs = append(recs, r)
		n++
	}
}

// rawSpans cuts each record's original bytes out of the range: a record runs from the end of
// the one before it (in the decoded text, mapped back to the raw bytes by rawOffsets) to its own
// end, less the blank lines before it and its line ending.
type rawSpans struct {
	raw     []byte
	offsets *rawOffsets
	end     int64 // the raw offset where the last record ended
	lines   int64 // the line ends in raw[:end]
}

// skip moves past a blank line that ends at decoded offset decodedEnd.
func (s *rawSpans) skip(decodedEnd int64) error {
	end, err := s.offsets.at(decodedEnd)
	if err != nil {
		return err
	}
	if end > int64(len(s.raw)) || end < s.end {
		return fmt.Errorf("a blank line ends at byte %d, outside the range's %d bytes", end, len(s.raw))
	}
	s.lines += int64(bytes.Count(s.raw[s.end:end], []byte("\n")))
	s.end = end
	return nil
}

// next sets rec's Raw and Line from the decoded offset just past its end.
func (s *rawSpans) next(rec *Record, decodedEnd int64) error {
	end, err := s.offsets.at(decodedEnd)
	if err != nil {
		return err
	}
	if end > int64(len(s.raw)) || end < s.end {
		return fmt.Errorf("record %d ends at byte %d, outside the range's %d bytes", rec.Number, end, len(s.raw))
	}
	b, start := s.raw[s.end:end], s.end
	for len(b) > 0 && (b[0] == '\n' || b[0] == '\r' && len(b) > 1 && b[1] == '\n') { // blank lines
		if b[0] == '\r' {
			b, start = b[1:], start+1
		}
		b, start, s.lines = b[1:], start+1, s.lines+1
	}
	rec.Line = s.lines + 1
	s.lines += int64(bytes.Count(b, []byte("\n")))
	b = bytes.TrimSuffix(b, []byte("\n"))
	rec.Raw = bytes.TrimSuffix(b, []byte("\r"))
	s.end = end
	return nil
}
