// Package localrun runs the synthesized tenant pipeline on this machine, with real emulators and the
// real Lambda binaries: gofakes3 for S3, fauxqs for SQS, aws-local-stepfunctions behind a small
// Step Functions API server, EventBridge routing by the synthesized rules' event patterns, and a
// Lambda event source mapping that follows Lambda's SQS semantics. docs/local-run.md describes it.
package localrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/johannesboyne/gofakes3"
)

// MetadataSource is the resource metadata key naming a function's Go main package.
const MetadataSource = "tenantpipeline:source"

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
	// Env adds or overrides environment variables of every Lambda process (NAME=value), after the
	// template's; EnvFor adds variables to the functions of one source package.
	EnvFor map[string][]string
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
	Throttle map[string]Throttle
	// EventKeyForm is how the "Object Created" events carry the object key: "raw" (default, the key
	// as written) or "form" (form-encoded, as classic S3 event notifications carry it: "red
	// flower.jpg" becomes "red+flower.jpg",
	// https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
	// AWS documents neither form for EventBridge, so the pipeline must work with both.
	EventKeyForm string
	// SinkLatency is added to every request of the embedded sink and of the DynamoDB emulator (a
	// core system, or a table, that takes this long to answer); see sinklatency.go.
	SinkLatency time.Duration
	// StatusEvents drops or duplicates the Step Functions status change events (statusevents.go);
	// SFNThrottle answers ThrottlingException to a fraction of the pipeline's Step Functions calls.
	StatusEvents StatusEvents
	SFNThrottle  SFNThrottle
}

// Event key forms (Config.EventKeyForm).
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

const (
	region  = "us-east-1"
	account = "000000000000" // the account fauxqs puts in queue URLs and ARNs
)

// Tenant is one tenant's pipeline as found in the templates.
type Tenant struct {
	ID          string
	Stack       string // the stack (template) of its controller
	Prefix      string
	Queue       *Queue
	FileMachine string // ARN
	Controller  *Function
	Config      map[string]any // the TENANT variable
}

// Queue is one SQS queue of the templates.
type Queue struct {
	Name, URL, ARN    string
	VisibilityTimeout int
}

// Run is a started local pipeline.
type Run struct {
	cfg       Config
	Counter   *APICounter
	S3        *S3
	Sink      *Sink
	Lambda    *LambdaService
	Tenants   []*Tenant
	Bucket    string
	sinkURL   string
	sfnURL    string
	sqsURL    string // direct, uncounted
	s3URL     string // harness endpoint, uncounted
	functions []*Function
	rules     []rule
	queues    map[string]*Queue // by ARN
	sqs       *sqs.Client       // counted (EventBridge and the event source mapping)
	sqsAdmin  *sqs.Client       // uncounted (harness)
	sfn       *sfn.Client
	s3        *s3.Client
	closers   []func()
	pollers   sync.WaitGroup
	cancel    context.CancelFunc
	asm       *Assembly
	res       *Resolver
	created   time.Time
	endpoints Endpoints    // for operators' clients (Env)
	dynamo    *dynamoLocal // nil without a DynamoDB sink (dynamodb.go)

	mu      sync.Mutex
	uploads []*Upload
	started time.Time
	busy    int // event source mapping invocations in flight
	inputs  map[string]string
	// delivered holds, per queue ARN, the ids of the messages handed to the function.
	delivered map[string]map[string]bool
	// drainedAt is when WaitDrained first saw the run drained (zero until then).
	drainedAt time.Time
	esms      []*esm
	esmOf     map[*mapping]*esm

	runCtx     context.Context
	statusOnce sync.Once
	statusSt   *statusState
	// mappingErrors counts failed event source mapping invocations (esm.go).
	mappingErrors atomic.Int64
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
	pattern  *Pattern
	queueARN string
	groupID  string
	fn       *Function // a Lambda target, invoked asynchronously with the whole event
}

