package emulate

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Function is one Lambda function of the templates, run as host-built processes that talk the
// Lambda Runtime API (https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html) to a small
// server of the harness, one server and one process per execution environment.
type Function struct {
	Name    string
	ARN     string
	Source  string // the Go main package (tenantpipeline:source metadata)
	Tenant  string // the id in the function's TENANT variable, if any
	Binary  string
	Env     []string
	Timeout time.Duration
	// Concurrency is the reserved concurrency; invocations beyond it are throttled, as on AWS.
	Concurrency int
	// Account, if set, is the unreserved concurrency of the account that a function without a
	// reserved concurrency shares with the others; invocations beyond it are throttled.
	Account *AccountConcurrency
	// MemoryMB is the template's MemorySize (Lambda's default 128 when unset): the process sees it
	// as AWS_LAMBDA_FUNCTION_MEMORY_SIZE, and it prices the billed duration (Usage).
	MemoryMB int
	Logs     io.Writer
	// LogLine, if set, is handed each line the function's processes write to stdout (the local run reads admission waits from them).
	LogLine func(line []byte)
	// LogGroup is the log group the template names (LoggingConfig.LogGroup), "" for Lambda's
	// default, /aws/lambda/<name>.
	LogGroup string

	// BeforeResponse, if set, is called when a function process posts the response of invocation
	// id (the Lambda-Runtime-Aws-Request-Id); returning true kills the process instead of
	// accepting it (a crash after the handler's side effects).
	BeforeResponse func(fn *Function, id string, payload []byte) bool
	// OnInvoke, if set, is called when an invocation is handed to an execution environment.
	OnInvoke func(fn *Function)
	// Async is how Lambda handles the function's asynchronous invocations (the local run's asyncinvoke.go).
	Async AsyncConfig
	// AssetDir is the function's code asset directory (LAMBDA_TASK_ROOT), if the template names it.
	AssetDir string
	// Pool is the pool a pooled tier's function serves (its POOL variable), PoolSettings the pool's
	// settings as the function reads them, and Role its FUNCTION_ROLE ("router" for a pool's router).
	Pool         string
	PoolSettings *pipeline.PoolSettings
	Role         string

	mu        sync.Mutex
	idle      []*instance
	running   int
	all       map[*instance]bool
	closed    bool
	invokes   atomic.Int64
	throttle  Throttle
	throttled int64 // invocations refused by throttle
	// concurrencyThrottled counts invocations refused because the reserved or the account's
	// concurrency was in use.
	concurrencyThrottled atomic.Int64
	throttleT            time.Time // when throttle's For started (the first refused invocation)
	billedMs             int64     // billed duration of every invocation so far (Usage)
	logBytes             atomic.Int64
}

// Throttle makes the Lambda Invoke API refuse a function's invocations with
// TooManyRequestsException (HTTP 429), as Lambda does when the function's concurrency or the
// account's request rate is exhausted (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html,
// "TooManyRequestsException ... HTTP Status Code: 429"). Step Functions reports it as
// Lambda.TooManyRequestsException.
type Throttle struct {
	// Count refuses this many invocations.
	Count int
	// For refuses every invocation for this long from the first refused one.
	For time.Duration
}

// SetThrottle replaces the function's throttle; the zero Throttle ends it.
func (f *Function) SetThrottle(t Throttle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.throttle, f.throttleT = t, time.Time{}
}

// Throttled is how many invocations the throttle refused.
func (f *Function) Throttled() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.throttled
}

// refuse reports whether the throttle refuses this invocation, and counts it.
func (f *Function) refuse() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &f.throttle
	now := time.Now()
	switch {
	case t.Count > 0:
		t.Count--
	case t.For > 0 && f.throttleT.IsZero():
		f.throttleT = now
	case t.For > 0 && now.Sub(f.throttleT) < t.For:
	default:
		return false
	}
	f.throttled++
	return true
}

// Throttles is how many invocations Lambda refused with TooManyRequestsException, whatever the
// cause: the throttle (SetThrottle), the reserved concurrency or the account's concurrency.
func (f *Function) Throttles() int64 { return f.Throttled() + f.concurrencyThrottled.Load() }

// ErrThrottled is an invocation refused with TooManyRequestsException; errors.Is matches every
// *ThrottleError.
var ErrThrottled = errors.New("TooManyRequestsException: Rate Exceeded")

