package pipeline

import "testing"

func TestFailureOf(t *testing.T) {
	for _, tc := range []struct {
		name, errName, cause  string
		wantType, wantMessage string
	}{
		{"a Lambda's error response", "ValidationError", `{"errorMessage":"inbox/a/b.csv line 3: 2 fields, want 3","errorType":"ValidationError"}`,
			"ValidationError", "inbox/a/b.csv line 3: 2 fields, want 3"},
		{"after a panic, with a stack trace", "runtime.Error", `{"errorMessage":"index out of range","errorType":"runtime.Error","stackTrace":[{"path":"x.go","line":1}]}`,
			"runtime.Error", "index out of range"},
		{"the error type wins over the error name", "Lambda.Unknown", `{"errorMessage":"Runtime exited with error: signal: killed","errorType":"Runtime.ExitError"}`,
			"Runtime.ExitError", "Runtime exited with error: signal: killed"},
		{"a response without a type keeps the error name", "Lambda.Unknown", `{"errorMessage":"Runtime exited with error: signal: killed"}`,
			"Lambda.Unknown", "Runtime exited with error: signal: killed"},
		{"a plain cause", "States.Timeout", "The execution timed out", "States.Timeout", "The execution timed out"},
		{"other JSON stays as it is", "States.TaskFailed", `{"ExecutionArn":"arn:x","Status":"FAILED"}`, "States.TaskFailed", `{"ExecutionArn":"arn:x","Status":"FAILED"}`},
		{"broken JSON stays as it is", "PermanentError", `{"errorMessage":`, "PermanentError", `{"errorMessage":`},
		{"nothing", "", "", "", ""},
		// A file execution fails with its segment execution's description (startExecution.sync).
		{"a failed child with a PermanentError", "States.TaskFailed",
			`{"ExecutionArn":"arn:x","Status":"FAILED","Input":{"a":1},"Error":"PermanentError","Cause":"{\"errorMessage\":\"core system answered 422: record 15: amount\",\"errorType\":\"PermanentError\"}"}`,
			"PermanentError", "core system answered 422: record 15: amount"},
		{"a failed child with a ValidationError", "States.TaskFailed",
			`{"ExecutionArn":"arn:x","Status":"FAILED","Error":"ValidationError","Cause":"{\"errorMessage\":\"line 3: 2 fields, want 3\",\"errorType\":\"ValidationError\"}"}`,
			"ValidationError", "line 3: 2 fields, want 3"},
		{"a failed child whose cause is not JSON", "States.TaskFailed",
			`{"ExecutionArn":"arn:x","Status":"TIMED_OUT","Error":"States.Timeout","Cause":"The execution timed out"}`,
			"States.Timeout", "The execution timed out"},
		{"a failed child with an empty cause", "States.TaskFailed", `{"ExecutionArn":"arn:x","Status":"FAILED","Error":"PermanentError","Cause":""}`,
			"PermanentError", ""},
		{"a failed child without a cause", "States.TaskFailed", `{"ExecutionArn":"arn:x","Status":"FAILED","Error":"PermanentError"}`,
			"PermanentError", ""},
		{"a TaskFailed with a non-JSON cause", "States.TaskFailed", "connection reset", "States.TaskFailed", "connection reset"},
		{"a TaskFailed with an empty cause", "States.TaskFailed", "", "States.TaskFailed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotType, gotMessage := FailureOf(tc.errName, tc.cause)
			if gotType != tc.wantType || gotMessage != tc.wantMessage {
				t.Errorf("got %q, %q, want %q, %q", gotType, gotMessage, tc.wantType, tc.wantMessage)
			}
		})
	}
}
