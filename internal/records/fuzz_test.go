package records

import (
	"testing"
)

// The round-trip property: for any input Split accepts, parsing each chunk's byte range and
// concatenating the records gives exactly the records of a whole-file parse, numbered 1… in file
// order. Plain `go test` runs the seed corpus in testdata/fuzz; `go test -fuzz FuzzCSVRoundTrip`
// explores further. maxField fuzzes the tenant's maxFieldBytes (0: the default), so the limits and
// their bookkeeping (blank lines cost nothing) are explored at small sizes too.

var fuzzDelimiters = []string{",", "\t", "|", `\`, ";"}

func FuzzCSVRoundTrip(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, cp932 bool, delim byte, chunkSize uint8, maxField uint16) {
		enc := "utf-8"
		if cp932 {
			enc = "cp932"
		}
		format := mustFormat(t, "csv", enc, fuzzDelimiters[int(delim)%len(fuzzDelimiters)], int(maxField))
		checkRoundTrip(t, data, format, 1+int(chunkSize%8))
	})
}

func FuzzJSONLRoundTrip(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, cp932 bool, chunkSize uint8, maxField uint16) {
		enc := "utf-8"
		if cp932 {
			enc = "cp932"
		}
		checkRoundTrip(t, data, mustFormat(t, "jsonl", enc, "", int(maxField)), 1+int(chunkSize%8))
	})
}
