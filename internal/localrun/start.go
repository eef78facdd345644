package localrun

// The steps of Start, in the order they run. Each reads its resources from the templates, creates
// them locally and records their local identities (Ref, Fn::GetAtt), so that a later step can
// resolve what refers to them: buckets and queues before the state machine definitions and the
// function environments that name them, functions before the rules and mappings that target them.
//
// The steps on *Cloud create only what the templates declare in the account; the steps on *Run
// also need the harness: the sinks the functions register into, the functions' builds and logs,
// and the tenants each controller mapping makes.

import (
	"cmp"
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
	"github.com/johannesboyne/gofakes3"
)

// startS3 serves S3 twice (the pipeline's counted endpoint, the harness's) and creates the buckets.
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
	asm, res := c.asm, c.res
	for _, b := range asm.OfType("AWS::S3::Bucket") {
		bucket := asm.ReadBucket(res, b)
		name := bucket.Name
		if err := c.S3.Backend.CreateBucket(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
		if bucket.Versioned {
			c.S3.Backend.SetVersioningConfiguration(name, gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled})
		}
		res.Set(b, deploy.Identity{Ref: name, Attrs: map[string]string{"Arn": "arn:aws:s3:::" + name, "DomainName": name + ".s3.amazonaws.com", "RegionalDomainName": name + ".s3." + emulate.Region + ".amazonaws.com"}})
		c.buckets = append(c.buckets, name)
	}
	return nil
}

// startSQS starts fauxqs, its counting proxy for the pipeline, and the queues (queues.go).
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
	for _, q := range c.asm.OfType("AWS::SQS::Queue") {
		queue, err := c.createQueue(ctx, c.asm, c.res, q)
		if err != nil {
			return err
		}
		c.queues[queue.ARN] = queue
		c.res.Set(q, deploy.Identity{Ref: queue.URL, Attrs: map[string]string{"Arn": queue.ARN, "QueueName": queue.Name, "QueueUrl": queue.URL}})
	}
	return nil
}

