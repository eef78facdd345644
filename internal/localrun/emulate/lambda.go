package emulate

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

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
