package records

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Summary is what a scan of a whole file found.
type Summary struct {
	Header  []string // CSV field names; nil for JSON Lines
	Records int64    // data records (the CSV header is not one)
	Chunks  int
}

// Split reads a whole file once, validates every record, and reports chunk boundaries as offsets
// into the raw bytes of r: first where the data starts (after the BOM and the CSV header), then
// where each chunk of chunkSize records ends, so boundary is called Chunks+1 times and chunk i is
// the byte range between calls i and i+1. Nothing but the current record and the read buffers is
// held in memory, whatever the file's size.
//
// A file that breaks its format fails with *Error. An error returned by boundary is returned as
// is; any other error is a read error of r.
func Split(r io.Reader, f Format, chunkSize int, boundary func(offset int64) error) (Summary, error) {
	if chunkSize < 1 {
		return Summary{}, fmt.Errorf("chunk size %d must be at least 1", chunkSize)
	}
	t, err := openText(r, f, true)
	if err != nil {
		return Summary{}, err
	}
	s := &splitter{text: t, f: f, chunkSize: int64(chunkSize), boundary: boundary}
	if f.Kind == pipeline.FormatJSONL {
		err = s.jsonl()
	} else {
		err = s.csv()
	}
	if err != nil {
		return Summary{}, err
	}
	return Summary{Header: s.header, Records: s.records, Chunks: s.chunks}, nil
}

type splitter struct {
	*text
	f         Format
	chunkSize int64
	boundary  func(int64) error
	header    []string
	records   int64
	chunks    int
	end       int64 // decoded offset just past the last record
	recCap    int64 // CSV: the longest a record may be
}

// started reports the first boundary.
func (s *splitter) started(off int64) error {
	s.end = off
	raw, err := s.offsets.at(off)
	if err != nil {
		return err
	}
	return s.boundary(raw)
}

// recorded counts a record that ends at decoded offset off and reports a boundary when a chunk
// is full.
func (s *splitter) recorded(off int64) error {
	s.records++
	s.end = off
	raw, err := s.offsets.at(off)
	if err != nil {
		return err
	}
	if s.records%s.chunkSize == 0 {
		s.chunks++
		return s.boundary(raw)
	}
	return nil
}

// finished reports the end of a last, partial chunk.
func (s *splitter) finished() error {
	if s.records%s.chunkSize == 0 {
		return nil
	}
	raw, err := s.offsets.at(s.end)
	if err != nil {
		return err
	}
	s.chunks++
	return s.boundary(raw)
}

// recordCap is the largest a CSV record of n fields can be in the text: every field at the limit,
// with every character a doubled quote, plus delimiters, enclosing quotes and CRLF.
func (f Format) recordCap(n int) int64 { return int64(n)*(2*int64(f.MaxFieldBytes)+3) + 2 }

func (s *splitter) csv() error {
	cr := newCSVReader(s.in, s.f, 0)
	// The header's width is not known yet, so bound it as a record of 16 fields at the limit.
	s.recCap = s.f.recordCap(16)
	s.in.setLimit(s.recCap + bufSize)
	rec, err := cr.Read()
	if err == io.EOF {
		return s.started(cr.InputOffset())
	}
	if err != nil {
		return s.csvError(err, 0)
	}
	if err := s.checkHeader(cr, rec); err != nil {
		return err
	}
	s.header = append([]string(nil), rec...)
	if err := s.started(cr.InputOffset()); err != nil {
		return err
	}
	width := len(rec)
	s.recCap = s.f.recordCap(width)
	// endLine is the physical line the last record ended on, for records too large to parse.
	lastLine, _ := cr.FieldPos(width - 1)
	last := rec[width-1]
	for {
		s.in.setLimit(cr.InputOffset() + s.recCap + bufSize)
		rec, err := cr.Read()
		if err == io.EOF {
			if s.in.check.bad {
				// Unreachable while every undecodable byte lands in some field; kept so that a
				// gap there fails the file instead of passing bad bytes on.
				return &Error{Line: int64(lastLine+strings.Count(last, "\n")) + 1, Reason: fmt.Sprintf("the file has bytes that are not valid %s", s.f.Encoding)}
			}
			return s.finished()
		}
		if pe := (*csv.ParseError)(nil); errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
			return &Error{Line: int64(pe.StartLine), Reason: fmt.Sprintf("record has %d fields, the header has %d", len(rec), width)}
		}
		if err != nil {
			return s.csvError(err, int64(lastLine+strings.Count(last, "\n")))
		}
		if err := s.checkFields(cr, rec); err != nil {
			return err
		}
		if err := s.recorded(cr.InputOffset()); err != nil {
			return err
		}
		lastLine, _ = cr.FieldPos(width - 1)
		last = rec[width-1]
	}
}

func newCSVReader(r io.Reader, f Format, fields int) *csv.Reader {
	cr := csv.NewReader(newBufReader(r))
	cr.Comma = f.Delimiter
	cr.FieldsPerRecord = fields // 0: the header sets it
	cr.ReuseRecord = true
	cr.LazyQuotes = false
	return cr
}

// csvError turns a parse error into an *Error; endLine is the line the previous record ended on.
func (s *splitter) csvError(err error, endLine int64) error {
	if errors.Is(err, errRecordTooLarge) {
		return &Error{Line: endLine + 1, Reason: fmt.Sprintf("record is longer than %d bytes, so a field is over the %d-byte limit", s.recCap, s.f.MaxFieldBytes)}
	}
	return csvParseError(err, 0)
}