// Start brings up the emulators and wires the pipeline from the synthesized templates.
func Start(ctx context.Context, cfg Config) (r *Run, err error) {
	if cfg.Logs == nil {
		cfg.Logs = io.Discard
	}
	switch cfg.EventKeyForm {
	case "", EventKeyRaw, EventKeyForm:
	default:
		return nil, fmt.Errorf("event key form %q: want %q or %q", cfg.EventKeyForm, EventKeyRaw, EventKeyForm)
	}
	asm, err := LoadAssembly(cfg.Assembly)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	run := &Run{cfg: cfg, Counter: &APICounter{}, Sink: &Sink{}, Lambda: &LambdaService{}, queues: map[string]*Queue{}, cancel: cancel, started: time.Now(),
		runCtx: runCtx, asm: asm, created: time.Now(), esmOf: map[*mapping]*esm{}}
	r = run
	defer func() {
		if err != nil {
			run.Close()
		}
	}()
	r.closers = append(r.closers, cancel)
	res, err := NewResolver(asm, region, account)
	if err != nil {
		return nil, err
	}
	r.res = res

	// S3.
	r.S3 = newS3(r.Counter)
	r.S3.OnPut = r.objectCreated
	pipeS3, stop, err := serve(r.S3.Handler(true))
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, stop)
	if r.s3URL, stop, err = serve(r.S3.Handler(false)); err != nil {
		return nil, err
	}
	r.closers = append(r.closers, stop)
	for _, b := range asm.OfType("AWS::S3::Bucket") {
		var name string
		var versioning struct{ Status string }
		a := asm
		a.Prop(res, b, "BucketName", &name)
		a.Prop(res, b, "VersioningConfiguration", &versioning)
		if name == "" {
			name = physicalName(b, 63)
		}
		if err := r.S3.Backend.CreateBucket(name); err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", name, err)
		}
		if versioning.Status == "Enabled" {
			r.S3.Backend.SetVersioningConfiguration(name, gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled})
		}
		res.Set(b, Identity{Ref: name, Attrs: map[string]string{"Arn": "arn:aws:s3:::" + name, "DomainName": name + ".s3.amazonaws.com", "RegionalDomainName": name + ".s3." + region + ".amazonaws.com"}})
		if r.Bucket == "" {
			r.Bucket = name
		}
	}

	// SQS.
	fq, err := startNode(ctx, cfg.Node, filepath.Join(cfg.ModuleRoot, "local/fauxqs/server.mjs"), []string{"--region", region}, cfg.Logs)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, fq.Close)
	r.sqsURL = fq.URL
	pipeSQS, stop, err := serve(countingProxy(fq.URL, "sqs", r.Counter))
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, stop)
	awsCfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}
	r.sqs = sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(pipeSQS) })
	r.sqsAdmin = sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(fq.URL) })
	r.s3 = s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(r.s3URL); o.UsePathStyle = true })
	for _, q := range asm.OfType("AWS::SQS::Queue") {
		queue, err := r.createQueue(ctx, asm, res, q)
		if err != nil {
			return nil, err
		}
		r.queues[queue.ARN] = queue
		res.Set(q, Identity{Ref: queue.URL, Attrs: map[string]string{"Arn": queue.ARN, "QueueName": queue.Name, "QueueUrl": queue.URL}})
	}

	// Identities of functions and state machines, before any environment or definition refers to them.
	for _, f := range asm.OfType("AWS::Lambda::Function") {
		var name string
		asm.Prop(res, f, "FunctionName", &name)
		if name == "" {
			name = physicalName(f, 64)
		}
		res.Set(f, Identity{Ref: name, Attrs: map[string]string{"Arn": fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", region, account, name)}})
	}
	for _, m := range asm.OfType("AWS::StepFunctions::StateMachine") {
		var name string
		asm.Prop(res, m, "StateMachineName", &name)
		if name == "" {
			name = physicalName(m, 80)
		}
		arn := fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:%s", region, account, name)
		res.Set(m, Identity{Ref: arn, Attrs: map[string]string{"Arn": arn, "Name": name}})
	}

	// Lambda Invoke API and the Step Functions server.
	lambdaURL, stop, err := serve(r.Lambda)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, stop)
	eventsURL, stop, err := serve(r.eventsHandler())
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, stop)
	sf, err := startNode(ctx, cfg.Node, filepath.Join(cfg.ModuleRoot, "local/sfn-server/server.mjs"), []string{"--lambda-endpoint", lambdaURL, "--events-endpoint", eventsURL, "--region", region, "--account", account}, cfg.Logs)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, sf.Close)
	r.sfnURL = sf.URL
	pipeSFN, stop, err := serve(r.sfnGate(countingProxy(sf.URL, "stepfunctions", r.Counter)))
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, stop)
	r.sfn = sfn.NewFromConfig(awsCfg, func(o *sfn.Options) { o.BaseEndpoint = aws.String(sf.URL) })
	for _, m := range asm.OfType("AWS::StepFunctions::StateMachine") {
		if err := r.createStateMachine(ctx, asm, res, m); err != nil {
			return nil, err
		}
	}

	// The register endpoint.
	r.sinkURL = cfg.RegisterURL
	if r.sinkURL == "" {
		u, stop, err := serve(r.Sink)
		if err != nil {
			return nil, err
		}
		r.closers = append(r.closers, stop)
		r.sinkURL = u
	}

	// DynamoDB (dynamodb.go), when a tenant has a DynamoDB sink.
	dynamoEnv, err := r.startDynamoDB(ctx, asm, res)
	if err != nil {
		return nil, err
	}
	r.Sink.SetLatency(cfg.SinkLatency)

	// Lambda functions.
	binDir := cmpOr(cfg.BinDir, filepath.Join(cfg.WorkDir, "bin"))
	os.MkdirAll(binDir, 0o755)
	built := map[string]string{}
	endpoints := []string{
		"AWS_ENDPOINT_URL_S3=" + pipeS3,
		"AWS_ENDPOINT_URL_SQS=" + pipeSQS,
		"AWS_ENDPOINT_URL_SFN=" + pipeSFN,
		"S3_USE_PATH_STYLE=true",
		"AWS_REGION=" + region,
		"AWS_DEFAULT_REGION=" + region,
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(cfg.WorkDir, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(cfg.WorkDir, "no-aws-credentials"),
		"PATH=" + os.Getenv("PATH"),
	}
	endpoints = append(endpoints, dynamoEnv...)
	for _, fr := range asm.OfType("AWS::Lambda::Function") {
		if _, ok := fr.Metadata[MetadataSource]; !ok {
			// CDK's own custom-resource handlers (bucket notifications, log retention) configure AWS
			// at deploy time; the local run has nothing for them to do.
			fmt.Fprintf(cfg.Logs, "localrun: %s has no %s metadata; not run locally\n", fr.LogicalID, MetadataSource)
			continue
		}
		f, err := r.function(ctx, asm, res, fr, binDir, built, endpoints)
		if err != nil {
			return nil, err
		}
		r.functions = append(r.functions, f)
		r.Lambda.Add(f)
	}

	// EventBridge rules.
	for _, rr := range asm.OfType("AWS::Events::Rule") {
		var pattern map[string]any
		var targets []struct {
			Arn           string
			SqsParameters struct{ MessageGroupId string }
		}
		if err := asm.Prop(res, rr, "EventPattern", &pattern); err != nil {
			return nil, err
		}
		if err := asm.Prop(res, rr, "Targets", &targets); err != nil {
			return nil, err
		}
		pb, _ := json.Marshal(pattern)
		p, err := ParsePattern(pb)
		if err != nil {
			return nil, fmt.Errorf("rule %s: %w", rr.LogicalID, err)
		}
		for _, t := range targets {
			if f := r.Lambda.Lookup(t.Arn); f != nil {
				r.rules = append(r.rules, rule{name: rr.LogicalID, pattern: p, fn: f})
				continue
			}
			if r.queues[t.Arn] == nil {
				return nil, fmt.Errorf("rule %s: target %s is neither a queue nor a function of the templates", rr.LogicalID, t.Arn)
			}
			r.rules = append(r.rules, rule{name: rr.LogicalID, pattern: p, queueARN: t.Arn, groupID: t.SqsParameters.MessageGroupId})
		}
	}

	// Event source mappings.
	for _, m := range asm.OfType("AWS::Lambda::EventSourceMapping") {
		if err := r.startMapping(runCtx, asm, res, m); err != nil {
			return nil, err
		}
	}
	if len(r.Tenants) == 0 {
		return nil, errors.New("no tenant found in the templates (no event source mapping of a controller with a TENANT variable)")
	}

	// The control plane (CloudFormation, STS, Lambda's event source mapping API) for operators.
	cp, stop, err := serve(r.controlPlane())
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, stop)
	r.endpoints = Endpoints{S3: r.s3URL, SQS: r.sqsURL, SFN: r.sfnURL, Lambda: cp, CloudFormation: cp, STS: cp}
	return r, nil
}

