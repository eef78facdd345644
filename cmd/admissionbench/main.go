// Command admissionbench measures admission under a burst: N tenants each drop one file at once
// into one gate of -slots running-file slots, and files run -file-seconds each. It runs the real
// internal/admission store and the controller's waiting and release path against the local
// DynamoDB (dynalite), on a scaled (simulated) clock, with asks and releases served by at most
// -controllers concurrent controller invocations, and prints one line per design and size:
//
//	admission: push N=1000: utilization 98.9 %; 3.00 invocations, 19.1 requests, 7.0 read units per admitted file; last first start 201 s of ideal 200 s (1.01x); weight 5:1 admitted 5.0x
//
// beside the same line for the reference design that waits by polling (cmd/admissionbench/pollref
// with the controller's old asking pace), in the same run, and the ratio of the two.
//
// The clock: time stands still while a controller works; each invocation lasts -invocation-ms plus
// -call-ms per DynamoDB request it made (emulated service latency), and a controller serves the next
// event only once its invocation has ended. A message made visible is delivered -delivery-ms later;
// a file's status event arrives -event-ms after it ends. Read units are DynamoDB's own count
// (ReturnConsumedCapacity TOTAL, computed by the emulator from the item sizes as DynamoDB bills:
// 4 KB per strongly consistent read unit, a Query billed on the items it read).
//
// The polling design asks many times a second at 10,000 waiting tenants; its run stops after
// -poll-window of simulated time (it is measured over that window, and its last first start is
// reported as beyond it when not reached).
package main

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/example/tenantpipeline/cmd/admissionbench/pollref"
	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/schema"
)

type options struct {
	sizes        []int
	slots        int
	fileDur      time.Duration
	controllers  int
	invocation   time.Duration
	perCall      time.Duration
	delivery     time.Duration
	event        time.Duration
	safetyNet    time.Duration
	pollWindow   time.Duration
	designs      []string
	strict       bool
	root         string
	verbose      bool
	maxWallClock time.Duration
	// loseEvery, when positive, loses every loseEvery'th wake-up of a handover (push): the
	// woken message is never made visible, as when its ChangeMessageVisibility fails.
	loseEvery int
	// reconcileTimer, when positive, is the reconciler's schedule (push): the gate is reconciled
	// every reconcileTimer, as the scheduled rule invokes a controller, beside its asks and releases.
	reconcileTimer time.Duration
}

func main() {
	var o options
	sizes := flag.String("tenants", "1000,10000", "comma-separated numbers of waiting tenants")
	designs := flag.String("designs", "push,poll", "designs to run: push (internal/admission), poll (the polling reference)")
	flag.IntVar(&o.slots, "slots", 50, "the gate's running-file slots")
	flag.DurationVar(&o.fileDur, "file-seconds", 10*time.Second, "how long each file runs")
	flag.IntVar(&o.controllers, "controllers", 10, "concurrent controller invocations at most")
	flag.DurationVar(&o.invocation, "invocation-ms", 5*time.Millisecond, "simulated duration of an invocation, beside its DynamoDB calls")
	flag.DurationVar(&o.perCall, "call-ms", 4*time.Millisecond, "simulated latency of one DynamoDB request")
	flag.DurationVar(&o.delivery, "delivery-ms", 50*time.Millisecond, "simulated delay from a message made visible to its delivery")
	flag.DurationVar(&o.event, "event-ms", 150*time.Millisecond, "simulated delay from a file's end to its status event")
	flag.DurationVar(&o.safetyNet, "safety-net", 5*time.Minute, "how long a waiting file's message is held (push)")
	flag.DurationVar(&o.pollWindow, "poll-window", 3*time.Minute, "simulated time after which the polling design's run stops")
	flag.DurationVar(&o.maxWallClock, "max-wall", 20*time.Minute, "wall-clock time after which a run stops")
	flag.IntVar(&o.loseEvery, "lose-every", 100, "the lost wake-up case: lose every this many handovers' wake-ups (0: no such case)")
	flag.DurationVar(&o.reconcileTimer, "reconcile-timer", time.Minute, "the reconciler's schedule: the gate is also reconciled this often, as the scheduled rule does (0: only on asks and releases)")
	flag.BoolVar(&o.strict, "strict", false, "exit 3 when the push design misses a goal")
	flag.BoolVar(&o.verbose, "v", false, "progress on stderr")
	flag.StringVar(&o.root, "root", ".", "the project's root (node_modules, local/dynalite)")
	flag.Parse()
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "admissionbench: -tenants %q: want positive numbers\n", *sizes)
			os.Exit(2)
		}
		o.sizes = append(o.sizes, n)
	}
	o.designs = strings.Split(*designs, ",")
	if err := run(o); err != nil {
		var miss goalMissed
		if errors.As(err, &miss) {
			fmt.Fprintln(os.Stderr, "admissionbench:", err)
			os.Exit(3)
		}
		fmt.Fprintln(os.Stderr, "admissionbench:", err)
		os.Exit(1)
	}
}

