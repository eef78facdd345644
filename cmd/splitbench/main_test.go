package main

import (
	"github.com/example/tenantpipeline/spec"
	"path/filepath"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// TestGenerateAndRun checks that the generated file is valid input and that run measures a real
// split of it.
func TestGenerateAndRun(t *testing.T) {
	for _, c := range []struct{ enc, policy string }{{"utf-8", "failFile"}, {"cp932", "failFile"}, {"utf-8", "skipRecord"}, {"cp932", "skipRecord"}} {
		enc := c.enc
		t.Run(enc+"/"+c.policy, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bench.csv")
			if err := generate(path, 250, enc); err != nil {
				t.Fatal(err)
			}
			r, err := run(path, pipeline.Tenant{Tenant: spec.Tenant{Format: "csv", Encoding: enc, OnInvalidRecord: c.policy}}, 100)
			if err != nil {
				t.Fatal(err)
			}
			if r.records != 250 || r.chunks != 3 || r.bytes < 250*80 || r.maxRSSMB <= 0 {
				t.Errorf("got %+v, want 250 records in 3 chunks of a ≥ 20 kB file", r)
			}
		})
	}
}