// The Reason of a TooManyRequestsException that a concurrency limit caused: "Lambda returns
// TooManyRequestsException if running the function would cause you to exceed a concurrency limit at
// either the account level (ConcurrentInvocationLimitExceeded) or function level
// (ReservedFunctionConcurrentInvocationLimitExceeded)"
// (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html).
const (
	ReasonAccountConcurrency  = "ConcurrentInvocationLimitExceeded"
	ReasonReservedConcurrency = "ReservedFunctionConcurrentInvocationLimitExceeded"
)

// ThrottleError is an invocation Lambda refused before running it, and why (Reason).
type ThrottleError struct{ Reason string }

func (e *ThrottleError) Error() string {
	return "TooManyRequestsException: Rate Exceeded. (" + e.Reason + ")"
}

// Is makes errors.Is(err, ErrThrottled) hold for every throttle.
func (e *ThrottleError) Is(target error) bool { return target == ErrThrottled }

// AccountConcurrency is the concurrency that the functions without a reserved concurrency share:
// the account's concurrency limit minus the reserved concurrency of the others. Lambda counts the
// invocations in progress across every function of the account and region, and refuses one that
// would exceed it with TooManyRequestsException, Reason ConcurrentInvocationLimitExceeded
// (https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html,
// https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html). A function with a reserved
// concurrency draws from its reservation only.
type AccountConcurrency struct{ sem *semaphore.Weighted }

// NewAccountConcurrency is an account's unreserved concurrency of limit invocations at once.
func NewAccountConcurrency(limit int) *AccountConcurrency {
	return &AccountConcurrency{sem: semaphore.NewWeighted(int64(limit))}
}

// admit takes a unit of the account's concurrency for one invocation of f, or refuses it; release
// gives it back. A function with a reserved concurrency, or none of an account, is not counted here.
func (f *Function) admit() (release func(), err error) {
	if f.Account == nil || f.Concurrency > 0 {
		return func() {}, nil
	}
	if !f.Account.sem.TryAcquire(1) {
		f.concurrencyThrottled.Add(1)
		return nil, &ThrottleError{Reason: ReasonAccountConcurrency}
	}
	return func() { f.Account.sem.Release(1) }, nil
}

// Result is the outcome of one invocation, as the Invoke API reports it.
type Result struct {
	Payload []byte
	// ErrorType is set when the function failed (X-Amz-Function-Error); Payload then holds
	// {"errorType", "errorMessage"}.
	ErrorType string
	// RequestID is the invocation's request id (Lambda-Runtime-Aws-Request-Id).
	RequestID string
}

type invocation struct {
	id       string
	payload  []byte
	deadline time.Time
	done     chan Result
	once     sync.Once
	began    atomic.Int64 // UnixNano when the process took it (handleNext); 0 before
}

func (inv *invocation) finish(r Result) { inv.once.Do(func() { inv.done <- r }) }

type instance struct {
	fn      *Function
	ln      net.Listener
	srv     *http.Server
	cmd     *exec.Cmd
	next    chan *invocation
	mu      sync.Mutex
	cur     *invocation
	exited  chan struct{}
	waitErr error // how the process ended, once exited is closed
	// The init phase: from the process start to its first request for an invocation. It is billed
	// with the first invocation of the environment (bill).
	startedAt  time.Time
	initEnd    atomic.Int64 // UnixNano of the first invocation/next request; 0 before
	initBilled bool
}

// exitReason describes how the process ended, as Lambda's Runtime.ExitError message does
// ("signal: killed", "exit status 2").
func (inst *instance) exitReason() string {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.waitErr == nil {
		return "exit status 0"
	}
	return inst.waitErr.Error()
}

// Invoke runs one invocation synchronously (InvocationType RequestResponse).
func (f *Function) Invoke(ctx context.Context, payload []byte) (Result, error) {
	res, id, err := f.invoke(ctx, payload)
	if err == nil {
		res.RequestID = id
	}
	return res, err
}