type goalMissed string

func (g goalMissed) Error() string { return "goal missed: " + string(g) }

func run(o options) error {
	ctx := context.Background()
	root, err := filepath.Abs(o.root)
	if err != nil {
		return err
	}
	url, stop, err := emulate.StartDynalite(ctx, deploy.NodeBinary(root), root, io.Discard)
	if err != nil {
		return fmt.Errorf("start dynalite (make setup installs it): %w", err)
	}
	defer stop()
	var missed []string
	results := map[string]map[int]result{}
	for _, design := range o.designs {
		results[design] = map[int]result{}
		for _, n := range o.sizes {
			plain := o
			plain.loseEvery = 0
			res, err := simulate(ctx, plain, url, design, n, false)
			if err != nil {
				return fmt.Errorf("%s N=%d: %w", design, n, err)
			}
			results[design][n] = res
			fmt.Println(res.line(o))
		}
	}
	// Weighted fairness: a weight-5 and a weight-1 tenant that always have a next file, beside a
	// burst of the smallest size, over the same window.
	for _, design := range o.designs {
		plain := o
		plain.loseEvery = 0
		res, err := simulate(ctx, plain, url, design, o.sizes[0], true)
		if err != nil {
			return fmt.Errorf("%s weights: %w", design, err)
		}
		fmt.Printf("admission: %s weights beside a burst of N=%d: weight 5 admitted %s as often as weight 1 over the same %.0f s (goal ≥ 4x)\n",
			design, o.sizes[0], ratio(res.heavy, res.light), res.makespan.Seconds())
		if design == "push" && (res.light == 0 || res.heavy < 4*res.light) {
			missed = append(missed, "weight 5 admitted "+ratio(res.heavy, res.light))
		}
	}
	// Lost wake-ups: every loseEvery'th handover's wake-up is lost; the reconciler hands each such
	// slot on, and wakes its waiter again, within one reconcile period of the reservation's end.
	if _, ok := results["push"]; ok && o.loseEvery > 0 {
		lo := o
		res, err := simulate(ctx, lo, url, "push", o.sizes[0], false)
		if err != nil {
			return fmt.Errorf("push lost wake-ups: %w", err)
		}
		// The reconciler runs on the gate's asks and releases, and on its schedule (-reconcile-timer):
		// without the schedule, a wake-up lost at the burst's tail, after the gate's last ask and
		// release, waits for its file's own hold.
		fmt.Printf("admission: push N=%d with a lost wake-up every %d handovers, reconciler schedule %s: %d lost, %d handed on within one reconcile period (%.0f s) of the reservation's end, %d within one reconciler period (%s), %d later or never (the slowest %.1f s); utilization %.1f %%, %.2f invocations per file\n",
			o.sizes[0], o.loseEvery, timerName(o.reconcileTimer), res.lost, res.inPeriod, admission.DefaultReconcileEvery.Seconds(), res.inTimer, timerName(o.reconcileTimer),
			res.lost-res.inTimer, res.slowestHandOn.Seconds(), 100*res.utilization(), res.invocationsPerFile())
		if res.lost == 0 || res.inTimer < res.lost {
			missed = append(missed, fmt.Sprintf("lost wake-ups: %d of %d handed on within one reconciler period", res.inTimer, res.lost))
		}
	}
	push := results["push"]
	if len(push) > 0 {
		small, large := push[o.sizes[0]], push[o.sizes[len(o.sizes)-1]]
		if len(o.sizes) > 1 {
			growth := large.readUnitsPerFile() / small.readUnitsPerFile()
			fmt.Printf("admission: push read units per file %d → %d tenants: %.2fx (goal ≤ 1.2x)\n", o.sizes[0], o.sizes[len(o.sizes)-1], growth)
			if growth > 1.2 {
				missed = append(missed, fmt.Sprintf("read units grew %.2fx", growth))
			}
		}
		for _, n := range o.sizes {
			r := push[n]
			if p, ok := results["poll"][n]; ok {
				fmt.Printf("admission: N=%d push/poll: utilization %.1f %% / %.1f %% (%.1fx), invocations per file %.2f / %.2f (%.1fx fewer), read units per file %.1f / %.1f (%.1fx fewer)\n",
					n, 100*r.utilization(), 100*p.utilization(), r.utilization()/p.utilization(),
					r.invocationsPerFile(), p.invocationsPerFile(), p.invocationsPerFile()/r.invocationsPerFile(),
					r.readUnitsPerFile(), p.readUnitsPerFile(), p.readUnitsPerFile()/r.readUnitsPerFile())
			}
			missed = append(missed, r.goals(o)...)
		}
	}
	if len(missed) > 0 {
		fmt.Fprintln(os.Stderr, "admissionbench: push design missed:", strings.Join(missed, "; "))
		if o.strict {
			return goalMissed(strings.Join(missed, "; "))
		}
	}
	return nil
}

