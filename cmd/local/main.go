// Command local runs the synthesized tenant pipeline end to end on this machine, with emulators
// on loopback and the real Lambda handlers; docs/local-run.md describes it and its flags.
//
//	go run ./cmd/local [--tenants FILE] [--inbox DIR] [--register-url URL] [--report FILE.json] [--timeout 10m] [--setup-timeout 30m]
//	                   [--halted-recheck 5s] [--fail-on-failed-files] [--event-key-form raw|form] [--sequencers per-key|global]
//	                   [--upload-order lexical|shuffle|reverse] [--upload-seed N] [--withhold GLOB]...
//	go run ./cmd/local --serve --env-file FILE [--tenants FILE] [--inbox DIR] [--register-url URL]
//
// Exit status (build it into .build/ and run the binary to see it; `go run` prints its own):
// 0 every upload drained and every invariant held; 1 an invariant broke, the run failed, or (with
// --fail-on-failed-files) a file failed; 2 bad usage; 3 not drained by --timeout, or synth and the
// builds not done by --setup-timeout; 4 every tenant drained, halted or holding files for a missing
// sequence number, and at least one halted (the halt is printed with the pipectl commands) or holds. Interrupted (SIGINT, SIGTERM), the runner finishes its
// summary and report before it stops the emulators; --serve then exits 0 (1 if an invariant broke).
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/example/tenantpipeline/internal/localrun"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/tenants"
)

// localRegisterURL stands in for the registerUrl of tenants that have none while synthesizing; the
// run replaces every tenant's endpoint with --register-url or the embedded sink's.
const localRegisterURL = "http://127.0.0.1/supplied-by-the-local-run"

// Exit statuses.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitTimeout  = 3
	exitHalted   = 4
	controllerPk = "lambdas/controller"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first Ctrl-C ends the run in order (summary, report, then the emulators); the
		// signals are then let go, so a second one stops the runner at once.
		<-ctx.Done()
		stop()
	}()
	// `make serve 2>&1 | tee log`: the terminal's Ctrl-C ends tee with the rest of the group, and
	// the runner's next line goes to a pipe nobody reads. Unnotified, that write kills the runner
	// with SIGPIPE before it writes its report; notified, it fails with EPIPE, which the summary's
	// writes ignore, so the report files are still written (os/signal's doc, "SIGPIPE":
	// https://pkg.go.dev/os/signal#hdr-SIGPIPE). Notify, not Ignore: an ignored SIGPIPE would be
	// inherited by the emulators and handlers the runner starts.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// The slow steps of the start-up, under --setup-timeout; tests replace them.
var (
	synthApp = deploy.Synth
	startRun = localrun.Start
)

// options are the checked flags.
type options struct {
	root, tenants, inbox, registerURL, report, assembly, workDir, envFile string
	timeout, setupTimeout, haltedRecheck, heartbeat                       time.Duration
	serve, failOnFailed                                                   bool
	// What the emulated services and the core system do differently, one struct per service as
	// localrun.Config takes them; each flag fills one field. --register-client-timeout and
	// --fault-seed are set into them after parsing (clientTimeouts, the throttles' and drops' seeds).
	s3                    localrun.S3Options
	eventBridge           localrun.EventBridgeOptions
	lambda                localrun.LambdaOptions
	stepFunctions         localrun.StepFunctionsOptions
	core                  localrun.CoreOptions
	registerClientTimeout time.Duration
	faultSeed             uint64
	files                 []inboxFile
	// The uploads' order (localrun.OrderUploads), its seed (seedSet: given, not drawn), and the
	// globs of the inbox files not uploaded (withheld, in inbox order).
	uploadOrder string
	uploadSeed  uint64
	seedSet     bool
	withhold    globs
	withheld    []inboxFile
	// warnings are printed to stderr before the run starts: a flag that has no effect.
	warnings []string
}

// globs is a repeatable flag of path.Match patterns.
type globs []string

func (g *globs) String() string { return strings.Join(*g, " ") }

