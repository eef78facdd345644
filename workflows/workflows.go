// Package workflows defines the tenant pipeline's Step Functions state machines with CDK's typed
// awsstepfunctions/awsstepfunctionstasks API.
//
// A file is registered by two Standard state machines, so that a file of any size stays inside
// Step Functions' per-execution limits of 25,000 history events and 256 KiB of state payload:
//
//	file:    FileSize (Choice) ─┬─▶ SmallFile (the event's size ≤ SmallFileBound; NotSmallError ─▶ Split)
//	                            └─▶ Split ─▶ OneSegment (Choice) ─┬─▶ Segments (Map, MaxConcurrency 1) ─▶ RegisterSegment
//	                                                              │   (startExecution.sync of segment) ─▶ Results ─▶ FileDone
//	                                                              └─▶ Register ─▶ NextChunks (Choice) ─┬─▶ Register (not done)
//	                                                                  (a file of one segment)          └─▶ Results ─▶ FileDone
//	segment: Register ─▶ NextChunks (Choice) ─┬─▶ Register (not done)
//	                                          └─▶ SegmentDone
//
// Each Register invocation works through consecutive chunks while its time budget lasts and
// returns the cursor (the next chunk), which the segment keeps in its state (RegisterSegment starts
// it at the segment's first chunk): Step Functions bills
// and limits state transitions, so a file costs transitions per Register invocation, not per chunk.
// A file of one segment (at most pipeline.SegmentChunks chunks) runs the same loop in its own
// execution (oneSegmentRoute): no Map, no child execution, two state transitions fewer.
// DesignPerChunk keeps the previous segment (an inline Map with one Register task per chunk), and
// a segment execution for every segment, for comparison:
//
//	segment: ChunkIndexes (Pass, States.ArrayRange) ─▶ Chunks (Map, MaxConcurrency 1) ─▶ Register
//
// A small file (Props.SmallFileBound) runs as the one SmallFile task, two state transitions in all:
// the Register function splits it, registers its chunks one after another and writes its results
// in one invocation (pipeline.TaskSmallFile), and hands a file that is not small after all (more
// than one segment, or its registration does not end in the invocation) to Split.
//
// Split returns a few numbers and one small descriptor per 1,000 chunks, never the chunks
// themselves; Register reads its chunk's byte range from the manifest Split wrote to S3. README
// ("Staying inside Step Functions limits") and docs/data-path.md give the arithmetic.
package workflows

