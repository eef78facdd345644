// Package results is what a tenant gets back from a file, under
// results/<tenant>/<file execution name>/ in the ingest bucket: summary.json, the rejected records
// (rejected.csv, or rejected.jsonl for JSON Lines files) and, for a file that failed or halted
// part-way, the records never sent (unprocessed.csv or unprocessed.jsonl).
//
// A rejected CSV row starts with three columns: _line (the physical line where the record
// starts), _record (its record number in the file, counting from 1) and _error (one sentence),
// followed by the record's original bytes, in the file's encoding and byte for byte; the header
// line is _line,_record,_error and the file's own header line. So _line is always the first
// column, whatever the record's field count, and the file reads back by its own header. A
// rejected row that is not valid CSV (a stray or missing quote, bytes not valid in the file's
// encoding) cannot be a CSV row: it goes to rejected.jsonl beside rejected.csv, one object a line,
// {"line":…,"record":…,"error":…,"raw":"<the bytes>"}, raw being the record's bytes as a JSON
// string when they are valid UTF-8 and the file is UTF-8 (or the bytes are ASCII), otherwise
// "rawBase64" (standard base64 with padding) instead: either way the original bytes exactly.
//
// A rejected JSON Lines line is {"line":…,"record":…,"error":…,"value":<the original object>}.
package results

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"path"
	"strconv"
	"unicode/utf8"

	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Prefix holds every file's results: results/<tenant>/<execution>/.
const Prefix = pipeline.ResultsPrefix

// Names of the files in a file's results folder.
const (
	SummaryFile      = "summary.json"
	RejectedCSV      = "rejected.csv"
	RejectedJSONL    = "rejected.jsonl"
	UnprocessedCSV   = "unprocessed.csv"
	UnprocessedJSONL = "unprocessed.jsonl"
)

// AppendPart appends one line of a rejection part: r as JSON (Raw in base64, as encoding/json
// writes a []byte), then "\n".
func AppendPart(dst []byte, r Rejection) []byte {
	b, _ := json.Marshal(r) // a Rejection always marshals
	return append(append(dst, b...), '\n')
}

// Extra CSV columns, before a record's own.
const (
	ColumnLine   = "_line"
	ColumnRecord = "_record"
	ColumnError  = "_error"
)

// Dir is the results folder of one file execution: results/<tenant>/<execution>/.
func Dir(o pipeline.Owner, execution string) string { return pipeline.ResultsDir(o) + execution + "/" }

// Key is the key of one results file of an execution.
func Key(o pipeline.Owner, execution, name string) string {
	return path.Join(pipeline.ResultsDir(o), execution, name)
}

// RejectedName and UnprocessedName are the names of the rejected and unprocessed files for a
// format (pipeline.FormatCSV or pipeline.FormatJSONL).
func RejectedName(format string) string {
	if format == pipeline.FormatJSONL {
		return RejectedJSONL
	}
	return RejectedCSV
}

func UnprocessedName(format string) string {
	if format == pipeline.FormatJSONL {
		return UnprocessedJSONL
	}
	return UnprocessedCSV
}

// Rejection is one rejected record.
type Rejection struct {
	// Line is the physical line (from 1) where the record starts; Record its record number (from 1,
	// the header not counted), as in the original file.
	Line   int64 `json:"line"`
	Record int64 `json:"record"`
	// Error is one sentence: why the record was rejected.
	Error string `json:"error"`
	// Status is the core system's HTTP status, for a record the core system rejected; 0 otherwise.
	Status int `json:"status,omitempty"`
	// Raw is the record's original bytes in the file's encoding, without the line ending.
	Raw []byte `json:"raw"`
}

// CSVHeader is the header line of rejected.csv: the three extra columns, then the file's own
// header line (raw, in its encoding, without the line ending), then "\n".
func CSVHeader(dst, rawHeader []byte, delimiter rune, encoding string) []byte {
	return appendRow(dst, rawHeader, delimiter, encoding, ColumnLine, ColumnRecord, ColumnError)
}

// AppendCSV appends one rejected.csv row when it reads back as one CSV record: _line, _record
// and _error, quoted as RFC 4180 needs and encoded in the file's encoding (a character CP932
// cannot hold becomes "?"), then the record's bytes as they were, then "\n". A record that is
// not valid CSV in the file's encoding would break the rows after it: dst comes back unchanged
// and false, and the record belongs in rejected.jsonl (AppendNotCSV).
func AppendCSV(dst []byte, r Rejection, delimiter rune, encoding string) ([]byte, bool) {
	row := appendRow(nil, r.Raw, delimiter, encoding, strconv.FormatInt(r.Line, 10), strconv.FormatInt(r.Record, 10), r.Error)
	if !oneCSVRecord(row, delimiter, encoding) {
		return dst, false
	}
	return append(dst, row...), true
}

