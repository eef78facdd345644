//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// The fault scenarios: failure modes AWS documents that the emulators used to be kinder
// about. Each asserts the AWS-correct outcome and the invariants of assertInvariants, which include
// that two files of a tenant never register at the same time (Report.Violations). They share no
// state, so they run side by side.

// forEachTier runs a scenario twice, side by side: with the tenants as written (silo), and with
// every tenant pooled in one pool, so that each fault holds per tenant in both tiers.
func forEachTier(t *testing.T, tenantsJSON string, body func(t *testing.T, tenants string)) {
	for _, tier := range []string{"silo", "pool"} {
		t.Run(tier, func(t *testing.T) {
			t.Parallel()
			body(t, withTierJSON(tenantsJSON, tier))
		})
	}
}

// withTenantJSON sets one field of one tenant of a tenants file (the tests' own, valid JSON).
func withTenantJSON(tenantsJSON, id, field string, value any) string {
	var f map[string]any
	if err := json.Unmarshal([]byte(tenantsJSON), &f); err != nil {
		panic(err)
	}
	for _, tn := range f["tenants"].([]any) {
		if tn.(map[string]any)["id"] == id {
			tn.(map[string]any)[field] = value
		}
	}
	b, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// withTierJSON sets "tier" on every tenant of a tenants file (the tests' own, valid JSON).
func withTierJSON(tenantsJSON, tier string) string {
	var f map[string]any
	if err := json.Unmarshal([]byte(tenantsJSON), &f); err != nil {
		panic(err)
	}
	for _, tn := range f["tenants"].([]any) {
		tn.(map[string]any)["tier"] = tier
	}
	b, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// functionsOf returns the run's functions built from one source package (one per tenant).
func functionsOf(r *Run, pkg string) []*emulate.Function {
	var out []*emulate.Function
	for _, f := range r.functions {
		if f.Source == pkg {
			out = append(out, f)
		}
	}
	return out
}

// taskErrors returns the error names of the failed task attempts (TaskFailed, LambdaFunctionFailed)
// of a file execution's segment executions, or of its own Register tasks, in order, read with
// GetExecutionHistory as an operator would.
func taskErrors(t *testing.T, ctx context.Context, r *Run, tenant string, f report.FileReport) []string {
	t.Helper()
	st, err := r.sfnStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parent := executionARN(t, r, tenant, f.ExecutionName)
	var errs []string
	for _, e := range st.Executions {
		// The segment executions' tasks, and the file execution's own SmallFile task and Register
		// loop (a small file, and a file of one segment, register there); a SmallFile task's
		// hand-off to the full path fails nothing.
		own := e.ExecutionArn == parent
		if e.ParentArn != parent && !own {
			continue
		}
		p := sfn.NewGetExecutionHistoryPaginator(r.StepFunctions(), &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(e.ExecutionArn), MaxResults: 1000})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatalf("GetExecutionHistory %s: %v", e.ExecutionArn, err)
			}
			for _, ev := range page.Events {
				// A Task with a plain Lambda ARN (LambdaInvoke with PayloadResponseOnly) writes
				// LambdaFunctionFailed, an integration TaskFailed.
				if d := ev.TaskFailedEventDetails; d != nil && !own {
					errs = append(errs, aws.ToString(d.Error))
				}
				if d := ev.LambdaFunctionFailedEventDetails; d != nil && aws.ToString(d.Error) != pipeline.ErrNotSmall {
					errs = append(errs, aws.ToString(d.Error))
				}
			}
		}
	}
	return errs
}

// The core system answers 301 with a Location on a page that answers GET with 200.
// Following the redirect turns the POST into a GET without a body, whose 200 would count as
// registered. The file must fail with a PermanentError that names the redirect, with nothing
// registered and the GET never sent.
func TestScenarioRedirect(t *testing.T) {
	t.Parallel()
	forEachTier(t, scenarioTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		r.Sink.SetFault(func(tenant, source string, _ int64, _ int) int {
			if tenant == "cont" && strings.HasSuffix(source, "/moved.csv") {
				return 301
			}
			return 0
		})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{{"cont", "moved.csv", csvOf(120)}, {"cont", "after.csv", csvOf(30)}, {"ov", "x.csv", csvOf(50)}})
		rep := drain(t, ctx, r)
		assertInvariants(t, r, rep, []string{"cont", "ov"}, false)

		moved := fileOf(t, rep, "cont", "moved.csv")
		if moved.Status != "FAILED" || !strings.Contains(moved.Cause, "PermanentError") || !strings.Contains(moved.Cause, "301") || !strings.Contains(moved.Cause, "/cont/list") {
			t.Errorf("moved.csv: got %s, cause %q; want FAILED with a PermanentError naming 301 and its Location /cont/list", moved.Status, moved.Cause)
		}
		if moved.Records != 0 {
			t.Errorf("moved.csv: got %d records registered, want 0", moved.Records)
		}
		if got := r.Sink.Gets(); got != 0 {
			t.Errorf("GET requests to the redirect's page: got %d, want 0 (redirects are never followed)", got)
		}
		wantStatuses(t, rep, "cont", "FAILED", "SUCCEEDED")
		if got := fileOf(t, rep, "cont", "after.csv").Records; got != 30 {
			t.Errorf("after.csv: got %d records, want 30", got)
		}
	})
}

