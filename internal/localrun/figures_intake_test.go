//go:build figures

package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/tenants"
)

// intakeFigureTenants is one pool of tenants whose ids begin with 32 different characters, with
// its intakeGroups (0: none, the per-tenant intake).
func intakeFigureTenants(pool string, tenants, groups int) string {
	const first = "abcdefghijklmnopqrstuvwxyz012345"
	var rows []string
	for i := range tenants {
		rows = append(rows, fmt.Sprintf(`{"id": "%c%03d", "tier": "pool", "pool": %q, "registerUrl": "https://core.example.com/records"}`, first[i%len(first)], i, pool))
	}
	// maxQueuedFilesPerTenant above the burst's files per tenant: the controller's mapping is off,
	// so nothing would unpark, and the figure is the router's rate into the pool queue.
	return fmt.Sprintf(`{"pools": {%q: {"intakeGroups": %d, "maxQueuedFilesPerTenant": 1000}}, "tenants": [%s]}`, pool, groups, strings.Join(rows, ",\n"))
}

// intakeFigureAWSLatency is added to each S3, SQS and DynamoDB call of the router while it routes
// the burst (Run.SetAWSCallLatency): the round trip of a call to AWS, where the emulators answer on
// loopback in about a millisecond and 16 routers would otherwise compete for the machine's cores
// rather than wait on the network. AWS publishes no round-trip figure for SQS, and DynamoDB's
// "single-digit millisecond" is the service's own (https://aws.amazon.com/dynamodb/): 30 ms is an
// assumption, a slow round trip, printed with the figure. At 20 ms the routers' CPU on a loaded
// 2-core machine still bounded the sharded rate (ratio 9.7 at a load average of 15).
const intakeFigureAWSLatency = 30 * time.Millisecond

// defaultIntakeGroups is the sharded intake's default.
const defaultIntakeGroups = tenants.DefaultPoolIntakeGroups

// TestFiguresPoolIntake measures the pool-intake figure (make figures): the same burst of "Object
// Created" events routed by the sharded intake (16 message groups, SendMessageBatch), by the
// per-tenant intake (a group per tenant, 16 router invocations at once) and by the
// intake as it was (one message group, one SendMessage a message: intakeGroups 1 and
// ROUTER_SEND_BATCH_SIZE=1), one pool after the other in one test (the local run names the state
// machines by logical id, which two pool stacks share), each call of the router taking
// intakeFigureAWSLatency. The controller's mapping is off, so nothing but the router runs; the
// burst waits in the intake, then the router's mapping is turned on and the rate is the burst over
// the time until the intake is empty. It asserts what routing must keep (every event on the pool
// queue once, each tenant's in order), never a rate.
func TestFiguresPoolIntake(t *testing.T) {
	const tenants, files = 64, 16
	sharded := routeBurst(t, "sharded", defaultIntakeGroups, nil, tenants, files, true)
	single := routeBurst(t, "single", 1, []string{pipeline.EnvRouterSendBatchSize + "=1"}, tenants, files, false)
	perTenant := routeBurst(t, "pertenant", 0, nil, tenants, files, false)
	fmt.Printf("pool-intake: sharded %.0f events/s, single group %.0f events/s, ratio %.1f (emulated %d ms per AWS call)\n",
		sharded.rate, single.rate, sharded.rate/single.rate, intakeFigureAWSLatency.Milliseconds())
	fmt.Printf("pool-intake: per-tenant %.0f events/s, sharded %.0f events/s, ratio %.2f\n", perTenant.rate, sharded.rate, perTenant.rate/sharded.rate)
	fmt.Println(sharded.burst(10000, 10))
	t.Logf("measured: router %.1f ms an invocation; per file %.2f executions started, %.1f state transitions, %.0f ms of controller, Split and Register (%.0f ms of controller)",
		sharded.batchMillis, sharded.startsPerFile, sharded.transitionsPerFile, sharded.lambdaMillisPerFile, sharded.controllerMillisPerFile)
}