// result is one simulated burst.
type result struct {
	design        string
	tenants       int
	admitted      int // files of the N tenants admitted
	invocations   int // controller invocations that asked admission or released
	requests      int64
	readUnits     float64
	writeUnits    float64
	busy          time.Duration // slot-seconds of running files within the makespan
	runs          [][2]time.Duration
	makespan      time.Duration // the simulated time the run covered
	lastFirst     time.Duration // the last of the N tenants' first starts
	allStarted    bool
	heavy, light  int // admissions of the weight-5 and weight-1 tenants that always have a next file
	weights       bool
	stoppedEarly  bool
	wall          time.Duration
	maxConcurrent int
	// The lost wake-up case: wake-ups lost, their slots handed on by the reconciler, and the
	// longest from a lost reservation's end to its slot's handing on.
	lost, handedOn, inPeriod int
	slowestHandOn            time.Duration
	// inTimer: lost wake-ups handed on within one reconciler period: the schedule's
	// (-reconcile-timer), or the reconcile period without one.
	inTimer int
}

// timerName names the reconciler's schedule of the lost wake-up case.
func timerName(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return d.String()
}

func (r result) utilization() float64 {
	if r.makespan <= 0 {
		return 0
	}
	return float64(r.busy) / float64(time.Duration(r.slots())*r.makespan)
}

var slotsForResults int

func (r result) slots() int { return slotsForResults }

func (r result) files() float64 { return float64(max(1, r.admitted+r.heavy+r.light)) }

func (r result) invocationsPerFile() float64 { return float64(r.invocations) / r.files() }
func (r result) requestsPerFile() float64    { return float64(r.requests) / r.files() }
func (r result) readUnitsPerFile() float64   { return r.readUnits / r.files() }

func (r result) ideal(o options) time.Duration {
	return time.Duration(float64(r.tenants) / float64(o.slots) * float64(o.fileDur))
}

func (r result) line(o options) string {
	first := fmt.Sprintf("last first start %.0f s of ideal %.0f s (%.2fx)", r.lastFirst.Seconds(), r.ideal(o).Seconds(),
		r.lastFirst.Seconds()/r.ideal(o).Seconds())
	if !r.allStarted {
		first = fmt.Sprintf("last first start beyond the %.0f s measured (ideal %.0f s; %d of %d tenants started)",
			r.makespan.Seconds(), r.ideal(o).Seconds(), r.admitted, r.tenants)
	}
	window := ""
	if r.stoppedEarly {
		window = fmt.Sprintf(" (measured over %.0f s simulated)", r.makespan.Seconds())
	}
	return fmt.Sprintf("admission: %s N=%d, %d slots, %s files, %d controllers%s: utilization %.1f %%; %.2f invocations, %.1f DynamoDB requests, %.1f read units, %.1f write units per admitted file; %s; %.0f s wall",
		r.design, r.tenants, o.slots, o.fileDur, o.controllers, window, 100*r.utilization(), r.invocationsPerFile(), r.requestsPerFile(),
		r.readUnitsPerFile(), r.writeUnits/r.files(), first, r.wall.Seconds())
}

func ratio(a, b int) string {
	if b == 0 {
		return fmt.Sprintf("%d:0", a)
	}
	return fmt.Sprintf("%.1fx (%d:%d)", float64(a)/float64(b), a, b)
}