// A Register invocation stops making progress mid-chunk and is killed at its
// function timeout (Sandbox.Timedout); another is killed outright, as by running out of memory
// (no errorType: Lambda.Unknown). The task is retried under the names Step Functions uses, and the
// file succeeds with every record registered once.
func TestScenarioRegisterKilled(t *testing.T) {
	t.Parallel()
	forEachTier(t, scenarioTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{
			EnvFor: map[string][]string{
				registerPkg:   {"HTTP_TIMEOUT_SECONDS=1"},
				controllerPkg: {"REGISTER_TIMEOUT_SECONDS=5"},
			},
			Lambda: LambdaOptions{
				// A small Register timeout, so that waiting for it is short. The HTTP timeout stays below it
				// by more than Register's deadline margin, as the construct's validation demands.
				FunctionTimeout: map[string]time.Duration{registerPkg: 5 * time.Second},
			},
		})
		var frozen, killed atomic.Int64
		r.Sink.SetFault(func(tenant, source string, n int64, attempt int) int {
			if tenant != "cont" || !strings.HasSuffix(source, "/killed.csv") || attempt != 1 {
				return 0
			}
			switch n {
			case 40: // record 40 of chunk 1: the process stops; Lambda kills it at the timeout
				for _, f := range functionsOf(r, registerPkg) {
					frozen.Add(int64(f.FreezeRunning()))
				}
				return -1
			case 140: // record 40 of chunk 2: the process is killed without a response
				go func() {
					time.Sleep(200 * time.Millisecond)
					for _, f := range functionsOf(r, registerPkg) {
						killed.Add(int64(f.KillRunning()))
					}
				}()
				return -1
			}
			return 0
		})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{{"cont", "killed.csv", csvOf(250)}, {"cont", "after.csv", csvOf(30)}})
		rep := drain(t, ctx, r)
		assertInvariants(t, r, rep, nil, false)
		f := fileOf(t, rep, "cont", "killed.csv")
		if f.Status != "SUCCEEDED" || f.Records != 250 {
			t.Errorf("killed.csv: got %s (%s %s) with %d records, want SUCCEEDED with 250", f.Status, f.Error, f.Cause, f.Records)
		}
		if got, want := strings.Join(taskErrors(t, ctx, r, "cont", f), " "), "Sandbox.Timedout Lambda.Unknown"; got != want {
			t.Errorf("killed.csv: Register task failures: got %q, want %q", got, want)
		}
		if frozen.Load() != 1 || killed.Load() != 1 {
			t.Errorf("Register processes frozen and killed: got %d and %d, want 1 and 1", frozen.Load(), killed.Load())
		}
		wantStatuses(t, rep, "cont", "SUCCEEDED", "SUCCEEDED")
	})
}

// Lambda throttles Register (TooManyRequestsException from the Invoke API) for
// longer than a few quick retries last. The file waits it out and succeeds.
func TestScenarioThrottled(t *testing.T) {
	t.Parallel()
	forEachTier(t, scenarioTenants, func(t *testing.T, tenants string) {
		const throttleFor = 15 * time.Second
		r := startScenario(t, tenants, Config{Lambda: LambdaOptions{Throttle: map[string]emulate.Throttle{registerPkg: {For: throttleFor}}}})
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{{"cont", "a.csv", csvOf(150)}, {"cont", "b.csv", csvOf(50)}, {"ov", "x.csv", csvOf(60)}})
		rep := drain(t, ctx, r)
		assertInvariants(t, r, rep, []string{"cont", "ov"}, false)
		var throttled int64
		for _, f := range functionsOf(r, registerPkg) {
			throttled += f.Throttled()
		}
		if throttled < 2 {
			t.Errorf("throttled Register invocations: got %d, want at least 2", throttled)
		}
		wantStatuses(t, rep, "cont", "SUCCEEDED", "SUCCEEDED")
		wantStatuses(t, rep, "ov", "SUCCEEDED")
		a := fileOf(t, rep, "cont", "a.csv")
		if a.Records != 150 {
			t.Errorf("a.csv: got %d records, want 150", a.Records)
		}
		errs := taskErrors(t, ctx, r, "cont", a)
		ok := len(errs) > 0
		for _, e := range errs {
			ok = ok && e == "Lambda.TooManyRequestsException"
		}
		if !ok {
			t.Errorf("a.csv: Register task failures: got %v, want one or more Lambda.TooManyRequestsException and nothing else", errs)
		}
		t.Logf("throttled for %s: %d refused invocations, %.1fs from upload to drained", throttleFor, throttled, rep.WallSeconds)
	})
}

