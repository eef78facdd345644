//go:build e2e || figures

package localrun

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// The small-file scenario's files, for the halt tenant of scenarioTenants (chunks of 100
// records): small files of one chunk, exactly one chunk, and several chunks; a small file whose
// registration does not fit its Register invocation (the sink answers it smallHandOffDelay late,
// and the invocation has smallRegisterTimeout), which hands on to the full path in the middle; and
// a small file the core system refuses at one record.
const (
	smallChunk           = 100
	smallSeveral         = 2*smallChunk + 50
	smallHandOff         = 20 * smallChunk
	smallHandOffDelay    = 5 * time.Millisecond
	smallRegisterTimeout = 12 * time.Second
	smallFails           = 30
	smallFailAt          = 12
)

var smallSizes = map[string]int{"one.csv": 1, "some.csv": 37, "chunk.csv": smallChunk, "several.csv": smallSeveral, "handoff.csv": smallHandOff}

// TestScenarioSmallFiles, in both tiers: files the S3 event gives under the small-file bound. One
// of one chunk or of several runs as the states FileSize and SmallFile alone (2 state transitions,
// no segment execution), registers every record once in file order, and gets its summary and its
// File Processed event. One whose records take longer than its Register invocation (2,000 records
// 5 ms late, 12 s of Lambda timeout of which the 2 s margin, a 1 s HTTP timeout and the 3 s kept
// for the progress and the results leave room for some chunks) registers some chunks in SmallFile, hands on to
// Split, and the full path resumes where it stopped: every record sent once. One the core system
// refuses at a record fails at SmallFile and halts the tenant (the next file waits); its results
// say exactly which records were registered (those before it) and which not (the rest, as
// uploaded); a redrive after the fix resumes at the failed record and completes the file, and the
// waiting file runs after it.
func TestScenarioSmallFiles(t *testing.T) {
	t.Parallel()
	forEachTier(t, scenarioTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{
			EnvFor: map[string][]string{
				registerPkg:   {"HTTP_TIMEOUT_SECONDS=1"},
				controllerPkg: {fmt.Sprintf("REGISTER_TIMEOUT_SECONDS=%.0f", smallRegisterTimeout.Seconds())},
			},
			Lambda: LambdaOptions{FunctionTimeout: map[string]time.Duration{registerPkg: smallRegisterTimeout}},
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var fixed atomic.Bool
		r.Sink.SetFault(func(tenant, source string, n int64, _ int) int {
			if tenant == "halt" && strings.HasSuffix(source, "/fails.csv") && n == smallFailAt && !fixed.Load() {
				return 400 // permanent: the file fails at this record, the tenant halts
			}
			return 0
		})
		r.Sink.SetDelay(func(tenant, source string, _ int64) time.Duration {
			if tenant == "halt" && strings.HasSuffix(source, "/handoff.csv") {
				return smallHandOffDelay
			}
			return 0
		})

		// Small files, and the one whose registration does not fit one invocation.
		files := []upload{{"halt", "one.csv", csvOf(1)}, {"halt", "some.csv", csvOf(37)}, {"halt", "chunk.csv", csvOf(smallChunk)},
			{"halt", "several.csv", csvOf(smallSeveral)}, {"halt", "handoff.csv", csvOf(smallHandOff)}}
		uploadAll(t, ctx, r, files)
		rep := drain(t, ctx, r)
		assertInvariants(t, r, rep, nil, false)
		st, err := r.sfnStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, up := range files {
			want := smallSizes[up.rel]
			if len(up.body) > pipeline.DefaultSmallFileBytes {
				t.Fatalf("%s: %d bytes, want a file within the small-file bound", up.rel, len(up.body))
			}
			f := fileOf(t, rep, "halt", up.rel)
			arn := executionARN(t, r, "halt", f.ExecutionName)
			states, failed := statesEntered(t, ctx, r, arn)
			children := 0
			for _, e := range st.Executions {
				if e.ParentArn == arn {
					children++
				}
			}
			if up.rel == "handoff.csv" {
				// The full path after the hand-off (with or without a segment execution).
				if len(states) < 3 || !slices.Equal(states[:3], []string{"FileSize", "SmallFile", "Split"}) {
					t.Errorf("%s: got states %v, want FileSize, SmallFile, then Split", up.rel, states)
				}
				// The SmallFile task registered records before it handed on: the hand-off is in the
				// middle of the file, not before it.
				if cause := handOffCause(t, ctx, r, arn); !strings.Contains(cause, "records registered, it resumes at") || strings.Contains(cause, "(0 records registered") {
					t.Errorf("%s: got the hand-off %q, want one after some records were registered", up.rel, cause)
				}
			} else {
				if !slices.Equal(states, []string{"FileSize", "SmallFile"}) || children != 0 || f.SegmentExecutions != 0 {
					t.Errorf("%s: got states %v and %d segment executions, want FileSize and SmallFile alone", up.rel, states, children)
				}
				// Step Functions bills a retry as a transition: none happens in a healthy run.
				if n := transitionsOf(st, arn); n != 2+failed {
					t.Errorf("%s: got %d state transitions with %d task attempts retried, want 2 and one per retry", up.rel, n, failed)
				}
			}
			if f.Status != "SUCCEEDED" || f.Records != int64(want) {
				t.Errorf("%s: got %s with %d records registered, want SUCCEEDED with %d", up.rel, f.Status, f.Records, want)
			}
			sum := readSummary(t, ctx, r, "halt", f.ExecutionName)
			if sum.Status != "SUCCEEDED" || sum.Records != int64(want) || sum.Registered != int64(want) || sum.Rejected != 0 || sum.Unprocessed != 0 {
				t.Errorf("%s summary: got %s, %d records, %d registered, %d rejected, %d unprocessed; want SUCCEEDED, %d, %d, 0, 0",
					up.rel, sum.Status, sum.Records, sum.Registered, sum.Rejected, sum.Unprocessed, want, want)
			}
			if evs := fileEventsOf(rep, f.ExecutionName); len(evs) != 1 || evs[0].Status != "SUCCEEDED" || evs[0].Records != int64(want) || evs[0].Registered != int64(want) {
				t.Errorf("%s: got File Processed events %+v, want one SUCCEEDED with %d records registered", up.rel, evs, want)
			}
			// Every record once, in file order, and sent once: the fallback sends none twice.
			if got, want := fileRecords(r, "halt", up.rel), oneTo(want); !slices.Equal(got, want) {
				t.Errorf("%s: the core system registered records %v, want 1 to %d in order", up.rel, got, len(want))
			}
			if got := postsOf(r, "halt", up.rel); !slices.Equal(got, oneTo(want)) {
				t.Errorf("%s: records were sent as %v, want each of 1 to %d once", up.rel, got, want)
			}
		}

		// A small file refused at one record, and a file behind it.
		uploadAll(t, ctx, r, []upload{{"halt", "fails.csv", csvOf(smallFails)}, {"halt", "after.csv", csvOf(5)}})
		rep = waitFor(t, ctx, r, "fails.csv failed, announced, the tenant halted", func(rep *report.Report) bool {
			f := maybeFile(rep, "halt", "fails.csv")
			return f != nil && f.Status == "FAILED" && len(fileEventsOf(rep, f.ExecutionName)) == 1 && rep.Tenants["halt"].Halted != nil
		})
		fails := fileOf(t, rep, "halt", "fails.csv")
		arn := executionARN(t, r, "halt", fails.ExecutionName)
		if states, _ := statesEntered(t, ctx, r, arn); !slices.Equal(states, []string{"FileSize", "SmallFile"}) {
			t.Errorf("fails.csv: got states %v, want FileSize and SmallFile, failed there", states)
		}
		if h := rep.Tenants["halt"].Halted; h.ExecutionName != fails.ExecutionName {
			t.Errorf("halt: got halted at %+v, want at fails.csv (%s)", h, fails.ExecutionName)
		}
		if after := fileOf(t, rep, "halt", "after.csv"); after.StartedAt != nil {
			t.Errorf("after.csv: got %s while the tenant is halted, want it not started", after.Status)
		}
		if got, want := fileRecords(r, "halt", "fails.csv"), oneTo(smallFailAt-1); !slices.Equal(got, want) {
			t.Errorf("fails.csv: the core system registered %v, want the records before %d", got, smallFailAt)
		}
		sum := readSummary(t, ctx, r, "halt", fails.ExecutionName)
		if sum.Status != "FAILED" || sum.Failure == nil || sum.Failure.Type != "PermanentError" || !strings.Contains(sum.Failure.Message, fmt.Sprintf("record %d", smallFailAt)) {
			t.Errorf("fails.csv summary: got %s, failure %+v; want FAILED with a PermanentError at record %d", sum.Status, sum.Failure, smallFailAt)
		}
		if sum.Records != smallFails || sum.Registered != smallFailAt-1 || sum.Rejected != 0 || sum.Unprocessed != smallFails-smallFailAt+1 || len(sum.RegisteredAfterHalt) != 0 {
			t.Errorf("fails.csv summary: got %d records, %d registered, %d rejected, %d unprocessed, %v after the halt; want %d, %d, 0, %d, none",
				sum.Records, sum.Registered, sum.Rejected, sum.Unprocessed, sum.RegisteredAfterHalt, smallFails, smallFailAt-1, smallFails-smallFailAt+1)
		}
		if evs := fileEventsOf(rep, fails.ExecutionName); evs[0].Status != "FAILED" || evs[0].Registered != smallFailAt-1 || evs[0].Unprocessed != smallFails-smallFailAt+1 {
			t.Errorf("fails.csv event: got %+v, want FAILED with %d registered, %d unprocessed", evs[0], smallFailAt-1, smallFails-smallFailAt+1)
		}
		// The unprocessed file: the header and the records from the failed one on, as uploaded.
		body := string(csvOf(smallFails))
		want := "id,name\n" + body[strings.Index(body, fmt.Sprintf("\n%d,", smallFailAt))+1:]
		if got := string(readObject(t, ctx, r, results.Key(r.Tenant("halt").Owner(), fails.ExecutionName, results.UnprocessedCSV))); got != want {
			t.Errorf("fails.csv unprocessed.csv: got %q, want the header and records %d to %d as uploaded", got, smallFailAt, smallFails)
		}

		// Redriven after the fix: SmallFile again, from the failed record; then the waiting file.
		fixed.Store(true)
		pipectl(t, r, "redrive", "halt", fails.ExecutionName, "--reason", "core system fixed", "--stack-prefix", opsPrefix)
		rep = waitFor(t, ctx, r, "fails.csv redriven and after.csv done", func(rep *report.Report) bool {
			f, after := maybeFile(rep, "halt", "fails.csv"), maybeFile(rep, "halt", "after.csv")
			return f != nil && f.Status == "SUCCEEDED" && len(fileEventsOf(rep, f.ExecutionName)) == 2 && after != nil && after.Status == "SUCCEEDED"
		})
		assertInvariants(t, r, rep, nil, false)
		if states, _ := statesEntered(t, ctx, r, arn); slices.Contains(states, "Split") || states[len(states)-1] != "SmallFile" {
			t.Errorf("fails.csv after the redrive: got states %v, want SmallFile again and no Split", states)
		}
		if got := fileRecords(r, "halt", "fails.csv"); !slices.Equal(got, oneTo(smallFails)) {
			t.Errorf("fails.csv after the redrive: the core system registered %v, want 1 to %d in order", got, smallFails)
		}
		// The redrive resumed at the failed record: it was sent twice (refused, then accepted), every
		// other record once.
		wantPosts := slices.Sorted(slices.Values(append(oneTo(smallFails), smallFailAt)))
		if got := postsOf(r, "halt", "fails.csv"); !slices.Equal(got, wantPosts) {
			t.Errorf("fails.csv: records were sent as %v, want each once and record %d twice", got, smallFailAt)
		}
		sum = readSummary(t, ctx, r, "halt", fails.ExecutionName)
		if sum.Status != "SUCCEEDED" || sum.RedriveCount != 1 || sum.Registered != smallFails || sum.Unprocessed != 0 || sum.Files.Unprocessed != "" {
			t.Errorf("fails.csv after the redrive: got %s redrive %d, %d registered, %d unprocessed (%q); want SUCCEEDED 1, %d, 0, none",
				sum.Status, sum.RedriveCount, sum.Registered, sum.Unprocessed, sum.Files.Unprocessed, smallFails)
		}
		if evs := fileEventsOf(rep, fails.ExecutionName); evs[1].EventID != fails.ExecutionName+"/1" || evs[1].Status != "SUCCEEDED" || evs[1].Registered != smallFails {
			t.Errorf("fails.csv redrive event: got %+v, want %s/1 SUCCEEDED with %d registered", evs[1], fails.ExecutionName, smallFails)
		}
		if _, dups, _, bad := r.Sink.Stats(); dups != 0 || len(bad) != 0 {
			t.Errorf("core system: got %d duplicate requests and %v, want none", dups, bad)
		}
	})
}