import (
	"maps"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	sfn "github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	tasks "github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctionstasks"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// State names. They appear in execution histories, in the local harness and in operators'
// runbooks, so they are part of the contract.
const (
	StateSplit           = "Split"
	StateSegments        = "Segments"
	StateRegisterSegment = "RegisterSegment"
	StateChunkIndexes    = "ChunkIndexes"
	StateChunks          = "Chunks"
	StateRegister        = "Register"
	StateNextChunks      = "NextChunks"
	StateSegmentDone     = "SegmentDone"
	// The file of one segment (DesignPerInvocation): OneSegment chooses it after Split, and the file
	// execution runs the segment's Register loop itself, Register and NextChunks, with the cursor at
	// $.split.cursor, until the segment is done.
	StateOneSegment = "OneSegment"
	// The file's results (internal/results), at the end of the success path.
	StateResults  = "Results"
	StateFileDone = "FileDone"
	// The small-file path (Props.SmallFileBound): FileSize chooses it from the size the S3 event
	// gave, SmallFile runs the whole file in one Register invocation (pipeline.TaskSmallFile).
	StateFileSize  = "FileSize"
	StateSmallFile = "SmallFile"
)

// Register designs: how a segment execution drives Register.
const (
	// DesignPerInvocation loops on a cursor: one Register task (and one Choice) per invocation,
	// each invocation registering as many consecutive chunks as its time budget allows.
	DesignPerInvocation = "per-invocation"
	// DesignPerChunk runs one Register task per chunk in an inline Map. Kept for comparison (it
	// costs one state transition per chunk), and for a user's own register function written
	// against the one-chunk contract.
	DesignPerChunk = "per-chunk"
)

// Designs lists the valid Props.Design values.
var Designs = []string{DesignPerInvocation, DesignPerChunk}

// Props configures the workflow of one tenant.
type Props struct {
	// Split cuts the file into chunks and writes the manifest. Required.
	Split awslambda.IFunction
	// Register registers a run of chunks (DesignPerInvocation) or one chunk (DesignPerChunk). Required.
	Register awslambda.IFunction
	// Timeout bounds one file execution and each segment execution. Required.
	Timeout time.Duration
	// SplitTimeout and RegisterTimeout are the functions' own timeouts. A Lambda invoke whose
	// outcome Step Functions could not learn (Lambda.ClientExecutionTimeoutException) is retried
	// only after this long, when the earlier invocation can no longer be running. Required.
	SplitTimeout, RegisterTimeout time.Duration
	// Logs receives both state machines' logs at level ERROR, without execution data. Required.
	Logs awslogs.ILogGroup
	// Design is DesignPerInvocation or DesignPerChunk. Default: DesignPerInvocation.
	Design string
	// RecordCursor makes the per-invocation cursor name a record within its chunk as well: Register
	// gets "record" and returns "nextRecord" (pipeline.ChunkRequest, ChunkResult), so an invocation
	// whose budget runs out inside a chunk hands on the rest of it. The bundled Register does; a
	// register function of your own need not return nextRecord. Default: the chunk cursor alone.
	RecordCursor bool
	// SmallFileBound, when positive, gives the file state machine the small-file path: a file whose
	// event gives it at most this many bytes runs as one SmallFile task of the Register function
	// (two state transitions, the FileSize choice and the task), which hands a file that is not
	// small after all to Split (pipeline.NotSmallError). It needs the bundled Register and
	// DesignPerInvocation; at most pipeline.MaxSmallFileBytes. 0: every file takes Split.
	SmallFileBound int64
	// Encryption encrypts both state machines' execution data (definition, input, output,
	// history). Default: an AWS-owned key.
	// https://docs.aws.amazon.com/step-functions/latest/dg/encryption-at-rest.html
	Encryption sfn.EncryptionConfiguration
}

// Workflow is the pair of state machines of one tenant.
type Workflow struct {
	constructs.Construct
	// File runs once per file; the controller starts it and watches its status.
	File sfn.StateMachine
	// Segment registers the chunks of one segment; File starts it once per segment of a file of
	// several segments (a file of one runs the same loop itself), and of every file under
	// DesignPerChunk.
	Segment sfn.StateMachine
}

// Error names Step Functions reports for a Lambda task; each is matched by exactly one retrier
// of addLambdaRetries.
// https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html
// https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html
var (
	// The Lambda service's own transient failures: the invocation did not run.
	lambdaServiceErrors = []string{
		"Lambda.ServiceException",
		"Lambda.AWSLambdaException",
		"Lambda.SdkClientException",
	}
	// The invocation ran and ended without a handled error: the guide reports crashes,
	// out-of-memory kills and function timeouts as Lambda.Unknown; a function timeout reaches Step
	// Functions as the errorType Lambda's runtime API writes for it, Sandbox.Timedout (task
	// failures carry the function's errorType as the error name). Either way the invocation is
	// over, so it is retried at once; a chunk that always ends this way fails the file after a few
	// attempts. https://docs.aws.amazon.com/lambda/latest/dg/services-stepfunctions.html
	lambdaEndedErrors = []string{
		"Lambda.Unknown",
		"Sandbox.Timedout",
	}
	// Step Functions gave up waiting for the Invoke call: the invocation may still be running, and a
	// second Register of the same chunk beside it could reorder records. Retried only once the
	// function timeout has passed.
	lambdaOutcomeUnknownErrors = []string{"Lambda.ClientExecutionTimeoutException"}
	// Lambda throttled the invoke (the account's concurrency, shared by every function, or a rate
	// quota): nothing ran. Throttling lasts as long as the account's load, so it is waited out
	// (throttleRetry), never counted against the other retriers' budgets.
	lambdaThrottleErrors = []string{"Lambda.TooManyRequestsException"}
)

// throttleRetry waits out a throttle for as long as the execution may run: Step Functions keeps one
// attempt count per retrier and uses the first retrier whose ErrorEquals matches, so a throttle
// spends only this retrier's attempts, and MaxAttempts is the documented maximum, 99,999,999, which
// leaves the state machine's timeout as the only bound. Waits grow from 5 s and are capped at
// throttleMaxDelay(timeout) (MaxDelaySeconds must be below 31,622,401), each drawn at random
// below its cap (FULL jitter), so the tenants throttled together come back spread out.
// https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html
func throttleRetry(errs []string, timeout time.Duration) *sfn.RetryProps {
	return &sfn.RetryProps{
		Errors:         jsii.Strings(errs...),
		Interval:       awscdk.Duration_Seconds(jsii.Number(5)),
		MaxAttempts:    jsii.Number(maxRetryAttempts),
		BackoffRate:    jsii.Number(2),
		MaxDelay:       awscdk.Duration_Seconds(jsii.Number(throttleMaxDelay(timeout).Seconds())),
		JitterStrategy: sfn.JitterType_FULL,
	}
}

// Step Functions keeps at most 25,000 events in one execution's history, and an execution that
// reaches it fails (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html). A
// throttled task writes events for as long as the throttle lasts, so the throttle retriers' cap
// is bounded from below by that limit and by the longest a throttled file may wait, the state
// machine's timeout:
//   - events per attempt: an attempt that fails writes TaskScheduled, TaskStarted and TaskFailed
//     (TaskSubmitFailed for a StartExecution refused). AWS lists the event types
//     (https://docs.aws.amazon.com/step-functions/latest/apireference/API_HistoryEvent.html) but
//     documents no count per attempt, so the bound counts one more: throttleEventsPerAttempt, 4;
//   - room: a file execution at pipeline.MaxSegments writes 20,025 events of its own (started 1,
//     the FileSize choice 2 and a SmallFile task that hands the file on 5, Split 5, the OneSegment
//     choice 2, the Segments Map 4, 8 a segment, Results 5, succeeded 1), which leaves 4,975, room
//     for 1,243 throttled attempts. A segment execution writes at most 7,004 of its own (started 1,
//     Register and NextChunks 7 an invocation, at worst one invocation per chunk of
//     pipeline.SegmentChunks, SegmentDone 2, succeeded 1); a file of one segment, which runs that
//     loop in its own execution, at most 7,021 (started 1, FileSize 2, SmallFile 5, Split 5,
//     OneSegment 2, Register and NextChunks 7 an invocation, Results 5, succeeded 1). Both leave
//     more;
//   - retries per hour: once the wait reaches the cap, FULL jitter draws it uniformly below the
//     cap, so an attempt comes on average every cap/2: 3,600 / (cap/2) an hour;
//   - hours: at most the state machine's timeout, the construct's 24 h by default and below 7
//     days at most.
//
// So cap ≥ 2 × timeout / 1,243: 139 s for 24 h (the cap stays at 5 minutes, 24 attempts and 96
// events an hour, 2,304 in a day), 973 s for 7 days (17 minutes). A 5 s cap would write 5,760
// events an hour and fill the whole history in about 4 h 20 min (6 h at 3 events an attempt).
const (
	historyLimit             = 25000
	throttleEventsPerAttempt = 4
	// fileHistoryEvents is what a file execution of pipeline.MaxSegments segments writes with no
	// retry, the most a file execution writes (a file of one segment writes at most
	// oneSegmentHistoryEvents).
	fileHistoryEvents = 1 + 2 + 5 + 5 + 2 + 4 + 8*pipeline.MaxSegments + 5 + 1
	// oneSegmentHistoryEvents is what a file of one segment of pipeline.SegmentChunks chunks writes
	// with no retry and one Register invocation per chunk, its worst case.
	oneSegmentHistoryEvents = 1 + 2 + 5 + 5 + 2 + 7*pipeline.SegmentChunks + 5 + 1
	minThrottleMaxDelay     = 5 * time.Minute
)

// throttleMaxDelay is the throttle retriers' cap for a state machine of that timeout: 5 minutes,
// or the least whole minutes that keep a throttle lasting the whole timeout inside the history.
func throttleMaxDelay(timeout time.Duration) time.Duration {
	attempts := time.Duration((historyLimit - max(fileHistoryEvents, oneSegmentHistoryEvents)) / throttleEventsPerAttempt)
	// A throttle that lasts the whole timeout makes timeout / (cap/2) attempts.
	minutes := (2*timeout/attempts + time.Minute - 1) / time.Minute
	return max(minThrottleMaxDelay, minutes*time.Minute)
}

// maxRetryAttempts is the largest MaxAttempts a retrier takes
// (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html).
const maxRetryAttempts = 99999999

// Error names of the segment's startExecution.sync:2 task that mean the child execution was not
// started. A child that started and then failed, timed out or was aborted reports
// States.TaskFailed (or the child's own error), which is never retried here: its Register tasks
// already retried, and its chunks must not run twice at once. Retrying a start is safe: the child's
// name is deterministic, and StartExecution is idempotent for a running execution's name and input.
// https://docs.aws.amazon.com/step-functions/latest/dg/connect-stepfunctions.html
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html#API_StartExecution_Errors
// https://docs.aws.amazon.com/step-functions/latest/apireference/CommonErrors.html
var (
	// The account's quotas: "The maximum number of running executions has been reached. Running
	// executions must end or be stopped before a new execution can be started"
	// (ExecutionLimitExceeded, API_StartExecution) and the API's token bucket (ThrottlingException,
	// CommonErrors). Both clear as the account's load falls, so they are waited out
	// (throttleRetry), as a Lambda throttle is.
	startSegmentThrottleErrors = []string{
		"StepFunctions.ExecutionLimitExceededException",
		"StepFunctions.ThrottlingException",
	}
	// The SDK client, and the SDK's generic exception: retried for a few minutes.
	startSegmentErrors = []string{
		"StepFunctions.SdkClientException",
		"StepFunctions.AWSStepFunctionsException",
	}
)

// outcomeUnknownMargin is added to a function's timeout before an invoke whose outcome is unknown
// is retried, the same margin the controller keeps after a stopped file's stopDate.
const outcomeUnknownMargin = 30 * time.Second

// New creates the segment and file state machines under scope/id.
func New(scope constructs.Construct, id string, p *Props) *Workflow {
	w := &Workflow{Construct: constructs.NewConstruct(scope, jsii.String(id))}
	w.Segment = newStateMachine(w.Construct, "Segment", segmentDefinition(w.Construct, p), p)
	w.File = newStateMachine(w.Construct, "File", fileDefinition(w.Construct, p, w.Segment), p)
	return w
}

func newStateMachine(scope constructs.Construct, id string, def sfn.IChainable, p *Props) sfn.StateMachine {
	return sfn.NewStateMachine(scope, jsii.String(id), &sfn.StateMachineProps{
		DefinitionBody:   sfn.DefinitionBody_FromChainable(def),
		StateMachineType: sfn.StateMachineType_STANDARD,
		Timeout:          awscdk.Duration_Seconds(jsii.Number(p.Timeout.Seconds())),
		TracingEnabled:   jsii.Bool(true),
		Logs: &sfn.LogOptions{
			Destination:          p.Logs,
			Level:                sfn.LogLevel_ERROR,
			IncludeExecutionData: jsii.Bool(false),
		},
		EncryptionConfiguration: p.Encryption,
	})
}

// fileDefinition: Split, then one segment execution at a time, in order.
func fileDefinition(scope constructs.Construct, p *Props, segment sfn.IStateMachine) sfn.IChainable {
	split := tasks.NewLambdaInvoke(scope, jsii.String(StateSplit), &tasks.LambdaInvokeProps{
		LambdaFunction: p.Split,
		Payload: sfn.TaskInput_FromObject(&map[string]any{
			"tenant":        sfn.JsonPath_ObjectAt(jsii.String("$.tenant")),
			"source":        sfn.JsonPath_ObjectAt(jsii.String("$.source")),
			"executionName": sfn.JsonPath_StringAt(jsii.String("$$.Execution.Name")),
		}),
		PayloadResponseOnly:      jsii.Bool(true),
		RetryOnServiceExceptions: jsii.Bool(false),
		ResultPath:               jsii.String("$.split"),
	})
	addLambdaRetries(split, p.SplitTimeout, p.Timeout)

	registerSegment := tasks.NewStepFunctionsStartExecution(scope, jsii.String(StateRegisterSegment), &tasks.StepFunctionsStartExecutionProps{
		StateMachine:       segment,
		IntegrationPattern: sfn.IntegrationPattern_RUN_JOB,
		Input: sfn.TaskInput_FromObject(fileFields(map[string]any{
			"segment": sfn.JsonPath_ObjectAt(jsii.String("$.segment")),
			// The segment's Register loop starts at its first chunk. Set here rather than by a
			// Pass state in the segment, which would cost a state transition per segment.
			"cursor": startCursor(p),
		})),
		// A deterministic name (pipeline.SegmentExecutionName): a Retry after a start whose answer
		// was lost finds the running child instead of starting a second one beside it, and the
		// controller can find the child by name. A new redrive names a new child.
		Name: sfn.JsonPath_Format(jsii.String("{}-s{}-r{}"),
			sfn.JsonPath_Hash(sfn.JsonPath_StringAt(jsii.String("$$.Execution.Name")), jsii.String("SHA-1")),
			sfn.JsonPath_StringAt(jsii.String("$.segment.index")),
			sfn.JsonPath_StringAt(jsii.String("$$.Execution.RedriveCount"))),
		// Links the segment execution to its file execution in the console.
		AssociateWithParent: jsii.Bool(true),
		ResultPath:          sfn.JsonPath_DISCARD(),
		// The iteration's output is {}: the Map collects every iteration's output before its
		// ResultPath discards the array, and that array counts against the 256 KiB payload quota.
		OutputPath: sfn.JsonPath_DISCARD(),
	})
	registerSegment.AddRetry(throttleRetry(startSegmentThrottleErrors, p.Timeout))
	registerSegment.AddRetry(&sfn.RetryProps{
		Errors:         jsii.Strings(startSegmentErrors...),
		Interval:       awscdk.Duration_Seconds(jsii.Number(5)),
		MaxAttempts:    jsii.Number(10),
		BackoffRate:    jsii.Number(2),
		MaxDelay:       awscdk.Duration_Minutes(jsii.Number(5)),
		JitterStrategy: sfn.JitterType_FULL,
	})

	segments := sfn.NewMap(scope, jsii.String(StateSegments), &sfn.MapProps{
		ItemsPath: jsii.String("$.split.segments"),
		// One at a time, in array order; a failed iteration fails the Map and later ones never start.
		// https://docs.aws.amazon.com/step-functions/latest/dg/state-map-inline.html
		MaxConcurrency: jsii.Number(1),
		ItemSelector: &map[string]any{
			"tenant.$": "$.tenant",
			// The source Split actually read: the event's key as given or its form-decoded form
			// (pipeline.SplitResult.Source). Register reads that key and never resolves it again.
			"source.$":        "$.split.source",
			"executionName.$": "$$.Execution.Name",
			"manifest.$":      "$.split.manifest",
			"records.$":       "$.split.records",
			"header.$":        "$.split.header",
			// The segment as Split cut it, plus the file execution's start: the controller starts
			// the execution right after admitting the file, and Register dates the file's 429s
			// against the adaptive limit with it (internal/admission, aimd.go). StartTime is in
			// every execution's context object
			// (https://docs.aws.amazon.com/step-functions/latest/dg/input-output-contextobject.html),
			// whereas a path into the input fails the state when the field is absent. It rides
			// inside the segment object, which the segment passes on whole, so a segment started
			// by an execution of an older definition, without it, still runs.
			"segment": map[string]any{
				"index.$":       "$$.Map.Item.Value.index",
				"firstChunk.$":  "$$.Map.Item.Value.firstChunk",
				"lastChunk.$":   "$$.Map.Item.Value.lastChunk",
				"fileStarted.$": "$$.Execution.StartTime",
			},
		},
		// Iteration results are discarded, so the Map's output does not grow with the file.
		ResultPath: sfn.JsonPath_DISCARD(),
	})
	segments.ItemProcessor(registerSegment, nil)

	// FileDone is reached only when the results task failed: the task itself ends a file that
	// succeeded, one state transition fewer per file (each costs $0.025 per 1,000,
	// https://aws.amazon.com/step-functions/pricing/).
	done := sfn.NewSucceed(scope, jsii.String(StateFileDone), nil)
	// Only the success path runs the results task in the state machine. A Catch that ran it on the
	// failure path and then failed would make that Fail state the execution's unsuccessful step,
	// and a redrive "continues the failed execution from the unsuccessful step"
	// (https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html):
	// it would fail again at once instead of re-running the failed segment, which breaks the
	// operator's redrive and the controller's halt. The controller writes a failed file's results
	// when it sees the failure, with the same task (internal/controller, results.go).
	succeeded := resultsTask(scope, StateResults, pipeline.StatusSucceeded, p, done)

	segments.Next(succeeded)
	if p.Design == DesignPerChunk {
		split.Next(segments)
	} else {
		split.Next(oneSegmentRoute(scope, p, segments, succeeded))
	}
	if p.SmallFileBound <= 0 {
		return split
	}
	return smallFileRoute(scope, p, split)
}

// oneSegmentRoute is the file state machine's path after Split: the OneSegment choice sends a file
// of exactly one segment, for which Split returns the start of its Register loop
// (pipeline.SplitResult.Cursor), to that loop, run in the file execution itself (Register, then
// NextChunks, the segment state machine's loop), and any other file to the Segments Map of
// segment executions. A file of one segment so saves the Map, RegisterSegment and SegmentDone
// states for the OneSegment choice: two state transitions a file, at $0.025 per 1,000
// (https://aws.amazon.com/step-functions/pricing/), and a child execution.
//
// Nothing else changes for the file: each Register request is the one the segment state machine
// sends (the same pipeline.ChunkRequest fields, the segment with the file's start, the cursor from
// the segment's first chunk and record), with the same retriers and no Catch, so a failed
// invocation fails the file execution itself. The cursor lives in the state at $.split.cursor,
// where Split starts it and each Register task replaces it: a Retry, or a redrive of the file,
// starts the failed task again at that invocation's first chunk and record, and Register goes on
// from the segment's progress in the work bucket when that lies further on (keyed by the file
// execution's name and the segment's index, as a segment execution's is), as a new segment
// execution does.
func oneSegmentRoute(scope constructs.Construct, p *Props, segments, results sfn.IChainable) sfn.IChainable {
	seg, cursor := "$.split.segments[0]", "$.split.cursor"
	payload := map[string]any{
		"tenant": sfn.JsonPath_ObjectAt(jsii.String("$.tenant")),
		// The source Split actually read (pipeline.SplitResult.Source), as the Segments Map passes it.
		"source":        sfn.JsonPath_ObjectAt(jsii.String("$.split.source")),
		"executionName": sfn.JsonPath_StringAt(jsii.String("$$.Execution.Name")),
		"manifest":      sfn.JsonPath_ObjectAt(jsii.String("$.split.manifest")),
		"records":       sfn.JsonPath_NumberAt(jsii.String("$.split.records")),
		"header":        sfn.JsonPath_ListAt(jsii.String("$.split.header")),
		"chunk":         sfn.JsonPath_NumberAt(jsii.String(cursor + ".chunk")),
		"lastChunk":     sfn.JsonPath_NumberAt(jsii.String(seg + ".lastChunk")),
		// The segment as the Segments Map builds it for a segment execution.
		"segment": map[string]any{
			"index":       sfn.JsonPath_NumberAt(jsii.String(seg + ".index")),
			"firstChunk":  sfn.JsonPath_NumberAt(jsii.String(seg + ".firstChunk")),
			"lastChunk":   sfn.JsonPath_NumberAt(jsii.String(seg + ".lastChunk")),
			"fileStarted": sfn.JsonPath_StringAt(jsii.String("$$.Execution.StartTime")),
		},
	}
	if p.RecordCursor {
		payload["record"] = sfn.JsonPath_NumberAt(jsii.String(cursor + ".record"))
	}
	// Construct ids of their own: the segment state machine's states of these names are in scope.
	register := registerTask(scope, "FileRegister", StateRegister, cursor, p, &payload)
	more := sfn.NewChoice(scope, jsii.String("FileNextChunks"), &sfn.ChoiceProps{StateName: jsii.String(StateNextChunks)}).
		When(sfn.Condition_BooleanEquals(jsii.String(cursor+".done"), jsii.Bool(true)), results, nil).
		Otherwise(register)
	register.Next(more)

	// Split's cursor, which it returns for a file of exactly one segment, and no second segment. A
	// file of no records has no segment and takes the Map, which runs no iteration; so does one
	// whose Split returned no cursor.
	return sfn.NewChoice(scope, jsii.String(StateOneSegment), nil).
		When(sfn.Condition_And(sfn.Condition_IsPresent(jsii.String(cursor)),
			sfn.Condition_Not(sfn.Condition_IsPresent(jsii.String("$.split.segments[1]")))), register, nil).
		Otherwise(segments)
}

// registerTask is a Register task of the per-invocation loop under construct id and state name:
// the request payload, the new cursor at cursorPath (pipeline.Cursor from a ChunkResult: two or
// three small numbers, so the state never grows), and Register's retriers. No Catch: a failed
// invocation fails the execution that runs the loop.
func registerTask(scope constructs.Construct, id, name, cursorPath string, p *Props, payload *map[string]any) tasks.LambdaInvoke {
	cursor := map[string]any{
		"chunk.$": "$.next",
		"done.$":  "$.done",
	}
	if p.RecordCursor {
		cursor["record.$"] = "$.nextRecord"
	}
	t := tasks.NewLambdaInvoke(scope, jsii.String(id), &tasks.LambdaInvokeProps{
		StateName:                jsii.String(name),
		LambdaFunction:           p.Register,
		Payload:                  sfn.TaskInput_FromObject(payload),
		PayloadResponseOnly:      jsii.Bool(true),
		RetryOnServiceExceptions: jsii.Bool(false),
		ResultSelector:           &cursor,
		ResultPath:               jsii.String(cursorPath),
	})
	addLambdaRetries(t, p.RegisterTimeout, p.Timeout)
	return t
}

// smallFileRoute is the file state machine's start with the small-file path: the FileSize choice
// sends a file whose event gives it at most SmallFileBound to the SmallFile task, every other file
// to Split. The task ends the execution: it writes the results itself. Its Retry is Register's,
// since it registers; its Catch takes a NotSmallError to Split with the state as it was, so the
// full path runs as if it had started there. Only a NotSmallError is caught: any other failure
// fails the file at SmallFile, and a redrive re-runs the task, which resumes from the progress.
// A Choice and a Task are the least states that choose a path (a Choice cannot end an execution),
// and each costs one state transition (https://aws.amazon.com/step-functions/pricing/).
func smallFileRoute(scope constructs.Construct, p *Props, split sfn.IChainable) sfn.IChainable {
	small := tasks.NewLambdaInvoke(scope, jsii.String(StateSmallFile), &tasks.LambdaInvokeProps{
		LambdaFunction: p.Register,
		Payload: sfn.TaskInput_FromObject(&map[string]any{
			"kind":          pipeline.TaskSmallFile,
			"input":         sfn.JsonPath_ObjectAt(jsii.String("$")),
			"executionName": sfn.JsonPath_StringAt(jsii.String("$$.Execution.Name")),
			"executionArn":  sfn.JsonPath_StringAt(jsii.String("$$.Execution.Id")),
			"startTime":     sfn.JsonPath_StringAt(jsii.String("$$.Execution.StartTime")),
			"redriveCount":  sfn.JsonPath_NumberAt(jsii.String("$$.Execution.RedriveCount")),
			"maxBytes":      p.SmallFileBound,
		}),
		PayloadResponseOnly:      jsii.Bool(true),
		RetryOnServiceExceptions: jsii.Bool(false),
		// The execution's output counts the file's records at $.split.records, as Split's result
		// does on the full path.
		ResultSelector: &map[string]any{"records.$": "$.records"},
		ResultPath:     jsii.String("$.split"),
	})
	addLambdaRetries(small, p.RegisterTimeout, p.Timeout)
	small.AddCatch(split, &sfn.CatchProps{Errors: jsii.Strings(pipeline.ErrNotSmall), ResultPath: sfn.JsonPath_DISCARD()})
	// The tenant's own bound (pipeline.Tenant.SmallFileBytes, -1 for none) when its settings carry
	// one, else this state machine's.
	size, own := jsii.String("$.source.size"), jsii.String("$.tenant.smallFileBytes")
	return sfn.NewChoice(scope, jsii.String(StateFileSize), nil).
		When(sfn.Condition_And(sfn.Condition_IsPresent(size), sfn.Condition_IsNumeric(size),
			sfn.Condition_IsPresent(own), sfn.Condition_IsNumeric(own),
			sfn.Condition_NumberLessThanEqualsJsonPath(size, own)), small, nil).
		When(sfn.Condition_And(sfn.Condition_IsPresent(size), sfn.Condition_IsNumeric(size),
			sfn.Condition_Not(sfn.Condition_IsPresent(own)),
			sfn.Condition_NumberLessThanEquals(size, jsii.Number(float64(p.SmallFileBound)))), small, nil).
		Otherwise(split)
}

// resultsTask writes the file's results (pipeline.ResultsRequest) with the Split function and
// ends the execution; onFailure follows its caught failure. Its request holds the whole state
// ("$" always exists, so no path it reads can be missing), the execution's name, ARN, start and
// redrive count. Its own failure is retried a few times, then caught: the file ends as it would
// have, and the function has logged the failure at ERROR with a metric. A throttle is retried like any failure, never until the
// state machine's timeout, which would turn a good file into a timed-out one.
func resultsTask(scope constructs.Construct, id, status string, p *Props, onFailure sfn.IChainable) sfn.IChainable {
	t := tasks.NewLambdaInvoke(scope, jsii.String(id), &tasks.LambdaInvokeProps{
		LambdaFunction: p.Split,
		Payload: sfn.TaskInput_FromObject(&map[string]any{
			"kind":          pipeline.TaskResults,
			"status":        status,
			"executionName": sfn.JsonPath_StringAt(jsii.String("$$.Execution.Name")),
			"executionArn":  sfn.JsonPath_StringAt(jsii.String("$$.Execution.Id")),
			"startTime":     sfn.JsonPath_StringAt(jsii.String("$$.Execution.StartTime")),
			"redriveCount":  sfn.JsonPath_NumberAt(jsii.String("$$.Execution.RedriveCount")),
			"state":         sfn.JsonPath_ObjectAt(jsii.String("$")),
		}),
		PayloadResponseOnly:      jsii.Bool(true),
		RetryOnServiceExceptions: jsii.Bool(false),
		ResultPath:               sfn.JsonPath_DISCARD(),
	})
	t.AddRetry(&sfn.RetryProps{
		Errors:         jsii.Strings("States.ALL"),
		Interval:       awscdk.Duration_Seconds(jsii.Number(2)),
		MaxAttempts:    jsii.Number(3),
		BackoffRate:    jsii.Number(2),
		JitterStrategy: sfn.JitterType_FULL,
	})
	t.AddCatch(onFailure, &sfn.CatchProps{Errors: jsii.Strings("States.ALL"), ResultPath: jsii.String("$.resultsError")})
	return t
}

// startCursor is where a segment's Register loop starts: its first chunk, from the chunk's first
// record (0) when the cursor names records.
func startCursor(p *Props) map[string]any {
	c := map[string]any{"chunk": sfn.JsonPath_NumberAt(jsii.String("$.segment.firstChunk"))}
	if p.RecordCursor {
		c["record"] = 0
	}
	return c
}

// fileFields is the file's part of a pipeline.ChunkRequest, which the segment's input and each
// Register request carry from the state, plus extra.
func fileFields(extra map[string]any) *map[string]any {
	m := map[string]any{
		"tenant":        sfn.JsonPath_ObjectAt(jsii.String("$.tenant")),
		"source":        sfn.JsonPath_ObjectAt(jsii.String("$.source")),
		"executionName": sfn.JsonPath_StringAt(jsii.String("$.executionName")),
		"manifest":      sfn.JsonPath_ObjectAt(jsii.String("$.manifest")),
		"records":       sfn.JsonPath_NumberAt(jsii.String("$.records")),
		"header":        sfn.JsonPath_ListAt(jsii.String("$.header")),
	}
	maps.Copy(m, extra)
	return &m
}

// segmentDefinition: Register the chunks of one segment, in order, one invocation at a time.
func segmentDefinition(scope constructs.Construct, p *Props) sfn.IChainable {
	if p.Design == DesignPerChunk {
		return perChunkSegmentDefinition(scope, p)
	}
	// A pipeline.ChunkRequest for the run of chunks from the cursor to the segment's last. The
	// cursor is in the state, not in the function: a Retry, or a redrive of the segment execution,
	// starts again at this invocation's first chunk (and record). The segment lets Register also
	// keep the chunk cursor in the work bucket, so that the new segment execution a redrive of the
	// file starts (-r<n>) resumes there rather than at the segment's first chunk.
	payload := map[string]any{
		"chunk":     sfn.JsonPath_NumberAt(jsii.String("$.cursor.chunk")),
		"lastChunk": sfn.JsonPath_NumberAt(jsii.String("$.segment.lastChunk")),
		"segment":   sfn.JsonPath_ObjectAt(jsii.String("$.segment")),
	}
	if p.RecordCursor {
		payload["record"] = sfn.JsonPath_NumberAt(jsii.String("$.cursor.record"))
	}
	register := registerTask(scope, StateRegister, StateRegister, "$.cursor", p, fileFields(payload))

	// The segment's output is {}: RegisterSegment discards it anyway.
	done := sfn.NewSucceed(scope, jsii.String(StateSegmentDone), &sfn.SucceedProps{OutputPath: sfn.JsonPath_DISCARD()})
	next := sfn.NewChoice(scope, jsii.String(StateNextChunks), nil).
		When(sfn.Condition_BooleanEquals(jsii.String("$.cursor.done"), jsii.Bool(true)), done, nil).
		Otherwise(register)

	return register.Next(next)
}

// perChunkSegmentDefinition (DesignPerChunk): Register each chunk of one segment, one at a time,
// in order, one Map iteration per chunk.
func perChunkSegmentDefinition(scope constructs.Construct, p *Props) sfn.IChainable {
	indexes := sfn.NewPass(scope, jsii.String(StateChunkIndexes), &sfn.PassProps{
		Parameters: &map[string]any{
			// States.ArrayRange returns at most 1,000 items: pipeline.SegmentChunks.
			"indexes": sfn.JsonPath_ArrayRange(
				sfn.JsonPath_NumberAt(jsii.String("$.segment.firstChunk")),
				sfn.JsonPath_NumberAt(jsii.String("$.segment.lastChunk")),
				jsii.Number(1)),
		},
		ResultPath: jsii.String("$.chunkIndexes"),
	})

	register := tasks.NewLambdaInvoke(scope, jsii.String(StateRegister), &tasks.LambdaInvokeProps{
		LambdaFunction: p.Register,
		// No payload: the function receives the iteration's input, which is a pipeline.ChunkRequest.
		PayloadResponseOnly:      jsii.Bool(true),
		RetryOnServiceExceptions: jsii.Bool(false),
		ResultPath:               sfn.JsonPath_DISCARD(),
		// The iteration's output is {}, so the Map's collected array stays 1,000 × 2 bytes at most
		// (see RegisterSegment).
		OutputPath: sfn.JsonPath_DISCARD(),
	})
	addLambdaRetries(register, p.RegisterTimeout, p.Timeout)

	chunks := sfn.NewMap(scope, jsii.String(StateChunks), &sfn.MapProps{
		ItemsPath:      jsii.String("$.chunkIndexes.indexes"),
		MaxConcurrency: jsii.Number(1),
		ItemSelector: &map[string]any{
			"tenant.$":        "$.tenant",
			"source.$":        "$.source",
			"executionName.$": "$.executionName",
			"manifest.$":      "$.manifest",
			"records.$":       "$.records",
			"header.$":        "$.header",
			"chunk.$":         "$$.Map.Item.Value",
		},
		ResultPath: sfn.JsonPath_DISCARD(),
	})
	// Retries sit on the task, never on the Map: a Retry on the Map would rerun every iteration.
	chunks.ItemProcessor(register, nil)

	return indexes.Next(chunks)
}

// addLambdaRetries retries what ends a Lambda task without the function deciding the outcome,
// each class by its own rule and its own retrier (no error name is in two retriers, so none spends
// another's attempts), a Lambda throttle until the state machine's timeout, and the pipeline's own
// RetryableError (a core system's outage: 408, 500, 502, 504, timeouts; S3 hiccups) patiently with
// jittered backoff. A core system's 429 and 503 are no RetryableError: Register waits them out,
// or ends the invocation with its cursor. PermanentError, ValidationError and ObjectChangedError
// are not retried: the file fails. fnTimeout is the function's timeout, timeout the state
// machine's.
func addLambdaRetries(t sfn.TaskStateBase, fnTimeout, timeout time.Duration) {
	t.AddRetry(&sfn.RetryProps{
		Errors:      jsii.Strings(lambdaServiceErrors...),
		Interval:    awscdk.Duration_Seconds(jsii.Number(1)),
		MaxAttempts: jsii.Number(3),
		BackoffRate: jsii.Number(2),
	})
	t.AddRetry(&sfn.RetryProps{
		Errors:      jsii.Strings(lambdaEndedErrors...),
		Interval:    awscdk.Duration_Seconds(jsii.Number(2)),
		MaxAttempts: jsii.Number(3),
		BackoffRate: jsii.Number(2),
	})
	t.AddRetry(&sfn.RetryProps{
		Errors:      jsii.Strings(lambdaOutcomeUnknownErrors...),
		Interval:    awscdk.Duration_Seconds(jsii.Number((fnTimeout + outcomeUnknownMargin).Seconds())),
		MaxAttempts: jsii.Number(2),
		BackoffRate: jsii.Number(1),
	})
	// A throttle never fails the file: it is waited out until the state machine's timeout.
	t.AddRetry(throttleRetry(lambdaThrottleErrors, timeout))
	t.AddRetry(&sfn.RetryProps{
		// A RecordLatencyError is retried alike: one invocation cannot tell a record slower than
		// the budget from a core system that hangs for a while. After the attempts the file fails
		// under its name, which says which.
		Errors:         jsii.Strings(pipeline.ErrRetryable, pipeline.ErrRecordLatency),
		Interval:       awscdk.Duration_Seconds(jsii.Number(2)),
		MaxAttempts:    jsii.Number(8),
		BackoffRate:    jsii.Number(2),
		MaxDelay:       awscdk.Duration_Seconds(jsii.Number(60)),
		JitterStrategy: sfn.JitterType_FULL,
	})
}
