//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/example/tenantpipeline/internal/localrun/report"
)

// stateEntries counts the states a file entered, in its own execution and in its segment
// executions (every *StateEntered event of their histories, read with GetExecutionHistory): Step
// Functions bills one state transition per state entered. It also returns the Register task
// entries (one per Register invocation, retries not counted): the segments', or the file's own
// Register when it runs its one segment's loop itself.
func stateEntries(t *testing.T, ctx context.Context, r *Run, tenant string, f report.FileReport) (states, registers int) {
	t.Helper()
	st, err := r.sfnStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parent := executionARN(t, r, tenant, f.ExecutionName)
	for _, e := range st.Executions {
		if e.ExecutionArn != parent && e.ParentArn != parent {
			continue
		}
		p := sfn.NewGetExecutionHistoryPaginator(r.StepFunctions(), &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(e.ExecutionArn), MaxResults: 1000})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatalf("GetExecutionHistory %s: %v", e.ExecutionArn, err)
			}
			for _, ev := range page.Events {
				if strings.HasSuffix(string(ev.Type), "StateEntered") {
					states++
					if d := ev.StateEnteredEventDetails; d != nil && registerState(aws.ToString(d.Name)) {
						registers++
					}
				}
			}
		}
	}
	return states, registers
}

// A Register invocation is killed midway through its time budget, after it has registered several
// chunks, on every attempt, so the segment and the file fail and the halt tenant stops. Before
// that, each Retry of the killed invocation starts again at the cursor in its input: it re-sends
// that invocation's records only, never those of the earlier invocations. Then the core system is
// fixed and the file is redriven (RedriveExecution of the file execution, which runs its one
// segment's Register loop itself and so re-runs the failed Register task, with the cursor its state
// kept): it resumes at the killed invocation's first chunk, or further on from the segment's
// progress in the work bucket, so it re-sends at most that invocation's records. No record is lost,
// each record's first successful registration is in file order, and the file needed far fewer
// Register invocations than chunks.
func TestScenarioRegisterFailsMidBudgetThenRedrive(t *testing.T) {
	t.Parallel()
	const records, killAt = 3000, 1450 // 30 chunks of 100; record 1,450 is in chunk 14
	r := startScenario(t, scenarioTenants, Config{
		EnvFor: map[string][]string{registerPkg: {"HTTP_TIMEOUT_SECONDS=1"}, controllerPkg: {"REGISTER_TIMEOUT_SECONDS=8", "HALT_WAIT_SECONDS=1"}},
		Lambda: LambdaOptions{
			// Each invocation may run for 8 s: 2 s of margin, and a chunk starts only while the slowest
			// chunk so far plus one HTTP timeout (1 s) fits, so an invocation registers several chunks of
			// 100 records at 5 ms each, and the kill falls in the middle of an invocation.
			FunctionTimeout: map[string]time.Duration{registerPkg: 8 * time.Second},
		},
		StepFunctions: StepFunctionsOptions{RetryIntervalScale: 0.1},
	})
	r.Sink.SetDelay(func(tenant, source string, _ int64) time.Duration {
		if tenant == "halt" && strings.HasSuffix(source, "/big.csv") {
			return 5 * time.Millisecond
		}
		return 0
	})
	var fixed atomic.Bool
	var kills atomic.Int64
	r.Sink.SetFault(func(tenant, source string, n int64, _ int) int {
		if tenant != "halt" || !strings.HasSuffix(source, "/big.csv") || n != killAt || fixed.Load() {
			return 0
		}
		go func() {
			time.Sleep(200 * time.Millisecond)
			for _, f := range functionsOf(r, registerPkg) {
				kills.Add(int64(f.KillRunning()))
			}
		}()
		return -1 // no answer: the process is killed while it waits (Lambda.Unknown)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"halt", "big.csv", csvOf(records)}, {"halt", "after.csv", csvOf(30)}})
	rep := waitFor(t, ctx, r, "halt/big.csv failed", func(rep *report.Report) bool {
		return len(rep.Tenants["halt"].Files) > 0 && rep.Tenants["halt"].Files[0].Status == "FAILED"
	})
	big := fileOf(t, rep, "halt", "big.csv")
	// The file's own error when it runs its one segment's loop itself, its segment's otherwise.
	if big.Error == "" || !strings.Contains(big.Error+" "+big.Cause, "Lambda.Unknown") {
		t.Errorf("big.csv: got %s %q, want it failed by the killed Register (Lambda.Unknown)", big.Error, big.Cause)
	}
	if got := fileOf(t, rep, "halt", "after.csv").Status; got != "WAITING" {
		t.Errorf("after.csv while big.csv is failed: got %s, want WAITING (halt)", got)
	}

	// Before the redrive: records sent more than once are exactly one invocation's, from a chunk
	// boundary after the segment's start up to the killed record.
	sent := map[int64]int{}
	for _, q := range r.Sink.Requests("halt") {
		if strings.HasSuffix(q.Source, "/big.csv") {
			sent[q.RecordNumber]++
		}
	}
	first := int64(0)
	for n := int64(1); n <= killAt; n++ {
		switch {
		case sent[n] == 0:
			t.Fatalf("record %d was never sent before the kill", n)
		case sent[n] > 1 && first == 0:
			first = n
		case sent[n] == 1 && first != 0:
			t.Errorf("record %d sent once, after record %d was re-sent: want the re-sent records one contiguous run", n, first)
		}
	}
	// How many attempts reach the killed record, and where each retry starts, depend on how fast
	// this machine runs (an attempt may time out before it, or record progress on the way; an
	// invocation whose budget ran out inside a chunk hands on a cursor inside it): the invariant is
	// a re-sent run that starts at a later invocation's first record, after the segment's start.
	if first <= 1 || sent[killAt] < 2 {
		t.Errorf("re-sent before the redrive: from record %d, record %d sent %d times; want a run starting at a later invocation's first record, the killed record retried",
			first, killAt, sent[killAt])
	}
	for n := int64(killAt + 1); n <= records; n++ {
		if sent[n] != 0 {
			t.Fatalf("record %d was sent before the redrive: want nothing after the failure", n)
		}
	}
	t.Logf("before the redrive: the killed invocation started at record %d; Register processes killed: %d", first, kills.Load())

	fixed.Store(true)
	beforeRedrive := len(r.Sink.Requests("halt"))
	arn := executionARN(t, r, "halt", big.ExecutionName)
	if _, err := r.StepFunctions().RedriveExecution(ctx, &sfn.RedriveExecutionInput{ExecutionArn: aws.String(arn)}); err != nil {
		t.Fatalf("redrive %s: %v", arn, err)
	}
	rep = drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	wantStatuses(t, rep, "halt", "SUCCEEDED", "SUCCEEDED")
	big = fileOf(t, rep, "halt", "big.csv")
	if big.Records != records || big.RedriveCount != 1 || big.Executions != 1 {
		t.Errorf("big.csv: got %d records, redriveCount %d, %d executions; want %d, 1, 1", big.Records, big.RedriveCount, big.Executions, records)
	}
	// After the redrive: the records sent again are one run, each once, from the segment's last
	// recorded progress (a chunk, and a record within it), at or after the killed invocation's
	// first record, to the killed one: nothing the earlier invocations registered.
	var resent []int64
	for _, q := range r.Sink.Requests("halt")[beforeRedrive:] {
		if strings.HasSuffix(q.Source, "/big.csv") && q.RecordNumber <= killAt {
			resent = append(resent, q.RecordNumber)
		}
	}
	ok := len(resent) > 0 && resent[0] >= first && resent[len(resent)-1] == killAt
	for i := 1; ok && i < len(resent); i++ {
		ok = resent[i] == resent[i-1]+1
	}
	if !ok {
		lo, hi := int64(0), int64(0)
		if len(resent) > 0 {
			lo, hi = resent[0], resent[len(resent)-1]
		}
		t.Errorf("re-sent after the redrive: got %d records (%d..%d), want one run, each once, from the recorded progress at or after %d to %d: the redriven segment must resume there",
			len(resent), lo, hi, first, int64(killAt))
	}
	t.Logf("after the redrive: %d records sent again (the killed invocation started at record %d)", len(resent), first)
	states, registers := stateEntries(t, ctx, r, "halt", big)
	t.Logf("big.csv: %d chunks, %d Register invocations and %d states entered over both runs (the failed one and the redrive)", records/100, registers, states)
	if registers >= records/100 {
		t.Errorf("Register invocations: got %d, want fewer than the %d chunks", registers, records/100)
	}
}

// cursorTenants: one silo and one pooled tenant, each with chunks of 20 records.
const cursorTenants = `{"pools": {"shared": {}}, "tenants": [
  {"id": "slow", "chunkSize": 20, "registerUrl": "https://core.example.com/records"},
  {"id": "pslow", "tier": "pool", "pool": "shared", "chunkSize": 20, "registerUrl": "https://core.example.com/records"}
]}`

// registerState reports whether a state is a Register task of the per-invocation loop, in a
// segment execution or in a file execution that runs its one segment's loop itself
// (workflows.StateRegister). No other state has this name.
func registerState(name string) bool { return name == "Register" }

// registerCursors returns the cursor each successful Register task of a file handed on (the
// "cursor" of the Register state's output, from the TaskStateExited events of the segment
// executions, or of the file execution that runs its one segment's loop), in history order.
func registerCursors(t *testing.T, ctx context.Context, r *Run, tenant string, f report.FileReport) []cursorState {
	t.Helper()
	st, err := r.sfnStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parent := executionARN(t, r, tenant, f.ExecutionName)
	var out []cursorState
	for _, e := range st.Executions {
		if e.ExecutionArn != parent && e.ParentArn != parent {
			continue
		}
		p := sfn.NewGetExecutionHistoryPaginator(r.StepFunctions(), &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(e.ExecutionArn), MaxResults: 1000})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatalf("GetExecutionHistory %s: %v", e.ExecutionArn, err)
			}
			for _, ev := range page.Events {
				d := ev.StateExitedEventDetails
				if ev.Type != "TaskStateExited" || d == nil || !registerState(aws.ToString(d.Name)) {
					continue
				}
				// A segment keeps its cursor at $.cursor, a file of one segment at $.split.cursor.
				var out1 struct {
					Cursor *cursorState
					Split  struct{ Cursor *cursorState }
				}
				if err := json.Unmarshal([]byte(aws.ToString(d.Output)), &out1); err != nil || out1.Cursor == nil && out1.Split.Cursor == nil {
					t.Fatalf("Register output %q: %v, want a cursor", aws.ToString(d.Output), err)
				}
				if out1.Cursor == nil {
					out1.Cursor = out1.Split.Cursor
				}
				out = append(out, *out1.Cursor)
			}
		}
	}
	return out
}