func (g *globs) Set(v string) error {
	if _, err := path.Match(v, ""); err != nil {
		return fmt.Errorf("%v (Go's path.Match: *, ?, [a-z], \\ to quote)", err)
	}
	*g = append(*g, v)
	return nil
}

// parse checks every flag before anything slow starts: a usage error is exit 2, in well under a
// second, naming the flag. --help prints the flags to help.
func parse(args []string, help io.Writer) (*options, error) {
	cwd, _ := os.Getwd()
	root, err := deploy.ModuleRoot(cwd)
	if err != nil {
		return nil, err
	}
	o := &options{root: root}
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	// A mistyped flag gets its error and a pointer to --help, not every flag's description.
	fs.SetOutput(io.Discard)
	defaultInbox := filepath.Join(root, "local/inbox")
	fs.StringVar(&o.tenants, "tenants", filepath.Join(root, "tenants.json"), "tenants config to synthesize the app with")
	fs.StringVar(&o.inbox, "inbox", "", "files to upload: DIR/<tenant-id>/<relative path> (default local/inbox; none with --serve)")
	fs.StringVar(&o.registerURL, "register-url", "", "core-system endpoint every tenant registers to (default: an embedded sink that checks order and idempotency)")
	fs.StringVar(&o.report, "report", "", "write the JSON report to this file, and its HTML picture beside it (.json replaced by .html)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "exit 3 if the pipeline has not drained by then (not with --serve)")
	fs.DurationVar(&o.setupTimeout, "setup-timeout", 30*time.Minute, "exit 3 if synth, the Lambda builds and the emulators' start have not finished by then (--timeout counts from the upload on)")
	fs.StringVar(&o.assembly, "cdk-out", "", "use this synthesized cloud assembly instead of synthesizing --tenants")
	fs.StringVar(&o.workDir, "work", filepath.Join(root, ".build/local"), "where binaries, the assembly and logs go")
	fs.StringVar(&o.s3.EventKeyForm, "event-key-form", localrun.EventKeyRaw, "how Object Created events carry the object key: raw (as written) or form (form-encoded, as S3 event notifications: a space as +)")
	fs.StringVar(&o.s3.Sequencers, "sequencers", emulate.SequencersPerKey, "how the events' S3 sequencers grow: per-key (as AWS documents them: increasing per key, in no order across keys) or global (one counter, following the writes)")
	fs.DurationVar(&o.haltedRecheck, "halted-recheck", 5*time.Second, "how often a halted tenant re-checks its failed file (HALT_WAIT_SECONDS of the controllers; 0 keeps the template's)")
	fs.DurationVar(&o.heartbeat, "heartbeat", 15*time.Second, "print what each tenant waits on at least this often")
	fs.BoolVar(&o.failOnFailed, "fail-on-failed-files", false, "exit 1 when a file's execution did not succeed")
	fs.BoolVar(&o.serve, "serve", false, "keep running until interrupted, for the aws CLI and pipectl (needs --env-file)")
	fs.StringVar(&o.envFile, "env-file", "", "with --serve: write the shell export lines of the local endpoints to this file")
	// A slow core system (and DynamoDB table) for measuring the sinks.
	fs.DurationVar(&o.core.Latency, "sink-latency", 0, "add this latency to every request of the embedded sink and of the local DynamoDB (e.g. 10ms)")
	// Step Functions status change events and throttling (docs/local-run.md).
	fs.BoolVar(&o.s3.MissingKeyForbidden, "s3-missing-key-403", false, "the Lambdas' S3 answers a read of a missing key with 403 AccessDenied instead of 404, as S3 does without s3:ListBucket")
	fs.Float64Var(&o.eventBridge.StatusEvents.Drop, "drop-status-events", 0, "fraction (0-1) of Step Functions status change events lost before routing")
	fs.BoolVar(&o.eventBridge.StatusEvents.Duplicate, "duplicate-status-events", false, "route every Step Functions status change event twice")
	fs.Float64Var(&o.stepFunctions.Throttle.DescribeExecution, "throttle-describe", 0, "fraction (0-1) of the pipeline's DescribeExecution calls answered ThrottlingException")
	fs.Float64Var(&o.stepFunctions.Throttle.StartExecution, "throttle-start", 0, "fraction (0-1) of the pipeline's StartExecution calls answered ThrottlingException")
	fs.DurationVar(&o.registerClientTimeout, "register-client-timeout", 0, "Step Functions gives up on an Invoke of Register after this long: the task fails with Lambda.ClientExecutionTimeoutException while the invocation goes on (0: never)")
	fs.IntVar(&o.stepFunctions.LoseChildStartAnswers, "lose-child-start-answers", 0, "the first N segment executions are started, and then each starting task fails with StepFunctions.SdkClientException, as when a start's answer is lost")
	fs.Float64Var(&o.lambda.AsyncRetryScale, "async-retry-scale", 1.0/60, "multiply Lambda's waits before retrying a failed asynchronous invocation (1 and 2 minutes) and the maximum event age (default: retries after 1 s and 2 s)")
	fs.Float64Var(&o.eventBridge.ScheduleScale, "schedule-scale", 1.0/12, "multiply the period of the scheduled EventBridge rules, such as the admission reconciler's rate(1 minute) (default: every 5 s)")
	fs.Float64Var(&o.stepFunctions.RetryIntervalScale, "retry-interval-scale", 1, "multiply every Retry's interval and maximum delay in the state machines (e.g. 0.05 to wait out a 2.5-minute retrier in 7.5 s)")
	fs.Uint64Var(&o.faultSeed, "fault-seed", 0, "seed of the drops and throttles (0: a fixed default), for a repeatable run")
	// Concurrency limits: Lambda's account concurrency and a core system that sheds load.
	fs.IntVar(&o.lambda.Concurrency, "lambda-concurrency", 0, "the account's Lambda concurrency: invocations beyond N at once, across every function, are refused with TooManyRequestsException (429), as Lambda does (0: unlimited)")
	fs.IntVar(&o.core.MaxInFlight, "sink-max-in-flight", 0, "the embedded sink answers 429 with Retry-After: 1 to a request beyond N in flight (0: no cap)")
	// A core system's bad day, for the embedded sink or, with --register-url, a proxy in front of it.
	fs.Func("sink-outage", "AT:FOR: the core system refuses connections from AT after its first request, for FOR (e.g. 30s:5m); repeat it for more outages", func(v string) error {
		out, err := emulate.ParseOutage(v)
		if err == nil {
			o.core.Outages = append(o.core.Outages, out)
		}
		return err
	})
	fs.Float64Var(&o.core.Rate5xx, "sink-5xx", 0, "fraction (0-1) of the core system's requests answered 500, 502 or 504 (never 503, which asks to slow down)")
	// A core system that forgets idempotency keys, and answers lookups by key.
	fs.DurationVar(&o.core.KeyTTL, "sink-key-ttl", 0, "the embedded sink forgets an idempotency key after D: a resend after D registers the record again, counted as a duplicate (0: keys kept for ever)")
	fs.BoolVar(&o.core.Lookup, "sink-lookup", false, "the embedded sink answers lookupUrl GETs (200 registered, 404 not), and every core system's lookupUrl points at it")
	// Arrivals out of the names' order, and files that never arrive (a tenant's sequence).
	fs.StringVar(&o.uploadOrder, "upload-order", localrun.UploadLexical, "in which order each tenant's inbox files are uploaded: lexical (by relative path), shuffle (drawn from --upload-seed) or reverse; tenants follow one another in lexical order")
	fs.Uint64Var(&o.uploadSeed, "upload-seed", 0, "seed of --upload-order shuffle (default: a new seed each run, printed so the run can be repeated)")
	fs.Var(&o.withhold, "withhold", "do not upload the inbox files matching this glob, matched against <tenant>/<relative path> as Go's path.Match does (* stops at /); repeat it for more globs; with --serve, upload them later with pipectl upload or the aws CLI")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(help, "usage: go run ./cmd/local [flags] (docs/local-run.md)")
		fs.SetOutput(help)
		fs.PrintDefaults()
		return nil, err
	} else if err != nil {
		return nil, &usageError{msg: err.Error(), hint: "run it with --help for the flags"}
	}
	switch {
	case fs.NArg() > 0:
		return nil, usagef("unexpected argument %q (every option is a --flag)", fs.Arg(0))
	case o.s3.EventKeyForm != localrun.EventKeyRaw && o.s3.EventKeyForm != localrun.EventKeyForm:
		return nil, usagef("--event-key-form %q: want raw or form", o.s3.EventKeyForm)
	case o.s3.Sequencers != emulate.SequencersPerKey && o.s3.Sequencers != emulate.SequencersGlobal:
		return nil, usagef("--sequencers %q: want per-key or global", o.s3.Sequencers)
	case o.serve && o.envFile == "":
		return nil, usagef("--serve needs --env-file FILE (where the export lines go)")
	case !o.serve && o.envFile != "":
		return nil, usagef("--env-file is for --serve")
	case o.eventBridge.StatusEvents.Drop < 0 || o.eventBridge.StatusEvents.Drop > 1:
		return nil, usagef("--drop-status-events %g: want a fraction from 0 to 1", o.eventBridge.StatusEvents.Drop)
	case o.stepFunctions.Throttle.DescribeExecution < 0 || o.stepFunctions.Throttle.DescribeExecution > 1:
		return nil, usagef("--throttle-describe %g: want a fraction from 0 to 1", o.stepFunctions.Throttle.DescribeExecution)
	case o.stepFunctions.Throttle.StartExecution < 0 || o.stepFunctions.Throttle.StartExecution > 1:
		return nil, usagef("--throttle-start %g: want a fraction from 0 to 1", o.stepFunctions.Throttle.StartExecution)
	case o.core.Rate5xx < 0 || o.core.Rate5xx > 1:
		return nil, usagef("--sink-5xx %g: want a fraction from 0 to 1", o.core.Rate5xx)
	case o.core.Latency < 0:
		return nil, usagef("--sink-latency %s: want 0 or more", o.core.Latency)
	case o.registerClientTimeout < 0:
		return nil, usagef("--register-client-timeout %s: want 0 or more", o.registerClientTimeout)
	case o.stepFunctions.LoseChildStartAnswers < 0:
		return nil, usagef("--lose-child-start-answers %d: want 0 or more", o.stepFunctions.LoseChildStartAnswers)
	case o.lambda.Concurrency < 0:
		return nil, usagef("--lambda-concurrency %d: want 0 (unlimited) or more", o.lambda.Concurrency)
	case o.core.MaxInFlight < 0:
		return nil, usagef("--sink-max-in-flight %d: want 0 (no cap) or more", o.core.MaxInFlight)
	case o.core.MaxInFlight > 0 && o.registerURL != "":
		return nil, usagef("--sink-max-in-flight is for the embedded sink; --register-url replaces it")
	case o.core.KeyTTL < 0:
		return nil, usagef("--sink-key-ttl %s: want 0 (keys kept for ever) or more", o.core.KeyTTL)
	case (o.core.KeyTTL > 0 || o.core.Lookup) && o.registerURL != "":
		return nil, usagef("--sink-key-ttl and --sink-lookup are for the embedded sink; --register-url replaces it")
	case !(o.stepFunctions.RetryIntervalScale > 0):
		return nil, usagef("--retry-interval-scale %g: want more than 0", o.stepFunctions.RetryIntervalScale)
	case !(o.lambda.AsyncRetryScale > 0):
		return nil, usagef("--async-retry-scale %g: want more than 0", o.lambda.AsyncRetryScale)
	case !(o.eventBridge.ScheduleScale > 0):
		return nil, usagef("--schedule-scale %g: want more than 0", o.eventBridge.ScheduleScale)
	case o.timeout <= 0:
		return nil, usagef("--timeout %s: want more than 0", o.timeout)
	case o.setupTimeout <= 0:
		return nil, usagef("--setup-timeout %s: want more than 0", o.setupTimeout)
	case o.haltedRecheck != 0 && o.haltedRecheck < time.Second:
		return nil, usagef("--halted-recheck %s: want 0 or at least 1s", o.haltedRecheck)
	case !slices.Contains(localrun.UploadOrders, o.uploadOrder):
		return nil, usagef("--upload-order %q: want lexical, shuffle or reverse", o.uploadOrder)
	}
	o.stepFunctions.LambdaClientTimeout = clientTimeouts(o.registerClientTimeout)
	o.eventBridge.StatusEvents.Seed, o.stepFunctions.Throttle.Seed = o.faultSeed, o.faultSeed
	fs.Visit(func(f *flag.Flag) { o.seedSet = o.seedSet || f.Name == "upload-seed" })
	if o.seedSet && o.uploadOrder != localrun.UploadShuffle {
		o.warnings = append(o.warnings, fmt.Sprintf("--upload-seed %d has no effect with --upload-order %s (it seeds shuffle only)", o.uploadSeed, o.uploadOrder))
	}
	if o.inbox == "" && !o.serve {
		o.inbox = defaultInbox
	}
	if len(o.withhold) > 0 && o.inbox == "" {
		return nil, usagef("--withhold keeps back files of --inbox, and there is none: give --inbox DIR")
	}
	if len(o.withhold) > 0 && !o.serve {
		o.warnings = append(o.warnings, "--withhold without --serve: the withheld files never arrive in this run, so a sequenced tenant holds the files after them; the run ends when every tenant has drained, halted or holds (exit 4)")
	}
	var ids []string
	if o.assembly == "" {
		f, err := tenants.Load(o.tenants, tenants.Options{RegisterURL: localRegisterURL})
		if err != nil {
			return nil, usagef("--tenants %s: %v", o.tenants, err)
		}
		for _, t := range f.Tenants {
			ids = append(ids, t.ID)
		}
	} else if st, err := os.Stat(o.assembly); err != nil || !st.IsDir() {
		return nil, usagef("--cdk-out %s: not a directory", o.assembly)
	}
	if o.inbox != "" {
		st, err := os.Stat(o.inbox)
		if err != nil || !st.IsDir() {
			return nil, usagef("--inbox %s: no such directory", o.inbox)
		}
		if o.files, err = inboxFiles(o.inbox); err != nil {
			return nil, usagef("--inbox: %v", err)
		}
		if ids != nil {
			for _, f := range o.files {
				if !contains(ids, f.tenant) {
					return nil, usagef("--inbox %s: folder %q is not a tenant of %s (tenants: %s)", o.inbox, f.tenant, o.tenants, strings.Join(ids, ", "))
				}
			}
		}
		if o.files, o.withheld, err = withhold(o.files, o.withhold); err != nil {
			return nil, usagef("--withhold %v (in --inbox %s)", err, o.inbox)
		}
	}
	if o.uploadOrder == localrun.UploadShuffle && !o.seedSet {
		o.uploadSeed = uint64(rand.Uint32()) // short enough to type back
	}
	if err := localrun.OrderUploads(o.files, func(f inboxFile) string { return f.tenant }, o.uploadOrder, o.uploadSeed); err != nil {
		return nil, usagef("--upload-order: %v", err)
	}
	return o, nil
}

