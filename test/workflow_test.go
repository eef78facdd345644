package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/stacks"
)

func stackOptions(topic string) stacks.Options { return stacks.Options{AlarmTopicArn: topic} }

// renderASL turns a synthesized DefinitionString (a Fn::Join of strings and references) into the
// state machine's ASL, with each reference shown as ${LogicalId}.
func renderASL(t *testing.T, def any) (string, map[string]any) {
	t.Helper()
	var b strings.Builder
	switch d := def.(type) {
	case string:
		b.WriteString(d)
	case map[string]any:
		parts := get(t, d, "Fn::Join", 1).([]any)
		for _, p := range parts {
			switch v := p.(type) {
			case string:
				b.WriteString(v)
			case map[string]any:
				if ref, ok := v["Ref"]; ok {
					fmt.Fprintf(&b, "${%v}", ref)
				} else if ga, ok := v["Fn::GetAtt"].([]any); ok {
					fmt.Fprintf(&b, "${%v.%v}", ga[0], ga[1])
				} else {
					fmt.Fprintf(&b, "${%s}", asJSON(v))
				}
			}
		}
	}
	var asl map[string]any
	if err := json.Unmarshal([]byte(b.String()), &asl); err != nil {
		t.Fatalf("definition is not JSON: %v\n%s", err, b.String())
	}
	pretty, _ := json.MarshalIndent(asl, "", "  ")
	return string(pretty) + "\n", asl
}

// stateMachines returns the tenant's file and segment definitions as ASL.
func stateMachines(t *testing.T, tenant string) (file, segment map[string]any, fileText, segmentText string) {
	t.Helper()
	for id, sm := range tenantResources(t, shared.template, "AWS::StepFunctions::StateMachine", tenant) {
		text, asl := renderASL(t, props(sm)["DefinitionString"])
		switch {
		case strings.Contains(id, "WorkflowFile"):
			file, fileText = asl, text
		case strings.Contains(id, "WorkflowSegment"):
			segment, segmentText = asl, text
		}
	}
	if file == nil || segment == nil {
		t.Fatalf("tenant %s: want a File and a Segment state machine", tenant)
	}
	return
}

func TestStateMachinesAreStandardAndLogErrorsOnly(t *testing.T) {
	sharedApp(t)
	sms := tenantResources(t, shared.template, "AWS::StepFunctions::StateMachine", "acme")
	if len(sms) != 2 {
		t.Fatalf("got %d state machines, want 2 (file, segment)", len(sms))
	}
	for id, sm := range sms {
		p := props(sm)
		if p["StateMachineType"] != "STANDARD" {
			t.Errorf("%s: type %v, want STANDARD (redrive, 90-day names, exactly-once)", id, p["StateMachineType"])
		}
		lc := get(t, p, "LoggingConfiguration").(map[string]any)
		if lc["Level"] != "ERROR" || lc["IncludeExecutionData"] != false {
			t.Errorf("%s: logging %v, want ERROR without execution data", id, asJSON(lc))
		}
		if get(t, p, "TracingConfiguration", "Enabled") != true {
			t.Errorf("%s: tracing off", id)
		}
	}
}

