package pipeline

// TaskResults is the Kind of the results task's request, which the Split function serves beside
// Split itself (one function, so each tier keeps its resource count).
const TaskResults = "results"

// ResultsRequest is the payload of the results task. The file state machine sends it as its last
// state when the file succeeds (the execution's facts from the context object, and its whole
// state); the controller sends it when it sees the execution fail, time out or be aborted (the
// facts from DescribeExecution, and a State with Split's result from the execution's history).
type ResultsRequest struct {
	Kind          string `json:"kind"`
	Status        string `json:"status"` // how the execution ends: SUCCEEDED, FAILED, TIMED_OUT or ABORTED
	ExecutionName string `json:"executionName"`
	ExecutionARN  string `json:"executionArn"`
	StartTime     string `json:"startTime"` // $$.Execution.StartTime, ISO 8601
	// RedriveCount is $$.Execution.RedriveCount: which run of the execution ends. A redriven
	// execution's summary replaces its earlier run's.
	RedriveCount int `json:"redriveCount"`
	// StopTime is the execution's stop, ISO 8601, when the sender knows it (the controller); empty:
	// the task's own time, which follows the execution's last state within one transition.
	StopTime string       `json:"stopTime,omitempty"`
	State    ResultsState `json:"state"`
}

// ResultsState is the file execution's state as the results task sees it.
type ResultsState struct {
	Tenant Tenant       `json:"tenant"`
	Source Source       `json:"source"`
	Split  *SplitResult `json:"split,omitempty"`
	// Error is the failed execution's error name and cause.
	Error *TaskError `json:"error,omitempty"`
	// Admitted is when the controller admitted the file and started its execution
	// (WorkflowInput.Admitted), ISO 8601; empty for an execution started without it.
	Admitted string `json:"admitted,omitempty"`
	// SmallFile is set by the controller when the execution ran the SmallFile task and no Split
	// state (its history has no Split result): the results task then splits the file again in
	// memory, writing nothing, to learn its records (TaskSmallFile).
	SmallFile bool `json:"smallFile,omitempty"`
}

// TaskError is the error output of a Catch: {"Error": …, "Cause": …}
// (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html, "Error
// output").
type TaskError struct {
	Error string `json:"Error"`
	Cause string `json:"Cause"`
}