// physicalName derives a deterministic local name for a resource without an explicit one.
func physicalName(res *Resource, max int) string {
	n := strings.ToLower(res.LogicalID)
	if len(n) > max {
		n = n[:max]
	}
	return n
}

func (r *Run) createQueue(ctx context.Context, asm *Assembly, res *Resolver, q *Resource) (*Queue, error) {
	var props struct {
		QueueName                     string
		FifoQueue                     any
		ContentBasedDeduplication     any
		VisibilityTimeout             any
		ReceiveMessageWaitTimeSeconds any
		MessageRetentionPeriod        any
		DelaySeconds                  any
		MaximumMessageSize            any
		DeduplicationScope            string
		FifoThroughputLimit           string
	}
	for _, k := range []string{"QueueName", "FifoQueue", "ContentBasedDeduplication", "VisibilityTimeout", "ReceiveMessageWaitTimeSeconds", "MessageRetentionPeriod", "DelaySeconds", "MaximumMessageSize", "DeduplicationScope", "FifoThroughputLimit"} {
		raw, ok := q.Properties[k]
		if !ok {
			continue
		}
		v, err := res.Resolve(q.Stack, raw)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(map[string]any{k: v})
		json.Unmarshal(b, &props)
	}
	fifo := fmt.Sprint(props.FifoQueue) == "true"
	name := props.QueueName
	if name == "" {
		name = physicalName(q, 75)
		if fifo {
			name += ".fifo"
		}
	}
	attrs := map[string]string{}
	set := func(k string, v any) {
		if s := attrString(v); s != "" {
			attrs[k] = s
		}
	}
	if fifo {
		attrs["FifoQueue"] = "true"
	}
	set("ContentBasedDeduplication", props.ContentBasedDeduplication)
	set("VisibilityTimeout", props.VisibilityTimeout)
	set("ReceiveMessageWaitTimeSeconds", props.ReceiveMessageWaitTimeSeconds)
	set("MessageRetentionPeriod", props.MessageRetentionPeriod)
	set("DelaySeconds", props.DelaySeconds)
	set("MaximumMessageSize", props.MaximumMessageSize)
	set("DeduplicationScope", props.DeduplicationScope)
	set("FifoThroughputLimit", props.FifoThroughputLimit)
	out, err := r.sqsAdmin.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return nil, fmt.Errorf("create queue %s: %w", name, err)
	}
	vis, _ := strconv.Atoi(cmpOr(attrs["VisibilityTimeout"], "30"))
	return &Queue{Name: name, URL: aws.ToString(out.QueueUrl), ARN: fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, account, name), VisibilityTimeout: vis}, nil
}

