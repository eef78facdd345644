package localrun

// The steps of Start, in the order they run. Each reads its resources from the templates, creates
// them locally and records their local identities (Ref, Fn::GetAtt), so that a later step can
// resolve what refers to them: buckets and queues before the state machine definitions and the
// function environments that name them, functions before the rules and mappings that target them.

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
func (r *Run) startS3(context.Context) (err error) {
	r.S3 = emulate.NewS3(r.Counter, r.Meter, emulate.NewSequencers(r.cfg.S3.Sequencers, r.cfg.S3.SequencerSeed))
	r.S3.MissingKeyForbidden = r.cfg.S3.MissingKeyForbidden
	r.S3.OnPut = r.objectCreated
	// A pool's tenant sessions are held to their role's policies (tenantauth.go).
	r.auth = newTenantAuth(r.asm, r.res)
	pipeS3 := r.auth.guardS3(r.S3.Handler(true))
	if r.pipe.s3, err = r.serveOn(pipeS3); err != nil {
		return err
	}
	if r.fn.s3, err = r.serveOn(r.awsLatency.Wrap(pipeS3)); err != nil {
		return err
	}
	if r.s3URL, err = r.serveOn(r.auth.guardS3(r.S3.Handler(false))); err != nil { // operators' uploader sessions too
		return err
	}
	r.s3 = s3.NewFromConfig(emulate.LocalAWS, func(o *s3.Options) { o.BaseEndpoint = aws.String(r.s3URL); o.UsePathStyle = true })
	asm, res := r.asm, r.res
	for _, b := range asm.OfType("AWS::S3::Bucket") {
		bucket := asm.ReadBucket(res, b)
		name := bucket.Name
		if err := r.S3.Backend.CreateBucket(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
		if bucket.Versioned {
			r.S3.Backend.SetVersioningConfiguration(name, gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled})
		}
		res.Set(b, deploy.Identity{Ref: name, Attrs: map[string]string{"Arn": "arn:aws:s3:::" + name, "DomainName": name + ".s3.amazonaws.com", "RegionalDomainName": name + ".s3." + emulate.Region + ".amazonaws.com"}})
		if r.Bucket == "" {
			r.Bucket = name
		}
	}
	return nil
}

// startSQS starts fauxqs, its counting proxy for the pipeline, and the queues (queues.go).
func (r *Run) startSQS(ctx context.Context) error {
	fq, err := emulate.StartNode(ctx, r.cfg.Node, filepath.Join(r.cfg.ModuleRoot, "local/fauxqs/server.mjs"), []string{"--region", emulate.Region}, r.cfg.Logs)
	if err != nil {
		return err
	}
	r.closers = append(r.closers, fq.Close)
	r.sqsURL = fq.URL
	pipeSQS := emulate.MeterSQS(emulate.Counting(emulate.SQSLongPoll(emulate.Proxy(fq.URL)), "sqs", r.Counter), r.Meter)
	if r.pipe.sqs, err = r.serveOn(pipeSQS); err != nil {
		return err
	}
	if r.fn.sqs, err = r.serveOn(r.awsLatency.Wrap(pipeSQS)); err != nil {
		return err
	}
	r.sqs = sqs.NewFromConfig(emulate.LocalAWS, func(o *sqs.Options) { o.BaseEndpoint = aws.String(r.pipe.sqs) })
	r.sqsAdmin = sqs.NewFromConfig(emulate.LocalAWS, func(o *sqs.Options) { o.BaseEndpoint = aws.String(fq.URL) })
	for _, q := range r.asm.OfType("AWS::SQS::Queue") {
		queue, err := r.createQueue(ctx, r.asm, r.res, q)
		if err != nil {
			return err
		}
		r.queues[queue.ARN] = queue
		r.res.Set(q, deploy.Identity{Ref: queue.URL, Attrs: map[string]string{"Arn": queue.ARN, "QueueName": queue.Name, "QueueUrl": queue.URL}})
	}
	return nil
}

