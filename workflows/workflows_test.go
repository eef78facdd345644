package workflows

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
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
	stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("S"), nil)
	fn := func(id string) awslambda.IFunction {
		return awslambda.Function_FromFunctionArn(stack, jsii.String(id), jsii.String("arn:aws:lambda:ap-northeast-1:123456789012:function:"+id))
	}
	w := New(stack, "Workflow", &Props{
		Split: fn("Split"), Register: fn("Register"), Timeout: time.Hour, SplitTimeout: time.Minute, RegisterTimeout: time.Minute,
		Logs: awslogs.NewLogGroup(stack, jsii.String("Logs"), nil), RecordCursor: recordCursor,
	})
	tpl := *assertions.Template_FromStack(stack, nil).ToJSON()
	id := *stack.GetLogicalId(w.Segment.Node().DefaultChild().(awscdk.CfnElement))
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
