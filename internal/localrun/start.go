package localrun

// The steps of Start, in the order they run. The services start first, each behind its judged
// and counted endpoints; then deploy.Apply creates what the templates declare, in the order their
// references need (account.go); then the schedules and the operators' control plane start.
//
// The steps on *Cloud belong to the account; those on *Run also need the harness: the sinks the
// functions register into, and the tenants each controller mapping makes.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// startS3 serves S3 twice (the pipeline's counted endpoint, the harness's).
// Every PutObject on either becomes an "Object Created" event (events.go).
func (c *Cloud) startS3(context.Context) (err error) {
	c.S3 = emulate.NewS3(c.Counter, c.Meter, emulate.NewSequencers(c.opts.s3.Sequencers, c.opts.s3.SequencerSeed))
	c.S3.MissingKeyForbidden = c.opts.s3.MissingKeyForbidden
	c.S3.OnPut = c.objectCreated
	// A pool's tenant sessions are held to their role's policies (tenantauth.go).
	c.auth = newTenantAuth(c.asm, c.res)
	pipeS3 := c.auth.guardS3(c.S3.Handler(true))
	if c.pipe.s3, err = c.serveOn(pipeS3); err != nil {
		return err
	}
	if c.fn.s3, err = c.serveOn(c.awsLatency.Wrap(pipeS3)); err != nil {
		return err
	}
	if c.s3URL, err = c.serveOn(c.auth.guardS3(c.S3.Handler(false))); err != nil { // operators' uploader sessions too
		return err
	}
	c.s3 = s3.NewFromConfig(emulate.LocalAWS, func(o *s3.Options) { o.BaseEndpoint = aws.String(c.s3URL); o.UsePathStyle = true })
	return nil
}

// startSQS starts fauxqs and its counting proxy for the pipeline.
func (c *Cloud) startSQS(ctx context.Context) error {
	fq, err := emulate.StartNode(ctx, c.node, filepath.Join(c.moduleRoot, "local/fauxqs/server.mjs"), []string{"--region", emulate.Region}, c.logs)
	if err != nil {
		return err
	}
	c.stops = append(c.stops, fq.Close)
	// A session's requests are held to its role's policies and the queue's (sqsauth.go), at the
	// pipeline's endpoints and the operators'.
	if c.sqsURL, err = c.serveOn(c.auth.guardSQS(emulate.Proxy(fq.URL))); err != nil {
		return err
	}
	pipeSQS := c.auth.guardSQS(emulate.MeterSQS(emulate.Counting(emulate.SQSLongPoll(emulate.Proxy(fq.URL)), "sqs", c.Counter), c.Meter))
	if c.pipe.sqs, err = c.serveOn(pipeSQS); err != nil {
		return err
	}
	if c.fn.sqs, err = c.serveOn(c.awsLatency.Wrap(pipeSQS)); err != nil {
		return err
	}
	c.sqs = sqs.NewFromConfig(emulate.LocalAWS, func(o *sqs.Options) { o.BaseEndpoint = aws.String(c.pipe.sqs) })
	c.sqsAdmin = sqs.NewFromConfig(emulate.LocalAWS, func(o *sqs.Options) { o.BaseEndpoint = aws.String(fq.URL) })
	return nil
}

// startStepFunctions serves the Lambda Invoke API and the status-event intake, and starts the Step
// Functions server with them.
func (c *Cloud) startStepFunctions(ctx context.Context) error {
	lambdaURL, err := c.serveOn(c.auth.guardLambda(c.Lambda))
	if err != nil {
		return err
	}
	c.lambdaURL = lambdaURL
	eventsURL, err := c.serveOn(c.eventsHandler())
	if err != nil {
		return err
	}
	args := append([]string{"--lambda-endpoint", lambdaURL, "--events-endpoint", eventsURL, "--region", emulate.Region, "--account", emulate.Account}, c.sfnFaultArgs()...)
	sf, err := emulate.StartNode(ctx, c.node, filepath.Join(c.moduleRoot, "local/sfn-server/server.mjs"), args, c.logs)
	if err != nil {
		return err
	}
	c.stops = append(c.stops, sf.Close)
	c.sfnURL = sf.URL
	// The functions' and the operators' requests are judged (sfnauth.go); the harness's own
	// client and the state machines' creation use the server directly.
	if c.pipe.sfn, err = c.serveOn(c.auth.guardSFN(c.sfnGate(emulate.CountingProxy(sf.URL, "stepfunctions", c.Counter)))); err != nil {
		return err
	}
	if c.sfnOps, err = c.serveOn(c.auth.guardSFN(emulate.Proxy(sf.URL))); err != nil {
		return err
	}
	c.sfn = sfn.NewFromConfig(emulate.LocalAWS, func(o *sfn.Options) { o.BaseEndpoint = aws.String(sf.URL) })
	return nil
}

// sfnFaultArgs are the Step Functions server's fault switches for StepFunctionsOptions.LambdaClientTimeout,
// LoseChildStartAnswers and RetryIntervalScale; a client timeout names every function of its source
// package.
func (c *Cloud) sfnFaultArgs() []string {
	var args []string
	for _, f := range c.asm.OfType("AWS::Lambda::Function") {
		var src string
		if raw, ok := f.Metadata[MetadataSource]; ok {
			json.Unmarshal(raw, &src)
		}
		if d, ok := c.opts.sfn.LambdaClientTimeout[src]; ok {
			name := c.asm.NameOf(c.res, f, "FunctionName", 64) // as deploy.Name names it
			args = append(args, "--lambda-client-timeout", fmt.Sprintf("%s=%d", name, d.Milliseconds()))
		}
	}
	if n := c.opts.sfn.LoseChildStartAnswers; n > 0 {
		args = append(args, "--lose-child-start-answers", strconv.Itoa(n))
	}
	if f := c.opts.sfn.RetryIntervalScale; f > 0 && f != 1 {
		args = append(args, "--retry-interval-scale", strconv.FormatFloat(f, 'g', -1, 64))
	}
	return args
}