// nameFunctionsAndStateMachines gives functions and state machines their local names and ARNs,
// before any environment or definition refers to them.
func (r *Run) nameFunctionsAndStateMachines(context.Context) error {
	asm, res := r.asm, r.res
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
func (r *Run) startStepFunctions(ctx context.Context) error {
	lambdaURL, err := r.serveOn(r.Lambda)
	if err != nil {
		return err
	}
	r.lambdaURL = lambdaURL
	eventsURL, err := r.serveOn(r.eventsHandler())
	if err != nil {
		return err
	}
	args := append([]string{"--lambda-endpoint", lambdaURL, "--events-endpoint", eventsURL, "--region", emulate.Region, "--account", emulate.Account}, r.sfnFaultArgs()...)
	sf, err := emulate.StartNode(ctx, r.cfg.Node, filepath.Join(r.cfg.ModuleRoot, "local/sfn-server/server.mjs"), args, r.cfg.Logs)
	if err != nil {
		return err
	}
	r.closers = append(r.closers, sf.Close)
	r.sfnURL = sf.URL
	if r.pipe.sfn, err = r.serveOn(r.sfnGate(emulate.CountingProxy(sf.URL, "stepfunctions", r.Counter))); err != nil {
		return err
	}
	r.sfn = sfn.NewFromConfig(emulate.LocalAWS, func(o *sfn.Options) { o.BaseEndpoint = aws.String(sf.URL) })
	for _, m := range r.asm.OfType("AWS::StepFunctions::StateMachine") {
		if err := r.createStateMachine(ctx, r.asm, r.res, m); err != nil {
			return err
		}
	}
	return nil
}

// sfnFaultArgs are the Step Functions server's fault switches for StepFunctionsOptions.LambdaClientTimeout,
// LoseChildStartAnswers and RetryIntervalScale; a client timeout names every function of its source
// package.
func (r *Run) sfnFaultArgs() []string {
	var args []string
	for _, f := range r.asm.OfType("AWS::Lambda::Function") {
		var src string
		if raw, ok := f.Metadata[MetadataSource]; ok {
			json.Unmarshal(raw, &src)
		}
		if d, ok := r.cfg.StepFunctions.LambdaClientTimeout[src]; ok {
			id, _ := r.res.Identity(f)
			args = append(args, "--lambda-client-timeout", fmt.Sprintf("%s=%d", id.Ref, d.Milliseconds()))
		}
	}
	if n := r.cfg.StepFunctions.LoseChildStartAnswers; n > 0 {
		args = append(args, "--lose-child-start-answers", strconv.Itoa(n))
	}
	if f := r.cfg.StepFunctions.RetryIntervalScale; f > 0 && f != 1 {
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
	if r.dynamoEnv, err = r.startDynamoDB(ctx, r.asm, r.res); err != nil {
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
func (r *Run) routeRules(context.Context) error {
	for _, rr := range r.asm.OfType("AWS::Events::Rule") {
		spec, err := r.asm.ReadRule(r.res, rr)
		if err != nil {
			return err
		}
		if spec.Schedule != "" {
			if err := r.scheduleRule(rr.LogicalID, spec); err != nil {
				return err
			}
			continue
		}
		p, err := emulate.ParsePattern(spec.Pattern)
		if err != nil {
			return fmt.Errorf("rule %s: %w", rr.LogicalID, err)
		}
		for _, t := range spec.Targets {
			if f := r.Lambda.Lookup(t.Arn); f != nil {
				r.rules = append(r.rules, rule{name: rr.LogicalID, pattern: p, fn: f})
				continue
			}
			if r.queues[t.Arn] == nil {
				return fmt.Errorf("rule %s: target %s is neither a queue nor a function of the templates", rr.LogicalID, t.Arn)
			}
			r.rules = append(r.rules, rule{name: rr.LogicalID, pattern: p, queueARN: t.Arn, groupID: t.MessageGroupID})
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
	r.endpoints = Endpoints{S3: r.s3URL, SQS: r.sqsURL, SFN: r.sfnURL, Lambda: cp, CloudFormation: cp, STS: cp, CloudWatch: cp}
	return nil
}

// limitConcurrency applies LambdaOptions.Concurrency: the functions without a reserved concurrency
// share what the reservations leave of it. Lambda keeps at least 100 unreserved
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html); locally at least 1.
func (r *Run) limitConcurrency() error {
	n := r.cfg.Lambda.Concurrency
	if n == 0 {
		return nil
	}
	unreserved := n
	for _, f := range r.functions {
		unreserved -= f.Concurrency
	}
	if unreserved < 1 {
		return fmt.Errorf("lambda concurrency %d: the functions' reserved concurrency takes %d of it and leaves none for the others", n, n-unreserved)
	}
	account := emulate.NewAccountConcurrency(unreserved)
	for _, f := range r.functions {
		f.Account = account
	}
	return nil
}
