//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/report"
)

// The wake-up scenarios: the controller waits for the file execution's status change event, which
// the local Step Functions server emits and the harness routes through the synthesized status rule
// to the controller (an asynchronous Lambda invocation). Each asserts per-tenant order and
// exactly-once by Idempotency-Key (assertInvariants).

// wakeSafetyNet is the scenarios' safety net (SAFETY_NET_SECONDS): short, so that a lost event
// costs seconds, not the default 5 minutes.
const wakeSafetyNet = 6 * time.Second

// wakeEnv is the construct's wake-up environment (WAKE_EVENTS=true, no in-process polling) with the
// scenarios' short safety net, so that every wait ends by an event or by the safety net.
var wakeEnv = []string{"WAKE_EVENTS=true", fmt.Sprintf("SAFETY_NET_SECONDS=%d", int(wakeSafetyNet/time.Second)), "POLL_BUDGET_SECONDS=0"}

// wakeAssembly is the synthesized app for tenantsJSON; its templates must carry the construct's
// status rule per tenant (source aws.states, the file state machine's terminal statuses, the
// controller as target), which the run routes the status change events through.
func wakeAssembly(t *testing.T, tenantsJSON string) string {
	t.Helper()
	dir := synthesized(t, moduleRoot(t), tenantsJSON)
	asm, err := deploy.LoadAssembly(dir)
	if err != nil {
		t.Fatal(err)
	}
	rules := 0
	for _, r := range asm.OfType("AWS::Events::Rule") {
		b, _ := json.Marshal(r.Properties["EventPattern"])
		if strings.Contains(string(b), `"aws.states"`) {
			rules++
		}
	}
	if rules == 0 {
		t.Fatalf("no status rule (an AWS::Events::Rule on source aws.states) in the templates of %s", dir)
	}
	return dir
}

// eventsOnlyEnv sets the controller's safety net (and so its longest wait) beyond a test's timeout:
// a file that waited for the safety net instead of an event would start only after the test ended.
func eventsOnlyEnv(timeout time.Duration) []string {
	net := int((timeout + time.Minute) / time.Second)
	return []string{fmt.Sprintf("SAFETY_NET_SECONDS=%d", net), fmt.Sprintf("MAX_WAIT_SECONDS=%d", net)}
}

// startWakeScenario starts a run of the scenario tenants with status rules and the wake-up on.
func startWakeScenario(t *testing.T, cfg Config) *Run {
	t.Helper()
	root := moduleRoot(t)
	cfg.ModuleRoot, cfg.Assembly, cfg.Node = root, wakeAssembly(t, scenarioTenants), deploy.NodeBinary(root)
	cfg.WorkDir, cfg.BinDir = t.TempDir(), filepath.Join(shared, "bin")
	cfg.EnvFor = map[string][]string{controllerPkg: append(append([]string{}, wakeEnv...), cfg.EnvFor[controllerPkg]...)}
	return startRun(t, cfg, 5*time.Minute)
}

// wakeFiles is the workload of the status event scenarios: two tenants, files that queue behind
// each other (each waits for the previous file's status event or the safety net).
func wakeFiles() []upload {
	return []upload{
		{"cont", "a.csv", csvOf(150)}, {"cont", "b.csv", csvOf(120)}, {"cont", "c.csv", csvOf(60)}, {"cont", "d.csv", csvOf(40)},
		{"ov", "x.csv", csvOf(110)}, {"ov", "y.csv", csvOf(40)}, {"ov", "z.csv", csvOf(80)},
	}
}

func assertAllSucceeded(t *testing.T, rep *report.Report, files []upload) {
	t.Helper()
	for _, f := range files {
		fr := fileOf(t, rep, f.tenant, f.rel)
		if fr.Status != "SUCCEEDED" || fr.Executions != 1 {
			t.Errorf("%s/%s: got %s with %d executions, want SUCCEEDED with 1", f.tenant, f.rel, fr.Status, fr.Executions)
		}
		if want := int64(strings.Count(string(f.body), "\n") - 1); fr.Records != want {
			t.Errorf("%s/%s: got %d records, want %d", f.tenant, f.rel, fr.Records, want)
		}
	}
}

func TestScenarioStatusEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		// onEvents: every wait must end on an event (or on the controller's own retry), never on
		// the safety net, which is then set longer than the test's context (eventsOnlyEnv): a wait
		// left to it fails the test, however loaded the machine.
		onEvents bool
		// slow makes the sink answer each record in this long, so that files run for seconds.
		slow  time.Duration
		check func(t *testing.T, r *Run, rep *report.Report, c StatusEventCounts)
	}{
		{
			name: "30 percent dropped",
			// Seed 2 loses 3 of the 7 files' end events (the 1st, 4th and 5th to end), so at least
			// one is not a tenant's last file and holds the next file until the safety net.
			cfg: Config{EventBridge: EventBridgeOptions{StatusEvents: StatusEvents{Drop: 0.3, Seed: 2}}},
			check: func(t *testing.T, r *Run, rep *report.Report, c StatusEventCounts) {
				if c.Dropped == 0 || c.Dropped == c.Invokes+c.Dropped {
					t.Errorf("file executions' end events dropped: got %d of %d, want some but not all", c.Dropped, c.Invokes+c.Dropped)
				}
				// Each lost end is found by the safety net's delivery, which describes the execution
				// (no in-process polling; a delivered SUCCEEDED releases its file on the record, with no
				// describe, since the app's bucket carries the write Deny).
				if got := rep.APICalls["stepfunctions"]["DescribeExecution"]; got < c.Dropped {
					t.Errorf("DescribeExecution calls: got %d, want at least one per lost event (%d)", got, c.Dropped)
				}
				// A lost event is made up for by the safety net: the next file waited for it (a wait
				// can only grow on a loaded machine), and the run drained.
				if max := time.Duration(rep.InterFileGapSecond.Max * float64(time.Second)); max < wakeSafetyNet/3 {
					t.Errorf("largest inter-file gap: got %s, want at least %s (a file held until the safety net)", max, wakeSafetyNet/3)
				}
			},
		},
		{
			name:     "every event twice",
			cfg:      Config{EventBridge: EventBridgeOptions{StatusEvents: StatusEvents{Duplicate: true}}},
			onEvents: true,
			check: func(t *testing.T, r *Run, rep *report.Report, c StatusEventCounts) {
				if c.Routed != 2*c.Emitted || c.Emitted == 0 {
					t.Errorf("status events routed: got %d of %d emitted, want twice each", c.Routed, c.Emitted)
				}
			},
		},
		{
			name: "20 percent of DescribeExecution throttled",
			// In-process polling on (10 s), so that the controller describes each running file
			// several times, as without events or after a lost one.
			cfg:      Config{StepFunctions: StepFunctionsOptions{Throttle: SFNThrottle{DescribeExecution: 0.2, Seed: 3}}, EnvFor: map[string][]string{controllerPkg: {"POLL_BUDGET_SECONDS=10"}}},
			slow:     15 * time.Millisecond,
			onEvents: true,
			check: func(t *testing.T, r *Run, rep *report.Report, c StatusEventCounts) {
				if c.Throttled["DescribeExecution"] == 0 {
					t.Errorf("DescribeExecution calls throttled: got 0 of %d, want some", rep.APICalls["stepfunctions"]["DescribeExecution"])
				}
			},
		},
		{
			name: "20 percent of StartExecution throttled",
			cfg:  Config{StepFunctions: StepFunctionsOptions{Throttle: SFNThrottle{StartExecution: 0.2, Seed: 5}}},
			// Files of seconds, so that a tenant held for a second or two by a throttled start
			// still runs beside the other.
			slow: 15 * time.Millisecond,
			// A throttled start holds the file for the controller's jittered backoff (from 1 s), its
			// own retry.
			onEvents: true,
			check: func(t *testing.T, r *Run, rep *report.Report, c StatusEventCounts) {
				if c.Throttled["StartExecution"] == 0 {
					t.Errorf("StartExecution calls throttled: got 0 of %d, want some", startCount(rep))
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const timeout = 4 * time.Minute
			if tc.onEvents {
				tc.cfg.EnvFor = map[string][]string{controllerPkg: append(append([]string{}, tc.cfg.EnvFor[controllerPkg]...), eventsOnlyEnv(timeout)...)}
			}
			r := startWakeScenario(t, tc.cfg)
			if tc.slow > 0 {
				r.Sink.SetDelay(func(string, string, int64) time.Duration { return tc.slow })
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			files := wakeFiles()
			uploadAll(t, ctx, r, files)
			rep := drain(t, ctx, r)
			c := r.StatusEventCounts()
			t.Logf("status events: %+v; gap mean %.2f s max %.2f s (n %d); calls %v; controller errors %d",
				c, rep.InterFileGapSecond.Mean, rep.InterFileGapSecond.Max, rep.InterFileGapSecond.N, rep.APICalls["stepfunctions"], r.MappingErrors())

			assertInvariants(t, r, rep, []string{"cont", "ov"}, false)
			assertAllSucceeded(t, rep, files)
			// One StartExecution per file, plus the ones refused with ThrottlingException (a refused
			// call is counted as a call and tried again).
			if got, want := startCount(rep), int64(len(files))+c.Throttled["StartExecution"]; got != want {
				t.Errorf("StartExecution calls: got %d, want %d (files + throttled)", got, want)
			}
			// The controller woke on events: its status rule invoked it.
			if c.Invokes == 0 {
				t.Errorf("asynchronous invocations of the status rule's target: got 0, want some")
			}
			// Throttling, a lost or a repeated event are never errors of the controller.
			if got := r.MappingErrors(); got != 0 {
				t.Errorf("failed controller invocations: got %d, want 0", got)
			}
			// Files waited behind each other, so each wait above was one for the previous file's end.
			if rep.InterFileGapSecond.N == 0 {
				t.Errorf("inter-file gaps: got none, want files that waited behind each other")
			}
			tc.check(t, r, rep, c)
		})
	}
}

// checkControlPrefixProtected fails unless every controller function with wake-up events of the
// synthesized app in dir has CONTROL_PREFIX_PROTECTED=want.
func checkControlPrefixProtected(t *testing.T, dir, want string) {
	t.Helper()
	asm, err := deploy.LoadAssembly(dir)
	if err != nil {
		t.Fatal(err)
	}
	controllers := 0
	for _, fn := range asm.OfType("AWS::Lambda::Function") {
		var pkg string
		if err := json.Unmarshal(fn.Metadata[MetadataSource], &pkg); err != nil || pkg != controllerPkg {
			continue
		}
		var env struct{ Variables map[string]any }
		if err := json.Unmarshal(fn.Properties["Environment"], &env); err != nil {
			t.Fatalf("controller %s: environment: %v", fn.LogicalID, err)
		}
		if env.Variables["WAKE_EVENTS"] != "true" {
			continue // a pool's router, or a controller without wake-up events
		}
		controllers++
		if got := env.Variables["CONTROL_PREFIX_PROTECTED"]; got != want {
			t.Errorf("controller %s: got CONTROL_PREFIX_PROTECTED=%v, want %s", fn.LogicalID, got, want)
		}
	}
	if controllers == 0 {
		t.Fatalf("no controller function with wake-up events in %s", dir)
	}
}