// attrString renders a template value as an SQS attribute value. SQS takes integers as decimal
// strings ("MessageRetentionPeriod – An integer from 60 seconds (1 minute) to 1,209,600 seconds",
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SetQueueAttributes.html);
// a JSON number decodes to float64, which fmt prints as 1.2096e+06.
func attrString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func (r *Run) createStateMachine(ctx context.Context, asm *Assembly, res *Resolver, m *Resource) error {
	id, _ := res.Identity(m)
	var def string
	if raw, ok := m.Properties["DefinitionString"]; ok {
		s, err := res.ResolveString(m.Stack, raw)
		if err != nil {
			return fmt.Errorf("%s.DefinitionString: %w", m.LogicalID, err)
		}
		def = s
	} else if raw, ok := m.Properties["Definition"]; ok {
		v, err := res.Resolve(m.Stack, raw)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(v)
		def = string(b)
	}
	var subs map[string]string
	asm.Prop(res, m, "DefinitionSubstitutions", &subs)
	for k, v := range subs {
		def = strings.ReplaceAll(def, "${"+k+"}", v)
	}
	var roleArn string
	asm.Prop(res, m, "RoleArn", &roleArn)
	_, err := r.sfn.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{Name: aws.String(id.Attrs["Name"]), Definition: aws.String(def), RoleArn: aws.String(cmpOr(roleArn, "arn:aws:iam::"+account+":role/local"))})
	if err != nil {
		return fmt.Errorf("state machine %s: %w", m.LogicalID, err)
	}
	return nil
}