// startSinks starts where records go: the embedded sink (unless --register-url), or a fault proxy
// in front of either. A table starts dynalite when it is created (dynamodb.go).
func (r *Run) startSinks(ctx context.Context) (err error) {
	r.sinkURL, r.registerURL = r.cfg.RegisterURL, r.cfg.RegisterURL
	faults := emulate.CoreFaults{Outages: r.cfg.Core.Outages, Rate5xx: r.cfg.Core.Rate5xx}
	switch {
	case faults.Active() && r.cfg.RegisterURL != "":
		if r.coreFaults, r.registerURL, err = emulate.ProxyFaulty(r.cfg.RegisterURL, faults); err != nil {
			return err
		}
		r.closers = append(r.closers, r.coreFaults.Close)
	case faults.Active():
		if r.coreFaults, r.sinkURL, err = emulate.ServeFaulty(r.Sink, faults); err != nil {
			return err
		}
		r.closers = append(r.closers, r.coreFaults.Close)
	case r.sinkURL == "":
		if r.sinkURL, err = r.serveOn(r.Sink); err != nil {
			return err
		}
	}
	r.Sink.SetLatency(r.cfg.Core.Latency)
	return nil
}

// startFunctionEndpoints serves what the functions reach besides S3, SQS, Step Functions and
// Lambda: STS (a pool's functions assume the tenant role, tenantauth.go), EventBridge's PutEvents
// (the controller's File Processed events, fileevents.go) and Secrets Manager (Register's secrets,
// secrets.go). Every function is deployed with these endpoints (CreateFunction).
func (c *Cloud) startFunctionEndpoints(context.Context) error {
	c.fnEnv = []string{
		"AWS_ENDPOINT_URL_S3=" + c.fn.s3,
		"AWS_ENDPOINT_URL_SQS=" + c.fn.sqs,
		"AWS_ENDPOINT_URL_SFN=" + c.pipe.sfn,
		"AWS_ENDPOINT_URL_LAMBDA=" + c.lambdaURL,
		"S3_USE_PATH_STYLE=true",
		"AWS_REGION=" + emulate.Region,
		"AWS_DEFAULT_REGION=" + emulate.Region,
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(c.opts.code.workDir, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(c.opts.code.workDir, "no-aws-credentials"),
		"PATH=" + os.Getenv("PATH"),
	}
	for _, s := range []struct {
		name string
		h    http.HandlerFunc
	}{{"STS", c.auth.serveSTS}, {"EVENTBRIDGE", c.servePutEvents}, {"SECRETS_MANAGER", c.serveSecrets}} {
		u, err := c.serveOn(s.h)
		if err != nil {
			return err
		}
		c.fnEnv = append(c.fnEnv, "AWS_ENDPOINT_URL_"+s.name+"="+u)
	}
	return nil
}

// apply deploys the templates into the cloud (deploy.Apply) and checks that they serve a tenant.
func (r *Run) apply(ctx context.Context) error {
	if err := r.limitConcurrency(); err != nil {
		return err
	}
	if err := deploy.Apply(ctx, r.asm, r.res, r.Cloud); err != nil {
		return err
	}
	if len(r.Tenants) == 0 {
		return errors.New("no tenant found in the templates (no event source mapping of a controller with a TENANT or POOL variable)")
	}
	return nil
}

// startControlPlane serves CloudFormation, STS and Lambda's event source mapping API for operators'
// clients (controlplane.go), and records the endpoints Env exports.
func (r *Run) startControlPlane(context.Context) error {
	// A session's requests are judged by its role's policies (controlplaneauth.go).
	cp, err := r.serveOn(r.auth.guardControlPlane(r.controlPlane()))
	if err != nil {
		return err
	}
	r.endpoints = Endpoints{S3: r.s3URL, SQS: r.sqsURL, SFN: r.sfnOps, Lambda: cp, CloudFormation: cp, STS: cp, CloudWatch: cp}
	return nil
}

// limitConcurrency applies LambdaOptions.Concurrency: the functions without a reserved concurrency
// share what the reservations of the templates' functions leave of it (CreateFunction gives them
// the account). Lambda keeps at least 100 unreserved
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html); locally at least 1.
func (c *Cloud) limitConcurrency() error {
	n := c.opts.lambda.Concurrency
	if n == 0 {
		return nil
	}
	unreserved := n
	for _, f := range c.asm.OfType("AWS::Lambda::Function") {
		if _, ok := f.Metadata[MetadataSource]; !ok {
			continue // not run locally (CreateFunction)
		}
		var reserved int
		c.asm.Prop(c.res, f, "ReservedConcurrentExecutions", &reserved)
		unreserved -= reserved
	}
	if unreserved < 1 {
		return fmt.Errorf("lambda concurrency %d: the functions' reserved concurrency takes %d of it and leaves none for the others", n, n-unreserved)
	}
	c.account = emulate.NewAccountConcurrency(unreserved)
	return nil
}
