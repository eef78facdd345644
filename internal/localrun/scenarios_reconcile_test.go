//go:build e2e

package localrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The admission reconciler's schedule, in both tiers, with nothing uploaded: the synthesized
// scheduled rule invokes the controller (a pool's, or the core system's silo tenant with the
// smallest id), which reconciles its gates on schedule; no controller refuses the input.
func TestScenarioReconcileSchedule(t *testing.T) {
	t.Parallel()
	const tenants = `{"coreSystems": {"ledger": {"maxRunningFiles": 1}}, "tenants": [
  {"id": "b", "coreSystem": "ledger", "registerUrl": "https://core.example.com/records"},
  {"id": "a", "coreSystem": "ledger", "registerUrl": "https://core.example.com/records"}
]}`
	forEachTier(t, tenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		pooled := r.Tenant("a").Tier == TierPool
		want := []string{`"gate":"core#ledger"`}
		if pooled {
			want = append(want, `"gate":"pool#`)
		} else {
			want = append(want, `"tenant":"a"`) // the smallest id carries the schedule
		}
		log := filepath.Join(r.cfg.WorkDir, "run.log")
		var lines []string
		deadline := time.Now().Add(90 * time.Second)
		for ; time.Now().Before(deadline); time.Sleep(time.Second) {
			lines = scheduledLines(t, log)
			if containsAll(lines, want) {
				break
			}
		}
		if !containsAll(lines, want) {
			t.Fatalf("got scheduled reconcile lines %q, want lines with each of %q", lines, want)
		}
		for _, l := range lines {
			if !pooled && strings.Contains(l, `"tenant":"b"`) {
				t.Errorf("got %s, want only tenant a's controller on the schedule", l)
			}
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "unknown event shape") {
			t.Errorf("got an unknown event shape in the run log, want the scheduled input recognised")
		}
	})
}

func scheduledLines(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "gate reconciled on schedule") {
			out = append(out, l)
		}
	}
	return out
}

func containsAll(lines, parts []string) bool {
	for _, p := range parts {
		found := false
		for _, l := range lines {
			found = found || strings.Contains(l, p)
		}
		if !found {
			return false
		}
	}
	return true
}