func (r result) goals(o options) []string {
	var missed []string
	if u := r.utilization(); u < 0.95 {
		missed = append(missed, fmt.Sprintf("N=%d utilization %.1f %% < 95 %%", r.tenants, 100*u))
	}
	if v := r.invocationsPerFile(); v > 3 {
		missed = append(missed, fmt.Sprintf("N=%d %.2f invocations per file > 3", r.tenants, v))
	}
	if v := r.readUnitsPerFile(); v > 10 {
		missed = append(missed, fmt.Sprintf("N=%d %.1f read units per file > 10", r.tenants, v))
	}
	if !r.allStarted || r.lastFirst.Seconds() > 1.1*r.ideal(o).Seconds() {
		missed = append(missed, fmt.Sprintf("N=%d last first start %.0f s > 1.1 × ideal %.0f s", r.tenants, r.lastFirst.Seconds(), r.ideal(o).Seconds()))
	}
	return missed
}

// meter counts a store's DynamoDB requests and the capacity DynamoDB reports for them.
type meter struct {
	db                admission.ItemAPI
	requests          atomic.Int64
	readMilli, wMilli atomic.Int64
}

func (m *meter) add(c *types.ConsumedCapacity, read bool) {
	m.requests.Add(1)
	if c == nil || c.CapacityUnits == nil {
		return
	}
	if read {
		m.readMilli.Add(int64(*c.CapacityUnits * 1000))
	} else {
		m.wMilli.Add(int64(*c.CapacityUnits * 1000))
	}
}

func (m *meter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.GetItem(ctx, in, o...)
	if out != nil {
		m.add(out.ConsumedCapacity, true)
	} else {
		m.requests.Add(1)
	}
	return out, err
}

func (m *meter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.Query(ctx, in, o...)
	if out != nil {
		m.add(out.ConsumedCapacity, true)
	} else {
		m.requests.Add(1)
	}
	return out, err
}

func (m *meter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.PutItem(ctx, in, o...)
	if out != nil {
		m.add(out.ConsumedCapacity, false)
	} else {
		m.requests.Add(1)
	}
	return out, err
}

func (m *meter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.UpdateItem(ctx, in, o...)
	if out != nil {
		m.add(out.ConsumedCapacity, false)
	} else {
		m.requests.Add(1)
	}
	return out, err
}

func (m *meter) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.DeleteItem(ctx, in, o...)
	if out != nil {
		m.add(out.ConsumedCapacity, false)
	} else {
		m.requests.Add(1)
	}
	return out, err
}

// event is one thing that happens at a simulated time: a delivery of a tenant's head message, or
// the status event of its running file.
type event struct {
	at      time.Duration
	seq     int
	kind    int
	tenant  int
	receipt int // deliveries: the receive this delivery's visibility belongs to
}

const (
	evDeliver = iota
	evStatus
	evTimer // the reconciler's schedule
)

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	return cmp.Or(cmp.Compare(e[i].at, e[j].at), cmp.Compare(e[i].seq, e[j].seq)) < 0
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// tenant is one tenant's head message and file.
type tenant struct {
	id        string
	weight    int
	file      int // the file's number; the always-busy tenants have many
	execution string
	receipt   int // the current receive (0: none yet)
	inFlight  bool
	attempt   int
	started   bool
	startedAt time.Duration
	firstAt   time.Duration
	hadFirst  bool
	endless   bool // always has a next file (the weight comparison)
	done      bool
}

// gateway is a design's admission as the controller uses it.
type gateway interface {
	// ask is one delivery of the tenant's message: admitted, or held for again; wakes are the
	// tenants whose messages to make visible.
	ask(ctx context.Context, t *tenant, now time.Duration) (admitted bool, again time.Duration, wakes []int, err error)
	release(ctx context.Context, t *tenant, now time.Duration) (wakes []int, err error)
	// tick is the reconciler's scheduled run.
	tick(ctx context.Context, now time.Duration) (wakes []int, err error)
}

