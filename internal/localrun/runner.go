// Package localrun runs the synthesized tenant pipeline on this machine, with real emulators and the
// real Lambda binaries: gofakes3 for S3, fauxqs for SQS, aws-local-stepfunctions behind a small
// Step Functions API server, EventBridge routing by the synthesized rules' event patterns, and a
// Lambda event source mapping that follows Lambda's SQS semantics. docs/local-run.md describes it.
package localrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/results"
)

// MetadataSource is the resource metadata key naming a function's Go main package.
const MetadataSource = deploy.MetadataSource

// Config configures one local run.
type Config struct {
	ModuleRoot string // the Go module, for building the Lambda packages and finding local/
	Assembly   string // synthesized cloud assembly (cdk.out)
	// RegisterURL, if set, replaces every tenant's registerUrl; otherwise the embedded Sink.
	RegisterURL string
	Node        string // Node >= 22.5
	WorkDir     string // binaries and logs
	BinDir      string // where the Lambda binaries go; default WorkDir/bin
	Logs        io.Writer
	// Progress, if set, gets a line as each function package's build starts and one with its time
	// when it ends, so a slow build says what it is building.
	Progress io.Writer
	// Env adds or overrides environment variables of every Lambda process (NAME=value), after the
	// template's; EnvFor adds variables to the functions of one source package.
	EnvFor map[string][]string
	// EnvForPool adds variables to the functions of one pool (its router and controller), by the
	// pool's name: the pool-intake figures run one pool's router as the router was before it sent
	// batches (pipeline.EnvRouterSendBatchSize).
	EnvForPool map[string][]string
	// Faults are what the emulated AWS does differently from a plain run: injected failures,
	// duplicates and throttles, limits, and the time scale of retries. The zero value is a plain run.
	Faults Faults
}

// Faults are a run's fault injection: each field changes one behaviour of the emulated AWS (or of
// the embedded sink) as a scenario needs it, and its zero value keeps the behaviour as AWS
// documents it.
type Faults struct {
	// ControllerCrash, if set, is asked when a controller process posts its response; true kills
	// the process instead, so the event source mapping sees a crashed invocation after the
	// handler's side effects (StartExecution, ChangeMessageVisibility) happened.
	ControllerCrash func(ControllerCall) bool
	// DuplicateEvents delivers every EventBridge event twice, with the same body. A FIFO queue's
	// content-based deduplication drops the second copy within its 5-minute interval.
	DuplicateEvents bool
	// DuplicateAfterDedupWindow makes the second copy of DuplicateEvents bypass the queue's
	// deduplication (an explicit MessageDeduplicationId), as a copy EventBridge delivers after the
	// 5-minute deduplication interval would, so that the controller itself sees both.
	DuplicateAfterDedupWindow bool
	// FunctionTimeout overrides the template's Timeout of the functions of one source package (a
	// scenario's small Register timeout). The harness changes nothing else: a variable that
	// carries the same number to another function (the controller's REGISTER_TIMEOUT_SECONDS) is
	// the scenario's to set through EnvFor.
	FunctionTimeout map[string]time.Duration
	// Throttle makes the Lambda Invoke API refuse invocations of the functions of one source package
	// with TooManyRequestsException, from the first invocation on (Function.SetThrottle changes it
	// while the run goes).
	Throttle map[string]emulate.Throttle
	// LambdaConcurrency is the account's Lambda concurrency limit (AWS's default is 1,000, shared
	// by every function of the account and region): an invocation that would put more than this
	// many in progress at once, across every function of the run, is refused with
	// TooManyRequestsException (HTTP 429), on every invoke path (Step Functions tasks, event source
	// mappings, asynchronous invocations), each of which handles it as on AWS. Functions with a
	// reserved concurrency keep it and the others share the rest. 0 means no limit.
	LambdaConcurrency int
	// SinkMaxInFlight caps the requests the embedded sink takes at once: above it the sink answers
	// 429 with Retry-After: 1, as a core system that sheds load. 0 means no cap.
	SinkMaxInFlight int
	// SinkKeyTTL makes the embedded sink forget an idempotency key after this long (emulate.Sink's
	// KeyTTL): a resend after it registers the record again. 0 keeps keys for ever.
	SinkKeyTTL time.Duration
	// SinkLookup makes the embedded sink answer lookupUrl GETs (emulate.Sink's Lookup), and the
	// harness points every core system's lookupUrl at it (emulate.SinkLookupURL).
	SinkLookup bool
	// EventKeyForm is how the "Object Created" events carry the object key: "raw" (default, the key
	// as written) or "form" (form-encoded, as classic S3 event notifications carry it: "red
	// flower.jpg" becomes "red+flower.jpg",
	// https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
	// AWS documents neither form for EventBridge, so the pipeline must work with both.
	EventKeyForm string
	// S3MissingKeyForbidden makes the pipeline's S3 endpoint answer a GetObject or HeadObject of a
	// missing key or version with 403 AccessDenied instead of 404, as S3 answers a caller without
	// s3:ListBucket (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html,
	// "Permissions"). Whether the construct's prefix-conditioned ListBucket grant counts is not
	// documented, so the pipeline must work either way. The harness's own endpoint (uploads,
	// pipectl) keeps answering 404.
	S3MissingKeyForbidden bool
	// Sequencers is how the "Object Created" events' S3 sequencers grow: "per-key" (default, as AWS
	// documents them: increasing for the events of one key, in no order across keys) or "global"
	// (one counter for all keys, following the order of the writes). See sequencer.go.
	Sequencers string
	// SequencerSeed fixes the per-key sequencers (0: a random seed), for a repeatable run.
	SequencerSeed uint64
	// SinkOutages and Sink5xx are a core system's bad day (emulate.CoreFaults): connections
	// refused from each outage's At (after the core system's first request) for its For, and a
	// fraction of requests answered 500, 502 or 504. They apply to the embedded sink, or to a
	// proxy in front of RegisterURL.
	SinkOutages []emulate.Outage
	Sink5xx     float64
	// SinkLatency is added to every request of the embedded sink and of the DynamoDB emulator (a
	// core system, or a table, that takes this long to answer); see sinklatency.go.
	SinkLatency time.Duration
	// StatusEvents drops or duplicates the Step Functions status change events (statusevents.go);
	// SFNThrottle answers ThrottlingException to a fraction of the pipeline's Step Functions calls.
	StatusEvents StatusEvents
	SFNThrottle  SFNThrottle
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
	// AsyncRetryScale multiplies Lambda's waits before retrying a failed asynchronous invocation
	// (1 minute, then 2 minutes) and the function's maximum event age (asyncinvoke.go). 0 means
	// 1/60: retries after 1 s and 2 s, the local default.
	AsyncRetryScale float64
	// ScheduleScale multiplies the period of the scheduled rules (rate(...)): 0 means 1/12, so
	// that the reconciler's rate(1 minute) runs every 5 s locally (schedules.go).
	ScheduleScale float64
}

