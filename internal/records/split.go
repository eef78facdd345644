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
	Records int64    // data records (the CSV header is not one), the skipped ones included
	Chunks  int
	// Invalid is the records skipped as invalid (SplitCutSkip); always 0 without a Skip.
	Invalid int64
	// RawHeader is the CSV header line as in the file, in its encoding, without the BOM or the
	// line ending; SplitCutSkip only.
	RawHeader []byte
}

// Invalid is a record that failed validation and that a scan with a Skip went on past.
type Invalid struct {
	// Line is the physical line (from 1) where the record starts. ParseRangeSkip reads one range
	// and knows no lines: it leaves Line 0.
	Line int64
	// Record is the record's number in the file: a skipped record keeps its number, and the next
	// record keeps its own.
	Record int64
	// Reason is one sentence, without record contents.
	Reason string
	// Raw is the record's original bytes, in the file's encoding, without its line ending.
	Raw []byte
}

// Skip receives every invalid record of a scan, in record order. With a Skip, a scan goes on past
// a record that fails validation instead of failing the file; an error Skip returns ends the scan
// and is returned as is.
//
// What is skipped is one record: a CSV record of the wrong field count, with a field over
// maxFieldBytes, with bytes not valid in the file's encoding, or with a stray or missing quote; a
// JSON line that is not valid JSON, not an object, or not valid text. The file still fails, in
// both modes, for what no record boundary can contain: a bad header, a CSV record longer than its
// bound (Format.recordCap) or a JSON line over maxFieldBytes (the parser cannot tell where it
// ends without buffering it), and a record too large for a batch on its own.
//
// Resynchronisation after a malformed CSV record is encoding/csv's: on a quoting error it drops the
// rest of the physical line where it gave up, so the next record starts on the next line. A quote
// opened and never closed therefore makes the rest of the file one invalid record (or, past the
// record bound, fails the file). Split and Register parse the same bytes with the same reader from
// the same record boundaries, so both skip exactly the same records.
type Skip func(Invalid) error

// Split reads a whole file once, validates every record, and reports chunk boundaries as offsets
// into the raw bytes of r: first where the data starts (after the BOM and the CSV header), then
// where each chunk of chunkSize records ends, so boundary is called Chunks+1 times and chunk i is
// the byte range between calls i and i+1. Nothing but the current record and the read buffers is
// held in memory, whatever the file's size.
//
// A file that breaks its format fails with *Error. An error returned by boundary is returned as
// is; any other error is a read error of r.
func Split(r io.Reader, f Format, chunkSize int, boundary func(offset int64) error) (Summary, error) {
	return SplitCut(r, f, Cut{Records: chunkSize}, func(b pipeline.Boundary) error { return boundary(b.Offset) })
}

// Cut says where a chunk ends: after Records records, or earlier when Bytes > 0 and one more
// record would make the chunk's records, encoded as the JSON array a batch POST carries (BatchJSON
// of each, comma-separated, in brackets), longer than Bytes.
type Cut struct {
	Records int
	Bytes   int64
	// Lines makes every boundary carry its physical line (pipeline.Boundary.Line), counted from
	// the bytes the scan lets go of at each record end, so memory stays as flat as without it.
	Lines bool
}

// SplitCut is Split with chunks cut by records and, optionally, bytes. Each boundary carries the
// number of the first record after it (Records+1 for the last). A record whose encoding alone is
// over cut.Bytes fails the file with an *Error naming its line.
func SplitCut(r io.Reader, f Format, cut Cut, boundary func(pipeline.Boundary) error) (Summary, error) {
	return SplitCutSkip(r, f, cut, boundary, nil)
}

