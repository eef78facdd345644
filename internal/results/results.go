// Package results is what a tenant gets back from a file, under
// results/<tenant>/<file execution name>/ in the ingest bucket: summary.json, the rejected records
// (rejected.csv, or rejected.jsonl for JSON Lines files) and, for a file that failed or halted
// part-way, the records never sent (unprocessed.csv or unprocessed.jsonl).
//
// A rejected CSV row is the record's original bytes, in the file's encoding and byte for byte,
// followed by three columns: _line (the physical line where the record starts), _record (its
// record number in the file, counting from 1) and _error (one sentence). A rejected JSON Lines
// line is {"line":…,"record":…,"error":…,"value":<the original object>}.
package results

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"path"
	"strconv"

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

// Extra CSV columns after a record's own.
const (
	ColumnLine   = "_line"
	ColumnRecord = "_record"
	ColumnError  = "_error"
)

// Dir is the results folder of one file execution: results/<tenant>/<execution>/.
func Dir(tenant, execution string) string { return Prefix + tenant + "/" + execution + "/" }

// Key is the key of one results file of an execution.
func Key(tenant, execution, name string) string { return path.Join(Prefix, tenant, execution, name) }

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

// CSVHeader is the header line of rejected.csv: the file's own header line (raw, in its encoding,
// without the line ending) and the three extra columns, then "\n".
func CSVHeader(dst, rawHeader []byte, delimiter rune, encoding string) []byte {
	dst = append(dst, rawHeader...)
	return appendColumns(dst, delimiter, encoding, ColumnLine, ColumnRecord, ColumnError)
}

// AppendCSV appends one rejected.csv row: the record's bytes as they were, then _line, _record and
// _error, quoted as RFC 4180 needs and encoded in the file's encoding (a character CP932 cannot hold
// becomes "?"), then "\n".
func AppendCSV(dst []byte, r Rejection, delimiter rune, encoding string) []byte {
	dst = append(dst, r.Raw...)
	return appendColumns(dst, delimiter, encoding, strconv.FormatInt(r.Line, 10), strconv.FormatInt(r.Record, 10), r.Error)
}

// AppendUnprocessedCSV appends one record of unprocessed.csv: its bytes as they were, then "\n".
func AppendUnprocessedCSV(dst, raw []byte) []byte { return append(append(dst, raw...), '\n') }

func appendColumns(dst []byte, delimiter rune, encoding string, fields ...string) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Comma = delimiter
	_ = w.Write(append([]string{""}, fields...)) // the leading empty field puts the delimiter first
	w.Flush()
	out := b.Bytes()
	if encoding == pipeline.EncodingCP932 {
		if enc, err := japanese.ShiftJIS.NewEncoder().Bytes(out); err == nil {
			out = enc
		} else {
			out = cp932Lossy(out)
		}
	}
	return append(dst, out...)
}

// cp932Lossy encodes s to CP932 rune by rune, "?" for a rune CP932 cannot hold.
func cp932Lossy(s []byte) []byte {
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