func TestFileWorkflowShape(t *testing.T) {
	sharedApp(t)
	file, _, _, _ := stateMachines(t, "acme")
	if file["StartAt"] != "FileSize" || file["TimeoutSeconds"] != float64(86400) {
		t.Errorf("StartAt %v, TimeoutSeconds %v; want FileSize, 86400 (24 h)", file["StartAt"], file["TimeoutSeconds"])
	}
	// The small-file path: FileSize sends a file of at most the bound by its event (the tenant's
	// own, else the app's default, 1 MiB) to SmallFile, on the Register function, which ends the
	// execution or hands the file to Split. A file of exactly the bound is small: the comparisons
	// are NumericLessThanEquals, never NumericLessThan.
	if got := asJSON(get(t, file, "States", "FileSize", "Default")); got != `"Split"` {
		t.Errorf("FileSize Default: got %s, want Split", got)
	}
	var bounds []string
	for i := range 2 {
		for _, c := range get(t, file, "States", "FileSize", "Choices", i, "And").([]any) {
			for k, v := range c.(map[string]any) {
				if strings.HasPrefix(k, "Numeric") {
					bounds = append(bounds, fmt.Sprintf("%s %v", k, v))
				}
			}
		}
		if got := get(t, file, "States", "FileSize", "Choices", i, "Next"); got != "SmallFile" {
			t.Errorf("FileSize rule %d: Next %v, want SmallFile", i, got)
		}
	}
	want := []string{"NumericLessThanEquals 1.048576e+06", "NumericLessThanEqualsPath $.tenant.smallFileBytes"}
	if slices.Sort(bounds); !slices.Equal(bounds, want) {
		t.Errorf("FileSize comparisons: got %v, want %v", bounds, want)
	}
	small := get(t, file, "States", "SmallFile").(map[string]any)
	if small["ResultPath"] != "$.split" || asJSON(small["ResultSelector"]) != `{"records.$":"$.records"}` {
		t.Errorf("SmallFile: ResultPath %v ResultSelector %s, want the records at $.split.records, as Split's", small["ResultPath"], asJSON(small["ResultSelector"]))
	}
	if !strings.Contains(asJSON(small["Resource"]), "Register") || small["End"] != true || asJSON(small["Catch"]) != `[{"ErrorEquals":["NotSmallError"],"Next":"Split","ResultPath":null}]` {
		t.Errorf("SmallFile: Resource %v End %v Catch %s; want the Register function, the end, and NotSmallError to Split", small["Resource"], small["End"], asJSON(small["Catch"]))
	}
	checkLambdaRetries(t, "SmallFile", small, 120)
	split := get(t, file, "States", "Split").(map[string]any)
	if split["Next"] != "OneSegment" || split["ResultPath"] != "$.split" {
		t.Errorf("Split: Next %v ResultPath %v", split["Next"], split["ResultPath"])
	}
	// A file of one segment runs the segment's Register loop in its own execution; any other goes
	// to the Segments Map of segment executions.
	one := get(t, file, "States", "OneSegment").(map[string]any)
	if one["Default"] != "Segments" || get(t, one, "Choices", 0, "Next") != "Register" {
		t.Errorf("OneSegment: Default %v Choices %s, want a file of one segment to Register, any other to Segments", one["Default"], asJSON(one["Choices"]))
	}
	_, seg, _, _ := stateMachines(t, "acme")
	for _, name := range []string{"Register"} {
		reg := get(t, file, "States", name).(map[string]any)
		if reg["Next"] != "NextChunks" || reg["Catch"] != nil || reg["ResultPath"] != "$.split.cursor" {
			t.Errorf("file %s: Next %v Catch %v ResultPath %v, want NextChunks, no Catch (the file fails), the cursor in $.split.cursor, where Split starts it", name, reg["Next"], reg["Catch"], reg["ResultPath"])
		}
		if got, want := asJSON(reg["Resource"])+asJSON(reg["Retry"]), asJSON(get(t, seg, "States", "Register", "Resource"))+asJSON(get(t, seg, "States", "Register", "Retry")); got != want {
			t.Errorf("file %s: Resource and Retry %s, want the segment's Register's %s", name, got, want)
		}
		checkLambdaRetries(t, "file "+name, reg, 120)
	}
	if got := asJSON(get(t, file, "States", "NextChunks")); got != `{"Choices":[{"BooleanEquals":true,"Next":"Results","Variable":"$.split.cursor.done"}],"Default":"Register","Type":"Choice"}` {
		t.Errorf("file NextChunks: got %s, want Results when done, else Register", got)
	}
	// With a payload-only result the state's Parameters are the function's payload.
	if got := asJSON(get(t, split, "Parameters")); got != `{"executionName.$":"$$.Execution.Name","source.$":"$.source","tenant.$":"$.tenant"}` {
		t.Errorf("Split payload: got %s", got)
	}
	checkLambdaRetries(t, "Split", split, 300)
	m := get(t, file, "States", "Segments").(map[string]any)
	checkSequentialMap(t, "Segments", m, "$.split.segments")
	// Segments and chunks read the key Split actually resolved (the event's key as given or its
	// form-decoded form), never the event's key again.
	if got := get(t, m, "ItemSelector", "source.$"); got != "$.split.source" {
		t.Errorf("Segments ItemSelector source.$: got %v, want $.split.source (the resolved source)", got)
	}
	// Each segment carries the file execution's start, which Register dates its 429s with against
	// the adaptive limit: from the context object, which every execution has, and inside the
	// segment object, which the segment passes on whole to Register.
	if got := asJSON(get(t, m, "ItemSelector", "segment")); got != `{"fileStarted.$":"$$.Execution.StartTime","firstChunk.$":"$$.Map.Item.Value.firstChunk","index.$":"$$.Map.Item.Value.index","lastChunk.$":"$$.Map.Item.Value.lastChunk"}` {
		t.Errorf("Segments ItemSelector segment: got %s, want Split's segment plus fileStarted from $$.Execution.StartTime", got)
	}
	inner := get(t, m, "ItemProcessor", "States", "RegisterSegment").(map[string]any)
	if !strings.HasSuffix(inner["Resource"].(string), ":states:startExecution.sync:2") {
		t.Errorf("RegisterSegment resource %v, want startExecution.sync:2 (waits for the segment)", inner["Resource"])
	}
	if got := asJSON(get(t, inner, "Parameters", "Input", "source.$")); got != `"$.source"` {
		t.Errorf("RegisterSegment input source.$: got %s, want \"$.source\" of the iteration (the resolved source)", got)
	}
	if got := asJSON(get(t, inner, "Parameters", "Input", "cursor")); got != `{"chunk.$":"$.segment.firstChunk","record":0}` {
		t.Errorf("RegisterSegment input cursor: got %s, want the segment's first chunk from its first record, where its Register loop starts", got)
	}
	checkIterationOutputIsEmpty(t, "RegisterSegment", inner)
	checkStartSegmentRetries(t, inner)
	checkSegmentName(t, inner)
	// A file that succeeds runs the results task on Split's own function (no function of its own).
	if m["Next"] != "Results" {
		t.Errorf("Segments: Next %v, want Results", m["Next"])
	}
	for _, name := range []string{"Results"} {
		r := get(t, file, "States", name).(map[string]any)
		if got, want := asJSON(r["Resource"]), asJSON(split["Resource"]); got != want {
			t.Errorf("%s: Resource %s, want Split's function %s", name, got, want)
		}
	}
}