// burstCosts are what the sharded run measured per call and per file.
type burstCosts struct {
	rate float64
	// batchMillis is the router's billed duration per invocation (one intake batch, one
	// SendMessageBatch call per up to 10 events), init phases and the emulated AWS latency included.
	batchMillis float64
	// Per file, once the files were registered: executions started (the file's and its segments'),
	// state transitions, billed Lambda milliseconds of the controller, Split and Register, and of
	// the controller alone.
	startsPerFile, transitionsPerFile, lambdaMillisPerFile, controllerMillisPerFile float64
}

// AWS's default quotas the burst estimate uses, us-east-1:
//   - Lambda: 1,000 concurrent executions per account and Region
//     (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html);
//   - Step Functions StartExecution: a bucket of 1,300 refilled at 300 per second, and Standard
//     state transitions at 5,000 per second
//     (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html). Whether a
//     workflow's own start of a child execution counts against StartExecution's bucket is not
//     said there; the estimate counts it, the longer answer.
const (
	burstLambdaConcurrency = 1000
	burstStartBucket       = 1300
	burstStartRefill       = 300
	burstTransitionsPerSec = 5000
	burstIntakeGroups      = tenants.DefaultPoolIntakeGroups
	burstEventsPerBatch    = 10
	// burstControllers is the pool's default maximumConcurrency: a setting, not a quota, but it caps
	// the controller invocations every file needs.
	burstControllers = tenants.DefaultPoolMaximumConcurrency
)

// burst is the "burst:" line: tenants × files small files dropped at once into one pool, the time
// to route them (the default 16 intake groups, each a sequence of router invocations of 10 events
// at the measured cost) and the time to register them at the default quotas, named by the one that
// bounds it. docs/local-run.md, "Pool intake", has the arithmetic.
func (c burstCosts) burst(tenants, files int) string {
	n := float64(tenants * files)
	batches := n / (burstIntakeGroups * burstEventsPerBatch) // per group, the groups at once
	route := batches * c.batchMillis / 1000
	bounds := []struct {
		what string
		secs float64
	}{
		{fmt.Sprintf("StartExecution %d/s refill: %.1f starts a file", burstStartRefill, c.startsPerFile), max(0, n*c.startsPerFile-burstStartBucket) / burstStartRefill},
		{fmt.Sprintf("state transitions %d/s: %.1f a file", burstTransitionsPerSec, c.transitionsPerFile), n * c.transitionsPerFile / burstTransitionsPerSec},
		{fmt.Sprintf("Lambda concurrency %d: %.0f ms a file", burstLambdaConcurrency, c.lambdaMillisPerFile), n * c.lambdaMillisPerFile / 1000 / burstLambdaConcurrency},
		{fmt.Sprintf("the pool's maximumConcurrency %d: %.0f ms of controller a file", burstControllers, c.controllerMillisPerFile), n * c.controllerMillisPerFile / 1000 / burstControllers},
	}
	bound := bounds[0]
	for _, b := range bounds[1:] {
		if b.secs > bound.secs {
			bound = b
		}
	}
	return fmt.Sprintf("burst: %d tenants x %d files: route %.0f s, register %.0f s (%s)", tenants, files, route, bound.secs, bound.what)
}

