package main

import (
	"path/filepath"
	"testing"

	"github.com/example/tenantpipeline/internal/records"
)

// TestGenerateAndRun checks that the generated file is valid input and that run measures a real
// split of it.
func TestGenerateAndRun(t *testing.T) {
	for _, enc := range []string{"utf-8", "cp932"} {
		t.Run(enc, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bench.csv")
			if err := generate(path, 250, enc); err != nil {
				t.Fatal(err)
			}
			r, err := run(path, records.Format{Kind: "csv", Encoding: enc}, 100)
			if err != nil {
				t.Fatal(err)
			}
			if r.records != 250 || r.chunks != 3 || r.bytes < 250*80 || r.maxRSSMB <= 0 {
				t.Errorf("got %+v, want 250 records in 3 chunks of a ≥ 20 kB file", r)
			}
		})
	}
}