// throttledTenants is the tenants file of TestScenarioLambdaThrottled: four tenants that upload at
// once.
const throttledTenants = `{"tenants": [
  {"id": "ta", "registerUrl": "https://core.example.com/records"},
  {"id": "tb", "onFailure": "halt", "registerUrl": "https://core.example.com/records"},
  {"id": "tc", "registerUrl": "https://core.example.com/records"},
  {"id": "td", "onFailure": "halt", "registerUrl": "https://core.example.com/records"}
]}`

// The account's Lambda concurrency is exhausted in a burst: with a concurrency of 3 shared by every
// function, four tenants' controllers, Splits and Registers are throttled
// (TooManyRequestsException) on every invoke path. No file fails: every record is registered once,
// in order, and the report shows the throttles, so throttling did happen.
func TestScenarioLambdaThrottled(t *testing.T) {
	t.Parallel()
	forEachTier(t, throttledTenants, func(t *testing.T, tenants string) {
		const concurrency, files, records = 3, 3, 60
		// The retriers' waits at a fiftieth: the throttle retrier's 5 s to 5 min become 0.1 s to 6 s.
		// The sink takes as many requests at once as Lambda runs invocations: Register posts one
		// request at a time, so the account's limit alone keeps the core system within it.
		r := startScenario(t, tenants, Config{Lambda: LambdaOptions{Concurrency: concurrency}, StepFunctions: StepFunctionsOptions{RetryIntervalScale: 0.02}, Core: CoreOptions{MaxInFlight: concurrency}})
		// A core system of 15 ms a record keeps each Register invocation busy for about a second,
		// so the tenants' invocations meet at the limit.
		r.Sink.SetDelay(func(string, string, int64) time.Duration { return 15 * time.Millisecond })
		ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
		defer cancel()
		ids := r.TenantIDs()
		var uploads []upload
		for f := range files {
			for _, id := range ids {
				uploads = append(uploads, upload{id, fmt.Sprintf("%02d.csv", f+1), csvOf(records)})
			}
		}
		uploadAll(t, ctx, r, uploads)
		rep := drain(t, ctx, r)
		// Order and exactly-once per tenant. Not that tenants progress independently: an exhausted
		// account concurrency is shared by every tenant, so one tenant's invocations do hold
		// another's back, which is what the limit means.
		assertInvariants(t, r, rep, nil, false)
		for _, id := range ids {
			wantStatuses(t, rep, id, strings.Fields(strings.Repeat("SUCCEEDED ", files))...)
			if got := rep.Tenants[id].RecordsRegistered; got != files*records {
				t.Errorf("%s: got %d records registered, want %d", id, got, files*records)
			}
		}
		var throttles int64
		for _, n := range rep.LambdaThrottles {
			throttles += n
		}
		if throttles == 0 {
			t.Errorf("lambda throttles: got none (%v), want some: the scenario did not reach the concurrency limit", rep.LambdaThrottles)
		}
		if got := r.MappingErrors(); got != 0 {
			t.Errorf("failed event source mapping invocations: got %d, want 0 (a throttle is retried, not failed)", got)
		}
		if rep.SinkMaxInFlight < 1 || rep.SinkMaxInFlight > concurrency || rep.Sink429 != 0 {
			t.Errorf("sink: got at most %d requests in flight and %d answered 429, want 1 to %d and none", rep.SinkMaxInFlight, rep.Sink429, concurrency)
		}
		t.Logf("concurrency %d: throttles %v (%d in all), %d mapping retries, sink at most %d in flight, %.1fs from upload to drained",
			concurrency, rep.LambdaThrottles, throttles, r.MappingThrottleRetries(), rep.SinkMaxInFlight, rep.WallSeconds)
	})
}