// routeBurst starts a run of one pool, uploads files small files of each of its tenants, their
// events waiting in the intake, and measures the rate at which the router empties it. With register
// it then lets the controller register the files and measures their costs per file.
func routeBurst(t *testing.T, pool string, groups int, routerEnv []string, tenants, files int, register bool) burstCosts {
	t.Helper()
	r := startScenario(t, intakeFigureTenants(pool, tenants, groups), Config{EnvForPool: map[string][]string{pool: routerEnv}})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var router, controller *esm
	var intake, queue *Queue
	prefix := ""
	for _, f := range r.functions {
		if f.Pool != pool {
			continue
		}
		if f.PoolSettings != nil { // the controller's and the router's: their settings asset
			prefix = f.PoolSettings.Prefix
		}
		for _, e := range r.esms {
			switch {
			case e.FunctionArn != f.ARN:
			case f.Role == pipeline.FunctionRoleRouter:
				router, intake = e, r.queues[e.EventSourceArn]
			default:
				controller, queue = e, r.queues[e.EventSourceArn]
			}
		}
	}
	if router == nil || controller == nil || intake == nil || queue == nil {
		t.Fatalf("pool %s: want its router and controller mappings and queues", pool)
	}
	router.SetEnabled(false)
	controller.SetEnabled(false)
	// Each tenant's files in order, the tenants interleaved, as a night's drop arrives.
	for n := range files {
		for _, tn := range r.Tenants {
			if _, err := r.Upload(ctx, tn.ID, fmt.Sprintf("%02d.csv", n), []byte(fmt.Sprintf("id,name\n%d,file %d\n", n, n))); err != nil {
				t.Fatal(err)
			}
		}
	}
	events := tenants * files
	if n := depth(t, ctx, r, intake); n != events {
		t.Fatalf("pool %s: intake holds %d events, want %d", pool, n, events)
	}
	r.SetAWSCallLatency(intakeFigureAWSLatency)
	start := time.Now()
	router.SetEnabled(true)
	for depth(t, ctx, r, intake) > 0 {
		sleep(ctx, 10*time.Millisecond)
	}
	c := burstCosts{rate: float64(events) / time.Since(start).Seconds()}
	// The register costs below are measured as before, without it.
	r.SetAWSCallLatency(0)
	checkRouted(t, ctx, r, queue, prefix, tenants, files)
	// Split and Register have no POOL variable; the controller has, without a FUNCTION_ROLE.
	isController := func(f *emulate.Function) bool { return f.Pool == pool && f.Role == "" }
	var others, controllers int64
	for _, f := range r.functions {
		u := f.Usage()
		switch {
		case f.Pool == pool && f.Role == pipeline.FunctionRoleRouter:
			c.batchMillis = float64(u.BilledMillis) / float64(max(u.Requests, 1))
		default:
			others -= u.BilledMillis // before registering
			if isController(f) {
				controllers -= u.BilledMillis
			}
		}
	}
	if !register {
		return c
	}
	controller.SetEnabled(true)
	assertInvariants(t, r, drain(t, ctx, r), nil, false)
	st, err := r.sfnStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range st.Executions {
		c.startsPerFile++
		c.transitionsPerFile += float64(e.StateTransitions)
	}
	for _, f := range r.functions {
		if f.Role != pipeline.FunctionRoleRouter {
			others += f.Usage().BilledMillis
			if isController(f) {
				controllers += f.Usage().BilledMillis
			}
		}
	}
	c.startsPerFile /= float64(events)
	c.transitionsPerFile /= float64(events)
	c.lambdaMillisPerFile = float64(others) / float64(events)
	c.controllerMillisPerFile = float64(controllers) / float64(events)
	return c
}

func depth(t *testing.T, ctx context.Context, r *Run, q *Queue) int {
	t.Helper()
	n, err := r.queueDepth(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkRouted checks the pool queue as fauxqs holds it: each tenant's group has its files once
// each, in the order they were written.
func checkRouted(t *testing.T, ctx context.Context, r *Run, q *Queue, prefix string, tenants, files int) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.sqsURL+"/_fauxqs/queues/"+url.PathEscape(q.Name), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Messages struct {
			Ready []struct {
				MessageGroupID string `json:"messageGroupId"`
				Body           string `json:"body"`
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	for _, m := range body.Messages.Ready {
		var ev struct {
			Detail struct{ Object struct{ Key string } }
		}
		if err := json.Unmarshal([]byte(m.Body), &ev); err != nil {
			t.Fatalf("pool queue %s: %v", q.Name, err)
		}
		keys[m.MessageGroupID] = append(keys[m.MessageGroupID], ev.Detail.Object.Key)
	}
	if len(keys) != tenants {
		t.Errorf("pool queue %s: got %d tenants' groups, want %d", q.Name, len(keys), tenants)
	}
	for group, ks := range keys {
		var want []string
		for n := range files {
			want = append(want, fmt.Sprintf("%s%s/%02d.csv", prefix, group, n))
		}
		if strings.Join(ks, " ") != strings.Join(want, " ") {
			t.Errorf("pool queue %s, tenant %s: got %v, want each file once, in order: %v", q.Name, group, ks, want)
		}
	}
}
