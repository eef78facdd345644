package pipeline

// The small-file path. A file whose S3 event gives it at most the state machine's small-file
// bound in bytes (DefaultSmallFileBytes unless the construct sets another) takes the file state
// machine's SmallFile task: one invocation of the Register function splits the file in memory,
// registers its chunks one after another (segment 0's run, as the full path's first Register
// invocation would) and writes its results, so the file costs two state transitions (the routing
// Choice and the task). A file that turns out not to be small (more than one segment of chunks,
// more bytes than the bound, or a core system that makes the invocation end before its last
// record) is handed to the full path (Split and its segments) by a NotSmallError,
// which the task's Catch follows; records the task registered before are not sent again, because
// the full path's Register resumes from the progress the task wrote, with the same idempotency
// keys.

// TaskSmallFile is the Kind of the SmallFile task's request, which the Register function serves
// beside Register itself.
const TaskSmallFile = "smallFile"

// SmallFileRequest is the payload of the SmallFile task: the execution's whole input and the
// facts of the execution from the context object, as the results task gets them.
type SmallFileRequest struct {
	Kind          string        `json:"kind"`
	Input         WorkflowInput `json:"input"`
	ExecutionName string        `json:"executionName"`
	ExecutionARN  string        `json:"executionArn"`
	StartTime     string        `json:"startTime"`
	RedriveCount  int           `json:"redriveCount"`
	// MaxBytes is the state machine's small-file bound: a larger object goes the full path.
	MaxBytes int64 `json:"maxBytes"`
}

// SmallFileResult is what the SmallFile task returns (the state machine discards it; it is in the
// execution's history for an operator).
type SmallFileResult struct {
	Records    int64 `json:"records"`
	Registered int64 `json:"registered"`
	Rejected   int64 `json:"rejected"`
}

// NotSmallError hands a file from the SmallFile task to the full path: it is not small after all,
// or its registration cannot end in this invocation. The task's Catch follows it to Split; it
// never fails a file.
type NotSmallError struct {
	Message string
	Err     error // the cause, if any; not part of Error()
}

func (e *NotSmallError) Error() string { return e.Message }
func (e *NotSmallError) Unwrap() error { return e.Err }

// ErrNotSmall is NotSmallError's name in Step Functions.
const ErrNotSmall = "NotSmallError"