func (r *Run) function(ctx context.Context, asm *Assembly, res *Resolver, fr *Resource, binDir string, built map[string]string, endpoints []string) (*Function, error) {
	id, _ := res.Identity(fr)
	var src string
	if raw, ok := fr.Metadata[MetadataSource]; ok {
		json.Unmarshal(raw, &src)
	}
	if src == "" {
		return nil, fmt.Errorf("function %s has no %q metadata naming its Go package", fr.LogicalID, MetadataSource)
	}
	bin, ok := built[src]
	if !ok {
		var err error
		if bin, err = buildFunctionBinary(ctx, r.cfg.ModuleRoot, src, binDir); err != nil {
			return nil, err
		}
		built[src] = bin
	}
	var env struct{ Variables map[string]string }
	if err := asm.Prop(res, fr, "Environment", &env); err != nil {
		return nil, err
	}
	var timeout, reserved int
	asm.Prop(res, fr, "Timeout", &timeout)
	asm.Prop(res, fr, "ReservedConcurrentExecutions", &reserved)
	if timeout == 0 {
		timeout = 3 // the Lambda default
	}
	vars := env.Variables
	if vars == nil {
		vars = map[string]string{}
	}
	// The harness points every tenant at the register endpoint of the run by rewriting registerUrl in
	// the TENANT variable; the controller passes it into every execution, so Split and Register see it.
	if t, ok := vars["TENANT"]; ok {
		var cfg map[string]any
		if err := json.Unmarshal([]byte(t), &cfg); err != nil {
			return nil, fmt.Errorf("function %s: TENANT is not JSON: %w", fr.LogicalID, err)
		}
		tid, _ := cfg["id"].(string)
		switch {
		case cfg["dynamodb"] != nil: // a DynamoDB sink has no registerUrl (dynamodb.go)
		case r.cfg.RegisterURL != "":
			cfg["registerUrl"] = r.cfg.RegisterURL
		default:
			cfg["registerUrl"] = sinkURL(r.sinkURL, tid)
		}
		b, _ := json.Marshal(cfg)
		vars["TENANT"] = string(b)
	}
	all := append([]string{}, endpoints...)
	for _, k := range sortedKeys(vars) {
		all = append(all, k+"="+vars[k])
	}
	all = append(all, r.cfg.EnvFor[src]...)
	f := &Function{Name: id.Ref, ARN: id.Attrs["Arn"], Source: src, Binary: bin, Env: all, Timeout: time.Duration(timeout) * time.Second, Concurrency: reserved, Logs: r.cfg.Logs}
	if d, ok := r.cfg.FunctionTimeout[src]; ok {
		f.Timeout = d
	}
	if t, ok := r.cfg.Throttle[src]; ok {
		f.SetThrottle(t)
	}
	if t, ok := vars["TENANT"]; ok {
		var cfg struct{ ID string }
		json.Unmarshal([]byte(t), &cfg)
		f.Tenant = cfg.ID
	}
	if t, ok := vars["TENANT"]; ok && r.cfg.ControllerCrash != nil {
		var cfg struct{ ID string }
		json.Unmarshal([]byte(t), &cfg)
		// StartExecution calls are attributed to the invocation by its trace id (sfnGate), so the
		// hook knows whether the invocation it is asked about started an execution.
		crash := r.cfg.ControllerCrash
		f.BeforeResponse = func(_ *Function, id string, payload []byte) bool {
			return crash(ControllerCall{Tenant: cfg.ID, Response: payload, StartExecutions: r.startsOf(id)})
		}
	}
	return f, nil
}