// SplitCutSkip is SplitCut that, when skip is set, reports each invalid record to skip and goes
// on. A skipped record counts as one record of its chunk (its number is taken), and adds no bytes
// to a chunk cut by bytes.
func SplitCutSkip(r io.Reader, f Format, cut Cut, boundary func(pipeline.Boundary) error, skip Skip) (Summary, error) {
	if cut.Records < 1 {
		return Summary{}, fmt.Errorf("chunk size %d must be at least 1", cut.Records)
	}
	if cut.Bytes < 0 {
		return Summary{}, fmt.Errorf("chunk byte limit %d must not be negative", cut.Bytes)
	}
	t, err := openText(r, f, true)
	if err != nil {
		return Summary{}, err
	}
	s := &splitter{text: t, f: f, chunkSize: int64(cut.Records), maxBytes: cut.Bytes, boundary: boundary, skip: skip, lines: cut.Lines}
	if skip != nil || cut.Lines {
		t.keep()
	}
	if f.Kind == pipeline.FormatJSONL {
		err = s.jsonl()
	} else {
		err = s.csv()
	}
	if err != nil {
		return Summary{}, err
	}
	return Summary{Header: s.header, Records: s.records, Chunks: s.chunks, Invalid: s.invalid, RawHeader: s.rawHeader}, nil
}

type splitter struct {
	*text
	f         Format
	chunkSize int64
	maxBytes  int64 // 0: chunks are not cut by bytes
	boundary  func(pipeline.Boundary) error
	header    []string
	records   int64
	chunks    int
	inChunk   int64 // records in the current chunk
	bytes     int64 // the current chunk's records as a JSON array
	end       int64 // decoded offset just past the last record
	recCap    int64 // CSV: the longest a record may be
	skip      Skip
	lines     bool // boundaries carry their line (Cut.Lines)
	invalid   int64
	rawHeader []byte
	keyer     *Keyer // Format.Keys' Keyer; nil without keys
}

// reject handles a record that failed validation with e, starting on line and ending at decoded
// offset off: without a Skip it fails the file with e; with one, the record is reported, counted
// in its chunk, and the scan goes on.
func (s *splitter) reject(e *Error, line, off int64) error {
	if s.skip == nil {
		return e
	}
	raw, err := s.rawBetween(s.end, off)
	if err != nil {
		return err
	}
	s.records++
	s.invalid++
	if err := s.skip(Invalid{Line: line, Record: s.records, Reason: e.Reason, Raw: trimRecord(raw)}); err != nil {
		return err
	}
	s.end = off
	if s.inChunk == 0 {
		s.bytes = 1
	}
	s.inChunk++
	if err := s.release(off); err != nil {
		return err
	}
	if s.inChunk == s.chunkSize {
		s.chunks++
		s.inChunk, s.bytes = 0, 0
		return s.cut(off)
	}
	return nil
}

