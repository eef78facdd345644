// Command local runs the synthesized tenant pipeline end to end on this machine, with emulators
// on loopback and the real Lambda handlers; docs/local-run.md describes it and its flags.
//
//	go run ./cmd/local [--tenants FILE] [--inbox DIR] [--register-url URL] [--report FILE] [--timeout 10m] [--event-key-form raw|form]
//
// Exit status: 0 when every upload drained and every invariant held; 1 when an invariant broke or
// the run failed; 2 on bad usage; 3 when the pipeline had not drained by --timeout.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/example/tenantpipeline/internal/localrun"
	tenantcfg "github.com/example/tenantpipeline/internal/tenants"
)

// localRegisterURL stands in for the registerUrl of tenants that have none while synthesizing; the
// run replaces every tenant's endpoint with --register-url or the embedded sink's.
const localRegisterURL = "http://127.0.0.1/supplied-by-the-local-run"

func main() {
	os.Exit(run())
}

func run() int {
	cwd, _ := os.Getwd()
	root, err := localrun.ModuleRoot(cwd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		return 2
	}
	tenants := flag.String("tenants", filepath.Join(root, "tenants.json"), "tenants config to synthesize the app with")
	inbox := flag.String("inbox", filepath.Join(root, "local/inbox"), "files to upload: DIR/<tenant-id>/<relative path>")
	registerURL := flag.String("register-url", "", "core-system endpoint every tenant registers to (default: an embedded sink that checks order and idempotency)")
	report := flag.String("report", "", "write the JSON report to this file")
	timeout := flag.Duration("timeout", 10*time.Minute, "exit non-zero if the pipeline has not drained by then")
	assembly := flag.String("cdk-out", "", "use this synthesized cloud assembly instead of synthesizing --tenants")
	workDir := flag.String("work", filepath.Join(root, ".build/local"), "where binaries, the assembly and logs go")
	keyForm := flag.String("event-key-form", localrun.EventKeyRaw, "how Object Created events carry the object key: raw (as written) or form (form-encoded, as S3 event notifications: a space as +)")
	// Issue 11: a slow core system (and DynamoDB table) for measuring the sinks.
	sinkLatency := flag.Duration("sink-latency", 0, "add this latency to every request of the embedded sink and of the local DynamoDB (e.g. 10ms)")
	// Step Functions status change events and throttling (docs/local-run.md).
	dropStatus := flag.Float64("drop-status-events", 0, "fraction (0-1) of Step Functions status change events lost before routing")
	dupStatus := flag.Bool("duplicate-status-events", false, "route every Step Functions status change event twice")
	throttleDescribe := flag.Float64("throttle-describe", 0, "fraction (0-1) of the pipeline's DescribeExecution calls answered ThrottlingException")
	throttleStart := flag.Float64("throttle-start", 0, "fraction (0-1) of the pipeline's StartExecution calls answered ThrottlingException")
	faultSeed := flag.Uint64("fault-seed", 0, "seed of the drops and throttles (0: a fixed default), for a repeatable run")
	flag.Parse()
	fractionsOK := true
	for _, f := range []float64{*dropStatus, *throttleDescribe, *throttleStart} {
		fractionsOK = fractionsOK && f >= 0 && f <= 1
	}
	if flag.NArg() > 0 || (*keyForm != localrun.EventKeyRaw && *keyForm != localrun.EventKeyForm) || *sinkLatency < 0 || !fractionsOK {
		flag.Usage()
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	deadline, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	if err := os.MkdirAll(*workDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		return 1
	}
	logPath := filepath.Join(*workDir, "run.log")
	logs, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		return 1
	}
	defer logs.Close()

	if *assembly == "" {
		*assembly = filepath.Join(*workDir, "cdk.out")
		fmt.Printf("synthesizing %s ...\n", *tenants)
		// Tenants without a registerUrl are fine here: the run points every tenant at its own endpoint.
		os.Setenv(tenantcfg.EnvRegisterURL, cmp.Or(*registerURL, localRegisterURL))
		if err := localrun.Synth(deadline, root, *tenants, *assembly); err != nil {
			fmt.Fprintln(os.Stderr, "local:", err)
			return 1
		}
	}
	fmt.Println("starting emulators (S3, SQS, Step Functions) and building the Lambda handlers ...")
	r, err := localrun.Start(deadline, localrun.Config{
		ModuleRoot: root, Assembly: *assembly, RegisterURL: *registerURL, Node: localrun.NodeBinary(root), WorkDir: *workDir, Logs: logs,
		EventKeyForm: *keyForm, SinkLatency: *sinkLatency,
		StatusEvents: localrun.StatusEvents{Drop: *dropStatus, Duplicate: *dupStatus, Seed: *faultSeed},
		SFNThrottle:  localrun.SFNThrottle{DescribeExecution: *throttleDescribe, StartExecution: *throttleStart, Seed: *faultSeed},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		return 1
	}
	defer r.Close()
	fmt.Printf("tenants: %s; logs: %s\n", strings.Join(r.TenantIDs(), ", "), logPath)

	files, err := inboxFiles(*inbox)
	if err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		return 2
	}
	for _, f := range files {
		body, err := os.ReadFile(f.path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "local:", err)
			return 1
		}
		if _, err := r.Upload(deadline, f.tenant, f.rel, body); err != nil {
			fmt.Fprintln(os.Stderr, "local:", err)
			return 1
		}
		fmt.Printf("uploaded %s/%s (%d bytes)\n", f.tenant, f.rel, len(body))
	}

	drainErr := r.WaitDrained(deadline, os.Stdout, time.Second)
	rep, err := r.Snapshot(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		return 1
	}
	fmt.Println()
	localrun.WriteSummary(os.Stdout, rep, r.TenantIDs())
	if c := r.StatusEventCounts(); c.Emitted > 0 || len(c.Throttled) > 0 {
		fmt.Printf("status events: %d emitted, %d dropped, %d routed, %d asynchronous invocations; throttled: describe %d, start %d\n",
			c.Emitted, c.Dropped, c.Routed, c.Invokes, c.Throttled["DescribeExecution"], c.Throttled["StartExecution"])
	}
	if *report != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*report, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "local:", err)
			return 1
		}
	}
	switch {
	case drainErr != nil && errors.Is(deadline.Err(), context.DeadlineExceeded):
		fmt.Fprintf(os.Stderr, "local: not drained after %s\n", *timeout)
		return 3
	case drainErr != nil:
		fmt.Fprintln(os.Stderr, "local:", drainErr)
		return 1
	case len(rep.Violations) > 0:
		return 1
	}
	return 0
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