// checkSegmentName: each child is named from the file execution's name, the segment index and the
// redrive count, so a retried start finds the running child (StartExecution is idempotent for the
// name and input of a running execution) and the controller can find it by name; the controller
// computes the same name with pipeline.SegmentExecutionName.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html
func checkSegmentName(t *testing.T, task map[string]any) {
	t.Helper()
	const want = "States.Format('{}-s{}-r{}', States.Hash($$.Execution.Name, 'SHA-1'), $.segment.index, $$.Execution.RedriveCount)"
	if got := get(t, task, "Parameters", "Name.$"); got != want {
		t.Errorf("RegisterSegment Name.$: got %v, want %s", got, want)
	}
	// A child that already finished answers a retried start with ExecutionAlreadyExists. That is
	// never retried: the file fails, its tenant's policy applies, and a redrive names a new child.
	by := retriersByError(t, "RegisterSegment", task)
	for _, e := range []string{"StepFunctions.ExecutionAlreadyExistsException", "States.ALL", "States.TaskFailed"} {
		if by[e] != nil {
			t.Errorf("RegisterSegment retries %s: a finished or failed child must not be started again", e)
		}
	}
	if _, ok := task["Catch"]; ok {
		t.Errorf("RegisterSegment has a Catch: a failed segment must fail the file")
	}
}