// uploadOrderLine says in which order the files go up, with the seed of a shuffle so that the run
// can be repeated; "" for the lexical order.
func uploadOrderLine(o *options) string {
	switch o.uploadOrder {
	case localrun.UploadLexical:
		return ""
	case localrun.UploadShuffle:
		return fmt.Sprintf("upload order: each tenant's files shuffled with seed %d (repeat it with --upload-order shuffle --upload-seed %d)", o.uploadSeed, o.uploadSeed)
	}
	return fmt.Sprintf("upload order: each tenant's files in %s order", o.uploadOrder)
}

// withhold splits files into those to upload and those matching a glob, each in inbox order; a
// glob that matches no file is an error, as it is most likely mistyped.
func withhold(files []inboxFile, globs []string) (upload, held []inboxFile, err error) {
	used := make([]bool, len(globs))
	for _, f := range files {
		name := f.tenant + "/" + f.rel
		matched := false
		for i, g := range globs {
			if ok, _ := path.Match(g, name); ok { // the pattern was checked as the flag was set
				used[i], matched = true, true
			}
		}
		if matched {
			held = append(held, f)
		} else {
			upload = append(upload, f)
		}
	}
	for i, g := range globs {
		if !used[i] {
			example := "acme/orders-3.csv"
			if len(files) > 0 {
				example = files[0].tenant + "/" + files[0].rel
			}
			return nil, nil, fmt.Errorf("%q matches no file: globs are matched against <tenant>/<relative path>, such as %s", g, example)
		}
	}
	return upload, held, nil
}