// handOffCause is the cause of the SmallFile task's NotSmallError in an execution's history, else
// the task failures it has.
func handOffCause(t *testing.T, ctx context.Context, r *Run, arn string) string {
	t.Helper()
	var failures []string
	p := sfn.NewGetExecutionHistoryPaginator(r.StepFunctions(), &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn), MaxResults: 1000})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("GetExecutionHistory %s: %v", arn, err)
		}
		for _, ev := range page.Events {
			// The task's Lambda ARN (LambdaInvoke with PayloadResponseOnly) writes
			// LambdaFunctionFailed.
			if d := ev.LambdaFunctionFailedEventDetails; d != nil {
				if aws.ToString(d.Error) == pipeline.ErrNotSmall {
					return aws.ToString(d.Cause)
				}
				failures = append(failures, aws.ToString(d.Error)+": "+aws.ToString(d.Cause))
			}
		}
	}
	return fmt.Sprintf("no %s among the task failures %q", pipeline.ErrNotSmall, failures)
}

// statesEntered is the names of the states an execution entered, in order, and the number of its
// failed task attempts (each retried one bills a transition more), from its history.
func statesEntered(t *testing.T, ctx context.Context, r *Run, arn string) (names []string, failed int) {
	t.Helper()
	p := sfn.NewGetExecutionHistoryPaginator(r.StepFunctions(), &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn), MaxResults: 1000})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("GetExecutionHistory %s: %v", arn, err)
		}
		for _, ev := range page.Events {
			if d := ev.StateEnteredEventDetails; d != nil && strings.HasSuffix(string(ev.Type), "StateEntered") {
				names = append(names, aws.ToString(d.Name))
			}
			if ev.TaskFailedEventDetails != nil || ev.LambdaFunctionFailedEventDetails != nil || ev.TaskTimedOutEventDetails != nil || ev.LambdaFunctionTimedOutEventDetails != nil {
				failed++
			}
		}
	}
	return names, failed
}