// checkIterationOutputIsEmpty: the last state of an item processor must output {}. The inline
// Map collects every iteration's output before its ResultPath discards the array, and AWS counts
// that array against the 256 KiB payload quota; ASL defines a null OutputPath as output {}.
// https://states-language.net/spec.html#filters
// https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html
func checkIterationOutputIsEmpty(t *testing.T, name string, state map[string]any) {
	t.Helper()
	if state["End"] != true {
		t.Errorf("%s: End %v, want the item processor's last state", name, state["End"])
	}
	if v, ok := state["OutputPath"]; !ok || v != nil {
		t.Errorf("%s: OutputPath got %v (present %v), want null so the iteration outputs {}", name, v, ok)
	}
	if _, ok := state["ResultSelector"]; ok {
		t.Errorf("%s: ResultSelector %v, want none (OutputPath null already empties the output)", name, state["ResultSelector"])
	}
}

// neverRetried are failures that must end the file: the States.* names Step Functions reports
// for a failed task or child execution, and the pipeline's permanent errors.
// https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html
var neverRetried = []string{"States.ALL", "States.TaskFailed", "States.Timeout", "States.Runtime",
	"PermanentError", "ValidationError", "ObjectChangedError"}

// retriersByError maps each error name to the retrier that matches it, failing on a name matched
// twice (only the first retrier would ever apply) or a permanent failure being retried.
func retriersByError(t *testing.T, name string, state map[string]any) map[string]map[string]any {
	t.Helper()
	rs, ok := state["Retry"].([]any)
	if !ok {
		t.Fatalf("%s: no Retry", name)
	}
	out := map[string]map[string]any{}
	for _, r := range rs {
		rm := r.(map[string]any)
		for _, e := range rm["ErrorEquals"].([]any) {
			if _, dup := out[e.(string)]; dup {
				t.Errorf("%s: %s matched by two retriers", name, e)
			}
			if slices.Contains(neverRetried, e.(string)) {
				t.Errorf("%s: retrier %s retries %s, a failure that must end the file", name, asJSON(rm), e)
			}
			out[e.(string)] = rm
		}
	}
	return out
}

// totalWaitSeconds is the longest a retrier waits over all its attempts, before jitter:
// min(interval × backoff^i, maxDelay) summed over the attempts.
func totalWaitSeconds(r map[string]any) float64 {
	interval, _ := r["IntervalSeconds"].(float64)
	if interval == 0 {
		interval = 1
	}
	backoff, _ := r["BackoffRate"].(float64)
	if backoff == 0 {
		backoff = 2
	}
	attempts, _ := r["MaxAttempts"].(float64)
	maxDelay, hasMax := r["MaxDelaySeconds"].(float64)
	total, d := 0.0, interval
	for range int(attempts) {
		w := d
		if hasMax && w > maxDelay {
			w = maxDelay
		}
		total += w
		d *= backoff
	}
	return total
}

