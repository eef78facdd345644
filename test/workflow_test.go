package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	if file["StartAt"] != "Split" || file["TimeoutSeconds"] != float64(86400) {
		t.Errorf("StartAt %v, TimeoutSeconds %v; want Split, 86400 (24 h)", file["StartAt"], file["TimeoutSeconds"])
	}
	split := get(t, file, "States", "Split").(map[string]any)
	if split["Next"] != "Segments" || split["ResultPath"] != "$.split" {
		t.Errorf("Split: Next %v ResultPath %v", split["Next"], split["ResultPath"])
	}
	// With a payload-only result the state's Parameters are the function's payload.
	if got := asJSON(get(t, split, "Parameters")); got != `{"executionName.$":"$$.Execution.Name","source.$":"$.source","tenant.$":"$.tenant"}` {
		t.Errorf("Split payload: got %s", got)
	}
	m := get(t, file, "States", "Segments").(map[string]any)
	checkSequentialMap(t, "Segments", m, "$.split.segments")
	inner := get(t, m, "ItemProcessor", "States", "RegisterSegment").(map[string]any)
	if !strings.HasSuffix(inner["Resource"].(string), ":states:startExecution.sync:2") {
		t.Errorf("RegisterSegment resource %v, want startExecution.sync:2 (waits for the segment)", inner["Resource"])
	}
	if _, ok := inner["Retry"]; ok {
		t.Errorf("RegisterSegment has Retry %v: a segment is retried through its Register tasks", inner["Retry"])
	}
}

func TestSegmentWorkflowShape(t *testing.T) {
	sharedApp(t)
	_, seg, _, _ := stateMachines(t, "acme")
	if seg["StartAt"] != "ChunkIndexes" {
		t.Errorf("StartAt %v", seg["StartAt"])
	}
	pass := get(t, seg, "States", "ChunkIndexes").(map[string]any)
	if got := get(t, pass, "Parameters", "indexes.$"); got != "States.ArrayRange($.segment.firstChunk, $.segment.lastChunk, 1)" {
		t.Errorf("ChunkIndexes: got %v", got)
	}
	m := get(t, seg, "States", "Chunks").(map[string]any)
	checkSequentialMap(t, "Chunks", m, "$.chunkIndexes.indexes")
	reg := get(t, m, "ItemProcessor", "States", "Register").(map[string]any)
	if reg["ResultPath"] != nil {
		t.Errorf("Register ResultPath %v, want null (discarded)", reg["ResultPath"])
	}
	retries := reg["Retry"].([]any)
	if len(retries) != 2 {
		t.Fatalf("Register: got %d retriers, want 2", len(retries))
	}
	lambda := retries[0].(map[string]any)
	if got := asJSON(lambda["ErrorEquals"]); got != `["Lambda.ServiceException","Lambda.AWSLambdaException","Lambda.SdkClientException","Lambda.TooManyRequestsException"]` {
		t.Errorf("first retrier errors: got %s", got)
	}
	if lambda["IntervalSeconds"] != float64(1) || lambda["MaxAttempts"] != float64(3) || lambda["BackoffRate"] != float64(2) {
		t.Errorf("first retrier: got %s, want 1 s, 3 attempts, backoff 2", asJSON(lambda))
	}
	own := retries[1].(map[string]any)
	if asJSON(own["ErrorEquals"]) != `["RetryableError"]` || own["JitterStrategy"] != "FULL" {
		t.Errorf("second retrier: got %s, want RetryableError with full jitter", asJSON(own))
	}
	for _, r := range retries {
		if strings.Contains(asJSON(r), "States.ALL") || strings.Contains(asJSON(r), "PermanentError") || strings.Contains(asJSON(r), "ValidationError") {
			t.Errorf("retrier %s retries a permanent failure", asJSON(r))
		}
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
