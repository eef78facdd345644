package spec

import (
	"fmt"
	"unicode/utf8"

	"golang.org/x/text/encoding/japanese"
)

// CheckDelimiter is the one rule for a CSV delimiter, used by the tenant's rules at synth and by
// Split and Register at run time: one character that encoding/csv accepts as Comma (not NUL, a
// quote, CR, LF or U+FFFD: https://pkg.go.dev/encoding/csv#Reader), and not a byte order mark.
//
// Any other character is safe in CP932 too, including '\' and '|', which are also trail bytes of
// double-byte characters (ソ is 0x83 0x5C, ポ is 0x83 0x7C): the parser only ever sees decoded text,
// never raw bytes (fixtures cp932_backslash.csv, cp932_pipe.csv). For CP932 it must be a character
// CP932 can encode, or it could never appear in a file.
func CheckDelimiter(d, encoding string) error {
	r, size := utf8.DecodeRuneInString(d)
	switch {
	case d == "" || size != len(d) || r == utf8.RuneError:
		return fmt.Errorf("%q is invalid: use exactly one character", d)
	case r == 0 || r == '"' || r == '\r' || r == '\n' || r == 0xFEFF:
		return fmt.Errorf("%q is invalid: it cannot be NUL, a quote, a line end or a byte order mark", d)
	case encoding == EncodingCP932:
		if _, err := japanese.ShiftJIS.NewEncoder().String(d); err != nil {
			return fmt.Errorf("%q is invalid for cp932 files: CP932 cannot encode it, so it never appears in a file", d)
		}
	}
	return nil
}