func simulate(ctx context.Context, o options, url, design string, n int, weights bool) (result, error) {
	slotsForResults = o.slots
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	table := fmt.Sprintf("admission-%s-%d-%v-%d-%d", design, n, weights, o.loseEvery, int(o.reconcileTimer.Seconds()))
	if err := createTable(ctx, db, table); err != nil {
		return result{}, err
	}
	m := &meter{db: db}
	var clock time.Duration
	epoch := time.UnixMilli(1_800_000_000_000)
	now := func() time.Time { return epoch.Add(clock) }
	gate := admission.Gate{Table: table, Key: schema.CoreGate("bench"), Limit: o.slots}
	var gw gateway
	var pushed *push
	switch design {
	case "push":
		pushed = &push{store: &admission.Store{DB: m, LeaseTTL: admission.LeaseTTLFor(o.safetyNet, o.safetyNet),
			WaiterTTL: admission.WaiterTTLFor(o.safetyNet), Now: now}, gate: gate, safetyNet: o.safetyNet,
			loseEvery: o.loseEvery, lost: map[int]time.Duration{}, period: admission.DefaultReconcileEvery}
		if o.reconcileTimer > 0 {
			pushed.period = o.reconcileTimer
		}
		gw = pushed
	case "poll":
		gw = &poll{store: &pollref.Store{DB: m, LeaseTTL: admission.LeaseTTLFor(o.safetyNet, o.safetyNet),
			WaiterTTL: 3*30*time.Second + time.Minute, Now: now}, gate: pollref.Gate{Table: table, Key: gate.Key, Limit: o.slots}}
	default:
		return result{}, fmt.Errorf("unknown design %q", design)
	}

	ts := make([]*tenant, n, n+2)
	for i := range n {
		ts[i] = &tenant{id: fmt.Sprintf("t%05d", i), weight: 1}
	}
	if weights {
		// Two tenants that always have a next file, of weight 5 and 1, wait beside the burst.
		ts = append(ts, &tenant{id: "heavy", weight: 5, endless: true}, &tenant{id: "light", weight: 1, endless: true})
	}
	tenantIndex = map[string]int{}
	for i, t := range ts {
		t.execution = fmt.Sprintf("%s-f%d", t.id, t.file)
		tenantIndex[t.id] = i
	}
	q := &events{}
	seq := 0
	push := func(at time.Duration, kind, i, receipt int) {
		seq++
		heap.Push(q, event{at: at, seq: seq, kind: kind, tenant: i, receipt: receipt})
	}
	// The burst: every tenant's file arrives at once; the two always-busy tenants too.
	for i := range ts {
		ts[i].receipt = 1
		ts[i].inFlight = true
		push(0, evDeliver, i, 1)
	}
	if pushed != nil && o.reconcileTimer > 0 {
		push(o.reconcileTimer, evTimer, 0, 0)
	}
	free := make([]time.Duration, o.controllers)
	res := result{design: design, tenants: n, weights: weights}
	started := 0
	wallStart := time.Now()
	window := time.Duration(1<<62 - 1)
	if design == "poll" {
		window = o.pollWindow
	}
	wake := func(at time.Duration, i int) {
		t := ts[i]
		if !t.inFlight || t.done {
			return // a stale receipt: SQS rejects it
		}
		t.inFlight = false
		t.receipt++
		push(at+o.delivery, evDeliver, i, t.receipt)
	}
	for q.Len() > 0 {
		if time.Since(wallStart) > o.maxWallClock {
			res.stoppedEarly = true
			break
		}
		// The controller that is free first serves the earliest event.
		c := 0
		for i := range free {
			if free[i] < free[c] {
				c = i
			}
		}
		e := heap.Pop(q).(event)
		start := max(e.at, free[c])
		if start > window {
			res.stoppedEarly = true
			clock = window
			break
		}
		clock = start
		t := ts[e.tenant]
		before := m.requests.Load()
		var wakes []int
		switch e.kind {
		case evDeliver:
			if t.done || e.receipt != t.receipt {
				continue // a delivery of a message already woken or deleted
			}
			t.inFlight, t.attempt = true, t.attempt+1
			admitted, again, w, err := gw.ask(ctx, t, clock)
			if err != nil {
				return res, err
			}
			res.invocations++
			wakes = w
			if admitted {
				if !t.hadFirst {
					t.hadFirst, t.firstAt = true, clock
				}
				t.started, t.startedAt = true, clock
				started++
				switch {
				case t.id == "heavy":
					res.heavy++
				case t.id == "light":
					res.light++
				default:
					res.admitted++
				}
			} else {
				t.receipt++
				push(clock+again, evDeliver, e.tenant, t.receipt) // the hold's end: the safety net, or the next poll
			}
		case evStatus:
			w, err := gw.release(ctx, t, clock)
			if err != nil {
				return res, err
			}
			res.invocations++
			wakes = w
		case evTimer:
			w, err := gw.tick(ctx, clock)
			if err != nil {
				return res, err
			}
			res.invocations++
			wakes = w
			push(e.at+o.reconcileTimer, evTimer, 0, 0) // on the schedule, however long this one took
		}
		calls := m.requests.Load() - before
		end := clock + o.invocation + time.Duration(calls)*o.perCall
		free[c] = end
		if e.kind == evDeliver && t.started && t.startedAt == clock {
			fileEnd := end + o.fileDur
			res.runs = append(res.runs, [2]time.Duration{end, fileEnd})
			push(fileEnd+o.event, evStatus, e.tenant, 0)
			if !t.endless {
				res.makespan = max(res.makespan, fileEnd)
			}
		}
		if e.kind == evStatus {
			t.started = false
			if t.endless {
				t.file++
				t.execution = fmt.Sprintf("%s-f%d", t.id, t.file)
				t.attempt = 0
				t.receipt++
				t.inFlight = true
				push(end+o.delivery, evDeliver, e.tenant, t.receipt) // its next file, at once
			} else {
				t.done = true
				if t.firstAt > res.lastFirst {
					res.lastFirst = t.firstAt
				}
			}
		}
		for _, i := range wakes {
			wake(end, i)
		}
		if o.verbose && res.invocations%20000 == 0 {
			fmt.Fprintf(os.Stderr, "admissionbench: %s N=%d: %.0f s simulated, %d files started, %d requests\n", design, n, clock.Seconds(), started, m.requests.Load())
		}
		// The burst is over once every one of the N tenants has finished.
		if res.admitted == n && allDone(ts[:n]) {
			break
		}
	}
	res.allStarted = res.admitted == n
	if res.stoppedEarly {
		res.makespan = clock
	}
	// Only running time within the makespan counts: the always-busy tenants' files may outlast it.
	for _, r := range res.runs {
		res.busy += max(0, min(r[1], res.makespan)-r[0])
	}
	res.runs = nil
	for _, t := range ts[:n] {
		if t.hadFirst && t.firstAt > res.lastFirst {
			res.lastFirst = t.firstAt
		}
	}
	if pushed != nil {
		res.lost, res.handedOn, res.inPeriod, res.slowestHandOn = pushed.lostCount, pushed.handedOn, pushed.inPeriod, pushed.slowest
		res.inTimer = pushed.inTimer
	}
	res.requests = m.requests.Load()
	res.readUnits = float64(m.readMilli.Load()) / 1000
	res.writeUnits = float64(m.wMilli.Load()) / 1000
	res.wall = time.Since(wallStart)
	return res, nil
}

