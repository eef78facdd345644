package workflows

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	sfn "github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/jsii-runtime-go"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// segmentASL synthesizes one workflow with props and returns its segment's definition, rendered:
// each token of the Fn::Join (an ARN) becomes "X".
func segmentASL(t *testing.T, recordCursor bool) map[string]any {
	t.Helper()
	return asl(t, recordCursor, func(w *Workflow) sfn.StateMachine { return w.Segment })
}

// fileASL is segmentASL for the file's definition.
func fileASL(t *testing.T) map[string]any {
	t.Helper()
	return asl(t, true, func(w *Workflow) sfn.StateMachine { return w.File })
}

func asl(t *testing.T, recordCursor bool, which func(*Workflow) sfn.StateMachine) map[string]any {
	t.Helper()
	return aslOf(t, time.Hour, recordCursor, which)
}

// aslOf is asl for state machines of the timeout given.
func aslOf(t *testing.T, timeout time.Duration, recordCursor bool, which func(*Workflow) sfn.StateMachine) map[string]any {
	t.Helper()
	return aslWith(t, func(p *Props) { p.Timeout, p.RecordCursor = timeout, recordCursor }, which)
}

// aslWith is asl for the props that set changes.
func aslWith(t *testing.T, set func(*Props), which func(*Workflow) sfn.StateMachine) map[string]any {
	t.Helper()
	stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("S"), nil)
	fn := func(id string) awslambda.IFunction {
		return awslambda.Function_FromFunctionArn(stack, jsii.String(id), jsii.String("arn:aws:lambda:ap-northeast-1:123456789012:function:"+id))
	}
	p := &Props{
		Split: fn("Split"), Register: fn("Register"), Timeout: time.Hour, SplitTimeout: time.Minute, RegisterTimeout: time.Minute,
		Logs: awslogs.NewLogGroup(stack, jsii.String("Logs"), nil), RecordCursor: true,
	}
	set(p)
	w := New(stack, "Workflow", p)
	tpl := *assertions.Template_FromStack(stack, nil).ToJSON()
	id := *stack.GetLogicalId(which(w).Node().DefaultChild().(awscdk.CfnElement))
	def := tpl["Resources"].(map[string]any)[id].(map[string]any)["Properties"].(map[string]any)["DefinitionString"]
	var b strings.Builder
	switch d := def.(type) {
	case string:
		b.WriteString(d)
	case map[string]any:
		for _, part := range d["Fn::Join"].([]any)[1].([]any) {
			if s, ok := part.(string); ok {
				b.WriteString(s)
			} else {
				b.WriteString("X")
			}
		}
	}
	var asl map[string]any
	if err := json.Unmarshal([]byte(b.String()), &asl); err != nil {
		t.Fatalf("segment definition: %v", err)
	}
	return asl
}

// TestRecordCursor: the bundled Register's cursor names a record within its chunk; a register
// function of your own under the per-invocation design keeps the chunk cursor it was written
// against, so its result needs no nextRecord (a missing path would fail the task).
func TestRecordCursor(t *testing.T) {
	tests := []struct {
		recordCursor              bool
		wantPayload, wantSelector string
	}{
		{true, "$.cursor.record", `{"chunk.$":"$.next","done.$":"$.done","record.$":"$.nextRecord"}`},
		{false, "", `{"chunk.$":"$.next","done.$":"$.done"}`},
	}
	for _, tt := range tests {
		reg := segmentASL(t, tt.recordCursor)["States"].(map[string]any)[StateRegister].(map[string]any)
		got, _ := reg["Parameters"].(map[string]any)["record.$"].(string)
		if got != tt.wantPayload {
			t.Errorf("RecordCursor %v: got payload record.$ %q, want %q", tt.recordCursor, got, tt.wantPayload)
		}
		sel, _ := json.Marshal(reg["ResultSelector"])
		if string(sel) != tt.wantSelector {
			t.Errorf("RecordCursor %v: got ResultSelector %s, want %s", tt.recordCursor, sel, tt.wantSelector)
		}
	}
}