// checkLambdaRetries asserts the retry policy of a Lambda task against the error
// names AWS documents. fnTimeout is the function's timeout in seconds.
// https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html
func checkLambdaRetries(t *testing.T, name string, task map[string]any, fnTimeout float64) {
	t.Helper()
	by := retriersByError(t, name, task)
	for _, e := range []string{"Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException",
		"Lambda.ClientExecutionTimeoutException", "Lambda.Unknown", "Sandbox.Timedout", "Lambda.TooManyRequestsException", "RetryableError"} {
		r, ok := by[e]
		if !ok {
			t.Errorf("%s: %s is not retried", name, e)
			continue
		}
		if a := r["MaxAttempts"].(float64); e != "Lambda.TooManyRequestsException" && (a < 2 || a > 10) {
			t.Errorf("%s: %s MaxAttempts %v, want bounded, 2 to 10", name, e, a)
		}
	}
	if t.Failed() {
		return
	}
	fast := by["Lambda.ServiceException"]
	if fast["IntervalSeconds"] != float64(1) || fast["MaxAttempts"] != float64(3) || fast["BackoffRate"] != float64(2) {
		t.Errorf("%s: service-exception retrier %s, want 1 s, 3 attempts, backoff 2", name, asJSON(fast))
	}
	// A crashed or timed-out invocation is over: retry soon, a few times.
	if ended := by["Sandbox.Timedout"]; asJSON(ended) != asJSON(by["Lambda.Unknown"]) || ended["MaxAttempts"].(float64) > 5 || totalWaitSeconds(ended) > 60 {
		t.Errorf("%s: Lambda.Unknown/Sandbox.Timedout retrier %s, want one retrier, at most 5 attempts within a minute", name, asJSON(ended))
	}
	// The invocation whose outcome is unknown may still run: wait out the function timeout first.
	if cet := by["Lambda.ClientExecutionTimeoutException"]; cet["IntervalSeconds"].(float64) <= fnTimeout {
		t.Errorf("%s: ClientExecutionTimeoutException retried after %v s, want longer than the function timeout %v s", name, cet["IntervalSeconds"], fnTimeout)
	}
	// Throttling never fails the file: waited out until the workflow's timeout, by its own retrier.
	thr := by["Lambda.TooManyRequestsException"]
	checkThrottleRetrier(t, name, task, "Lambda.TooManyRequestsException")
	if thr["IntervalSeconds"] == fast["IntervalSeconds"] {
		t.Errorf("%s: throttling shares the service exceptions' 1 s interval", name)
	}
	own := by["RetryableError"]
	if own["JitterStrategy"] != "FULL" || own["MaxDelaySeconds"] != float64(60) || own["MaxAttempts"] != float64(8) {
		t.Errorf("%s: RetryableError retrier %s, want 8 attempts, full jitter, 60 s MaxDelay", name, asJSON(own))
	}
	// A record slower than the budget looks, from one invocation, like a core system that hangs for
	// a while: retried as patiently, then the file fails under its own name.
	if slow := by["RecordLatencyError"]; asJSON(slow) != asJSON(own) {
		t.Errorf("%s: RecordLatencyError retrier %s, want the RetryableError retrier %s", name, asJSON(slow), asJSON(own))
	}
}

// workflowTimeoutSeconds is the file and segment state machines' TimeoutSeconds (24 h).
const workflowTimeoutSeconds = 86400

// matchingRetrier is the retrier Step Functions uses for an error: the first one, in order, whose
// ErrorEquals names it or holds a wildcard that matches a Task's error (States.ALL, or
// States.TaskFailed for anything but States.Timeout); -1 for none.
// https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html
func matchingRetrier(task map[string]any, errorName string) int {
	rs, _ := task["Retry"].([]any)
	for i, r := range rs {
		for _, e := range r.(map[string]any)["ErrorEquals"].([]any) {
			if e == errorName || e == "States.ALL" || (e == "States.TaskFailed" && errorName != "States.Timeout") {
				return i
			}
		}
	}
	return -1
}

// checkThrottleRetrier: a throttle is matched by a retrier of its own (no earlier retrier names it
// or a wildcard that matches it, so it spends no other retrier's attempts) that waits it out until
// the workflow's timeout: the documented maximum MaxAttempts (99,999,999), a growing wait capped by
// MaxDelaySeconds (below 31,622,401) with FULL jitter, whose mean over all attempts outlasts the
// timeout. https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html
func checkThrottleRetrier(t *testing.T, name string, task map[string]any, errorName string) {
	t.Helper()
	i := matchingRetrier(task, errorName)
	if i < 0 {
		t.Errorf("%s: no retrier matches %s", name, errorName)
		return
	}
	r := task["Retry"].([]any)[i].(map[string]any)
	if got := asJSON(r["ErrorEquals"]); !strings.Contains(got, `"`+errorName+`"`) {
		t.Errorf("%s: %s is matched first by retrier %d %s, want a retrier that names it", name, errorName, i, got)
	}
	maxDelay, _ := r["MaxDelaySeconds"].(float64)
	backoff, _ := r["BackoffRate"].(float64)
	if r["MaxAttempts"] != float64(99999999) || r["JitterStrategy"] != "FULL" || maxDelay <= 0 || maxDelay >= 31622401 || backoff <= 1 {
		t.Errorf("%s: %s retrier %s, want MaxAttempts 99999999, FULL jitter, BackoffRate above 1 and MaxDelaySeconds from 1 to 31622400", name, errorName, asJSON(r))
	}
	// With FULL jitter a wait is drawn below its cap: on average half of it.
	interval, _ := r["IntervalSeconds"].(float64)
	mean, d := 0.0, max(interval, 1)
	for range int(min(r["MaxAttempts"].(float64), 1e6)) {
		mean += min(d, maxDelay) / 2
		d *= max(backoff, 1)
		if mean > workflowTimeoutSeconds {
			break
		}
	}
	if mean <= workflowTimeoutSeconds {
		t.Errorf("%s: %s retrier waits %.0f s on average in all, want more than the workflow timeout %d s", name, errorName, mean, workflowTimeoutSeconds)
	}
}