// registerSource is the bundled Register function's source package, by which the local run knows
// its functions (the tenantpipeline:source metadata of the templates).
const registerSource = "lambdas/register"

// clientTimeouts is StepFunctionsOptions.LambdaClientTimeout for --register-client-timeout (nil for 0).
func clientTimeouts(d time.Duration) map[string]time.Duration {
	if d == 0 {
		return nil
	}
	return map[string]time.Duration{registerSource: d}
}

// usageError is bad usage: exit 2. hint, if any, is printed on a line of its own.
type usageError struct{ msg, hint string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stdout)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintln(stderr, "local:", err)
		if ue := (*usageError)(nil); errors.As(err, &ue) && ue.hint != "" {
			fmt.Fprintln(stderr, "local:", ue.hint)
		}
		return exitUsage
	}
	for _, w := range o.warnings {
		fmt.Fprintln(stderr, "local: warning:", w)
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "local:", err)
		return exitFailed
	}
	// Synth and the builds have their own limit: on a busy machine they alone can take longer than
	// a whole run. --timeout counts from the upload on.
	setupCtx, cancelSetup := context.WithTimeout(ctx, o.setupTimeout)
	defer cancelSetup()
	setupFailed := func(err error) int {
		if errors.Is(err, context.DeadlineExceeded) && errors.Is(setupCtx.Err(), context.DeadlineExceeded) {
			fmt.Fprintln(stderr, "local:", err)
			fmt.Fprintf(stderr, "local: synth and the builds ran out of --setup-timeout %s (--timeout counts only from the upload on); raise it, e.g. --setup-timeout %s\n", o.setupTimeout, 2*o.setupTimeout)
			return exitTimeout
		}
		return fail(err)
	}

	if err := os.MkdirAll(o.workDir, 0o755); err != nil {
		return fail(err)
	}
	logPath := filepath.Join(o.workDir, "run.log")
	logs, err := os.Create(logPath)
	if err != nil {
		return fail(err)
	}
	defer logs.Close()

	if o.assembly == "" {
		o.assembly = filepath.Join(o.workDir, "cdk.out")
		if err := compileApp(setupCtx, stdout, o.root); err != nil {
			return setupFailed(err)
		}
		fmt.Fprintf(stdout, "phase 1/3: synthesizing %s (cdk synth runs the Go CDK app) ...\n", o.tenants)
		// Tenants without a registerUrl are fine here: the run points every tenant at its own endpoint.
		os.Setenv(tenants.EnvRegisterURL, cmp.Or(o.registerURL, localRegisterURL))
		if err := phase(setupCtx, stdout, "synthesizing", func(ctx context.Context) error { return synthApp(ctx, o.root, o.tenants, o.assembly, nil) }); err != nil {
			return setupFailed(err)
		}
	}
	fmt.Fprintln(stdout, "phase 2/3: starting the emulators (S3, SQS, Step Functions, control plane) and building the Lambda handlers ...")
	env := map[string][]string{}
	if o.haltedRecheck > 0 {
		env[controllerPk] = []string{fmt.Sprintf("HALT_WAIT_SECONDS=%d", int(o.haltedRecheck/time.Second))}
	}
	var r *localrun.Run
	err = phase(setupCtx, stdout, "starting", func(ctx context.Context) error {
		var err error
		r, err = startRun(ctx, localrun.Config{
			ModuleRoot: o.root, Assembly: o.assembly, RegisterURL: o.registerURL, Node: deploy.NodeBinary(o.root), WorkDir: o.workDir, Logs: logs, Progress: stdout, EnvFor: env,
			S3: o.s3, EventBridge: o.eventBridge, Lambda: o.lambda, StepFunctions: o.stepFunctions, Core: o.core,
		})
		return err
	})
	if err != nil {
		return setupFailed(err)
	}
	cancelSetup()
	defer r.Close()
	pipeCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	fmt.Fprintf(stdout, "tenants: %s; logs: %s\n", tenantList(r), logPath)
	for _, f := range o.files {
		if r.Tenant(f.tenant) == nil {
			fmt.Fprintf(stderr, "local: --inbox %s: folder %q is not a tenant of the assembly (tenants: %s)\n", o.inbox, f.tenant, strings.Join(r.TenantIDs(), ", "))
			return exitUsage
		}
	}
	if o.serve {
		if err := writeEnvFile(o.envFile, r.Env()); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "serving; the local endpoints (also in %s; `source` it in another shell):\n", o.envFile)
		for _, kv := range r.Env() {
			fmt.Fprintln(stdout, exportLine(kv))
		}
		fmt.Fprintf(stdout, "then: aws s3 cp x.csv s3://$INGEST_BUCKET/<prefix>x.csv ; go run ./cmd/pipectl status\n")
	}
	fmt.Fprintln(stdout, "phase 3/3: uploading and running")
	if line := uploadOrderLine(o); line != "" {
		fmt.Fprintln(stdout, line)
	}
	for _, f := range o.files {
		body, err := os.ReadFile(f.path)
		if err != nil {
			return fail(err)
		}
		if _, err := r.Upload(pipeCtx, f.tenant, f.rel, body); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "uploaded %s/%s (%d bytes)\n", f.tenant, f.rel, len(body))
	}
	for _, f := range o.withheld {
		name := ""
		if path.Base(f.rel) != f.rel {
			name = " --name " + ops.ShellQuote(f.rel) // pipectl keeps a file's base name by default
		}
		fmt.Fprintf(stdout, "withheld %s/%s (--withhold); to upload it: pipectl upload %s %s%s\n", f.tenant, f.rel, f.tenant, ops.ShellQuote(f.path), name)
	}

	wait := localrun.WaitOptions{Interval: time.Second, Heartbeat: o.heartbeat, StopWhenHalted: true}
	waitCtx := pipeCtx
	if o.serve {
		wait.UntilInterrupted, waitCtx = true, ctx
	}
	waitErr := r.Wait(waitCtx, stdout, wait)
	if ctx.Err() != nil {
		// The emulators are in process groups of their own (the terminal's Ctrl-C reached the
		// runner only), so they still answer the last snapshot.
		fmt.Fprintln(stdout, "interrupted: writing the summary and the report, then stopping the emulators")
	}
	rep, err := r.Snapshot(context.Background())
	if err != nil {
		return fail(err)
	}
	fmt.Fprintln(stdout)
	report.WriteSummary(stdout, rep, r.TenantIDs())
	if c := r.StatusEventCounts(); c.Emitted > 0 || len(c.Throttled) > 0 {
		fmt.Fprintf(stdout, "status events: %d emitted, %d dropped, %d routed, %d asynchronous invocations; throttled: describe %d, start %d\n",
			c.Emitted, c.Dropped, c.Routed, c.Invokes, c.Throttled["DescribeExecution"], c.Throttled["StartExecution"])
	}
	if c := r.StatusEventCounts(); c.DeadLettered > 0 || c.Discarded > 0 {
		fmt.Fprintf(stdout, "asynchronous invocations given up: %d sent to a dead-letter queue, %d discarded\n", c.DeadLettered, c.Discarded)
	}
	if o.report != "" {
		if err := writeReports(o.report, rep, r.TenantIDs()); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "report: %s and %s\n", o.report, report.HTMLPath(o.report))
	}
	code, msg := exitStatus(rep, waitErr, errors.Is(pipeCtx.Err(), context.DeadlineExceeded), o)
	if msg != "" {
		fmt.Fprintln(stderr, "local:", msg)
	}
	return code
}

