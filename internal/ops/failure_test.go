package ops

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
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotType, gotMessage := failureOf(tc.errName, tc.cause)
			if gotType != tc.wantType || gotMessage != tc.wantMessage {
				t.Errorf("got %q, %q, want %q, %q", gotType, gotMessage, tc.wantType, tc.wantMessage)
			}
		})
	}
}