// Event key forms (Faults.EventKeyForm).
const (
	EventKeyRaw  = "raw"
	EventKeyForm = "form"
)

// ControllerCall is one controller invocation at the moment its process posts the response.
type ControllerCall struct {
	Tenant   string
	Response []byte
	// StartExecutions is how many StartExecution calls the invocation made, attributed by the
	// invocation's trace id (invocationOfTrace), so it is exact at any concurrency.
	StartExecutions int64
}

// Tenant is one tenant's pipeline as found in the templates.
type Tenant struct {
	ID          string
	Stack       string // the stack (template) of its controller
	Prefix      string
	Queue       *Queue
	FileMachine string // ARN
	Controller  *emulate.Function
	Config      map[string]any // the TENANT variable, or the tenant's settings in its pool's file
	// Tier is TierSilo (its own queue and functions) or TierPool (one message group of its pool's
	// queue); Pool is the pool's name, "" for a silo tenant.
	Tier string
	Pool string
}

// Tenant tiers (Tenant.Tier).
const (
	TierSilo = report.TierSilo
	TierPool = report.TierPool
)

// Pooled reports whether the tenant shares its pool's queue and functions.
func (t *Tenant) Pooled() bool { return t.Tier == TierPool }

// CoreSystemName is the name of the core system the tenant registers into, "" when it names none.
func (t *Tenant) CoreSystemName() string {
	cs, _ := t.Config["coreSystem"].(map[string]any)
	name, _ := cs["name"].(string)
	return name
}

// Queue is one SQS queue of the templates.
type Queue struct {
	Name, URL, ARN    string
	VisibilityTimeout int
}

// Run is a started local pipeline: the emulated account (Cloud) with the templates deployed in
// it, and the harness around it, which uploads files, waits for them, reads what the pipeline did
// and reports it.
type Run struct {
	*Cloud
	cfg     Config
	Sink    *emulate.Sink
	Tenants []*Tenant
	Bucket  string
	sinkURL string
	// registerURL is RegisterURL, or the fault proxy in front of it (startSinks).
	registerURL string
	// coreFaults serves the embedded sink, or the proxy to RegisterURL, with the run's
	// SinkOutages and Sink5xx; nil without them.
	coreFaults *emulate.FaultyServer
	closers    []func()
	// admissionWaits are the files' admission waits, from the controllers' logs (admissionlog.go).
	admissionWaits admissionWaits
	// breakers are the core systems' breaker events, from Register's logs (breakerlog.go).
	breakers breakerLog

	mu      sync.Mutex
	uploads []*Upload
	// fileEvents are the File Processed events the pipeline put (fileevents.go).
	fileEvents []report.FileEvent
	started    time.Time
	inputs     map[string]string
	// redriven caches the redrive history of stopped redriven executions (operatorruns.go).
	redriven map[string]redriveTimes
	// refused keeps the REFUSED summaries read, by execution name: a refusal is final (sequence.go).
	refused map[string]results.Summary
	// drainedAt is when WaitDrained first saw the run drained (zero until then).
	drainedAt time.Time
}