func (f *Function) invoke(ctx context.Context, payload []byte) (Result, string, error) {
	release, err := f.admit()
	if err != nil {
		return Result{}, "", err
	}
	// The unit goes back however the invocation ends: a response, an error, a crash, the function
	// timeout, the caller giving up, or a panic on the way.
	defer release()
	inst, err := f.acquire()
	if err != nil {
		return Result{}, "", err
	}
	f.invokes.Add(1)
	if f.OnInvoke != nil {
		f.OnInvoke(f)
	}
	inv := &invocation{id: NewID(), payload: payload, deadline: time.Now().Add(f.Timeout), done: make(chan Result, 1)}
	timer := time.NewTimer(f.Timeout)
	defer timer.Stop()
	defer f.bill(inst, inv)
	select {
	case inst.next <- inv:
	case <-inst.exited:
		f.release(inst, false)
		return crashResult("", "RequestId: "+inv.id+" Error: Runtime exited before the invocation"), inv.id, nil
	case <-ctx.Done():
		f.release(inst, true)
		return Result{}, inv.id, ctx.Err()
	}
	select {
	case r := <-inv.done:
		f.release(inst, true)
		return r, inv.id, nil
	case <-inst.exited:
		// Killed or crashed without a response (out of memory, a fatal signal): the payload has
		// no errorType, which Step Functions reports as Lambda.Unknown
		// (https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html).
		f.release(inst, false)
		return crashResult("", "RequestId: "+inv.id+" Error: Runtime exited with error: "+inst.exitReason()), inv.id, nil
	case <-timer.C:
		// The function timeout: Lambda stops the invocation and reports errorType Sandbox.Timedout.
		inst.kill()
		f.release(inst, false)
		return crashResult("Sandbox.Timedout", fmt.Sprintf("RequestId: %s Error: Task timed out after %.2f seconds", inv.id, f.Timeout.Seconds())), inv.id, nil
	case <-ctx.Done():
		inst.kill()
		f.release(inst, false)
		return Result{}, inv.id, ctx.Err()
	}
}

// Invocations is how many times the function was invoked.
func (f *Function) Invocations() int64 { return f.invokes.Load() }

// LambdaUsage is what Lambda bills for a function: requests, and duration in GB-seconds.
type LambdaUsage struct {
	Requests int64
	// BilledMillis sums each invocation's billed duration: "Duration is calculated from the time
	// your code begins executing until it returns or otherwise terminates, rounded up to the nearest
	// 1 ms", and it includes the initialization code of a new execution environment
	// (https://aws.amazon.com/lambda/pricing/).
	BilledMillis int64
	MemoryMB     int
	// LogBytes are the bytes the function's processes wrote to stdout and stderr, which Lambda
	// sends to CloudWatch Logs ("Lambda automatically ... sends logs to CloudWatch Logs",
	// https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs.html). The lines
	// Lambda itself adds (START, END, REPORT) are not in them.
	LogBytes int64
}

// GBSeconds is the billed duration times the configured memory (128 MB is 0.125 GB).
func (u LambdaUsage) GBSeconds() float64 {
	return float64(u.BilledMillis) / 1000 * float64(u.MemoryMB) / 1024
}

// Usage is the function's billed usage so far.
func (f *Function) Usage() LambdaUsage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return LambdaUsage{Requests: f.invokes.Load(), BilledMillis: f.billedMs, MemoryMB: f.MemoryMB, LogBytes: f.logBytes.Load()}
}

// bill adds an invocation's billed duration when Invoke returns: from the moment the process took
// it until now (its response, its error, its timeout or its death), plus the environment's init
// phase when this is its first invocation. An invocation the process never took bills nothing.
func (f *Function) bill(inst *instance, inv *invocation) {
	var d time.Duration
	if began := inv.began.Load(); began != 0 {
		d = time.Since(time.Unix(0, began))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !inst.initBilled {
		if end := inst.initEnd.Load(); end != 0 {
			d += time.Unix(0, end).Sub(inst.startedAt)
			inst.initBilled = true
		}
	}
	f.billedMs += billedMillis(d)
}

// billedMillis rounds a duration up to whole milliseconds, as Lambda bills it.
func billedMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// crashResult is the Invoke answer for an invocation the runtime did not answer itself; typ "" leaves
// errorType out of the payload.
func crashResult(typ, msg string) Result {
	body := map[string]string{"errorMessage": msg}
	if typ != "" {
		body["errorType"] = typ
	}
	b, _ := json.Marshal(body)
	return Result{Payload: b, ErrorType: cmp.Or(typ, "Unhandled")}
}

func (f *Function) acquire() (*instance, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errors.New("function closed")
	}
	for len(f.idle) > 0 {
		inst := f.idle[len(f.idle)-1]
		f.idle = f.idle[:len(f.idle)-1]
		select {
		case <-inst.exited:
			continue
		default:
		}
		f.running++
		f.mu.Unlock()
		return inst, nil
	}
	if f.Concurrency > 0 && f.running >= f.Concurrency {
		f.mu.Unlock()
		f.concurrencyThrottled.Add(1)
		return nil, &ThrottleError{Reason: ReasonReservedConcurrency}
	}
	f.running++
	f.mu.Unlock()
	inst, err := f.start()
	if err != nil {
		f.mu.Lock()
		f.running--
		f.mu.Unlock()
		return nil, err
	}
	return inst, nil
}

