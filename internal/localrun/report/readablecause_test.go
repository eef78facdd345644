package report

import "testing"

// The runner reads a failure as pipectl does (pipeline.FailureOf).
func TestReadableCause(t *testing.T) {
	for _, tc := range []struct{ name, cause, want string }{
		{"a segment's Lambda error", `PermanentError: {"errorMessage":"record 15: rejected","errorType":"PermanentError"}`, "PermanentError: record 15: rejected"},
		{"the file's TaskFailed description of its segment", `{"ExecutionArn":"arn:x","Status":"FAILED","Error":"PermanentError","Cause":"{\"errorMessage\":\"record 15: rejected\",\"errorType\":\"PermanentError\"}"}`, "record 15: rejected"},
		{"a plain cause", "States.Timeout: The execution timed out", "States.Timeout: The execution timed out"},
		{"other JSON", `States.TaskFailed: {"a":1}`, `States.TaskFailed: {"a":1}`},
		{"nothing", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReadableCause(tc.cause); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