// checkStartSegmentRetries: the child start's transient failures are retried, its throttles (the
// open-execution quota and the API's token bucket) until the workflow's timeout; a child that ran
// and failed (States.TaskFailed) is not.
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html#API_StartExecution_Errors
// https://docs.aws.amazon.com/step-functions/latest/apireference/CommonErrors.html
func checkStartSegmentRetries(t *testing.T, task map[string]any) {
	t.Helper()
	by := retriersByError(t, "RegisterSegment", task)
	want := []string{"StepFunctions.ExecutionLimitExceededException", "StepFunctions.SdkClientException",
		"StepFunctions.ThrottlingException", "StepFunctions.AWSStepFunctionsException"}
	if got := slices.Sorted(maps.Keys(by)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("RegisterSegment retried errors: got %v, want %v", got, want)
	}
	for _, e := range []string{"StepFunctions.ExecutionLimitExceededException", "StepFunctions.ThrottlingException"} {
		checkThrottleRetrier(t, "RegisterSegment", task, e)
	}
	for _, e := range []string{"StepFunctions.SdkClientException", "StepFunctions.AWSStepFunctionsException"} {
		r := by[e]
		if r == nil {
			continue
		}
		if r["JitterStrategy"] != "FULL" || r["MaxAttempts"].(float64) > 10 || totalWaitSeconds(r) < 5*60 {
			t.Errorf("RegisterSegment %s retrier %s, want FULL jitter, at most 10 attempts, at least 5 minutes in all", e, asJSON(r))
		}
	}
}

// TestSegmentWorkflowShape: the segment loops on a cursor: Register gets the run of chunks from
// the cursor to the segment's last, its result is the next cursor, and a Choice sends it back to
// Register until the segment is done. The cursor is state input (never only the function's memory),
// so a Retry or a redrive of the segment resumes at the failed invocation's first chunk.
func TestSegmentWorkflowShape(t *testing.T) {
	sharedApp(t)
	_, seg, _, _ := stateMachines(t, "acme")
	checkSegmentLoop(t, seg)
}

// TestPoolSegmentWorkflowShape: a pool's segment loops on the same record cursor as a silo's.
func TestPoolSegmentWorkflowShape(t *testing.T) {
	_, tpl := poolTemplate(t)
	var file, seg map[string]any
	for id, sm := range byType(tpl, "AWS::StepFunctions::StateMachine") {
		_, asl := renderASL(t, props(sm)["DefinitionString"])
		switch {
		case strings.Contains(id, "WorkflowFile"):
			file = asl
		case strings.Contains(id, "WorkflowSegment"):
			seg = asl
		}
	}
	if file == nil || seg == nil {
		t.Fatal("want the pool's File and Segment state machines")
	}
	inner := get(t, file, "States", "Segments", "ItemProcessor", "States", "RegisterSegment").(map[string]any)
	if got := asJSON(get(t, inner, "Parameters", "Input", "cursor")); got != `{"chunk.$":"$.segment.firstChunk","record":0}` {
		t.Errorf("pool RegisterSegment input cursor: got %s, want the segment's first chunk from its first record", got)
	}
	checkSegmentLoop(t, seg)
}

