package pipeline

// TaskResults is the Kind of the results task's request, which the Split function serves beside
// Split itself (one function, so each tier keeps its resource count).
const TaskResults = "results"

// ResultsRequest is the payload of the results task, the last state of a file execution on both
// its success and its failure paths: the execution's own facts from the context object, and its
// whole state (State), which holds Split's result only when Split ran.
type ResultsRequest struct {
	Kind          string       `json:"kind"`
	Status        string       `json:"status"` // StatusSucceeded or StatusFailed: how the execution ends
	ExecutionName string       `json:"executionName"`
	ExecutionARN  string       `json:"executionArn"`
	StartTime     string       `json:"startTime"` // $$.Execution.StartTime, ISO 8601
	State         ResultsState `json:"state"`
}

// ResultsState is the file execution's state as the results task sees it.
type ResultsState struct {
	Tenant Tenant       `json:"tenant"`
	Source Source       `json:"source"`
	Split  *SplitResult `json:"split,omitempty"`
	// Error is what a Catch put in the state: the failed state's error name and cause.
	Error *TaskError `json:"error,omitempty"`
}

// TaskError is the error output of a Catch: {"Error": …, "Cause": …}
// (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html, "Error
// output").
type TaskError struct {
	Error string `json:"Error"`
	Cause string `json:"Cause"`
}
