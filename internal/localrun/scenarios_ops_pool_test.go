package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/report"
)

// poolOpsTenants: one pool of three tenants, "halt" under halt.
const poolOpsTenants = `{"pools": {"shared": {}}, "tenants": [
  {"id": "paused", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records"},
  {"id": "p1", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records"},
  {"id": "p2", "tier": "pool", "pool": "shared", "registerUrl": "https://core.example.com/records", "onFailure": "halt"}
]}`

// Pausing one pooled tenant through pipectl holds only its message group: the pool's two other
// tenants register every file meanwhile, the paused one none. Resume takes effect at once (by the
// held message made visible, not after the safety net), and the paused tenant's files register in
// order, once.
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
	// The paused tenant's first message has been received and held: status counts it in flight,
	// from the wake state the controller records for the hold.
	st := waitForStatus(t, ctx, r, opsPrefix, "paused", "the paused tenant's head is held", func(st statusJSON) bool {
		q := st.Tenants[0].Queue
		return q.InFlight != nil && *q.InFlight == 1
	})
	if n := len(r.Sink.Registered("paused")); n != 0 {
		t.Fatalf("paused: got %d records registered while paused, want 0", n)
	}
	if row := st.Tenants[0]; row.Paused == nil || !*row.Paused {
		t.Errorf("status: got paused %v, want true from the marker", row.Paused)
	}
	out = pipectl(t, r, "resume", "paused", "--stack-prefix", opsPrefix)
	if !strings.Contains(out, "made visible") {
		t.Errorf("resume: got %q, want the held message made visible", out)
	}
	// The hold lasts the controller's paused wait, longer than this test's context: a record before
	// the context ends comes from the resume's release, not from the hold running out.
	wait := pausedWait(t, synthesized(t, moduleRoot(t), poolOpsTenants))
	if end, _ := ctx.Deadline(); time.Now().Add(wait).Before(end) {
		t.Fatalf("the controller's paused wait %s ends before this test's context: the test could not tell a resume from the hold running out", wait)
	}
	waitFor(t, ctx, r, "the paused tenant's first record", func(*report.Report) bool { return len(r.Sink.Registered("paused")) > 0 })
	rep := drain(t, ctx, r)
	noViolations(t, rep)
	assertOrderedOnce(t, r, "paused", []string{"pools/shared/paused/f-0.csv", "pools/shared/paused/f-1.csv", "pools/shared/paused/f-2.csv"},
		map[string]int64{"pools/shared/paused/f-0.csv": 10, "pools/shared/paused/f-1.csv": 11, "pools/shared/paused/f-2.csv": 12})
}

// pausedWait is how long the controllers of the synthesized app in dir hold a paused tenant's
// message between looks (internal/controller, Handler.pausedWait): the safety net with wake-up events,
// MAX_WAIT_SECONDS otherwise; the shortest among them.
func pausedWait(t *testing.T, dir string) time.Duration {
	t.Helper()
	asm, err := deploy.LoadAssembly(dir)
	if err != nil {
		t.Fatal(err)
	}
	shortest := time.Duration(0)
	for _, fn := range asm.OfType("AWS::Lambda::Function") {
		var pkg string
		if err := json.Unmarshal(fn.Metadata[MetadataSource], &pkg); err != nil || pkg != controllerPkg {
			continue
		}
		var env struct{ Variables map[string]any }
		if err := json.Unmarshal(fn.Properties["Environment"], &env); err != nil {
			t.Fatalf("controller %s: environment: %v", fn.LogicalID, err)
		}
		name := "MAX_WAIT_SECONDS"
		if env.Variables["WAKE_EVENTS"] == "true" {
			name = "SAFETY_NET_SECONDS"
		} else if _, ok := env.Variables[name]; !ok {
			continue // a pool's router, which holds no message
		}
		secs, err := strconv.Atoi(fmt.Sprint(env.Variables[name]))
		if err != nil {
			t.Fatalf("controller %s: %s=%v: %v", fn.LogicalID, name, env.Variables[name], err)
		}
		if d := time.Duration(secs) * time.Second; shortest == 0 || d < shortest {
			shortest = d
		}
	}
	if shortest == 0 {
		t.Fatalf("no controller function in %s", dir)
	}
	return shortest
}