// writeReports writes the JSON report to path and its picture, the HTML report, beside it, making
// the report's directory if need be (--work may put the run elsewhere than .build/local).
func writeReports(path string, rep *report.Report, ids []string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	var page bytes.Buffer
	if err := report.WriteHTML(&page, rep, ids, time.Now()); err != nil {
		return fmt.Errorf("render the HTML report: %w", err)
	}
	return os.WriteFile(report.HTMLPath(path), page.Bytes(), 0o644)
}

// exitStatus is the run's exit status and the line that explains a non-zero one.
func exitStatus(rep *report.Report, waitErr error, timedOut bool, o *options) (int, string) {
	var halted *localrun.HaltedError
	failed := failedFiles(rep)
	switch {
	case len(rep.Violations) > 0:
		return exitFailed, fmt.Sprintf("%d invariant(s) violated", len(rep.Violations))
	case o.serve:
		return exitOK, "" // interrupted, as asked
	case errors.As(waitErr, &halted):
		return exitHalted, fmt.Sprintf("%v; exit %d", waitErr, exitHalted)
	case waitErr != nil && timedOut:
		return exitTimeout, fmt.Sprintf("not drained after %s", o.timeout)
	case waitErr != nil:
		return exitFailed, waitErr.Error()
	case o.failOnFailed && len(failed) > 0:
		return exitFailed, fmt.Sprintf("%d file(s) did not succeed (--fail-on-failed-files): %s", len(failed), strings.Join(failed, ", "))
	}
	return exitOK, ""
}