// transitionsOf is the state transitions the server billed for one execution.
func transitionsOf(st *sfnStats, arn string) int {
	for _, e := range st.Executions {
		if e.ExecutionArn == arn {
			return e.StateTransitions
		}
	}
	return -1
}

// fileEventsOf is the File Processed events of one execution, in order.
func fileEventsOf(rep *report.Report, execution string) []results.Event {
	var out []results.Event
	for _, ev := range rep.FileEvents {
		if ev.Detail.Execution == execution {
			out = append(out, ev.Detail)
		}
	}
	return out
}

// fileRecords is the record numbers of one file the core system registered, in the order of
// their first registration.
func fileRecords(r *Run, tenant, rel string) []int64 {
	var ns []int64
	for _, rec := range r.Sink.Registered(tenant) {
		if strings.HasSuffix(rec.Source, "/"+rel) {
			ns = append(ns, rec.RecordNumber)
		}
	}
	return ns
}

// postsOf is the record numbers of every request the core system got for one file, sorted.
func postsOf(r *Run, tenant, rel string) []int64 {
	var ns []int64
	for _, req := range r.Sink.Requests(tenant) {
		if strings.HasSuffix(req.Source, "/"+rel) {
			ns = append(ns, req.RecordNumber)
		}
	}
	slices.Sort(ns)
	return ns
}

// oneTo is 1, 2, …, n.
func oneTo(n int) []int64 {
	ns := make([]int64, n)
	for i := range ns {
		ns[i] = int64(i + 1)
	}
	return ns
}