// Upload is one file the harness put into the ingest bucket.
type Upload struct {
	Tenant    string
	Key       string
	VersionID string
	ETag      string
	At        time.Time
}

type rule struct {
	name     string
	pattern  *emulate.Pattern
	queueARN string
	groupID  string
	fn       *emulate.Function // a Lambda target, invoked asynchronously with the whole event
}

// Start brings up the emulators and wires the pipeline from the synthesized templates, one step
// after another (start.go).
func Start(ctx context.Context, cfg Config) (*Run, error) {
	if cfg.Logs == nil {
		cfg.Logs = io.Discard
	}
	switch cfg.Faults.EventKeyForm {
	case "", EventKeyRaw, EventKeyForm:
	default:
		return nil, fmt.Errorf("event key form %q: want %q or %q", cfg.Faults.EventKeyForm, EventKeyRaw, EventKeyForm)
	}
	switch cfg.Faults.Sequencers {
	case "", emulate.SequencersPerKey, emulate.SequencersGlobal:
	default:
		return nil, fmt.Errorf("sequencers %q: want %q or %q", cfg.Faults.Sequencers, emulate.SequencersPerKey, emulate.SequencersGlobal)
	}
	if r := cfg.Faults.Sink5xx; r < 0 || r > 1 {
		return nil, fmt.Errorf("sink 5xx rate %v: want a fraction from 0 to 1", r)
	}
	if cfg.Faults.LambdaConcurrency < 0 || cfg.Faults.SinkMaxInFlight < 0 {
		return nil, fmt.Errorf("lambda concurrency %d, sink max in flight %d: want 0 (no limit) or more", cfg.Faults.LambdaConcurrency, cfg.Faults.SinkMaxInFlight)
	}
	asm, err := deploy.LoadAssembly(cfg.Assembly)
	if err != nil {
		return nil, err
	}
	res, err := deploy.NewResolver(asm, emulate.Region, emulate.Account)
	if err != nil {
		return nil, err
	}
	noticeEncryption(asm, cfg.Logs)
	r := &Run{Cloud: newCloud(cfg.Faults, cfg.Logs, asm, res), cfg: cfg, started: time.Now(),
		Sink: &emulate.Sink{MaxInFlight: cfg.Faults.SinkMaxInFlight, KeyTTL: cfg.Faults.SinkKeyTTL, Lookup: cfg.Faults.SinkLookup}}
	r.watch = r
	for _, step := range []func(context.Context) error{
		r.startS3,
		r.startSQS,
		r.nameFunctionsAndStateMachines,
		r.startStepFunctions,
		r.startSinks,
		r.startFunctions,
		r.routeRules,
		r.startMappings,
		r.startSchedules,
		r.startControlPlane,
	} {
		if err := step(ctx); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// Function returns the function of a source package that serves a tenant (by its TENANT
// variable; for a pooled tenant, its pool's controller, or the pool's other function of the
// package that is not the router), or nil.
func (r *Run) Function(pkg, tenant string) *emulate.Function {
	for _, f := range r.functions {
		if f.Source == pkg && f.Tenant == tenant {
			return f
		}
	}
	t := r.Tenant(tenant)
	if t == nil || !t.Pooled() {
		return nil
	}
	if t.Controller != nil && t.Controller.Source == pkg {
		return t.Controller
	}
	for _, f := range r.functions {
		if f.Source == pkg && f.Pool == t.Pool && f.Role != "router" {
			return f
		}
	}
	return nil
}

// Tenant returns one tenant by id.
func (r *Run) Tenant(id string) *Tenant {
	for _, t := range r.Tenants {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// PutObject writes any object to the ingest bucket through the harness's S3 endpoint (operator
// actions such as a skip marker).
func (r *Run) PutObject(ctx context.Context, key string, body []byte) error {
	_, err := r.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	return err
}

func uuid() string {
	h := emulate.NewID()
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

// Uploads lists the uploads so far, in order.
func (r *Run) Uploads() []*Upload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Upload(nil), r.uploads...)
}

// Close stops every process and server of the run: the cloud's, then the harness's.
func (r *Run) Close() {
	if r.Cloud != nil {
		r.Cloud.Close()
	}
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}