func (f *Function) release(inst *instance, reusable bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running--
	if reusable && !f.closed {
		select {
		case <-inst.exited:
		default:
			f.idle = append(f.idle, inst)
			return
		}
	}
	inst.kill()
}

// Redeploy changes the variables of the function's next execution environments, as a deployment
// of a configuration change does: the idle environments end, and the next invocation starts a
// new one; an invocation in progress finishes in its own.
func (f *Function) Redeploy(edit func(env []string) []string) {
	f.mu.Lock()
	f.Env = edit(slices.Clone(f.Env))
	idle := f.idle
	f.idle = nil
	f.mu.Unlock()
	for _, inst := range idle {
		inst.kill()
	}
}

// KillRunning kills every process that is handling an invocation right now.
func (f *Function) KillRunning() int {
	return f.eachBusy(func(inst *instance) bool { inst.kill(); return true })
}

// eachBusy calls do for every process handling an invocation right now, and counts the ones it
// acted on.
func (f *Function) eachBusy(do func(*instance) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for inst := range f.all {
		inst.mu.Lock()
		busy := inst.cur != nil
		inst.mu.Unlock()
		if busy && do(inst) {
			n++
		}
	}
	return n
}

// FreezeRunning stops (SIGSTOP) every process that is handling an invocation right now, as a
// process that makes no more progress (a stuck call, a hung dependency): it is killed at the
// function timeout like any other, and the invocation reports Sandbox.Timedout.
func (f *Function) FreezeRunning() int {
	return f.eachBusy(func(inst *instance) bool {
		if inst.cmd == nil || inst.cmd.Process == nil {
			return false
		}
		inst.cmd.Process.Signal(syscall.SIGSTOP)
		return true
	})
}

// Close stops every execution environment of the function.
func (f *Function) Close() {
	f.mu.Lock()
	f.closed = true
	all := f.all
	f.all = nil
	f.idle = nil
	f.mu.Unlock()
	for inst := range all {
		inst.kill()
		<-inst.exited
	}
}

func (f *Function) start() (*instance, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	inst := &instance{fn: f, ln: ln, next: make(chan *invocation), exited: make(chan struct{}), startedAt: time.Now()}
	mux := http.NewServeMux()
	const base = "/2018-06-01/runtime/"
	mux.HandleFunc("GET "+base+"invocation/next", inst.handleNext)
	mux.HandleFunc("POST "+base+"invocation/{id}/response", inst.handleResponse)
	mux.HandleFunc("POST "+base+"invocation/{id}/error", inst.handleError)
	mux.HandleFunc("POST "+base+"init/error", inst.handleInitError)
	inst.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go inst.srv.Serve(ln)

	cmd := exec.Command(f.Binary)
	cmd.SysProcAttr = ownProcessGroup()
	cmd.Env = append(append([]string{}, f.Env...),
		"AWS_LAMBDA_RUNTIME_API="+ln.Addr().String(),
		"AWS_LAMBDA_FUNCTION_NAME="+f.Name,
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+strconv.Itoa(cmpOrInt(f.MemoryMB, 128)),
		"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/"+f.Name,
		"_HANDLER=bootstrap",
	)
	out := &byteCounter{w: cmp.Or[io.Writer](f.Logs, io.Discard), n: &f.logBytes}
	cmd.Stdout, cmd.Stderr = out, out
	if f.LogLine != nil {
		cmd.Stdout = NewLineTap(out, f.LogLine)
	}
	if err := cmd.Start(); err != nil {
		inst.srv.Close()
		return nil, fmt.Errorf("start %s: %w", f.Binary, err)
	}
	inst.cmd = cmd
	f.mu.Lock()
	if f.all == nil {
		f.all = map[*instance]bool{}
	}
	f.all[inst] = true
	f.mu.Unlock()
	go func() {
		err := cmd.Wait()
		inst.mu.Lock()
		inst.waitErr = err
		inst.mu.Unlock()
		inst.srv.Close()
		f.mu.Lock()
		delete(f.all, inst)
		f.mu.Unlock()
		close(inst.exited)
	}()
	return inst, nil
}