// A file's execution is stopped while its Register invocation is still posting
// to a slow core system. Step Functions cannot stop a running Lambda invocation, so the next file
// of the tenant must not start registering before the stopped file's last POST.
func TestScenarioStoppedFile(t *testing.T) {
	t.Parallel()
	forEachTier(t, scenarioTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{
			EnvFor: map[string][]string{
				registerPkg:   {"HTTP_TIMEOUT_SECONDS=1"},
				controllerPkg: {"REGISTER_TIMEOUT_SECONDS=6"},
			},
			Lambda: LambdaOptions{
				FunctionTimeout: map[string]time.Duration{registerPkg: 6 * time.Second},
			},
		})
		// 40 ms per record: a chunk of 100 records takes about 4 s.
		r.Sink.SetDelay(func(tenant, source string, _ int64) time.Duration {
			if tenant == "cont" && strings.HasSuffix(source, "/stopped.csv") {
				return 40 * time.Millisecond
			}
			return 0
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{{"cont", "stopped.csv", csvOf(300)}, {"cont", "next.csv", csvOf(20)}})
		rep := waitFor(t, ctx, r, "stopped.csv registering", func(rep *report.Report) bool {
			return fileOf(t, rep, "cont", "stopped.csv").Records >= 20
		})
		arn := executionARN(t, r, "cont", fileOf(t, rep, "cont", "stopped.csv").ExecutionName)
		out, err := r.StepFunctions().StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: aws.String(arn), Error: aws.String("Operator"), Cause: aws.String("stopped by the scenario")})
		if err != nil {
			t.Fatal(err)
		}
		stoppedAt := aws.ToTime(out.StopDate)
		rep = drain(t, ctx, r)
		assertInvariants(t, r, rep, nil, false)
		wantStatuses(t, rep, "cont", "ABORTED", "SUCCEEDED")

		w := RegistrationWindows(r.Sink.Requests("cont"))
		stopped, next := fileOf(t, rep, "cont", "stopped.csv"), fileOf(t, rep, "cont", "next.csv")
		ws, wn := w[stopped.Key+"\x00"+stopped.VersionID], w[next.Key+"\x00"+next.VersionID]
		if ws == nil || wn == nil {
			t.Fatalf("registration windows: got %v and %v, want both files registering", ws, wn)
		}
		// The scenario only means something if Register went on posting after the stop.
		if !ws.Last.After(stoppedAt) {
			t.Errorf("stopped.csv's last POST: got %s, want after the stop at %s (the invocation keeps running)", ws.Last.Format(time.StampMilli), stoppedAt.Format(time.StampMilli))
		}
		if !wn.First.After(ws.Last) {
			t.Errorf("next.csv's first POST at %s: want after stopped.csv's last POST at %s", wn.First.Format(time.StampMilli), ws.Last.Format(time.StampMilli))
		}
		if next.Records != 20 {
			t.Errorf("next.csv: got %d records, want 20", next.Records)
		}
		t.Logf("stopped at %s; stopped.csv posted until %s (%d records); next.csv's first POST %s later",
			stoppedAt.Format(time.StampMilli), ws.Last.Format(time.StampMilli), stopped.Records, wn.First.Sub(ws.Last).Round(time.Millisecond))
	})
}

// wideCSV has a header of about headerBytes and one single-character field per column.
func wideCSV(records, headerBytes int) []byte {
	const colWidth = 100
	cols := headerBytes / (colWidth + 1)
	var b strings.Builder
	for c := range cols {
		if c > 0 {
			b.WriteByte(',')
		}
		name := fmt.Sprintf("column_%03d_", c)
		b.WriteString(name + strings.Repeat("x", colWidth-len(name)))
	}
	b.WriteByte('\n')
	row := strings.TrimSuffix(strings.Repeat("v,", cols), ",")
	for i := 1; i <= records; i++ {
		fmt.Fprintf(&b, "%d%s\n", i, row[1:])
	}
	return []byte(b.String())
}