// phase runs a slow step, saying every 15 s that it is still going.
func phase(ctx context.Context, w io.Writer, what string, f func(context.Context) error) error {
	done := make(chan struct{})
	defer close(done)
	start := time.Now()
	go func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "  still %s (%.0fs) ...\n", what, time.Since(start).Seconds())
			}
		}
	}()
	return f(ctx)
}

func failedFiles(rep *report.Report) []string {
	var out []string
	for _, id := range sortedKeys(rep.Tenants) {
		for _, f := range rep.Tenants[id].Files {
			if f.Status != "SUCCEEDED" {
				out = append(out, id+" "+f.Key+" ("+f.Status+")")
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// exportLine is NAME=value as a POSIX shell export, single-quoted.
func exportLine(kv string) string {
	k, v, _ := strings.Cut(kv, "=")
	return "export " + k + "='" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

func writeEnvFile(path string, env []string) error {
	var b strings.Builder
	b.WriteString("# The local run's endpoints (go run ./cmd/local --serve); source this file: . " + path + "\n")
	for _, kv := range env {
		b.WriteString(exportLine(kv) + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

type inboxFile struct{ tenant, rel, path string }

// inboxFiles lists DIR/<tenant>/<relative path>, in lexical order of tenant and relative path.
func inboxFiles(dir string) ([]inboxFile, error) {
	var out []inboxFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		tenant, path, ok := strings.Cut(filepath.ToSlash(rel), "/")
		if !ok {
			return fmt.Errorf("%s: files go under %s/<tenant-id>/", p, dir)
		}
		out = append(out, inboxFile{tenant, path, p})
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].tenant != out[j].tenant {
			return out[i].tenant < out[j].tenant
		}
		return out[i].rel < out[j].rel
	})
	return out, err
}

// tenantList names the run's tenants by tier: "silo: acme, globex; pool default: hooli, umbrella".
func tenantList(r *localrun.Run) string {
	var silo []string
	pools := map[string][]string{}
	var poolNames []string
	for _, id := range r.TenantIDs() {
		t := r.Tenant(id)
		if t.Tier != localrun.TierPool {
			silo = append(silo, id)
			continue
		}
		if pools[t.Pool] == nil {
			poolNames = append(poolNames, t.Pool)
		}
		pools[t.Pool] = append(pools[t.Pool], id)
	}
	var parts []string
	if len(silo) > 0 {
		parts = append(parts, "silo: "+strings.Join(silo, ", "))
	}
	for _, p := range poolNames {
		parts = append(parts, "pool "+p+": "+strings.Join(pools[p], ", "))
	}
	return strings.Join(parts, "; ")
}
