package localrun

import (
	"context"
	"fmt"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"strings"
	"testing"
	"time"
)

// poolOpsTenants: one pool of three tenants, "halt" under halt.
const poolOpsTenants = `{"pools": {"shared": {}}, "tenants": [
  {"id": "paused", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records"},
  {"id": "p1", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records"},
  {"id": "p2", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records", "onFailure": "halt"}
]}`

// Pausing one pooled tenant through pipectl holds only its message group: the pool's two other
// tenants register every file meanwhile, the paused one none. Resume takes effect within seconds
// (not the safety net), and the paused tenant's files register in order, once.
func TestScenarioOpsPoolPauseResume(t *testing.T) {
	t.Parallel()
	r := startScenario(t, poolOpsTenants, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := pipectl(t, r, "pause", "paused", "--reason", "supplier resends", "--stack-prefix", opsPrefix)
	if !strings.Contains(out, "paused paused (pool shared)") {
		t.Fatalf("pause: got %q", out)
	}
	var files []upload
	for i := range 3 {
		for _, id := range []string{"paused", "p1", "p2"} {
			files = append(files, upload{id, fmt.Sprintf("f-%d.csv", i), csvOf(10 + i)})
		}
	}
	uploadAll(t, ctx, r, files)
	waitFor(t, ctx, r, "p1 and p2 finish", func(rep *report.Report) bool {
		return len(r.Sink.Registered("p1")) == 33 && len(r.Sink.Registered("p2")) == 33
	})
	time.Sleep(2 * time.Second) // the paused tenant's first message has been received and held
	if n := len(r.Sink.Registered("paused")); n != 0 {
		t.Fatalf("paused: got %d records registered while paused, want 0", n)
	}
	st := pipectlStatus(t, r, opsPrefix, "paused")
	if row := st.Tenants[0]; row.Paused == nil || !*row.Paused {
		t.Errorf("status: got paused %v, want true from the marker", row.Paused)
	}
	resumed := time.Now()
	out = pipectl(t, r, "resume", "paused", "--stack-prefix", opsPrefix)
	if !strings.Contains(out, "made visible") {
		t.Errorf("resume: got %q, want the held message made visible", out)
	}
	waitFor(t, ctx, r, "the paused tenant's first record", func(*report.Report) bool { return len(r.Sink.Registered("paused")) > 0 })
	latency := time.Since(resumed)
	t.Logf("resume took effect after %v", latency.Round(10*time.Millisecond))
	if latency > 5*time.Second {
		t.Errorf("resume took effect after %v, want within 5 s", latency)
	}
	rep := drain(t, ctx, r)
	noViolations(t, rep)
	assertOrderedOnce(t, r, "paused", []string{"pools/shared/paused/f-0.csv", "pools/shared/paused/f-1.csv", "pools/shared/paused/f-2.csv"},
		map[string]int64{"pools/shared/paused/f-0.csv": 10, "pools/shared/paused/f-1.csv": 11, "pools/shared/paused/f-2.csv": 12})
}