// TestFileResults: a file that succeeds runs the results task after Segments; the task retries a
// few times (never until the state machine's timeout) and its own failure is caught into
// FileDone, so the file's status stands. No Catch sits on Split or Segments: a caught failure
// would make a later Fail state the step a redrive continues from.
func TestFileResults(t *testing.T) {
	states := fileASL(t)["States"].(map[string]any)
	state := func(name string) map[string]any {
		s, ok := states[name].(map[string]any)
		if !ok {
			t.Fatalf("got no state %s, want one", name)
		}
		return s
	}
	if got := state(StateSegments)["Next"]; got != StateResults {
		t.Errorf("got Segments.Next %v, want %s", got, StateResults)
	}
	for _, name := range []string{StateSplit, StateSegments, StateRegister} {
		if c, ok := state(name)["Catch"]; ok {
			t.Errorf("got %s.Catch %v, want none (a redrive must continue from the failed state)", name, c)
		}
	}
	s := state(StateResults)
	// PayloadResponseOnly: the payload is the task's Parameters.
	p, _ := s["Parameters"].(map[string]any)
	if p["kind"] != "results" || p["status"] != "SUCCEEDED" || p["state.$"] != "$" || p["executionName.$"] != "$$.Execution.Name" ||
		p["executionArn.$"] != "$$.Execution.Id" || p["startTime.$"] != "$$.Execution.StartTime" || p["redriveCount.$"] != "$$.Execution.RedriveCount" {
		t.Errorf("got payload %v, want the results request with status SUCCEEDED, the run's redrive count and the whole state", p)
	}
	// The task ends a file that succeeded: no Succeed state after it, one transition fewer a file.
	if s["End"] != true || s["Next"] != nil || s["ResultPath"] != nil {
		t.Errorf("got End %v Next %v ResultPath %v, want the execution's last state and the state unchanged (null)", s["End"], s["Next"], s["ResultPath"])
	}
	r, _ := json.Marshal(s["Retry"])
	if want := `[{"BackoffRate":2,"ErrorEquals":["States.ALL"],"IntervalSeconds":2,"JitterStrategy":"FULL","MaxAttempts":3}]`; string(r) != want {
		t.Errorf("got Retry %s, want %s", r, want)
	}
	c, _ := json.Marshal(s["Catch"])
	if want := `[{"ErrorEquals":["States.ALL"],"Next":"` + StateFileDone + `","ResultPath":"$.resultsError"}]`; string(c) != want {
		t.Errorf("got Catch %s, want %s", c, want)
	}
	if d := state(StateFileDone); d["Type"] != "Succeed" {
		t.Errorf("got FileDone %v, want a Succeed state", d)
	}
}

// TestSmallFileRoute: with SmallFileBytes the file state machine starts at the FileSize choice,
// which sends a file the event gives at most the tenant's bound (its settings' smallFileBytes), or
// without one that many bytes, to the SmallFile task (the Register
// function, which ends the execution: two state transitions) and any other, or one without a
// numeric size, to Split; the task retries as Register does and hands a NotSmallError, and only
// that, to Split with the state unchanged. Without it the machine starts at Split as before.
func TestSmallFileRoute(t *testing.T) {
	file := func(w *Workflow) sfn.StateMachine { return w.File }
	if got := aslWith(t, func(*Props) {}, file)["StartAt"]; got != StateSplit {
		t.Errorf("without SmallFileBytes got StartAt %v, want %s", got, StateSplit)
	}
	def := aslWith(t, func(p *Props) { p.SmallFileBound = 262144 }, file)
	states := def["States"].(map[string]any)
	if def["StartAt"] != StateFileSize {
		t.Fatalf("got StartAt %v, want %s", def["StartAt"], StateFileSize)
	}
	choice, _ := json.Marshal(states[StateFileSize])
	// The tenant's own bound when its settings carry one (-1: none), else the state machine's.
	wantChoice := `{"Choices":[` +
		`{"And":[{"IsPresent":true,"Variable":"$.source.size"},{"IsNumeric":true,"Variable":"$.source.size"},` +
		`{"IsPresent":true,"Variable":"$.tenant.smallFileBytes"},{"IsNumeric":true,"Variable":"$.tenant.smallFileBytes"},` +
		`{"NumericLessThanEqualsPath":"$.tenant.smallFileBytes","Variable":"$.source.size"}],"Next":"SmallFile"},` +
		`{"And":[{"IsPresent":true,"Variable":"$.source.size"},{"IsNumeric":true,"Variable":"$.source.size"},` +
		`{"Not":{"IsPresent":true,"Variable":"$.tenant.smallFileBytes"}},` +
		`{"NumericLessThanEquals":262144,"Variable":"$.source.size"}],"Next":"SmallFile"}],"Default":"Split","Type":"Choice"}`
	if string(choice) != wantChoice {
		t.Errorf("got FileSize\n%s\nwant\n%s", choice, wantChoice)
	}
	small := states[StateSmallFile].(map[string]any)
	if sel, _ := json.Marshal(small["ResultSelector"]); small["End"] != true || small["ResultPath"] != "$.split" || string(sel) != `{"records.$":"$.records"}` {
		t.Errorf("got SmallFile End %v ResultPath %v ResultSelector %s, want the end of the execution, its records at $.split.records", small["End"], small["ResultPath"], sel)
	}
	payload, _ := json.Marshal(small["Parameters"])
	for _, want := range []string{`"kind":"smallFile"`, `"input.$":"$"`, `"maxBytes":262144`, `"executionName.$":"$$.Execution.Name"`,
		`"executionArn.$":"$$.Execution.Id"`, `"redriveCount.$":"$$.Execution.RedriveCount"`, `"startTime.$":"$$.Execution.StartTime"`} {
		if !strings.Contains(string(payload), want) {
			t.Errorf("got SmallFile payload %s, want %s in it", payload, want)
		}
	}
	catch, _ := json.Marshal(small["Catch"])
	if want := `[{"ErrorEquals":["NotSmallError"],"Next":"Split","ResultPath":null}]`; string(catch) != want {
		t.Errorf("got SmallFile Catch %s, want %s", catch, want)
	}
	retry, _ := json.Marshal(small["Retry"])
	registerRetry, _ := json.Marshal(states[StateSplit].(map[string]any)["Retry"])
	if !strings.Contains(string(retry), `"RetryableError","RecordLatencyError"`) || !strings.Contains(string(retry), `"Lambda.TooManyRequestsException"`) {
		t.Errorf("got SmallFile Retry %s, want Register's retriers (%s)", retry, registerRetry)
	}
	if states[StateSplit].(map[string]any)["Next"] != StateOneSegment {
		t.Errorf("got Split's Next %v, want the full path on from it", states[StateSplit].(map[string]any)["Next"])
	}
}