// nameFunctionsAndStateMachines gives functions and state machines their local names and ARNs,
// before any environment or definition refers to them.
func (c *Cloud) nameFunctionsAndStateMachines(context.Context) error {
	asm, res := c.asm, c.res
	for _, f := range asm.OfType("AWS::Lambda::Function") {
		name := asm.NameOf(res, f, "FunctionName", 64)
		res.Set(f, deploy.Identity{Ref: name, Attrs: map[string]string{"Arn": fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", emulate.Region, emulate.Account, name)}})
	}
	for _, m := range asm.OfType("AWS::StepFunctions::StateMachine") {
		name := asm.NameOf(res, m, "StateMachineName", 80)
		arn := fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:%s", emulate.Region, emulate.Account, name)
		res.Set(m, deploy.Identity{Ref: arn, Attrs: map[string]string{"Arn": arn, "Name": name}})
	}
	return nil
}

// startStepFunctions serves the Lambda Invoke API and the status-event intake, starts the Step
// Functions server with them, and creates the state machines (statemachines.go).
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
	for _, m := range c.asm.OfType("AWS::StepFunctions::StateMachine") {
		if err := c.createStateMachine(ctx, c.asm, c.res, m); err != nil {
			return err
		}
	}
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
			id, _ := c.res.Identity(f)
			args = append(args, "--lambda-client-timeout", fmt.Sprintf("%s=%d", id.Ref, d.Milliseconds()))
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

// startSinks starts where records go: the embedded sink (unless --register-url) and, when a tenant
// has a DynamoDB sink, dynalite (dynamodb.go).
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
	if r.dynamoEnv, err = r.startDynamoDB(ctx, r.asm, r.res, r.cfg.Core.Latency); err != nil {
		return err
	}
	r.Sink.SetLatency(r.cfg.Core.Latency)
	return nil
}

// startFunctions builds each function's package once and prepares its processes (functions.go),
// pointed at the pipeline's counted endpoints.
func (r *Run) startFunctions(ctx context.Context) error {
	binDir := cmp.Or(r.cfg.BinDir, filepath.Join(r.cfg.WorkDir, "bin"))
	os.MkdirAll(binDir, 0o755)
	built := map[string]string{}
	endpoints := []string{
		"AWS_ENDPOINT_URL_S3=" + r.fn.s3,
		"AWS_ENDPOINT_URL_SQS=" + r.fn.sqs,
		"AWS_ENDPOINT_URL_SFN=" + r.pipe.sfn,
		"AWS_ENDPOINT_URL_LAMBDA=" + r.lambdaURL,
		"S3_USE_PATH_STYLE=true",
		"AWS_REGION=" + emulate.Region,
		"AWS_DEFAULT_REGION=" + emulate.Region,
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(r.cfg.WorkDir, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(r.cfg.WorkDir, "no-aws-credentials"),
		"PATH=" + os.Getenv("PATH"),
	}
	endpoints = append(endpoints, r.dynamoEnv...)
	if err := r.loadInsightRules(r.asm, r.res); err != nil {
		return err
	}
	// A pool's functions assume the tenant role here (tenantauth.go).
	sts, err := r.serveOn(http.HandlerFunc(r.auth.serveSTS))
	if err != nil {
		return err
	}
	endpoints = append(endpoints, "AWS_ENDPOINT_URL_STS="+sts)
	// The controller's File Processed events (fileevents.go).
	eventBridge, err := r.serveOn(http.HandlerFunc(r.servePutEvents))
	if err != nil {
		return err
	}
	endpoints = append(endpoints, "AWS_ENDPOINT_URL_EVENTBRIDGE="+eventBridge)
	// Register's secrets (secrets.go).
	secrets, err := r.serveOn(http.HandlerFunc(r.serveSecrets))
	if err != nil {
		return err
	}
	endpoints = append(endpoints, "AWS_ENDPOINT_URL_SECRETS_MANAGER="+secrets)
	for _, fr := range r.asm.OfType("AWS::Lambda::Function") {
		if _, ok := fr.Metadata[MetadataSource]; !ok {
			// CDK's own custom-resource handlers (bucket notifications, log retention) configure AWS
			// at deploy time; the local run has nothing for them to do.
			fmt.Fprintf(r.cfg.Logs, "localrun: %s has no %s metadata; not run locally\n", fr.LogicalID, MetadataSource)
			continue
		}
		f, err := r.function(ctx, r.asm, r.res, fr, binDir, built, endpoints)
		if err != nil {
			return err
		}
		r.functions = append(r.functions, f)
		r.Lambda.Add(f)
	}
	if err := r.limitConcurrency(); err != nil {
		return err
	}
	for _, c := range r.asm.OfType("AWS::Lambda::EventInvokeConfig") {
		if err := r.eventInvokeConfig(r.asm, r.res, c); err != nil {
			return err
		}
	}
	return nil
}

// routeRules reads each EventBridge rule's pattern and targets: a queue (with the target's message
// group) or a function (invoked asynchronously). events.go routes by them.
func (c *Cloud) routeRules(context.Context) error {
	for _, rr := range c.asm.OfType("AWS::Events::Rule") {
		spec, err := c.asm.ReadRule(c.res, rr)
		if err != nil {
			return err
		}
		if spec.Schedule != "" {
			if err := c.scheduleRule(rr.LogicalID, spec); err != nil {
				return err
			}
			continue
		}
		p, err := emulate.ParsePattern(spec.Pattern)
		if err != nil {
			return fmt.Errorf("rule %s: %w", rr.LogicalID, err)
		}
		for _, t := range spec.Targets {
			if f := c.Lambda.Lookup(t.Arn); f != nil {
				c.rules = append(c.rules, rule{name: rr.LogicalID, pattern: p, fn: f})
				continue
			}
			if c.queues[t.Arn] == nil {
				return fmt.Errorf("rule %s: target %s is neither a queue nor a function of the templates", rr.LogicalID, t.Arn)
			}
			arn, err := c.res.ResolveString(rr.Stack, json.RawMessage(fmt.Sprintf(`{"Fn::GetAtt":[%q,"Arn"]}`, rr.LogicalID)))
			if err != nil {
				return fmt.Errorf("rule %s: %w", rr.LogicalID, err)
			}
			c.rules = append(c.rules, rule{name: rr.LogicalID, arn: arn, pattern: p, queueARN: t.Arn, groupID: t.MessageGroupID})
		}
	}
	return nil
}

// startMappings starts the pollers of the event source mappings (mappings.go); each controller
// mapping makes a tenant.
func (r *Run) startMappings(context.Context) error {
	for _, m := range r.asm.OfType("AWS::Lambda::EventSourceMapping") {
		if err := r.startMapping(r.ctx, r.asm, r.res, m); err != nil {
			return err
		}
	}
	if len(r.Tenants) == 0 {
		return errors.New("no tenant found in the templates (no event source mapping of a controller with a TENANT or POOL variable)")
	}
	return nil
}

// startControlPlane serves CloudFormation, STS and Lambda's event source mapping API for operators'
// clients (controlplane.go), and records the endpoints Env exports.
func (r *Run) startControlPlane(context.Context) error {
	cp, err := r.serveOn(r.controlPlane())
	if err != nil {
		return err
	}
	r.endpoints = Endpoints{S3: r.s3URL, SQS: r.sqsURL, SFN: r.sfnOps, Lambda: cp, CloudFormation: cp, STS: cp, CloudWatch: cp}
	return nil
}

// limitConcurrency applies LambdaOptions.Concurrency: the functions without a reserved concurrency
// share what the reservations leave of it. Lambda keeps at least 100 unreserved
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html); locally at least 1.
func (c *Cloud) limitConcurrency() error {
	n := c.opts.lambda.Concurrency
	if n == 0 {
		return nil
	}
	unreserved := n
	for _, f := range c.functions {
		unreserved -= f.Concurrency
	}
	if unreserved < 1 {
		return fmt.Errorf("lambda concurrency %d: the functions' reserved concurrency takes %d of it and leaves none for the others", n, n-unreserved)
	}
	account := emulate.NewAccountConcurrency(unreserved)
	for _, f := range c.functions {
		f.Account = account
	}
	return nil
}