// Two segments, of 1,000 chunks and one (chunkSize 1), whose header is close to the 16 KiB header
// cap. Each Map iteration's result is collected before ResultPath discards it, and the local Step
// Functions server counts the collection against 256 KiB as AWS may; the workflow stays inside the
// limit only if each iteration returns {} (server.test.mjs shows the failure without it). Two
// segments, because a file of one runs its Register loop in its own execution, without the Map.
// The file is within the small-file bound, so the tenant has no small-file path here: the full
// path is the point.
func TestScenarioWideSegment(t *testing.T) {
	t.Parallel()
	forEachTier(t, withTenantJSON(scenarioTenants, "wide", "smallFileBytes", -1), func(t *testing.T, tenants string) {
		const records, headerBytes = 1001, 16_000
		body := wideCSV(records, headerBytes)
		if h := strings.IndexByte(string(body), '\n'); h > 16*1024 || h < 15_000 {
			t.Fatalf("header: got %d bytes, want close to and below 16 KiB", h)
		}
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{{"wide", "wide.csv", body}})
		rep := drain(t, ctx, r)
		assertInvariants(t, r, rep, nil, false)
		f := fileOf(t, rep, "wide", "wide.csv")
		if f.Status != "SUCCEEDED" || f.Records != records || f.SegmentExecutions != 2 {
			t.Fatalf("wide.csv: got %s (%s %s), %d records, %d segment executions; want SUCCEEDED, %d, 2", f.Status, f.Error, f.Cause, f.Records, f.SegmentExecutions, records)
		}
		st, err := r.sfnStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range st.Executions {
			if e.Status != "SUCCEEDED" || e.MaxPayloadBytes >= 256*1024 {
				t.Errorf("execution %s: got %s (%s), largest payload %d B; want SUCCEEDED below 256 KiB", e.Name, e.Status, e.Error, e.MaxPayloadBytes)
			}
		}
		t.Logf("1,001 chunks with a %d-byte header: largest payload %d B, segment history %d events, %.1fs", headerBytes, f.MaxPayloadBytes, f.SegmentHistoryEventsMax, rep.WallSeconds)
	})
}

// The datapath with keys that read differently raw and form-encoded (a space, a
// literal "+", "%", Japanese), with events carrying the key raw and form-encoded. Both "a b.csv"
// and "a+b.csv" exist: the form-encoded key of the first is the raw key of the second, so guessing
// from the characters would read the wrong object.
func TestScenarioDataPath(t *testing.T) {
	t.Parallel()
	forEachTier(t, scenarioTenants, func(t *testing.T, tenants string) {
		files := []upload{
			{"cont", "a+b.csv", csvOf(11)},
			{"cont", "a b.csv", csvOf(12)},
			{"cont", "100%.csv", csvOf(13)},
			{"cont", "注文 2026.csv", csvOf(14)},
			{"ov", "x y+z.csv", csvOf(15)},
		}
		for _, tc := range []struct {
			name string
			cfg  Config
		}{
			{EventKeyRaw, Config{S3: S3Options{EventKeyForm: EventKeyRaw}}},
			{EventKeyForm, Config{S3: S3Options{EventKeyForm: EventKeyForm}}},
			// The Lambdas' S3 answers a missing key with 403, as S3 does to a role without
			// s3:ListBucket: the key as given (form-encoded) is not there, and neither are the
			// controller's wake-up objects at first. Nothing may fail or log at ERROR for it.
			{"form, missing keys answer 403", Config{S3: S3Options{EventKeyForm: EventKeyForm, MissingKeyForbidden: true}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				r := startScenario(t, tenants, tc.cfg)
				ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
				defer cancel()
				uploadAll(t, ctx, r, files)
				rep := drain(t, ctx, r)
				assertInvariants(t, r, rep, []string{"cont", "ov"}, false)
				for _, u := range files {
					f := fileOf(t, rep, u.tenant, u.rel)
					want := int64(strings.Count(string(u.body), "\n") - 1)
					if f.Status != "SUCCEEDED" || f.Records != want || f.Executions != 1 {
						t.Errorf("%s/%s: got %s (%s %s), %d records, %d executions; want SUCCEEDED, %d, 1", u.tenant, u.rel, f.Status, f.Error, f.Cause, f.Records, f.Executions, want)
					}
				}
				if errs := lambdaLogs(t, r, func(l map[string]any) bool { return l["level"] == "ERROR" }); len(errs) > 0 {
					t.Errorf("got %d ERROR lines, want none: %v", len(errs), errs)
				}
				if tc.cfg.S3.MissingKeyForbidden {
					// The form-encoded keys that differ from the stored ones were denied (403) and then
					// read under their decoded form.
					decoded := lambdaLogs(t, r, func(l map[string]any) bool {
						return l["msg"] == "the event's key was form-encoded; read the decoded key"
					})
					if len(decoded) < len(files) {
						t.Errorf("got %d reads of a decoded key after a denied one, want at least %d, one per file", len(decoded), len(files))
					}
				}
			})
		}
	})
}
