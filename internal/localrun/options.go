package localrun

import (
	"io"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// A run's options, one struct per emulated service and one for the core system: each field changes
// one behaviour as a scenario needs it (an injected failure, a duplicate, a throttle, a limit, a
// time scale), and its zero value keeps the behaviour as AWS documents it. cmd/local's flags map
// to them one to one.

// S3Options are how the emulated S3 and its "Object Created" events differ from a plain run.
type S3Options struct {
	// EventKeyForm is how the "Object Created" events carry the object key: "raw" (default, the key
	// as written) or "form" (form-encoded, as classic S3 event notifications carry it: "red
	// flower.jpg" becomes "red+flower.jpg",
	// https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
	// AWS documents neither form for EventBridge, so the pipeline must work with both.
	EventKeyForm string
	// MissingKeyForbidden makes the pipeline's S3 endpoint answer a GetObject or HeadObject of a
	// missing key or version with 403 AccessDenied instead of 404, as S3 answers a caller without
	// s3:ListBucket (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html,
	// "Permissions"). Whether the construct's prefix-conditioned ListBucket grant counts is not
	// documented, so the pipeline must work either way. The harness's own endpoint (uploads,
	// pipectl) keeps answering 404.
	MissingKeyForbidden bool
	// Sequencers is how the "Object Created" events' S3 sequencers grow: "per-key" (default, as AWS
	// documents them: increasing for the events of one key, in no order across keys) or "global"
	// (one counter for all keys, following the order of the writes). See sequencer.go.
	Sequencers string
	// SequencerSeed fixes the per-key sequencers (0: a random seed), for a repeatable run.
	SequencerSeed uint64
}

// EventBridgeOptions are how the emulated EventBridge delivers events and runs schedules.
type EventBridgeOptions struct {
	// DuplicateEvents delivers every S3 event twice, with the same body. A FIFO queue's
	// content-based deduplication drops the second copy within its 5-minute interval.
	DuplicateEvents bool
	// DuplicateAfterDedupWindow makes the second copy of DuplicateEvents bypass the queue's
	// deduplication (an explicit MessageDeduplicationId), as a copy EventBridge delivers after the
	// 5-minute deduplication interval would, so that the controller itself sees both.
	DuplicateAfterDedupWindow bool
	// StatusEvents drops or duplicates the Step Functions status change events (statusevents.go).
	StatusEvents StatusEvents
	// ScheduleScale multiplies the period of the scheduled rules (rate(...)): 0 means 1/12, so
	// that the reconciler's rate(1 minute) runs every 5 s locally (schedules.go).
	ScheduleScale float64
}

// LambdaOptions are how the emulated Lambda runs the functions.
type LambdaOptions struct {
	// ControllerCrash, if set, is asked when a controller process posts its response; true kills
	// the process instead, so the event source mapping sees a crashed invocation after the
	// handler's side effects (StartExecution, ChangeMessageVisibility) happened.
	ControllerCrash func(ControllerCall) bool
	// FunctionTimeout overrides the template's Timeout of the functions of one source package (a
	// scenario's small Register timeout). The harness changes nothing else: a variable that
	// carries the same number to another function (the controller's REGISTER_TIMEOUT_SECONDS) is
	// the scenario's to set through EnvFor.
	FunctionTimeout map[string]time.Duration
	// Throttle makes the Lambda Invoke API refuse invocations of the functions of one source package
	// with TooManyRequestsException, from the first invocation on (Function.SetThrottle changes it
	// while the run goes).
	Throttle map[string]emulate.Throttle
	// Concurrency is the account's Lambda concurrency limit (AWS's default is 1,000, shared by
	// every function of the account and region): an invocation that would put more than this many
	// in progress at once, across every function of the run, is refused with
	// TooManyRequestsException (HTTP 429), on every invoke path (Step Functions tasks, event source
	// mappings, asynchronous invocations), each of which handles it as on AWS. Functions with a
	// reserved concurrency keep it and the others share the rest. 0 means no limit.
	Concurrency int
	// AsyncRetryScale multiplies Lambda's waits before retrying a failed asynchronous invocation
	// (1 minute, then 2 minutes) and the function's maximum event age (asyncinvoke.go). 0 means
	// 1/60: retries after 1 s and 2 s, the local default.
	AsyncRetryScale float64
}

// StepFunctionsOptions are how the emulated Step Functions answers and runs the state machines.
type StepFunctionsOptions struct {
	// Throttle answers ThrottlingException to a fraction of the pipeline's Step Functions calls
	// (statusevents.go).
	Throttle SFNThrottle
	// LambdaClientTimeout makes the Step Functions server give up on an Invoke of the functions of
	// one source package that has not answered after this long: the task fails with
	// Lambda.ClientExecutionTimeoutException and the invocation goes on running, as when Step
	// Functions' own Invoke call times out (docs/local-run.md, "Ambiguous failures").
	LambdaClientTimeout map[string]time.Duration
	// LoseChildStartAnswers: the first N child executions the workflows start (each name once) are
	// created, and the starting task then fails with StepFunctions.SdkClientException, as when the
	// answer of a StartExecution that succeeded is lost.
	LoseChildStartAnswers int
	// RetryIntervalScale multiplies every Retry's IntervalSeconds and MaxDelaySeconds in the state
	// machines (0 means 1): a scenario can wait out a retrier meant for minutes. Which errors are
	// retried, and how often, stays as synthesized.
	RetryIntervalScale float64
}

// CoreOptions are how the core system answers: the embedded sink, or a proxy in front of
// RegisterURL, and the DynamoDB emulator where a tenant's records go to a table.
type CoreOptions struct {
	// MaxInFlight caps the requests the embedded sink takes at once: above it the sink answers
	// 429 with Retry-After: 1, as a core system that sheds load. 0 means no cap.
	MaxInFlight int
	// KeyTTL makes the embedded sink forget an idempotency key after this long (emulate.Sink's
	// KeyTTL): a resend after it registers the record again. 0 keeps keys for ever.
	KeyTTL time.Duration
	// Lookup makes the embedded sink answer lookupUrl GETs (emulate.Sink's Lookup), and the
	// harness points every core system's lookupUrl at it (emulate.SinkLookupURL).
	Lookup bool
	// Outages and Rate5xx are a core system's bad day (emulate.CoreFaults): connections refused
	// from each outage's At (after the core system's first request) for its For, and a fraction of
	// requests answered 500, 502 or 504. They apply to the embedded sink, or to a proxy in front
	// of RegisterURL.
	Outages []emulate.Outage
	Rate5xx float64
	// Latency is added to every request of the embedded sink and of the DynamoDB emulator (a core
	// system, or a table, that takes this long to answer); see sinklatency.go.
	Latency time.Duration
}

// cloudOptions are the emulated services' options of a run: Config's S3, EventBridge, Lambda and
// StepFunctions, the latency of DynamoDB (CoreOptions.Latency), and how the functions' code is
// deployed.
type cloudOptions struct {
	s3            S3Options
	events        EventBridgeOptions
	lambda        LambdaOptions
	sfn           StepFunctionsOptions
	dynamoLatency time.Duration
	code          codeOptions
}

// codeOptions are how the cloud deploys the functions of the templates (functions.go): where it
// builds their packages, what it adds to their environment, and where their tenants' records go.
type codeOptions struct {
	assembly, binDir, workDir string
	progress                  io.Writer
	envFor, envForPool        map[string][]string // Config's
	// sink is where a tenant's records go in this run: the registerUrl the function is deployed
	// with and, when lookup (the tenant's core system declares a lookupUrl), its lookupUrl. ""
	// keeps the deployed value. Without it, the templates' are kept.
	sink func(tenant string, lookup bool) (registerURL, lookupURL string)
}