// TestOneSegmentRoute: after Split, the OneSegment choice sends a file of exactly one segment, for
// which Split returned the loop's start ($.split.cursor), to the segment's Register loop run in the
// file execution, and any other (none, several, or no cursor) to the Segments Map. The loop sends
// Register the request a segment execution sends (the same fields, the same segment, the cursor
// Split started), keeps the cursor at $.split.cursor, retries by the same rules, catches nothing,
// and ends in Results. DesignPerChunk keeps a segment execution for every segment.
func TestOneSegmentRoute(t *testing.T) {
	file := func(w *Workflow) sfn.StateMachine { return w.File }
	segment := func(w *Workflow) sfn.StateMachine { return w.Segment }
	for _, recordCursor := range []bool{true, false} {
		t.Run(fmt.Sprintf("record cursor %v", recordCursor), func(t *testing.T) {
			states := asl(t, recordCursor, file)["States"].(map[string]any)
			segStates := asl(t, recordCursor, segment)["States"].(map[string]any)
			choice, _ := json.Marshal(states[StateOneSegment])
			const wantChoice = `{"Choices":[{"And":[{"IsPresent":true,"Variable":"$.split.cursor"},` +
				`{"Not":{"IsPresent":true,"Variable":"$.split.segments[1]"}}],"Next":"Register"}],"Default":"Segments","Type":"Choice"}`
			if string(choice) != wantChoice {
				t.Errorf("got OneSegment\n%s\nwant\n%s", choice, wantChoice)
			}
			segReg := segStates[StateRegister].(map[string]any)
			reg, ok := states[StateRegister].(map[string]any)
			if !ok {
				t.Fatalf("got no state %s in the file, want one", StateRegister)
			}
			p := reg["Parameters"].(map[string]any)
			if got, want := fields(p), fields(segReg["Parameters"].(map[string]any)); !slices.Equal(got, want) {
				t.Errorf("got payload fields %v, want the segment's Register fields %v", got, want)
			}
			want := map[string]any{
				"tenant.$": "$.tenant", "source.$": "$.split.source", "executionName.$": "$$.Execution.Name",
				"manifest.$": "$.split.manifest", "records.$": "$.split.records", "header.$": "$.split.header",
				"chunk.$": "$.split.cursor.chunk", "lastChunk.$": "$.split.segments[0].lastChunk",
				"segment": map[string]any{"index.$": "$.split.segments[0].index", "firstChunk.$": "$.split.segments[0].firstChunk",
					"lastChunk.$": "$.split.segments[0].lastChunk", "fileStarted.$": "$$.Execution.StartTime"},
			}
			if recordCursor {
				want["record.$"] = "$.split.cursor.record"
			}
			if g, w := mustJSON(t, p), mustJSON(t, want); g != w {
				t.Errorf("got payload %s, want %s", g, w)
			}
			for _, key := range []string{"Retry", "ResultSelector", "Resource"} {
				if g, w := mustJSON(t, reg[key]), mustJSON(t, segReg[key]); g != w {
					t.Errorf("got %s %s, want the segment's Register's %s", key, g, w)
				}
			}
			if reg["ResultPath"] != "$.split.cursor" || reg["Next"] != StateNextChunks || reg["Catch"] != nil {
				t.Errorf("got ResultPath %v Next %v Catch %v, want $.split.cursor, %s and no Catch", reg["ResultPath"], reg["Next"], reg["Catch"], StateNextChunks)
			}
			next, _ := json.Marshal(states[StateNextChunks])
			const wantNext = `{"Choices":[{"BooleanEquals":true,"Next":"Results","Variable":"$.split.cursor.done"}],"Default":"Register","Type":"Choice"}`
			if string(next) != wantNext {
				t.Errorf("got NextChunks %s, want %s", next, wantNext)
			}
		})
	}
	perChunk := aslWith(t, func(p *Props) { p.Design = DesignPerChunk }, file)["States"].(map[string]any)
	if next := perChunk[StateSplit].(map[string]any)["Next"]; next != StateSegments || perChunk[StateOneSegment] != nil {
		t.Errorf("per-chunk design: got Split's Next %v, OneSegment %v; want Segments and no OneSegment", next, perChunk[StateOneSegment])
	}
}

// fields lists a payload's field names, without the ".$" of a path.
func fields(payload map[string]any) []string {
	var names []string
	for k := range maps.Keys(payload) {
		names = append(names, strings.TrimSuffix(k, ".$"))
	}
	return slices.Sorted(slices.Values(names))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
