package main

import (
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/breaker"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
)

// The text output has one breaker line per core system: its state, and while it is not closed
// since when and why.
func TestStatusBreakerLine(t *testing.T) {
	opened := now.Add(-2 * time.Minute)
	for _, tc := range []struct {
		name   string
		status breaker.Status // "" no item
		want   string
	}{
		{"no item", "", "core system ledger breaker: closed (opened 0 times)\n"},
		{"open", breaker.Open, "core system ledger breaker: open since " + opened.UTC().Format(time.RFC3339) +
			" (opened 1 times): the core system did not answer: connection refused; its running files hold at their cursor and nothing new is admitted until a probe succeeds\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := opsfake.New(now)
			w.CoreSystemOf["hooli"] = &pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 3}
			pool := opsfake.Pool("default")
			w.AddPool("TenantPipeline-Pool-default", pool, map[string]string{"hooli": pipeline.OnFailureContinue})
			w.Env[pool.ControllerFunction][pipeline.EnvCoreSystemTables] = `{"ledger":"ledger-admission"}`
			if tc.status != "" {
				w.SetBreaker("ledger-admission", schema.CoreGate("ledger"), tc.status, opened, now.Add(time.Hour), "the core system did not answer: connection refused", 1)
			}
			code, stdout, stderr := runIn(t, w, "status")
			if code != 0 {
				t.Fatalf("got exit %d (%s), want 0", code, stderr)
			}
			if !strings.Contains(stdout, tc.want) {
				t.Errorf("got %s, want the line %q", stdout, tc.want)
			}
		})
	}
}
