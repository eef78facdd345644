package main

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
)

// keyStats is what validate reports of a keyed tenant's file (recordOrder "key"): how many keys
// its records have, and its longest run of consecutive records of one key. Register keeps up to
// maxRecordsInFlight requests in flight for a file, but never two of one key, so a file of few
// keys, or long runs of one, goes little faster than file order.
type keyStats struct {
	Distinct   int64  `json:"distinct"`
	LongestRun int64  `json:"longestRun"`
	RunKey     string `json:"longestRunKey"` // as records.Keyer gives it: each value quoted, comma-separated
}

// fileKeys reads the valid records of an accepted file chunk by chunk, as Register parses them
// (the boundaries are Split's, from the scan), and counts their keys. Records the scan rejected
// are skipped, as Register skips them.
func fileKeys(t pipeline.Tenant, f records.Format, name string, header []string, bounds []pipeline.Boundary) (*keyStats, error) {
	keyer, err := records.NewKeyer(t.KeyColumns, header)
	if err != nil {
		return nil, err
	}
	file, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	s := &keyStats{}
	seen := map[string]bool{}
	var last string
	var run int64
	skip := func(records.Invalid) error { return nil }
	for i := 0; i+1 < len(bounds); i++ {
		from, to := bounds[i], bounds[i+1]
		r := io.NewSectionReader(file, from.Offset, to.Offset-from.Offset)
		recs, err := records.ParseRangeSkip(r, f, header, from.FirstRecord, to.FirstRecord-from.FirstRecord, skip)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, rec := range recs {
			k, err := keyer.Key(rec)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if !seen[k] {
				seen[k] = true
				s.Distinct++
			}
			if k == last && run > 0 {
				run++
			} else {
				last, run = k, 1
			}
			if run > s.LongestRun {
				s.LongestRun, s.RunKey = run, k
			}
		}
	}
	return s, nil
}

// String is validate's line, e.g. `keys: 1,000 distinct, longest run 3 records (key "acme")`.
func (s keyStats) String() string {
	if s.Distinct == 0 {
		return "keys: none (no valid records)"
	}
	unit := "records"
	if s.LongestRun == 1 {
		unit = "record"
	}
	return fmt.Sprintf("keys: %s distinct, longest run %s %s (key %s)", grouped(s.Distinct), grouped(s.LongestRun), unit, s.RunKey)
}

// grouped writes n with a comma every three digits: 1,000.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