// byteCounter counts the bytes written through it.
type byteCounter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *byteCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.w.Write(p)
}

func (inst *instance) kill() {
	if inst.cmd != nil && inst.cmd.Process != nil {
		inst.cmd.Process.Kill()
	}
}

// handleNext hands the next invocation to the function process. The headers are the ones
// aws-lambda-go reads (lambda/runtime_api_client.go).
func (inst *instance) handleNext(w http.ResponseWriter, r *http.Request) {
	inst.initEnd.CompareAndSwap(0, time.Now().UnixNano())
	select {
	case inv := <-inst.next:
		inv.began.Store(time.Now().UnixNano())
		inst.mu.Lock()
		inst.cur = inv
		inst.mu.Unlock()
		h := w.Header()
		h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
		h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", inst.fn.ARN)
		h.Set("Lambda-Runtime-Trace-Id", "Root=1-"+inv.id[:8]+"-"+inv.id[8:32]+";Sampled=0")
		h.Set("Content-Type", "application/json")
		w.Write(inv.payload)
	case <-r.Context().Done():
	case <-inst.exited:
	}
}

func (inst *instance) current(id string) *invocation {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.cur == nil || inst.cur.id != id {
		return nil
	}
	inv := inst.cur
	inst.cur = nil
	return inv
}

func (inst *instance) handleResponse(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if hook := inst.fn.BeforeResponse; hook != nil && hook(inst.fn, r.PathValue("id"), body) {
		inst.kill()
		return
	}
	inv := inst.current(r.PathValue("id"))
	if inv == nil {
		http.Error(w, "unknown request id", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	inv.finish(Result{Payload: body})
}

func (inst *instance) handleError(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	inv := inst.current(r.PathValue("id"))
	if inv == nil {
		http.Error(w, "unknown request id", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	inv.finish(errorResult(r, body))
}

func (inst *instance) handleInitError(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(inst.fn.Logs, "%s: init error: %s\n", inst.fn.Name, body)
	inst.kill()
}

func errorResult(r *http.Request, body []byte) Result {
	var e struct {
		ErrorType string `json:"errorType"`
	}
	json.Unmarshal(body, &e)
	typ := cmp.Or(e.ErrorType, r.Header.Get("Lambda-Runtime-Function-Error-Type"), "Unhandled")
	return Result{Payload: body, ErrorType: typ}
}

func cmpOrInt(v, def int) int {
	if v != 0 {
		return v
	}
	return def
}

func NewID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// LambdaService serves the Lambda Invoke API
// (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html) for the functions of the run, so
// that the Step Functions server invokes them as Step Functions would.
type LambdaService struct {
	mu    sync.Mutex
	byKey map[string]*Function
}

// Add registers a function under its name and ARN.
func (s *LambdaService) Add(f *Function) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[string]*Function{}
	}
	s.byKey[f.Name] = f
	s.byKey[f.ARN] = f
}

// Lookup finds a function by name or ARN.
func (s *LambdaService) Lookup(nameOrARN string) *Function {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[nameOrARN]
}

func (s *LambdaService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const prefix = "/2015-03-31/functions/"
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, prefix) || !strings.HasSuffix(r.URL.Path, "/invocations") {
		http.NotFound(w, r)
		return
	}
	name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, prefix), "/invocations")
	f := s.Lookup(name)
	if f == nil {
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		http.Error(w, `{"message":"Function not found: `+name+`"}`, http.StatusNotFound)
		return
	}
	payload, _ := io.ReadAll(r.Body)
	if f.refuse() {
		writeThrottle(w, ReasonReservedConcurrency)
		return
	}
	res, err := f.Invoke(r.Context(), payload)
	if te := (*ThrottleError)(nil); errors.As(err, &te) {
		writeThrottle(w, te.Reason)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if res.ErrorType != "" {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(res.Payload)
}

// writeThrottle answers an Invoke with TooManyRequestsException as the Lambda API does: HTTP 429,
// X-Amzn-ErrorType, and a body with the throttle's Reason, Type and message
// (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html, "Errors":
// "TooManyRequestsException ... HTTP Status Code: 429"). The Step Functions server names it
// Lambda.TooManyRequestsException. Lambda's Retry-After header (the SDK's retryAfterSeconds) is
// left out: AWS documents no value for a concurrency throttle.
func writeThrottle(w http.ResponseWriter, reason string) {
	w.Header().Set("X-Amzn-ErrorType", "TooManyRequestsException")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	b, _ := json.Marshal(map[string]string{"Reason": reason, "Type": "User", "message": "Rate Exceeded."})
	w.Write(b)
}

// builtBinaries remembers the binaries this process built, by module root and package, so that
// several runs in one process (the scenario tests) link each package once.
var builtBinaries sync.Map

// buildLocks serializes builds of one package, so that runs starting side by side (parallel
// scenarios) never write the same binary at once.
var buildLocks sync.Map

// BuildFunctionBinary builds a Lambda main package for the host (the deployed asset is
// linux/arm64), with the tag the deployed build uses, once per package and process.
func BuildFunctionBinary(ctx context.Context, moduleRoot, pkg, outDir string) (string, error) {
	if err := ctx.Err(); err != nil {
		// Setup's time is up: say so even for a binary an earlier run of this process built.
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	cacheKey := moduleRoot + "\x00" + pkg
	mu, _ := buildLocks.LoadOrStore(cacheKey, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if p, ok := builtBinaries.Load(cacheKey); ok {
		if _, err := os.Stat(p.(string)); err == nil {
			return p.(string), nil
		}
	}
	out, err := goBuild(ctx, moduleRoot, pkg, outDir)
	if err == nil {
		builtBinaries.Store(cacheKey, out)
	}
	return out, err
}

func goBuild(ctx context.Context, moduleRoot, pkg, outDir string) (string, error) {
	out := outDir + "/" + strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "_")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-o", out, "./"+strings.TrimPrefix(pkg, "./"))
	cmd.Dir = moduleRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			// Killed because the caller's time ran out: say so, not "signal: killed".
			return "", fmt.Errorf("go build %s: %w", pkg, ctx.Err())
		}
		return "", fmt.Errorf("go build %s: %v: %s", pkg, err, stderr.String())
	}
	return out, nil
}

