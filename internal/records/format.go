// Package records reads the files tenants send: CSV (RFC 4180) and JSON Lines, in UTF-8 (with or
// without BOM) or CP932. Split uses it to validate a whole object and find chunk boundaries as raw
// byte offsets; Register uses it to parse one chunk's byte range back into records. Both sides share
// this code so that a chunk always parses to exactly the records Split counted for it.
//
// Errors that describe the file carry a line or record number and a reason, never record contents,
// so they are safe to log and to return to Step Functions.
package records

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/transform"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// Format says how one tenant's files are read.
type Format struct {
	Kind          string // pipeline.FormatCSV or pipeline.FormatJSONL
	Encoding      string // pipeline.EncodingUTF8 or pipeline.EncodingCP932
	Delimiter     rune   // CSV only
	MaxFieldBytes int    // bound of one CSV field or one JSON line, in UTF-8 bytes
	// Keys are a keyed tenant's keyColumns (pipeline.Tenant.KeyedOrder); none otherwise. With
	// them, a CSV header must have every column, and a record whose key is empty (Keyer.Key) is
	// invalid, in Split's scan and Register's parse alike.
	Keys []string
}

// FormatOf checks a tenant's format settings and fills in the defaults.
func FormatOf(t pipeline.Tenant) (Format, error) {
	f := Format{Kind: t.Format, Encoding: t.Encoding, Delimiter: ',', MaxFieldBytes: t.MaxFieldBytes}
	var errs []error
	switch f.Kind {
	case pipeline.FormatCSV, pipeline.FormatJSONL:
	default:
		errs = append(errs, fmt.Errorf("format %q is not %q or %q", t.Format, pipeline.FormatCSV, pipeline.FormatJSONL))
	}
	switch f.Encoding {
	case pipeline.EncodingUTF8, pipeline.EncodingCP932:
	default:
		errs = append(errs, fmt.Errorf("encoding %q is not %q or %q", t.Encoding, pipeline.EncodingUTF8, pipeline.EncodingCP932))
	}
	if t.Delimiter != "" {
		if err := CheckDelimiter(t.Delimiter, t.Encoding); err != nil {
			errs = append(errs, fmt.Errorf("delimiter %w", err))
		} else {
			f.Delimiter, _ = utf8.DecodeRuneInString(t.Delimiter)
		}
	}
	if t.KeyedOrder() {
		f.Keys = t.KeyColumns
	}
	switch {
	case f.MaxFieldBytes == 0:
		f.MaxFieldBytes = pipeline.DefaultMaxFieldBytes
	case f.MaxFieldBytes < 0:
		errs = append(errs, fmt.Errorf("maxFieldBytes %d must be positive", t.MaxFieldBytes))
	}
	return f, errors.Join(errs...)
}

// CheckDelimiter is the one rule for a CSV delimiter (spec.CheckDelimiter), which Split and
// Register apply at run time as the tenant's rules do at synth.
func CheckDelimiter(d, encoding string) error { return spec.CheckDelimiter(d, encoding) }

// Error is a file that breaks its format. It names the 1-based physical line in the file (Split)
// or the 1-based record number (Register), and a reason that holds no record contents.
type Error struct {
	Line   int64
	Record int64
	Reason string
}

func (e *Error) Error() string {
	if e.Record > 0 {
		return fmt.Sprintf("record %d: %s", e.Record, e.Reason)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
}

// decode returns the UTF-8 text of a raw stream.
func (f Format) decode(r io.Reader) io.Reader {
	if f.Encoding == pipeline.EncodingCP932 {
		// x/text's ShiftJIS is the WHATWG Shift_JIS, which decodes as Windows code page 932 does:
		// 0x8160 is U+FF5E (～), 0x8740 is U+2460 (①), 0x8775 is U+33A1 (㎡); the tests pin this.
		// Bytes it cannot map become U+FFFD, which validText rejects.
		return transform.NewReader(r, japanese.ShiftJIS.NewDecoder())
	}
	return r
}

// validText reports whether decoded text holds no undecodable bytes. For UTF-8 input the text is
// the raw bytes, so it must be valid UTF-8; for CP932 input the decoder has already replaced every
// byte it could not map with U+FFFD, a character CP932 itself cannot encode.
func (f Format) validText(s string) bool {
	if f.Encoding == pipeline.EncodingCP932 {
		return !strings.ContainsRune(s, utf8.RuneError)
	}
	return utf8.ValidString(s)
}

// badTextLine is the offset in lines of the first undecodable byte of s, counted from s's start.
func (f Format) badTextLine(s string) int64 {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && (size == 1 || f.Encoding == pipeline.EncodingCP932) {
			break
		}
		i += size
	}
	return int64(strings.Count(s[:i], "\n"))
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}
