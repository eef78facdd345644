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
	"github.com/example/tenantpipeline/internal/pipeline"
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
	// S3, EventBridge, Lambda and StepFunctions are what the emulated services do differently from
	// a plain run (the cloud's options); Core is what the core system does (the embedded sink's, or
	// a fault proxy's in front of RegisterURL). Each zero value behaves as AWS documents it.
	S3            S3Options
	EventBridge   EventBridgeOptions
	Lambda        LambdaOptions
	StepFunctions StepFunctionsOptions
	Core          CoreOptions
}

// Event key forms (S3Options.EventKeyForm).
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
	// KeysPool is the pool its keys carry (its controller's KEYS_POOL): Pool under the
	// KeysPerPool layout, else "".
	KeysPool string
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
	arn      string // the rule's ARN, which the queue's and the key's policies name (aws:SourceArn)
	pattern  *emulate.Pattern
	queueARN string
	groupID  string
	fn       *emulate.Function // a Lambda target, invoked asynchronously with the whole event
	api      *apiTarget        // an API Gateway target (apigateway.go)
}

// Start brings up the emulators and wires the pipeline from the synthesized templates, one step
// after another (start.go).
func Start(ctx context.Context, cfg Config) (*Run, error) {
	if cfg.Logs == nil {
		cfg.Logs = io.Discard
	}
	switch cfg.S3.EventKeyForm {
	case "", EventKeyRaw, EventKeyForm:
	default:
		return nil, fmt.Errorf("event key form %q: want %q or %q", cfg.S3.EventKeyForm, EventKeyRaw, EventKeyForm)
	}
	switch cfg.S3.Sequencers {
	case "", emulate.SequencersPerKey, emulate.SequencersGlobal:
	default:
		return nil, fmt.Errorf("sequencers %q: want %q or %q", cfg.S3.Sequencers, emulate.SequencersPerKey, emulate.SequencersGlobal)
	}
	if r := cfg.Core.Rate5xx; r < 0 || r > 1 {
		return nil, fmt.Errorf("sink 5xx rate %v: want a fraction from 0 to 1", r)
	}
	if cfg.Lambda.Concurrency < 0 || cfg.Core.MaxInFlight < 0 {
		return nil, fmt.Errorf("lambda concurrency %d, sink max in flight %d: want 0 (no limit) or more", cfg.Lambda.Concurrency, cfg.Core.MaxInFlight)
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
	noticeImportedKeys(asm, res, cfg.Logs)
	r := &Run{Cloud: newCloud(cfg, asm, res), cfg: cfg, started: time.Now(),
		Sink: &emulate.Sink{MaxInFlight: cfg.Core.MaxInFlight, KeyTTL: cfg.Core.KeyTTL, Lookup: cfg.Core.Lookup}}
	r.watch = r
	r.opts.code.sink = r.sinkFor
	for _, step := range []func(context.Context) error{
		r.startS3,
		r.startSQS,
		r.startStepFunctions,
		r.startSinks,
		r.startFunctionEndpoints,
		r.apply,
		r.startSchedules,
		r.startControlPlane,
	} {
		if err := step(ctx); err != nil {
			r.Close()
			return nil, err
		}
	}
	if len(r.buckets) > 0 {
		r.Bucket = r.buckets[0] // the files' bucket: the first of the templates
	}
	return r, nil
}

// sinkFor is where a tenant's records go in this run (codeOptions.sink): the --register-url (or
// the fault proxy in front of it), else the embedded sink's per-tenant URL and, for a core system
// with a lookupUrl or when CoreOptions.Lookup asks for it, the sink's lookup URL.
func (r *Run) sinkFor(tenant string, lookup bool) (registerURL, lookupURL string) {
	switch {
	case r.cfg.RegisterURL != "":
		return r.registerURL, ""
	case lookup || r.cfg.Core.Lookup:
		return emulate.SinkURL(r.sinkURL, tenant), emulate.SinkLookupURL(r.sinkURL, tenant)
	}
	return emulate.SinkURL(r.sinkURL, tenant), ""
}

// logged reads the functions' log lines the report needs: the controllers' admission waits and
// Register's breaker events.
func (r *Run) logged(line []byte) {
	r.admissionWaits.observe(line)
	r.breakers.observe(line)
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

// Owner is whose keys the tenant's are: in its pool, if pooled.
func (t *Tenant) Owner() pipeline.Owner { return pipeline.PoolOwner(t.KeysPool, t.ID) }

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