func allDone(ts []*tenant) bool {
	for _, t := range ts {
		if !t.done {
			return false
		}
	}
	return true
}

func createTable(ctx context.Context, db *dynamodb.Client, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(schema.AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(schema.AttrSK), KeyType: types.KeyTypeRange},
		},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(schema.AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(schema.AttrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	return dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 100*time.Millisecond
	}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second)
}

// push is internal/admission as the controller drives it (internal/controller/admission.go): a
// waiting file is held for the safety net and armed with its receipt; the release that hands it a
// slot names it to wake.
type push struct {
	store     *admission.Store
	gate      admission.Gate
	safetyNet time.Duration
	// loseEvery > 0 loses every loseEvery'th handover's wake-up; lost holds when each lost
	// waiter's slot was handed to it, until the reconciler wakes it again (its slot handed on).
	loseEvery, handovers, lostCount, handedOn, inPeriod int
	lost                                                map[int]time.Duration
	slowest                                             time.Duration
	// period is one reconciler period: the schedule's, or the reconcile period without one;
	// inTimer counts the lost wake-ups handed on within it of their reservation's end.
	period  time.Duration
	inTimer int
}

// woken is the tenants to wake of wakes at now, less the lost ones (loseEvery).
func (p *push) woken(wakes []admission.Wake, now time.Duration) []int {
	var out []int
	for _, w := range wakes {
		is := toIndexes([]admission.Wake{w})
		if len(is) == 0 {
			continue
		}
		i := is[0]
		if w.Again {
			// The reconciler found the lost reservation's end, handed its slot on and wakes the
			// waiter again.
			if at, ok := p.lost[i]; ok {
				delete(p.lost, i)
				p.handedOn++
				late := now - (at + admission.DefaultReserveFor)
				p.slowest = max(p.slowest, late)
				if late <= admission.DefaultReconcileEvery {
					p.inPeriod++
				}
				if late <= p.period {
					p.inTimer++
				}
			}
			out = append(out, i)
			continue
		}
		p.handovers++
		if p.loseEvery > 0 && p.handovers%p.loseEvery == 0 {
			p.lost[i] = now
			p.lostCount++
			continue
		}
		out = append(out, i)
	}
	return out
}