// csvParseError describes an encoding/csv error without its record. record > 0 names that record
// instead of a line (Register).
func csvParseError(err error, record int64) error {
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	reason := pe.Err.Error()
	switch {
	case errors.Is(pe.Err, csv.ErrQuote):
		reason = `a quoted field has a stray or missing '"'`
	case errors.Is(pe.Err, csv.ErrBareQuote):
		reason = `an unquoted field holds a '"'`
	}
	if record > 0 {
		return &Error{Record: record, Reason: reason}
	}
	return &Error{Line: int64(pe.Line), Reason: reason}
}

func (s *splitter) checkHeader(cr *csv.Reader, rec []string) error {
	seen := make(map[string]int, len(rec))
	for i, name := range rec {
		if err := s.checkField(cr, rec, i); err != nil {
			return err
		}
		line, _ := cr.FieldPos(i)
		if strings.TrimSpace(name) == "" {
			return &Error{Line: int64(line), Reason: fmt.Sprintf("header column %d has an empty name", i+1)}
		}
		if j, dup := seen[name]; dup {
			return &Error{Line: int64(line), Reason: fmt.Sprintf("header columns %d and %d have the same name", j+1, i+1)}
		}
		seen[name] = i
	}
	// json.Marshal escapes <, > and & as \u003c…, so this may overcount a little, never under.
	enc, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if len(enc) > pipeline.MaxHeaderBytes {
		line, _ := cr.FieldPos(0)
		return &Error{Line: int64(line), Reason: fmt.Sprintf(
			"the header is %d bytes as JSON, over the %d-byte limit: it travels in every Step Functions payload; shorten the column names", len(enc), pipeline.MaxHeaderBytes)}
	}
	return nil
}

func (s *splitter) checkFields(cr *csv.Reader, rec []string) error {
	for i, v := range rec {
		if len(v) > s.f.MaxFieldBytes || s.in.check.bad {
			if err := s.checkField(cr, rec, i); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *splitter) checkField(cr *csv.Reader, rec []string, i int) error {
	v := rec[i]
	if len(v) > s.f.MaxFieldBytes {
		line, _ := cr.FieldPos(i)
		return &Error{Line: int64(line), Reason: fmt.Sprintf("field %d is %d bytes, over the %d-byte limit", i+1, len(v), s.f.MaxFieldBytes)}
	}
	if !s.f.validText(v) {
		line, _ := cr.FieldPos(i)
		return &Error{Line: int64(line) + s.f.badTextLine(v), Reason: fmt.Sprintf("field %d has bytes that are not valid %s", i+1, s.f.Encoding)}
	}
	return nil
}

func (s *splitter) jsonl() error {
	lr := &lineReader{r: newBufReader(s.in), max: s.f.MaxFieldBytes}
	if err := s.started(0); err != nil {
		return err
	}
	var off int64
	for line := int64(1); ; line++ {
		b, n, err := lr.next()
		if err == io.EOF {
			if s.in.check.bad {
				return &Error{Line: line, Reason: fmt.Sprintf("the file has bytes that are not valid %s", s.f.Encoding)}
			}
			return s.finished()
		}
		if err != nil {
			return lineError(err, line, 0, s.f)
		}
		off += int64(n)
		if blank(b) {
			continue
		}
		if err := checkJSONLine(b, s.f, s.in.check.bad); err != nil {
			return lineError(err, line, 0, s.f)
		}
		if err := s.recorded(off); err != nil {
			return err
		}
	}
}

// lineReader reads '\n'-terminated lines of at most max bytes (without the line end).
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

var errLineTooLong = errors.New("line too long")

// next returns a line without its "\n" or "\r\n", and how many bytes it took from the text.
func (lr *lineReader) next() ([]byte, int, error) {
	b, err := lr.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		lr.buf = append(lr.buf[:0], b...)
		for err == bufio.ErrBufferFull {
			if len(lr.buf) > lr.max+2 {
				return nil, 0, errLineTooLong
			}
			b, err = lr.r.ReadSlice('\n')
			lr.buf = append(lr.buf, b...)
		}
		b = lr.buf
	}
	if err == io.EOF {
		if len(b) == 0 {
			return nil, 0, io.EOF
		}
		err = nil
	}
	if err != nil {
		return nil, 0, err
	}
	n := len(b)
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) > lr.max {
		return nil, 0, errLineTooLong
	}
	return b, n, nil
}

// errBadJSON and friends are line-level reasons; lineError adds the position.
var (
	errBadText   = errors.New("bad text")
	errBadJSON   = errors.New("not valid JSON")
	errNotObject = errors.New("not a JSON object")
)

func checkJSONLine(b []byte, f Format, suspect bool) error {
	if suspect && !f.validText(string(b)) {
		return errBadText
	}
	if !json.Valid(b) {
		return errBadJSON
	}
	if bytes.TrimLeft(b, " \t\r")[0] != '{' {
		return errNotObject
	}
	return nil
}

func lineError(err error, line, record int64, f Format) error {
	var reason string
	switch {
	case errors.Is(err, errLineTooLong):
		reason = fmt.Sprintf("line is over the %d-byte limit", f.MaxFieldBytes)
	case errors.Is(err, errBadText):
		reason = fmt.Sprintf("line has bytes that are not valid %s", f.Encoding)
	case errors.Is(err, errBadJSON):
		reason = "line is not valid JSON"
	case errors.Is(err, errNotObject):
		reason = "line is valid JSON but not an object"
	default:
		return err
	}
	if record > 0 {
		return &Error{Record: record, Reason: reason}
	}
	return &Error{Line: line, Reason: reason}
}

// blank reports a line of JSON whitespace only; such lines are skipped, not records.
func blank(b []byte) bool { return len(bytes.Trim(b, " \t\r")) == 0 }