// AsyncConfig is a function's asynchronous invocation configuration: its
// AWS::Lambda::EventInvokeConfig and its DeadLetterConfig.
type AsyncConfig struct {
	// MaximumRetryAttempts is how many times a function error is retried; nil means Lambda's
	// default, 2.
	MaximumRetryAttempts *int
	// MaximumEventAge is how long Lambda keeps an event; 0 means Lambda's default, 6 hours.
	MaximumEventAge time.Duration
	// DeadLetterTargetARN is the queue that receives the events that failed; "" discards them.
	DeadLetterTargetARN string
}

// Lambda's defaults and bounds of asynchronous invocation
// (https://docs.aws.amazon.com/lambda/latest/api/API_PutFunctionEventInvokeConfig.html).
const (
	AsyncDefaultRetries  = 2
	AsyncDefaultEventAge = 6 * time.Hour
	AsyncMinEventAge     = 60 * time.Second
	// A throttled event is retried after 1 s, then twice as long each time, up to 5 minutes.
	AsyncThrottleFirstWait = time.Second
	AsyncThrottleMaxWait   = 5 * time.Minute
	// DLQErrorMessageBytes is how much of the error message the ErrorMessage attribute carries.
	DLQErrorMessageBytes = 1024
)

func (c AsyncConfig) Retries() int {
	if c.MaximumRetryAttempts == nil {
		return AsyncDefaultRetries
	}
	return *c.MaximumRetryAttempts
}

func (c AsyncConfig) EventAge() time.Duration {
	if c.MaximumEventAge == 0 {
		return AsyncDefaultEventAge
	}
	return c.MaximumEventAge
}

// NewLineTap writes to w and gives observe each whole line written.
func NewLineTap(w io.Writer, observe func([]byte)) *lineTap { return &lineTap{w: w, observe: observe} }

// lineTap passes a process's output through to w and hands each complete line to observe. One
// tap serves one stream of one process, so its lines are never interleaved with another's.
type lineTap struct {
	w       io.Writer
	observe func([]byte)
	buf     []byte
}

func (t *lineTap) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			break
		}
		t.observe(t.buf[:i])
		t.buf = t.buf[i+1:]
	}
	if len(t.buf) > 1<<20 { // a line longer than any log line: drop it
		t.buf = nil
	}
	return n, err
}