func (r *Run) startMapping(ctx context.Context, asm *Assembly, res *Resolver, m *Resource) error {
	var props struct {
		EventSourceArn        string
		FunctionName          string
		BatchSize             int
		Enabled               *bool
		FunctionResponseTypes []string
		ScalingConfig         struct{ MaximumConcurrency int }
	}
	raw, err := res.Resolve(m.Stack, mustJSON(m.Properties))
	if err != nil {
		return fmt.Errorf("mapping %s: %w", m.LogicalID, err)
	}
	if err := json.Unmarshal(mustJSON(raw), &props); err != nil {
		return fmt.Errorf("mapping %s: %w", m.LogicalID, err)
	}
	q := r.queues[props.EventSourceArn]
	if q == nil {
		return fmt.Errorf("mapping %s: event source %s is not a queue of the templates", m.LogicalID, props.EventSourceArn)
	}
	f := r.Lambda.Lookup(props.FunctionName)
	if f == nil {
		return fmt.Errorf("mapping %s: function %s not found", m.LogicalID, props.FunctionName)
	}
	batch := props.BatchSize
	if batch == 0 {
		batch = 10 // the SQS default batch size
	}
	reportFailures := false
	for _, t := range props.FunctionResponseTypes {
		reportFailures = reportFailures || t == "ReportBatchItemFailures"
	}
	if t := r.tenantOf(f, q); t != nil {
		t.Stack = m.Stack.Name
		r.Tenants = append(r.Tenants, t)
	}
	pollers := mappingPollers(f.Concurrency, props.ScalingConfig.MaximumConcurrency)
	mp := &mapping{run: r, queue: q, fn: f, batch: min(batch, 10), reportFailures: reportFailures}
	// Its Enabled is the Lambda API's to change (pipectl pause/resume); a disabled mapping does not poll.
	state := newESM(uuidFor(m.Stack.Name+"/"+m.LogicalID), f.ARN, q.ARN, batch, props.Enabled == nil || *props.Enabled)
	res.Set(m, Identity{Ref: state.UUID})
	r.mu.Lock()
	r.esms = append(r.esms, state)
	r.esmOf[mp] = state
	r.mu.Unlock()
	for range pollers {
		r.pollers.Add(1)
		go func() {
			defer r.pollers.Done()
			mp.poll(ctx)
		}()
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func (r *Run) tenantOf(f *Function, q *Queue) *Tenant {
	var tenantVar, prefix, machine string
	for _, kv := range f.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "TENANT":
			tenantVar = v
		case "TENANT_PREFIX":
			prefix = v
		case "STATE_MACHINE_ARN":
			machine = v
		}
	}
	if tenantVar == "" {
		return nil
	}
	var cfg map[string]any
	json.Unmarshal([]byte(tenantVar), &cfg)
	id, _ := cfg["id"].(string)
	return &Tenant{ID: id, Prefix: prefix, Queue: q, FileMachine: machine, Controller: f, Config: cfg}
}