// cursorState is the segment's cursor as its state keeps it.
type cursorState struct {
	Chunk  int   `json:"chunk"`
	Record int64 `json:"record"`
	Done   bool  `json:"done"`
}

// A chunk longer than one Register invocation's budget, in both tiers: 20 records at 200 ms each
// (4 s of answers) against a 6 s Register timeout, of which 2 s are the margin and the last POST
// starts with one HTTP timeout (1 s) left, so no invocation can send more than 16 of them however
// fast the machine runs. Each invocation hands on a cursor inside the chunk, and the next one goes
// on from there: the file completes, every record registered once and in order, and the cursors
// the segment kept name records within the chunk, each further on than the last.
func TestScenarioCursorInsideChunk(t *testing.T) {
	t.Parallel()
	const records = 20
	r := startScenario(t, cursorTenants, Config{
		EnvFor:        map[string][]string{registerPkg: {"HTTP_TIMEOUT_SECONDS=1"}, controllerPkg: {"REGISTER_TIMEOUT_SECONDS=6"}},
		Lambda:        LambdaOptions{FunctionTimeout: map[string]time.Duration{registerPkg: 6 * time.Second}},
		StepFunctions: StepFunctionsOptions{RetryIntervalScale: 0.1},
	})
	r.Sink.SetLatency(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"slow", "one-chunk.csv", csvOf(records)}, {"pslow", "one-chunk.csv", csvOf(records)}})
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	for _, tenant := range []string{"slow", "pslow"} {
		t.Run(tenant, func(t *testing.T) {
			wantStatuses(t, rep, tenant, "SUCCEEDED")
			f := fileOf(t, rep, tenant, "one-chunk.csv")
			var got []int64
			for _, rec := range r.Sink.Registered(tenant) {
				got = append(got, rec.RecordNumber)
			}
			want := make([]int64, records)
			for i := range want {
				want[i] = int64(i + 1)
			}
			if !slices.Equal(got, want) {
				t.Errorf("records registered: got %v, want 1..%d, each once, in order", got, records)
			}
			cursors := registerCursors(t, ctx, r, tenant, f)
			t.Logf("%s: cursors %v", tenant, cursors)
			if len(cursors) < 2 || cursors[len(cursors)-1] != (cursorState{Chunk: 1, Done: true}) {
				t.Fatalf("cursors: got %v, want at least two Register tasks, the last done at chunk 1", cursors)
			}
			last := int64(1)
			for _, c := range cursors[:len(cursors)-1] {
				if c.Chunk != 0 || c.Done || c.Record <= last || c.Record > records {
					t.Errorf("cursor %+v: want one inside chunk 0, past record %d (the cursor moves by record within the chunk)", c, last)
				}
				last = c.Record
			}
		})
	}
}