// trimRecord is a record's raw bytes without the blank lines before it (encoding/csv skips them)
// and its line ending. 0x0A and 0x0D are never part of a CP932 double-byte character.
func trimRecord(b []byte) []byte {
	for len(b) > 0 && (b[0] == '\n' || b[0] == '\r') {
		if b[0] == '\r' && (len(b) < 2 || b[1] != '\n') {
			break
		}
		b = bytes.TrimPrefix(bytes.TrimPrefix(b, []byte("\r")), []byte("\n"))
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// started reports the first boundary.
func (s *splitter) started(off int64) error {
	s.end = off
	return s.cut(off)
}

// cut reports a boundary at decoded offset off, before record s.records+1.
func (s *splitter) cut(off int64) error {
	raw, err := s.offsets.at(off)
	if err != nil {
		return err
	}
	b := pipeline.Boundary{Offset: raw, FirstRecord: s.records + 1}
	if s.lines {
		if b.Line, err = s.lineAt(off); err != nil {
			return err
		}
	}
	return s.boundary(b)
}

// fits makes room for a record of size encoded bytes that starts on line: it ends the current
// chunk first if the record would take it over the byte limit. A record that fits in no chunk
// fails the file. Without a byte limit it does nothing.
func (s *splitter) fits(size, line int64) error {
	if s.maxBytes == 0 {
		return nil
	}
	if size+2 > s.maxBytes {
		return &Error{Line: line, Reason: fmt.Sprintf("record is %d bytes as JSON, so a batch holding it alone is over the maxBatchBytes limit of %d", size, s.maxBytes)}
	}
	if s.inChunk > 0 && s.bytes+size+1 > s.maxBytes {
		s.chunks++
		s.inChunk, s.bytes = 0, 0
		return s.cut(s.end)
	}
	return nil
}

// recorded counts a record of size encoded bytes that ends at decoded offset off, and reports a
// boundary when a chunk is full.
func (s *splitter) recorded(off, size int64) error {
	s.records++
	s.end = off
	if s.raw.kept != nil {
		if err := s.release(off); err != nil {
			return err
		}
	}
	if s.inChunk == 0 {
		s.bytes = 1 // "["
	}
	s.inChunk++
	s.bytes += size + 1 // the record and its "," or "]"
	if s.inChunk == s.chunkSize {
		s.chunks++
		s.inChunk, s.bytes = 0, 0
		return s.cut(off)
	}
	return nil
}

// finished reports the end of a last, partial chunk.
func (s *splitter) finished() error {
	if s.inChunk == 0 {
		return nil
	}
	s.chunks++
	return s.cut(s.end)
}

// csvSize is a CSV record's BatchJSON length, when chunks are cut by bytes.
func (s *splitter) csvSize(rec []string) (int64, error) {
	if s.maxBytes == 0 {
		return 0, nil
	}
	obj, err := Record{Fields: rec}.BatchJSON(s.header)
	return int64(len(obj)), err
}

// jsonSize is a JSON line's BatchJSON length, when chunks are cut by bytes.
func (s *splitter) jsonSize(b []byte) (int64, error) {
	if s.maxBytes == 0 {
		return 0, nil
	}
	obj, err := Record{JSON: b}.BatchJSON(nil)
	return int64(len(obj)), err
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
		return s.csvError(err, cr, rec, 0)
	}
	if err := s.checkHeader(cr, rec); err != nil {
		return err
	}
	s.header = append([]string(nil), rec...)
	if s.keyer, err = s.f.keyer(s.header); err != nil {
		line, _ := cr.FieldPos(0)
		return &Error{Line: int64(line), Reason: err.Error()}
	}
	if s.skip != nil {
		raw, err := s.rawBetween(0, cr.InputOffset())
		if err != nil {
			return err
		}
		s.rawHeader = trimRecord(raw)
	}
	if err := s.started(cr.InputOffset()); err != nil {
		return err
	}
	width := len(rec)
	s.recCap = s.f.recordCap(width)
	// endLine is the physical line the last record ended on, for records too large to parse.
	lastLine, _ := cr.FieldPos(width - 1)
	endLine := int64(lastLine + strings.Count(rec[width-1], "\n"))
	for {
		s.in.setLimit(cr.InputOffset() + s.recCap + bufSize)
		rec, err := cr.Read()
		if err == io.EOF {
			if s.in.check.bad && s.invalid == 0 {
				// Unreachable while every undecodable byte lands in some field (or in a skipped
				// record); kept so that a gap there fails the file instead of passing bad bytes on.
				return &Error{Line: endLine + 1, Reason: fmt.Sprintf("the file has bytes that are not valid %s", s.f.Encoding)}
			}
			return s.finished()
		}
		if pe := (*csv.ParseError)(nil); errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
			if len(rec) > 0 {
				l, _ := cr.FieldPos(len(rec) - 1)
				endLine = int64(l + strings.Count(rec[len(rec)-1], "\n"))
			}
			e := &Error{Line: int64(pe.StartLine), Reason: fmt.Sprintf("record has %d fields, the header has %d", len(rec), width)}
			if err := s.reject(e, int64(pe.StartLine), cr.InputOffset()); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			ferr := s.csvError(err, cr, rec, endLine)
			var pe *csv.ParseError
			if !errors.As(err, &pe) || errors.Is(err, errRecordTooLarge) {
				return ferr
			}
			// encoding/csv dropped the rest of the line where it gave up: the next record starts
			// on the next line.
			endLine = int64(pe.Line)
			if err := s.reject(ferr.(*Error), int64(pe.StartLine), cr.InputOffset()); err != nil {
				return err
			}
			continue
		}
		line, _ := cr.FieldPos(0)
		lastLine, _ = cr.FieldPos(width - 1)
		endLine = int64(lastLine + strings.Count(rec[width-1], "\n"))
		if err := s.checkFields(cr, rec); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				return err
			}
			if err := s.reject(e, int64(line), cr.InputOffset()); err != nil {
				return err
			}
			continue
		}
		if e := s.checkKey(Record{Number: s.records + 1, Fields: rec}, int64(line)); e != nil {
			if err := s.reject(e, int64(line), cr.InputOffset()); err != nil {
				return err
			}
			continue
		}
		size, err := s.csvSize(rec)
		if err != nil {
			return err
		}
		if err := s.fits(size, int64(line)); err != nil {
			return err
		}
		if err := s.recorded(cr.InputOffset(), size); err != nil {
			return err
		}
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