// AppendUnprocessedCSV appends one record of unprocessed.csv: its bytes as they were, then "\n".
func AppendUnprocessedCSV(dst, raw []byte) []byte { return append(append(dst, raw...), '\n') }

// appendRow appends fields written by encoding/csv in the file's encoding, then the delimiter
// and raw when raw is not empty, then "\n".
func appendRow(dst, raw []byte, delimiter rune, encoding string, fields ...string) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Comma = delimiter
	_ = w.Write(fields) // a bytes.Buffer does not fail
	w.Flush()
	text := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	if len(raw) > 0 {
		text = append(text, string(delimiter)...)
	}
	dst = append(dst, toEncoding(text, encoding)...)
	return append(append(dst, raw...), '\n')
}

// toEncoding encodes UTF-8 text in the file's encoding: CP932 rune by rune, "?" for a rune CP932
// cannot hold.
func toEncoding(s []byte, encoding string) []byte {
	if encoding != pipeline.EncodingCP932 {
		return s
	}
	if enc, err := japanese.ShiftJIS.NewEncoder().Bytes(s); err == nil {
		return enc
	}
	var out []byte
	e := japanese.ShiftJIS.NewEncoder()
	for _, r := range string(s) {
		b, err := e.Bytes([]byte(string(r)))
		if err != nil {
			b = []byte("?")
		}
		out = append(out, b...)
	}
	return out
}

// oneCSVRecord reports whether row, in the file's encoding, is exactly one CSV record as
// encoding/csv reads it after decoding (as internal/records reads the file): valid text, no
// stray or missing quote, nothing after the record.
func oneCSVRecord(row []byte, delimiter rune, encoding string) bool {
	text := row
	if encoding == pipeline.EncodingCP932 {
		// The decoder turns every byte it cannot map into U+FFFD, which CP932 cannot encode.
		d, err := japanese.ShiftJIS.NewDecoder().Bytes(row)
		if err != nil || bytes.ContainsRune(d, utf8.RuneError) {
			return false
		}
		text = d
	} else if !utf8.Valid(row) {
		return false
	}
	r := csv.NewReader(bytes.NewReader(text))
	r.Comma, r.FieldsPerRecord = delimiter, -1
	if _, err := r.Read(); err != nil {
		return false
	}
	_, err := r.Read()
	return err == io.EOF
}

// notCSVLine is one line of a CSV file's rejected.jsonl: a rejected record that is not valid CSV.
// Exactly one of Raw and RawBase64 is set (encoding/json writes a []byte as standard base64).
type notCSVLine struct {
	Line      int64   `json:"line"`
	Record    int64   `json:"record"`
	Error     string  `json:"error"`
	Status    int     `json:"status,omitempty"`
	Raw       *string `json:"raw,omitempty"`
	RawBase64 []byte  `json:"rawBase64,omitempty"`
}

// AppendNotCSV appends one line of a CSV file's rejected.jsonl: the record's bytes as a string
// when that string is exactly them and reads as the file's text (valid UTF-8, and the file is
// UTF-8 or the bytes are ASCII, which CP932 shares), else in base64; then "\n".
func AppendNotCSV(dst []byte, r Rejection, encoding string) []byte {
	l := notCSVLine{Line: r.Line, Record: r.Record, Error: r.Error, Status: r.Status}
	if utf8.Valid(r.Raw) && (encoding != pipeline.EncodingCP932 || isASCII(r.Raw)) {
		s := string(r.Raw)
		l.Raw = &s
	} else {
		l.RawBase64 = r.Raw
	}
	b, _ := json.Marshal(l) // strings, numbers and bytes: cannot fail
	return append(append(dst, b...), '\n')
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// rejectedLine is one line of rejected.jsonl.
type rejectedLine struct {
	Line   int64           `json:"line"`
	Record int64           `json:"record"`
	Error  string          `json:"error"`
	Status int             `json:"status,omitempty"`
	Value  json.RawMessage `json:"value"`
}

// AppendJSONL appends one rejected.jsonl line. Value is the original object when the line is valid
// JSON, else the line as a JSON string (a malformed line cannot be an object).
func AppendJSONL(dst []byte, r Rejection) []byte {
	v := json.RawMessage(bytes.TrimSpace(r.Raw))
	if !json.Valid(v) {
		v, _ = json.Marshal(string(r.Raw))
	} else {
		var c bytes.Buffer
		if json.Compact(&c, v) == nil {
			v = c.Bytes()
		}
	}
	b, _ := json.Marshal(rejectedLine{Line: r.Line, Record: r.Record, Error: r.Error, Status: r.Status, Value: v})
	return append(append(dst, b...), '\n')
}
