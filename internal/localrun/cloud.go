package localrun

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
)

// Cloud is the emulated AWS account a run deploys the templates into: the services and their
// endpoints (S3, SQS, Step Functions, Lambda, DynamoDB, STS and IAM, CloudWatch's Contributor
// Insights), the EventBridge rules and schedules, the queues, and the event source mappings that
// poll them. It owns what the templates create and how AWS behaves; the harness around it (Run)
// uploads files, waits, reads the results and writes the report.
type Cloud struct {
	opts cloudOptions // how the emulated services differ from a plain run (options.go)
	logs io.Writer    // the emulators' and the mappings' diagnostics
	// node runs the Node emulators (fauxqs, the Step Functions server, dynalite), from moduleRoot's local/.
	node, moduleRoot string
	watch            observer // the harness, told of what it records; nil watches nothing

	Counter *emulate.APICounter
	Meter   *emulate.RequestMeter // billed S3 and SQS requests (meter.go)
	S3      *emulate.S3
	Lambda  *emulate.LambdaService
	sfnURL  string
	sfnOps  string // judged, for operators (Env)
	sqsURL  string // direct, uncounted
	s3URL   string // harness endpoint, uncounted
	// pipe are the pipeline's counted endpoints; fn serve the same to the Lambda processes, each
	// call delayed by awsLatency (awslatency.go).
	pipe       struct{ s3, sqs, sfn string }
	fn         struct{ s3, sqs string }
	awsLatency emulate.AWSLatency
	// lambdaURL serves the Lambda Invoke API to Step Functions and to the functions (the
	// controller invokes a failed file's results task).
	lambdaURL string
	sqs       *sqs.Client // counted (EventBridge and the event source mapping)
	sqsAdmin  *sqs.Client // uncounted (harness)
	sfn       *sfn.Client
	s3        *s3.Client

	asm *deploy.Assembly
	res *deploy.Resolver
	// buckets are the templates' buckets, in the templates' order (the first is the ingest bucket).
	buckets []string
	// definitions are the state machines' resolved definitions, by ARN (written by Start only).
	definitions map[string]string
	created     time.Time
	endpoints   Endpoints // for operators' clients (Env)
	functions   []*emulate.Function
	built       map[string]string // each source package's binary (CreateFunction)
	fnEnv       []string          // the endpoints every function is deployed with (startFunctionEndpoints)
	// account is the concurrency the functions without a reservation share; nil without
	// LambdaOptions.Concurrency (limitConcurrency).
	account   *emulate.AccountConcurrency
	rules     []rule
	schedules []schedule               // the scheduled rules' targets (schedules.go)
	queues    map[string]*Queue        // by ARN
	dynamo    *dynamoLocal             // nil without a DynamoDB sink (dynamodb.go)
	dynamoEnv []string                 // the Lambdas' DynamoDB endpoint, if any
	auth      *tenantAuth              // pool tenant sessions and their policies (tenantauth.go)
	mapping   *emulate.MappingRenderer // API Gateway's request templates; nil without an API target (apigateway.go)
	// insightLog holds the Contributor Insights rules of the templates and the lines of their log
	// groups (insightrules.go).
	insightLog insightLog

	// ctx ends when the cloud closes: the pollers, schedules and asynchronous invocations run in it.
	ctx     context.Context
	cancel  context.CancelFunc
	pollers sync.WaitGroup
	stops   []func() // the servers and processes, stopped in reverse order

	mu   sync.Mutex
	busy int // event source mapping invocations in flight
	// delivered holds, per queue ARN, the ids of the messages handed to the function, with their
	// message group.
	delivered map[string]map[string]string
	esms      []*esm
	esmOf     map[*mapping]*esm

	statusOnce sync.Once
	statusSt   *statusState
	// mappingErrors counts failed event source mapping invocations (esm.go).
	mappingErrors atomic.Int64
	// mappingThrottleRetries counts the retries of throttled event source mapping batches (esm.go).
	mappingThrottleRetries atomic.Int64
}

// observer is what the harness watches of the account, each told before the cloud routes it.
type observer interface {
	// arrived is every PutObject, by anyone (the harness, the aws CLI, pipectl).
	arrived(bucket, key, versionID, etag string)
	// fileProcessed is every File Processed event the functions put.
	fileProcessed(report.FileEvent)
	// logged is every line a function logs.
	logged(line []byte)
	// mappingCreated is every event source mapping, before it polls; an error fails the deploy.
	mappingCreated(stack string, f *emulate.Function, q *Queue) error
}

// newCloud is an empty account for the templates of asm, resolved by res, with cfg's options for
// its services.
func newCloud(cfg Config, asm *deploy.Assembly, res *deploy.Resolver) *Cloud {
	ctx, cancel := context.WithCancel(context.Background())
	opts := cloudOptions{s3: cfg.S3, events: cfg.EventBridge, lambda: cfg.Lambda, sfn: cfg.StepFunctions, dynamoLatency: cfg.Core.Latency,
		code: codeOptions{assembly: cfg.Assembly, binDir: cfg.BinDir, workDir: cfg.WorkDir, progress: cfg.Progress, envFor: cfg.EnvFor, envForPool: cfg.EnvForPool}}
	return &Cloud{opts: opts, logs: cfg.Logs, node: cfg.Node, moduleRoot: cfg.ModuleRoot, Counter: &emulate.APICounter{}, Meter: &emulate.RequestMeter{},
		Lambda: &emulate.LambdaService{}, queues: map[string]*Queue{}, asm: asm, res: res, created: time.Now(),
		esmOf: map[*mapping]*esm{}, definitions: map[string]string{}, built: map[string]string{}, ctx: ctx, cancel: cancel}
}

// serveOn starts an HTTP server on loopback for h; it stops when the cloud closes.
func (c *Cloud) serveOn(h http.Handler) (string, error) {
	u, stop, err := emulate.Serve(h)
	if err != nil {
		return "", err
	}
	c.stops = append(c.stops, stop)
	return u, nil
}

// Close stops the pollers, every function's processes, and the servers and emulators.
func (c *Cloud) Close() {
	if c.cancel != nil {
		c.cancel()
	}
	c.pollers.Wait()
	for _, f := range c.functions {
		f.Close()
	}
	for i := len(c.stops) - 1; i >= 0; i-- {
		c.stops[i]()
	}
	c.stops = nil
}

// SetAWSCallLatency sets the time added to each S3, SQS and DynamoDB call the Lambda processes make
// from now on (0: none), as if each call crossed the network to AWS.
func (c *Cloud) SetAWSCallLatency(d time.Duration) { c.awsLatency.Set(d) }

// StepFunctions is a client of the local Step Functions server (operator actions such as redrive).
func (c *Cloud) StepFunctions() *sfn.Client { return c.sfn }