// checkSegmentLoop asserts the per-invocation segment of the bundled Register.
func checkSegmentLoop(t *testing.T, seg map[string]any) {
	t.Helper()
	if seg["StartAt"] != "Register" {
		t.Errorf("StartAt %v, want Register (RegisterSegment sets the cursor: no Pass state to pay for)", seg["StartAt"])
	}
	if got := slices.Sorted(maps.Keys(get(t, seg, "States").(map[string]any))); !slices.Equal(got, []string{"NextChunks", "Register", "SegmentDone"}) {
		t.Errorf("states: got %v, want NextChunks, Register, SegmentDone (no Map: one transition per invocation, not per chunk)", got)
	}
	reg := get(t, seg, "States", "Register").(map[string]any)
	const payload = `{"chunk.$":"$.cursor.chunk","executionName.$":"$.executionName","header.$":"$.header","lastChunk.$":"$.segment.lastChunk",` +
		`"manifest.$":"$.manifest","record.$":"$.cursor.record","records.$":"$.records","segment.$":"$.segment","source.$":"$.source","tenant.$":"$.tenant"}`
	if got := asJSON(reg["Parameters"]); got != payload {
		t.Errorf("Register payload: got %s, want %s (the file execution's name keeps the idempotency keys; the source is the resolved one; the segment keys its progress; the cursor names a record within its chunk)", got, payload)
	}
	if got := asJSON(reg["ResultSelector"]); got != `{"chunk.$":"$.next","done.$":"$.done","record.$":"$.nextRecord"}` || reg["ResultPath"] != "$.cursor" {
		t.Errorf("Register result: ResultSelector %s ResultPath %v, want the next cursor, chunk and record, in $.cursor", got, reg["ResultPath"])
	}
	if reg["Next"] != "NextChunks" {
		t.Errorf("Register Next %v, want NextChunks", reg["Next"])
	}
	if _, ok := reg["Catch"]; ok {
		t.Errorf("Register has a Catch: a failed invocation must fail the segment")
	}
	checkLambdaRetries(t, "Register", reg, 120)
	choice := get(t, seg, "States", "NextChunks").(map[string]any)
	if choice["Type"] != "Choice" || choice["Default"] != "Register" {
		t.Errorf("NextChunks: type %v Default %v, want a Choice back to Register", choice["Type"], choice["Default"])
	}
	if got := asJSON(choice["Choices"]); got != `[{"BooleanEquals":true,"Next":"SegmentDone","Variable":"$.cursor.done"}]` {
		t.Errorf("NextChunks choices: got %s", got)
	}
	done := get(t, seg, "States", "SegmentDone").(map[string]any)
	if v, ok := done["OutputPath"]; done["Type"] != "Succeed" || !ok || v != nil {
		t.Errorf("SegmentDone: type %v OutputPath %v (present %v), want Succeed with output {}", done["Type"], v, ok)
	}
}

// TestSegmentWorkflowShapePerChunk: -c registerDesign=per-chunk still synthesizes the design before
// the cursor, one Map iteration (and one Register task) per chunk, for a side-by-side comparison.
func TestSegmentWorkflowShapePerChunk(t *testing.T) {
	_, built := synthApp(t, "one-tenant.json", stacks.Options{RegisterDesign: "per-chunk"})
	tpl := stackTemplate(t, built.TenantStacks[0])
	var seg map[string]any
	for id, sm := range tenantResources(t, tpl, "AWS::StepFunctions::StateMachine", "acme") {
		if strings.Contains(id, "WorkflowSegment") {
			_, seg = renderASL(t, props(sm)["DefinitionString"])
		}
	}
	if seg == nil {
		t.Fatal("no segment state machine")
	}
	if seg["StartAt"] != "ChunkIndexes" {
		t.Errorf("StartAt %v", seg["StartAt"])
	}
	pass := get(t, seg, "States", "ChunkIndexes").(map[string]any)
	if got := get(t, pass, "Parameters", "indexes.$"); got != "States.ArrayRange($.segment.firstChunk, $.segment.lastChunk, 1)" {
		t.Errorf("ChunkIndexes: got %v", got)
	}
	m := get(t, seg, "States", "Chunks").(map[string]any)
	checkSequentialMap(t, "Chunks", m, "$.chunkIndexes.indexes")
	if got := get(t, m, "ItemSelector", "source.$"); got != "$.source" {
		t.Errorf("Chunks ItemSelector source.$: got %v, want $.source (the segment's input: the resolved source)", got)
	}
	reg := get(t, m, "ItemProcessor", "States", "Register").(map[string]any)
	if v, ok := reg["ResultPath"]; !ok || v != nil {
		t.Errorf("Register ResultPath %v, want null (discarded)", v)
	}
	checkIterationOutputIsEmpty(t, "Register", reg)
	checkLambdaRetries(t, "Register", reg, 120)
	// Both designs retry Register by exactly the same rules.
	sharedApp(t)
	_, cur, _, _ := stateMachines(t, "acme")
	if got, want := asJSON(reg["Retry"]), asJSON(get(t, cur, "States", "Register", "Retry")); got != want {
		t.Errorf("per-chunk Register Retry %s, want the per-invocation one %s", got, want)
	}
}

