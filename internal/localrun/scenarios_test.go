//go:build e2e || figures

package localrun

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// The fault scenarios run the synthesized app (cdk synth of a tenants file) with the real
// Lambda binaries. Each scenario starts its own emulators, so a failure names one scenario; the
// assemblies and binaries are shared by the whole test binary.

// scenarioTenants is the tenants file of every scenario but the burst: one tenant per failure
// policy and idempotency key, and "wide" with one record per chunk (the 1,000-chunk segment of
// TestScenarioWideSegment). The harness replaces registerUrl with the embedded sink.
const scenarioTenants = `{"tenants": [
  {"id": "cont", "registerUrl": "https://core.example.com/records"},
  {"id": "halt", "onFailure": "halt", "registerUrl": "https://core.example.com/records"},
  {"id": "ov", "idempotencyKey": "object-version", "registerUrl": "https://core.example.com/records"},
  {"id": "wide", "chunkSize": 1, "registerUrl": "https://core.example.com/records"}
]}`

const controllerPkg, registerPkg = "lambdas/controller", "lambdas/register"

// shared is the test binary's directory for assemblies and Lambda binaries.
var shared string

func TestMain(m *testing.M) {
	// The scenarios mostly wait (on the emulators, backoffs, safety nets, a slow sink) rather than
	// compute, so more of them run at once than go test's default of one per CPU: three per CPU,
	// at least six, which took the package from 468 s to about 360 s on 2 cores with both cores
	// still busy; -parallel on the command line still decides.
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		flag.Set("test.parallel", strconv.Itoa(max(6, 3*runtime.GOMAXPROCS(0))))
	}
	// The scenarios synthesize tenants files written to temp folders, with no committed stack
	// assignment; under CI=true (as CI runs the tests) synth would refuse to write one.
	os.Unsetenv("CI")
	dir, err := os.MkdirTemp("", "localrun-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = dir
	batch.Bin = filepath.Join(dir, "synthbatch")
	code := m.Run()
	batch.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// synths synthesize each distinct app once per test binary, in shared: tenants files with the same
// values share one cdk synth however they are written (deploy.Synths).
// They run in one synthbatch process (deploy.Batch), which TestMain ends.
var synths = sync.OnceValue(func() *deploy.Synths {
	return &deploy.Synths{Dir: shared, Synth: batch.Synth}
})

var batch = &deploy.Batch{}

// written counts the distinct tenants files as written (with their extra context), to log how many
// synths the content key saves.
var written sync.Map

// synthesized synthesizes the app for a tenants file once per test binary.
func synthesized(t *testing.T, root, tenantsJSON string) string {
	t.Helper()
	return synthesizedWith(t, root, tenantsJSON, nil)
}

// synthesizedWith synthesizes the app for a tenants file and extra context (Synth) once per test
// binary and content.
func synthesizedWith(t *testing.T, root, tenantsJSON string, extra map[string]string) string {
	t.Helper()
	written.Store(fmt.Sprint(tenantsJSON, extra), true)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // a cold aws-cdk-go build
	defer cancel()
	start := time.Now()
	dir, err := synths().Assembly(ctx, root, []byte(tenantsJSON), extra)
	if err != nil {
		t.Fatalf("synth: %v", err)
	}
	n := 0
	written.Range(func(any, any) bool { n++; return true })
	t.Logf("cdk synth: %.1fs; %d synths so far for %d tenants files as written", time.Since(start).Seconds(), synths().Runs(), n)
	return dir
}

// startScenario starts a run of the synthesized app for tenantsJSON; everything it starts is
// stopped when the test ends, and the run log's tail is printed when it failed.
func startScenario(t *testing.T, tenantsJSON string, cfg Config) *Run {
	t.Helper()
	return startScenarioWith(t, tenantsJSON, nil, cfg)
}

// startScenarioWith is startScenario for the app synthesized with extra context.
func startScenarioWith(t *testing.T, tenantsJSON string, extra map[string]string, cfg Config) *Run {
	t.Helper()
	root := moduleRoot(t)
	cfg.ModuleRoot, cfg.Assembly, cfg.Node = root, synthesizedWith(t, root, tenantsJSON, extra), deploy.NodeBinary(root)
	cfg.WorkDir, cfg.BinDir = t.TempDir(), filepath.Join(shared, "bin")
	return startRun(t, cfg, 5*time.Minute)
}

// upload is one file of a scenario.
type upload struct {
	tenant, rel string
	body        []byte
}

func uploadAll(t *testing.T, ctx context.Context, r *Run, files []upload) {
	t.Helper()
	for _, f := range files {
		if _, err := r.Upload(ctx, f.tenant, f.rel, f.body); err != nil {
			t.Fatal(err)
		}
	}
}

// drain waits until the run has drained and returns the report.
func drain(t *testing.T, ctx context.Context, r *Run) *report.Report {
	t.Helper()
	err := r.WaitDrained(ctx, nil, 250*time.Millisecond)
	rep, serr := r.Snapshot(context.Background())
	if serr != nil {
		t.Fatal(serr)
	}
	if err != nil {
		t.Fatalf("%v; progress: %s", err, report.ProgressLine(rep, r.TenantIDs()))
	}
	return rep
}

// waitFor polls the report until cond holds.
func waitFor(t *testing.T, ctx context.Context, r *Run, what string, cond func(*report.Report) bool) *report.Report {
	t.Helper()
	for {
		rep, err := r.Snapshot(ctx)
		if err == nil && cond(rep) {
			return rep
		}
		select {
		case <-ctx.Done():
			line := ""
			if rep != nil {
				line = report.ProgressLine(rep, r.TenantIDs())
			}
			t.Fatalf("waiting until %s: %v; progress: %s", what, ctx.Err(), line)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// fileOf returns the report of the tenant's file whose key ends in rel; with several uploads of
// one key, the n-th (0-based) of them.
func fileOf(t *testing.T, rep *report.Report, tenant, rel string, n ...int) report.FileReport {
	t.Helper()
	want := 0
	if len(n) > 0 {
		want = n[0]
	}
	tr := rep.Tenants[tenant]
	if tr == nil {
		t.Fatalf("tenant %s: not in the report", tenant)
	}
	seen := 0
	for _, f := range tr.Files {
		if strings.HasSuffix(f.Key, "/"+rel) {
			if seen == want {
				return f
			}
			seen++
		}
	}
	t.Fatalf("%s/%s (upload %d): not in the report", tenant, rel, want)
	return report.FileReport{}
}

func executionARN(t *testing.T, r *Run, tenant, name string) string {
	t.Helper()
	tn := r.Tenant(tenant)
	if tn == nil || name == "" {
		t.Fatalf("no execution of %s named %q", tenant, name)
	}
	return strings.Replace(tn.FileMachine, ":stateMachine:", ":execution:", 1) + ":" + name
}

// wantStatuses checks the status of the tenant's files in upload order.
func wantStatuses(t *testing.T, rep *report.Report, tenant string, want ...string) {
	t.Helper()
	var got []string
	for _, f := range rep.Tenants[tenant].Files {
		got = append(got, f.Status)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s statuses in upload order: got %v, want %v", tenant, got, want)
	}
}

// assertInvariants checks the four invariants every fault scenario must keep:
//
//  1. Per tenant, file order = upload order: executions start in upload order and never overlap
//     (Report.Violations), and no uploaded object version has more than one execution.
//  2. Record order = file order: records are first registered file by file in upload order and,
//     inside a file, as 1, 2, 3, … (Report.Violations).
//  3. Every record is registered exactly once by its Idempotency-Key: the sink registers a key once;
//     on top of that no record of an object version was registered under two keys (two workflows
//     for one file), and a succeeded file registered exactly the records Split counted.
//  4. Tenants progress in parallel: of the tenants uploaded together, none started its first file
//     only after another had started its last one (it did not wait for another tenant's backlog);
//     with overlap, executions of different tenants also ran at the same time.
func assertInvariants(t *testing.T, r *Run, rep *report.Report, together []string, overlap bool) {
	t.Helper()
	for _, v := range rep.Violations {
		t.Errorf("invariant violated: %s", v)
	}
	for _, id := range r.TenantIDs() {
		tr := rep.Tenants[id]
		for _, f := range tr.Files {
			if f.Executions > 1 {
				t.Errorf("%s %s (version %s): got %d executions, want 1", id, f.Key, f.VersionID, f.Executions)
			}
		}
		byRecord := map[string]string{}
		for _, rec := range r.Sink.Registered(id) {
			k := fmt.Sprintf("%s\x00%s\x00%d", rec.Source, rec.VersionID, rec.RecordNumber)
			if prev, ok := byRecord[k]; ok {
				t.Errorf("%s %s record %d: registered under keys %s and %s, want one key", id, rec.Source, rec.RecordNumber, prev, rec.Key)
			}
			byRecord[k] = rec.Key
		}
	}

	type span struct{ start, stop time.Time }
	spans := map[string][]span{}
	for _, id := range together {
		for _, f := range rep.Tenants[id].Files {
			if f.StartedAt != nil {
				s := span{start: *f.StartedAt, stop: time.Now()}
				if f.StoppedAt != nil {
					s.stop = *f.StoppedAt
				}
				spans[id] = append(spans[id], s)
			}
		}
	}
	for _, a := range together {
		for _, b := range together {
			sa, sb := spans[a], spans[b]
			if a == b || len(sa) == 0 || len(sb) < 2 {
				continue
			}
			if first, last := sa[0].start, sb[len(sb)-1].start; !first.Before(last) {
				t.Errorf("tenant %s started its first file %s after tenant %s started its last one: got it waiting for another tenant's backlog, want independent progress",
					a, first.Sub(last), b)
			}
		}
	}
	if overlap && len(together) > 1 {
		type edge struct {
			at     time.Time
			tenant string
			d      int
		}
		var edges []edge
		for id, ss := range spans {
			for _, s := range ss {
				edges = append(edges, edge{s.start, id, 1}, edge{s.stop, id, -1})
			}
		}
		sort.Slice(edges, func(i, j int) bool {
			if edges[i].at.Equal(edges[j].at) {
				return edges[i].d < edges[j].d
			}
			return edges[i].at.Before(edges[j].at)
		})
		running, most := map[string]int{}, 0
		for _, e := range edges {
			running[e.tenant] += e.d
			n := 0
			for _, c := range running {
				if c > 0 {
					n++
				}
			}
			most = max(most, n)
		}
		if most < 2 {
			t.Errorf("tenants with executions running at the same time: got at most %d, want at least 2", most)
		}
	}
}

func csvOf(records int) []byte { return csv(records, false) }

// csvKeyed is a CSV file of records whose customer column cycles through keys distinct values:
// record i belongs to customer c<(i*7) mod keys>, so that the keys interleave and each key's
// records are spread over the file.
func csvKeyed(records, keys int) []byte {
	var b strings.Builder
	b.WriteString("id,customer,name\n")
	for i := 1; i <= records; i++ {
		fmt.Fprintf(&b, "%d,%s,name %d\n", i, keyOfRecord(i, keys), i)
	}
	return []byte(b.String())
}

// keyOfRecord is record i's customer in csvKeyed.
func keyOfRecord(i, keys int) string { return fmt.Sprintf("c%04d", (i*7)%keys) }

// badCSV has a wrong column count on line 7 (the header is line 1).
func badCSV() []byte { return csv(10, true) }

func startCount(rep *report.Report) int64 { return rep.APICalls["stepfunctions"]["StartExecution"] }

// Scenario 1: the controller is killed after its handler called StartExecution and before its
// response was accepted. The message comes back; the redelivery must find the execution by its
// deterministic name and start nothing.
func TestScenarioControllerCrash(t *testing.T) {
	t.Parallel()
	var crashes atomic.Int64
	r := startScenario(t, scenarioTenants, Config{
		// No in-process polling: the crashed invocation has just started the execution and set the
		// message's visibility to the first wait (1 s), so the redelivery comes quickly.
		EnvFor: map[string][]string{controllerPkg: {"POLL_BUDGET_SECONDS=0"}},
		Lambda: LambdaOptions{
			ControllerCrash: func(c ControllerCall) bool {
				if c.StartExecutions == 0 {
					return false
				}
				crashes.Add(1)
				return true
			},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	files := []upload{
		{"cont", "a.csv", csvOf(150)}, {"cont", "b.csv", csvOf(120)}, {"cont", "c.csv", csvOf(30)},
		{"ov", "x.csv", csvOf(110)}, {"ov", "y.csv", csvOf(40)},
	}
	uploadAll(t, ctx, r, files)
	rep := drain(t, ctx, r)

	assertInvariants(t, r, rep, []string{"cont", "ov"}, false)
	if got, want := crashes.Load(), int64(len(files)); got != want {
		t.Errorf("controller crashes after StartExecution: got %d, want %d (one per file)", got, want)
	}
	if got, want := startCount(rep), int64(len(files)); got != want {
		t.Errorf("StartExecution calls: got %d, want %d (a redelivery must find the execution, not start one)", got, want)
	}
	for _, f := range files {
		fr := fileOf(t, rep, f.tenant, f.rel)
		if fr.Status != "SUCCEEDED" || fr.Executions != 1 {
			t.Errorf("%s/%s: got %s with %d executions, want SUCCEEDED with 1", f.tenant, f.rel, fr.Status, fr.Executions)
		}
	}
}

// Scenario 2: the same EventBridge event delivered twice, and the same object re-uploaded.
func TestScenarioDuplicateEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		late bool
		// messages is how many messages per file reach the controller.
		messages int
	}{
		// Within 5 minutes the FIFO queue's content-based deduplication drops the copy.
		{"within the dedup interval", false, 1},
		// A copy that arrives later reaches the controller, which finds the execution by name.
		{"after the dedup interval", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startScenario(t, scenarioTenants, Config{EventBridge: EventBridgeOptions{DuplicateEvents: true, DuplicateAfterDedupWindow: tc.late}})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			files := []upload{
				{"cont", "a.csv", csvOf(150)}, {"cont", "b.csv", csvOf(60)},
				{"ov", "x.csv", csvOf(120)}, {"ov", "y.csv", csvOf(30)},
			}
			uploadAll(t, ctx, r, files)
			rep := drain(t, ctx, r)
			assertInvariants(t, r, rep, []string{"cont", "ov"}, false)
			for _, id := range []string{"cont", "ov"} {
				if got, want := r.Messages(id), 2*tc.messages; got != want {
					t.Errorf("%s: messages the controller saw: got %d, want %d", id, got, want)
				}
			}
			if got, want := startCount(rep), int64(len(files)); got != want {
				t.Errorf("StartExecution calls: got %d, want %d", got, want)
			}
			for _, f := range files {
				if fr := fileOf(t, rep, f.tenant, f.rel); fr.Status != "SUCCEEDED" || fr.Records != int64(len(strings.Split(string(f.body), "\n"))-2) {
					t.Errorf("%s/%s: got %s with %d records", f.tenant, f.rel, fr.Status, fr.Records)
				}
			}
		})
	}

	t.Run("identical re-upload", func(t *testing.T) {
		r := startScenario(t, scenarioTenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		body := csvOf(80)
		uploadAll(t, ctx, r, []upload{{"ov", "same.csv", body}, {"ov", "other.csv", csvOf(20)}})
		drain(t, ctx, r)
		uploadAll(t, ctx, r, []upload{{"ov", "same.csv", body}}) // the same bytes to the same key
		rep := drain(t, ctx, r)
		assertInvariants(t, r, rep, nil, false)

		first, again := fileOf(t, rep, "ov", "same.csv", 0), fileOf(t, rep, "ov", "same.csv", 1)
		if first.ETag != again.ETag || first.VersionID == again.VersionID {
			t.Fatalf("re-upload: got versions %q/%q with ETags %q/%q, want a new version of the same content",
				first.VersionID, again.VersionID, first.ETag, again.ETag)
		}
		// One could expect the object-version key to recognise "a re-upload of identical content".
		// The controller's key (internal/controller/naming.go) hashes the bucket, the key, the version
		// id (the bucket is versioned) and the event's sequencer, all of which differ for a new PUT,
		// so an identical re-upload is a new file: a second execution, and its records are
		// registered again under the new execution's keys. This asserts that behaviour as it is
		// (reported to the controller's owner); a duplicated event is still recognised (above).
		if first.ExecutionName == again.ExecutionName {
			t.Errorf("re-upload: got the first upload's execution %s, want a second one (if the controller now recognises identical content, update this test and docs/local-run.md)", first.ExecutionName)
		}
		if got, want := startCount(rep), int64(3); got != want {
			t.Errorf("StartExecution calls: got %d, want %d", got, want)
		}
		if first.Status != "SUCCEEDED" || again.Status != "SUCCEEDED" || first.Records != 80 || again.Records != 80 {
			t.Errorf("same.csv: got %s/%d records and %s/%d records, want SUCCEEDED/80 twice", first.Status, first.Records, again.Status, again.Records)
		}
	})
}

// Scenario 3: the register endpoint answers 500, 429 and times out for some records, then recovers.
// After the 500 and the timeout the state machine retries the chunk (RetryableError, 2 s × 2, full
// jitter); records sent again are answered as duplicates. The two 429s (Retry-After: 0) are no
// RetryableError: Register waits them out and resends the same record with the same key.
func TestScenarioRegisterFaults(t *testing.T) {
	t.Parallel()
	r := startScenario(t, scenarioTenants, Config{EnvFor: map[string][]string{registerPkg: {"HTTP_TIMEOUT_SECONDS=1"}}})
	r.Sink.SetFault(func(tenant, source string, n int64, attempt int) int {
		if tenant != "cont" || !strings.HasSuffix(source, "/faulty.csv") {
			return 0
		}
		switch {
		case n == 10 && attempt == 1:
			return 500
		case n == 120 && attempt <= 2:
			return 429
		case n == 230 && attempt == 1:
			return -1 // hold the request past the register function's timeout
		}
		return 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	files := []upload{
		{"cont", "faulty.csv", csvOf(250)}, {"cont", "after.csv", csvOf(50)},
		{"ov", "x.csv", csvOf(100)}, {"ov", "y.csv", csvOf(100)},
	}
	uploadAll(t, ctx, r, files)
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, []string{"cont", "ov"}, false)
	_, dups, faults, _ := r.Sink.Stats()
	if faults != 4 {
		t.Errorf("injected faults: got %d, want 4 (500, 429 twice, one timeout)", faults)
	}
	if dups == 0 {
		t.Errorf("duplicate requests: got 0, want some (a retried chunk resends its earlier records)")
	}
	wantStatuses(t, rep, "cont", "SUCCEEDED", "SUCCEEDED")
	wantStatuses(t, rep, "ov", "SUCCEEDED", "SUCCEEDED")
	if got := fileOf(t, rep, "cont", "faulty.csv").Records; got != 250 {
		t.Errorf("faulty.csv: got %d records, want 250", got)
	}
}

// Scenario 4: a bad file (wrong column count on line 7) under continue and under halt.
func TestScenarioBadFile(t *testing.T) {
	t.Parallel()
	// HALT_WAIT_SECONDS=1: a halted tenant rechecks its head file every second.
	env := map[string][]string{controllerPkg: {"HALT_WAIT_SECONDS=1"}}

	t.Run("continue", func(t *testing.T) {
		r := startScenario(t, scenarioTenants, Config{EnvFor: env})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{
			{"cont", "1.csv", csvOf(30)}, {"cont", "2-bad.csv", badCSV()}, {"cont", "3.csv", csvOf(40)},
			{"ov", "x.csv", csvOf(50)}, {"ov", "y.csv", csvOf(50)},
		})
		rep := drain(t, ctx, r)
		assertInvariants(t, r, rep, []string{"cont", "ov"}, false)
		wantStatuses(t, rep, "cont", "SUCCEEDED", "FAILED", "SUCCEEDED")
		bad := fileOf(t, rep, "cont", "2-bad.csv")
		assertLine7(t, bad)
		if got := fileOf(t, rep, "cont", "3.csv").Records; got != 40 {
			t.Errorf("3.csv after the bad file: got %d records, want 40", got)
		}
	})

	// haltAndRelease uploads a halt tenant's files, waits until the tenant is blocked on its
	// second upload's predecessor, checks that later files wait while another tenant finishes,
	// then releases it and checks that the rest follow in order.
	haltAndRelease := func(t *testing.T, r *Run, files []upload, failed string, release func(ctx context.Context, fr report.FileReport)) *report.Report {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, append(files, upload{"cont", "c1.csv", csvOf(50)}, upload{"cont", "c2.csv", csvOf(50)}))
		rep := waitFor(t, ctx, r, "halt/"+failed+" failed", func(rep *report.Report) bool {
			for _, f := range rep.Tenants["halt"].Files {
				if strings.HasSuffix(f.Key, "/"+failed) {
					return f.Status == "FAILED"
				}
			}
			return false
		})
		// The controller keeps looking at the failed head file: wait for three more checks and for
		// the other tenant to finish.
		seen := r.Tenant("halt").Controller.Invocations()
		rep = waitFor(t, ctx, r, "halt rechecked three times and cont done", func(rep *report.Report) bool {
			done := 0
			for _, f := range rep.Tenants["cont"].Files {
				if f.Status == "SUCCEEDED" {
					done++
				}
			}
			return done == 2 && r.Tenant("halt").Controller.Invocations() >= seen+3
		})
		blocked := false
		for _, f := range rep.Tenants["halt"].Files {
			if blocked && f.Status != "WAITING" {
				t.Errorf("halt %s after the failed file: got %s, want WAITING while the tenant is halted", f.Key, f.Status)
			}
			blocked = blocked || strings.HasSuffix(f.Key, "/"+failed)
		}
		release(ctx, fileOf(t, rep, "halt", failed))
		rep = drain(t, ctx, r)
		assertInvariants(t, r, rep, []string{"cont", "halt"}, false)
		wantStatuses(t, rep, "cont", "SUCCEEDED", "SUCCEEDED")
		return rep
	}

	haltThenSkip := func(t *testing.T, cfg Config) *Run {
		r := startScenario(t, scenarioTenants, cfg)
		rep := haltAndRelease(t, r, []upload{
			{"halt", "1.csv", csvOf(20)}, {"halt", "2-bad.csv", badCSV()}, {"halt", "3.csv", csvOf(30)}, {"halt", "4.csv", csvOf(40)},
		}, "2-bad.csv", func(ctx context.Context, fr report.FileReport) {
			assertLine7(t, fr)
			if err := r.PutObject(ctx, pipeline.SkipMarkerKey(r.Tenant("halt").Owner(), fr.ExecutionName), []byte("bad export, resent as 3.csv")); err != nil {
				t.Fatal(err)
			}
		})
		wantStatuses(t, rep, "halt", "SUCCEEDED", "FAILED", "SUCCEEDED", "SUCCEEDED")
		if a, b := fileOf(t, rep, "halt", "3.csv").Records, fileOf(t, rep, "halt", "4.csv").Records; a != 30 || b != 40 {
			t.Errorf("after the skip: got %d and %d records, want 30 and 40", a, b)
		}
		return r
	}
	t.Run("halt then skip", func(t *testing.T) { haltThenSkip(t, Config{EnvFor: env}) })

	// The Lambdas' S3 answers a missing key with 403, as S3 does to a role without s3:ListBucket:
	// the missing skip marker and wake-up record read as absent, never as a failed read.
	t.Run("halt then skip, missing keys answer 403", func(t *testing.T) {
		r := haltThenSkip(t, Config{EnvFor: env, S3: S3Options{MissingKeyForbidden: true}})
		unread := lambdaLogs(t, r, func(l map[string]any) bool {
			msg, _ := l["msg"].(string)
			return strings.Contains(msg, "could not be read")
		})
		if len(unread) > 0 {
			t.Errorf("got %d lines of an unreadable control object, want none: %v", len(unread), unread)
		}
		halted := lambdaLogs(t, r, func(l map[string]any) bool { return l["skipMarkerRead"] != nil })
		if len(halted) == 0 {
			t.Errorf("got no halted line saying the marker read was a 403; is the switch on?")
		}
	})

	t.Run("halt then redrive", func(t *testing.T) {
		r := startScenario(t, scenarioTenants, Config{EnvFor: env})
		// The core system rejects record 150 of 1.csv (a permanent 400) until it is fixed.
		var fixed atomic.Bool
		r.Sink.SetFault(func(tenant, source string, n int64, _ int) int {
			if tenant == "halt" && strings.HasSuffix(source, "/1.csv") && n == 150 && !fixed.Load() {
				return 400
			}
			return 0
		})
		rep := haltAndRelease(t, r, []upload{
			{"halt", "1.csv", csvOf(250)}, {"halt", "2.csv", csvOf(30)}, {"halt", "3.csv", csvOf(20)},
		}, "1.csv", func(ctx context.Context, fr report.FileReport) {
			if fr.Records != 149 || !strings.Contains(fr.Cause, "PermanentError") {
				t.Errorf("1.csv before the redrive: got %d records, cause %q; want 149 records and a PermanentError", fr.Records, fr.Cause)
			}
			fixed.Store(true)
			arn := executionARN(t, r, "halt", fr.ExecutionName)
			if _, err := r.StepFunctions().RedriveExecution(ctx, &sfn.RedriveExecutionInput{ExecutionArn: aws.String(arn)}); err != nil {
				t.Fatalf("redrive %s: %v", arn, err)
			}
		})
		wantStatuses(t, rep, "halt", "SUCCEEDED", "SUCCEEDED", "SUCCEEDED")
		first := fileOf(t, rep, "halt", "1.csv")
		if first.Records != 250 || first.RedriveCount != 1 || first.Executions != 1 {
			t.Errorf("1.csv: got %d records, redriveCount %d, %d executions; want 250, 1, 1", first.Records, first.RedriveCount, first.Executions)
		}
		if got, want := startCount(rep), int64(5); got != want {
			t.Errorf("StartExecution calls: got %d, want %d", got, want)
		}
	})
}

// assertLine7 checks that a file failed validation and that the error names line 7.
func assertLine7(t *testing.T, f report.FileReport) {
	t.Helper()
	if f.Status != "FAILED" || f.Error != "ValidationError" || !strings.Contains(f.Cause, "line 7") {
		t.Errorf("%s: got %s %s %q, want FAILED ValidationError naming line 7", f.Key, f.Status, f.Error, f.Cause)
	}
	if f.Records != 0 {
		t.Errorf("%s: got %d records registered, want 0 (validation runs before registration)", f.Key, f.Records)
	}
}

// Scenario 5: a burst of 20 tenants × 10 files uploaded at once.
func TestScenarioBurst(t *testing.T) {
	t.Parallel()
	const tenants, files, records = 20, 10, 50
	var b strings.Builder
	b.WriteString(`{"tenants": [`)
	for i := range tenants {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"id": "t%02d", "registerUrl": "https://core.example.com/records"}`, i+1)
	}
	b.WriteString("]}")
	r := startScenario(t, b.String(), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ids := r.TenantIDs()
	if len(ids) != tenants {
		t.Fatalf("tenants: got %d, want %d", len(ids), tenants)
	}
	// Every tenant uploads its files in order, all tenants at once.
	var wg sync.WaitGroup
	errs := make(chan error, tenants)
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range files {
				if _, err := r.Upload(ctx, id, fmt.Sprintf("%02d.csv", j+1), csvOf(records)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, ids, true)
	for _, id := range ids {
		wantStatuses(t, rep, id, strings.Fields(strings.Repeat("SUCCEEDED ", files))...)
		if got := rep.Tenants[id].RecordsRegistered; got != files*records {
			t.Errorf("%s: got %d records, want %d", id, got, files*records)
		}
	}
	t.Logf("burst: %.1fs from first upload to drained; gap mean %.2fs p95 %.2fs", rep.WallSeconds, rep.InterFileGapSecond.Mean, rep.InterFileGapSecond.P95)
}

// Scenario 6: a file of 5,000 chunks (5 segments of 1,000) completes inside the Step Functions
// limits. The history and payload sizes grow with a file's chunks and segments, not with its
// records, so the file is the "wide" tenant's (1 record per chunk): the same 5,000 chunks as a
// 500,000-record file of 100-record chunks, without registering 500,000 records one POST each.
func TestScenarioLargeFile(t *testing.T) {
	t.Parallel()
	const chunks, perChunk = 5_000, 1 // the "wide" tenant's chunkSize
	const records = chunks * perChunk
	const historyLimit, payloadLimit = 25_000, 256 * 1024
	r := startScenario(t, scenarioTenants, Config{})
	var b strings.Builder
	b.Grow(records * 40)
	b.WriteString("id,name,email\n")
	for i := 1; i <= records; i++ {
		fmt.Fprintf(&b, "%d,name %d,user%d@example.com\n", i, i, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"wide", "big.csv", []byte(b.String())}, {"ov", "small.csv", csvOf(100)}})
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, []string{"wide", "ov"}, false)

	f := fileOf(t, rep, "wide", "big.csv")
	t.Logf("%d chunks: %.1fs from upload to drained (%.0f records/s); history %d, segments %d × ≤ %d events, payload ≤ %d B",
		chunks, rep.WallSeconds, rep.RecordsPerSecond, f.HistoryEvents, f.SegmentExecutions, f.SegmentHistoryEventsMax, f.MaxPayloadBytes)
	if f.Status != "SUCCEEDED" || f.Records != records {
		t.Fatalf("big.csv: got %s (%s %s) with %d records, want SUCCEEDED with %d", f.Status, f.Error, f.Cause, f.Records, records)
	}
	if f.HistoryEvents >= historyLimit || f.SegmentHistoryEventsMax >= historyLimit || f.MaxPayloadBytes >= payloadLimit {
		t.Errorf("big.csv: got history %d, segment history ≤ %d, payload ≤ %d B; want < %d events and < %d B",
			f.HistoryEvents, f.SegmentHistoryEventsMax, f.MaxPayloadBytes, historyLimit, payloadLimit)
	}
	states, registers := stateEntries(t, ctx, r, "wide", f)
	t.Logf("%d chunks: %d Register invocations, %d state transitions (the per-chunk design: %d)",
		chunks, registers, states, 2+3*f.SegmentExecutions+chunks)
	if registers >= chunks {
		t.Errorf("big.csv: got %d Register invocations, want fewer than its %d chunks", registers, chunks)
	}
	if want := chunks / pipeline.SegmentChunks; f.SegmentExecutions != want {
		t.Errorf("big.csv: got %d segment executions, want %d (%d chunks, %d per segment)", f.SegmentExecutions, want, chunks, pipeline.SegmentChunks)
	}
	// Every execution on its own, not only the largest.
	st, err := r.sfnStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range st.Executions {
		if e.Status != "SUCCEEDED" || e.HistoryEvents >= historyLimit || e.MaxPayloadBytes >= payloadLimit {
			t.Errorf("execution %s: got %s, %d history events, %d B payload; want SUCCEEDED, < %d, < %d",
				e.Name, e.Status, e.HistoryEvents, e.MaxPayloadBytes, historyLimit, payloadLimit)
		}
	}
}