// tenantIndex finds a woken tenant by the id its receipt handle carries.
var tenantIndex = map[string]int{}

func (p *push) ask(ctx context.Context, t *tenant, now time.Duration) (bool, time.Duration, []int, error) {
	var wakes []admission.Wake
	for try := 0; ; try++ {
		dec, err := p.store.Admit(ctx, admission.Request{Execution: t.execution, Tenant: t.id, Weight: t.weight,
			Gates: []admission.Gate{p.gate}, Fresh: t.attempt == 1})
		if err != nil {
			return false, 0, nil, err
		}
		wakes = append(wakes, dec.Wakes...)
		if dec.Admitted {
			return true, 0, p.woken(wakes, now), nil
		}
		// The controller holds the message for the safety net, then arms the entry.
		hold := dec.Hold(p.safetyNet, p.gate.Limit)
		armed, err := p.store.Arm(ctx, dec.Entry, admission.Wake{QueueURL: "q", ReceiptHandle: fmt.Sprintf("%s#%d", t.id, t.receipt)}, hold)
		if err != nil {
			return false, 0, nil, err
		}
		if armed || try >= 2 {
			return false, hold, p.woken(wakes, now), nil
		}
	}
}

func toIndexes(ws []admission.Wake) []int {
	var out []int
	for _, w := range ws {
		id, _, _ := strings.Cut(w.ReceiptHandle, "#")
		if i, ok := tenantIndex[id]; ok {
			out = append(out, i)
		}
	}
	return out
}

func (p *push) release(ctx context.Context, t *tenant, now time.Duration) ([]int, error) {
	_, wakes, err := p.store.Release(ctx, []admission.Gate{p.gate}, t.id, t.execution)
	return p.woken(wakes, now), err
}

// tick is the scheduled rule's invocation: the controller reconciles the gate if it is due.
func (p *push) tick(ctx context.Context, now time.Duration) ([]int, error) {
	wakes, err := p.store.ReconcileDue(ctx, p.gate)
	return p.woken(wakes, now), err
}

// poll is the reference: cmd/admissionbench/pollref with the controller's old asking pace (every
// second while fewer tenants are ahead than a round of the gate's limit, at most 20; a second more
// per round ahead; past the counted ranks a backoff doubling per delivery; 30 s at most).
type poll struct {
	store *pollref.Store
	gate  pollref.Gate
}

func (p *poll) ask(ctx context.Context, t *tenant, _ time.Duration) (bool, time.Duration, []int, error) {
	dec, err := p.store.Admit(ctx, pollref.Request{Execution: t.execution, Tenant: t.id, Weight: t.weight,
		Gates: []pollref.Gate{p.gate}, Fresh: t.attempt == 1})
	if err != nil {
		return false, 0, nil, err
	}
	if dec.Admitted {
		return true, 0, nil, nil
	}
	return false, oldPace(time.Second, dec.Ahead, dec.Counted, dec.Limit, t.attempt), nil, nil
}

func (p *poll) tick(context.Context, time.Duration) ([]int, error) { return nil, nil }

func (p *poll) release(ctx context.Context, t *tenant, _ time.Duration) ([]int, error) {
	_, err := p.store.Release(ctx, []pollref.Gate{p.gate}, t.execution)
	return nil, err
}

// oldPace is the polling controller's admissionPace, unchanged.
func oldPace(first time.Duration, ahead, counted, limit, attempt int) time.Duration {
	const maxWait, maxFast = 30 * time.Second, 20
	round := min(max(limit, 1), maxFast)
	if ahead < counted {
		return min(first*time.Duration(1+ahead/round), maxWait)
	}
	d := first
	for i := 1; i < attempt && d < maxWait; i++ {
		d *= 2
	}
	return min(d, maxWait)
}