// Function returns the function of a source package that serves a tenant (by its TENANT
// variable), or nil.
func (r *Run) Function(pkg, tenant string) *Function {
	for _, f := range r.functions {
		if f.Source == pkg && f.Tenant == tenant {
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

// Upload puts one file under the tenant's prefix, as the sending system would; the PutObject
// becomes an "Object Created" event.
func (r *Run) Upload(ctx context.Context, tenantID, rel string, body []byte) (*Upload, error) {
	t := r.Tenant(tenantID)
	if t == nil {
		return nil, fmt.Errorf("unknown tenant %q", tenantID)
	}
	key := t.Prefix + rel
	out, err := r.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		return nil, fmt.Errorf("upload %s: %w", key, err)
	}
	vid, etag := aws.ToString(out.VersionId), strings.Trim(aws.ToString(out.ETag), `"`)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.uploads) - 1; i >= 0; i-- {
		if u := r.uploads[i]; u.Key == key && u.VersionID == vid && u.ETag == etag {
			return u, nil
		}
	}
	return nil, fmt.Errorf("upload %s: the ingest bucket saw no such PutObject", key)
}

// arrived records a PutObject under a tenant's prefix as a file of the run, whoever wrote it (the
// harness, the aws CLI, pipectl), before its event is routed, so that the report lists it.
func (r *Run) arrived(bucket, key, versionID, etag string) {
	if bucket != r.Bucket {
		return
	}
	var t *Tenant
	for _, c := range r.Tenants {
		if strings.HasPrefix(key, c.Prefix) && (t == nil || len(c.Prefix) > len(t.Prefix)) {
			t = c
		}
	}
	if t == nil {
		return // control markers, work objects, keys of no tenant
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.uploads) == 0 {
		r.started = time.Now() // wall time and throughput are measured from the first upload
	}
	r.drainedAt = time.Time{}
	r.uploads = append(r.uploads, &Upload{Tenant: t.ID, Key: key, VersionID: versionID, ETag: etag, At: time.Now()})
}

// PutObject writes any object to the ingest bucket through the harness's S3 endpoint (operator
// actions such as a skip marker).
func (r *Run) PutObject(ctx context.Context, key string, body []byte) error {
	_, err := r.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	return err
}

// StepFunctions is a client of the local Step Functions server (operator actions such as redrive).
func (r *Run) StepFunctions() *sfn.Client { return r.sfn }

// objectCreated turns a PutObject into the EventBridge event S3 sends
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html) and routes it.
func (r *Run) objectCreated(bucket, key, versionID, etag string, size int64) {
	r.arrived(bucket, key, versionID, etag)
	detail := map[string]any{
		"version":           "0",
		"bucket":            map[string]any{"name": bucket},
		"object":            map[string]any{"key": r.eventKey(key), "size": size, "etag": etag, "sequencer": r.S3.Sequencer()},
		"request-id":        newID()[:16],
		"requester":         account,
		"source-ip-address": "127.0.0.1",
		"reason":            "PutObject",
	}
	if versionID != "" {
		detail["object"].(map[string]any)["version-id"] = versionID
	}
	ev := map[string]any{
		"version":     "0",
		"id":          uuid(),
		"detail-type": "Object Created",
		"source":      "aws.s3",
		"account":     account,
		"time":        time.Now().UTC().Format(time.RFC3339),
		"region":      region,
		"resources":   []any{"arn:aws:s3:::" + bucket},
		"detail":      detail,
	}
	r.PutEvent(context.Background(), ev)
	if r.cfg.DuplicateEvents {
		r.putEvent(context.Background(), ev, r.cfg.DuplicateAfterDedupWindow)
	}
}