// csvError turns a parse error into an *Error; rec is the partial record Read returned with it,
// and endLine the line the previous record ended on.
func (s *splitter) csvError(err error, cr *csv.Reader, rec []string, endLine int64) error {
	if errors.Is(err, errRecordTooLarge) {
		return &Error{Line: endLine + 1, Reason: fmt.Sprintf("record is longer than %d bytes, so a field is over the %d-byte limit", s.recCap, s.f.MaxFieldBytes)}
	}
	e := csvParseError(err, 0)
	if pe := (*csv.ParseError)(nil); errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrQuote) {
		// encoding/csv names the line where it gave up: the stray quote's, or the file's last line
		// for a quote never closed. The field opened earlier, where the reader can look for it.
		e.(*Error).Line = int64(fieldOpenLine(cr, pe, rec))
	}
	return e
}

// fieldOpenLine is the line where the field that failed to parse opens. rec holds the fields of
// the record before it (encoding/csv returns them with the error), so the field opens on the line
// where the last of them ends; with none, on the record's first line.
func fieldOpenLine(cr *csv.Reader, pe *csv.ParseError, rec []string) int {
	n := len(rec)
	if n == 0 {
		return pe.StartLine
	}
	line, _ := cr.FieldPos(n - 1)
	return line + strings.Count(rec[n-1], "\n")
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

// checkKey checks the key of record r, which starts on line: an empty key (Keyer.Key) makes it
// invalid. Without keys it does nothing.
func (s *splitter) checkKey(r Record, line int64) *Error {
	if s.keyer == nil {
		return nil
	}
	if _, err := s.keyer.Key(r); err != nil {
		return &Error{Line: line, Reason: err.Error()}
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
	var err error
	if s.keyer, err = s.f.keyer(nil); err != nil {
		return &Error{Line: 1, Reason: err.Error()}
	}
	var off int64
	for line := int64(1); ; line++ {
		b, n, err := lr.next()
		if err == io.EOF {
			if s.in.check.bad && s.invalid == 0 {
				return &Error{Line: line, Reason: fmt.Sprintf("the file has bytes that are not valid %s", s.f.Encoding)}
			}
			return s.finished()
		}
		if err != nil {
			return lineError(err, line, 0, s.f)
		}
		start := off
		off += int64(n)
		if blank(b) {
			continue
		}
		if err := checkJSONLine(b, s.f, s.in.check.bad); err != nil {
			e := lineError(err, line, 0, s.f).(*Error)
			// The record's bytes start at its own line, not after the blank lines before it.
			s.end = start
			if err := s.reject(e, line, off); err != nil {
				return err
			}
			continue
		}
		if e := s.checkKey(Record{Number: s.records + 1, JSON: b}, line); e != nil {
			s.end = start
			if err := s.reject(e, line, off); err != nil {
				return err
			}
			continue
		}
		size, err := s.jsonSize(b)
		if err != nil {
			return err
		}
		if err := s.fits(size, line); err != nil {
			return err
		}
		if err := s.recorded(off, size); err != nil {
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