// checkSequentialMap asserts what keeps order: one iteration at a time, no Retry on the Map, and
// results discarded so the output stays small.
func checkSequentialMap(t *testing.T, name string, m map[string]any, itemsPath string) {
	t.Helper()
	if m["Type"] != "Map" || m["MaxConcurrency"] != float64(1) || m["ItemsPath"] != itemsPath {
		t.Errorf("%s: got type %v MaxConcurrency %v ItemsPath %v, want Map, 1, %s", name, m["Type"], m["MaxConcurrency"], m["ItemsPath"], itemsPath)
	}
	if _, ok := m["Retry"]; ok {
		t.Errorf("%s: Retry on the Map reruns every iteration", name)
	}
	if v, ok := m["ResultPath"]; !ok || v != nil {
		t.Errorf("%s: ResultPath got %v, want null (discard iteration results)", name, v)
	}
	if got := get(t, m, "ItemProcessor", "ProcessorConfig", "Mode"); got != "INLINE" {
		t.Errorf("%s: mode %v, want INLINE", name, got)
	}
}

// TestASLValidates runs the npm asl-validator on every rendered definition.
func TestASLValidates(t *testing.T) {
	sharedApp(t)
	validator := filepath.Join("..", "node_modules", ".bin", "asl-validator")
	if _, err := os.Stat(validator); err != nil {
		t.Fatalf("asl-validator not installed (%v): run make setup", err)
	}
	for _, tenant := range sampleTenants {
		_, _, fileText, segText := stateMachines(t, tenant)
		for name, text := range map[string]string{"file": fileText, "segment": segText} {
			p := filepath.Join(t.TempDir(), name+".asl.json")
			// References are resolved the way CloudFormation would, with stand-in values.
			text = strings.ReplaceAll(text, "${AWS::Partition}", "aws")
			text = refPattern.ReplaceAllString(text, "arn:aws:lambda:eu-west-1:123456789012:function:$1")
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(validator, "--json-path", p, "--no-arn-check").CombinedOutput()
			if err != nil {
				t.Errorf("%s %s: asl-validator: %v\n%s", tenant, name, err, out)
			}
		}
	}
}

// TestASLGolden pins the rendered definitions; `go test ./test -run ASLGolden -update` rewrites them.
func TestASLGolden(t *testing.T) {
	sharedApp(t)
	_, _, fileText, segText := stateMachines(t, "acme")
	for name, text := range map[string]string{"file": fileText, "segment": segText} {
		golden := filepath.Join("testdata", "golden", name+".asl.json")
		text = refPattern.ReplaceAllString(text, "${$1}")
		if *update {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -update to create)", err)
		}
		if text != string(want) {
			t.Errorf("%s definition differs from %s (run with -update if intended):\n%s", name, golden, text)
		}
	}
}

// refPattern matches the ${LogicalId.Attr} stand-ins renderASL writes.
var refPattern = regexpMust(`\$\{([A-Za-z0-9]+)(?:\.[A-Za-z]+)?\}`)