// eventKey is the object key as the events carry it (Config.EventKeyForm).
func (r *Run) eventKey(key string) string {
	if r.cfg.EventKeyForm != EventKeyForm {
		return key
	}
	return FormEncodeKey(key)
}

// FormEncodeKey form-encodes an object key as S3 event notifications do: each path segment as
// application/x-www-form-urlencoded (space as "+", "+" as "%2B", "%" as "%25", UTF-8 bytes as %XX),
// the "/" between segments kept, so that key prefixes still match
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
func FormEncodeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.QueryEscape(s)
	}
	return strings.Join(segs, "/")
}

// PutEvent routes one event to every matching rule's target queue, as EventBridge does: the body is
// the event, the message group is the target's fixed MessageGroupId, and deduplication is left to
// the queue's content-based deduplication (EventBridge sends no deduplication id).
func (r *Run) PutEvent(ctx context.Context, ev map[string]any) { r.putEvent(ctx, ev, false) }

// putEvent routes one event; late sends it with its own deduplication id, as a copy that arrives
// after the queue's deduplication interval is no longer deduplicated.
func (r *Run) putEvent(ctx context.Context, ev map[string]any, late bool) {
	body, _ := json.Marshal(ev)
	// Route on the decoded event, as EventBridge matches JSON values.
	var decoded map[string]any
	json.Unmarshal(body, &decoded)
	for _, rl := range r.rules {
		if !rl.pattern.Match(decoded) {
			continue
		}
		if rl.fn != nil {
			r.invokeAsync(rl.fn, body)
			continue
		}
		q := r.queues[rl.queueARN]
		in := &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(string(body))}
		if rl.groupID != "" {
			in.MessageGroupId = aws.String(rl.groupID)
		}
		if late && strings.HasSuffix(q.Name, ".fifo") {
			in.MessageDeduplicationId = aws.String(newID())
		}
		// EventBridge retries delivery for up to 24 hours; locally a few attempts suffice.
		for attempt := 0; attempt < 5; attempt++ {
			if _, err := r.sqs.SendMessage(ctx, in); err == nil {
				break
			} else {
				fmt.Fprintf(r.cfg.Logs, "eventbridge: deliver to %s: %v\n", q.Name, err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
}

func uuid() string {
	h := newID()
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

// Uploads lists the uploads so far, in order.
func (r *Run) Uploads() []*Upload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Upload(nil), r.uploads...)
}

// Close stops every process and server of the run.
func (r *Run) Close() {
	if r.cancel != nil {
		r.cancel()
	}
	r.pollers.Wait()
	for _, f := range r.functions {
		f.Close()
	}
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}

// sfnStats reads the Step Functions server's execution table.
func (r *Run) sfnStats(ctx context.Context) (*sfnStats, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.sfnURL, strings.NewReader("{}"))
	req.Header.Set("X-Amz-Target", "LocalStepFunctions.Stats")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var s sfnStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

type sfnStats struct {
	APICalls   map[string]int64 `json:"apiCalls"`
	Executions []sfnExecution   `json:"executions"`
}

type sfnExecution struct {
	ExecutionArn    string  `json:"executionArn"`
	StateMachineArn string  `json:"stateMachineArn"`
	Name            string  `json:"name"`
	Status          string  `json:"status"`
	StartDate       float64 `json:"startDate"`
	StopDate        float64 `json:"stopDate"`
	HistoryEvents   int     `json:"historyEvents"`
	MaxPayloadBytes int     `json:"maxPayloadBytes"`
	ParentArn       string  `json:"parentArn"`
	RedriveCount    int     `json:"redriveCount"`
	Error           string  `json:"error"`
	Cause           string  `json:"cause"`
}

// queueDepth is the number of messages of a queue, visible or in flight.
func (r *Run) queueDepth(ctx context.Context, q *Queue) (int, error) {
	out, err := r.sqsAdmin.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range out.Attributes {
		x, _ := strconv.Atoi(v)
		n += x
	}
	return n, nil
}
