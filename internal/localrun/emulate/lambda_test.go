package emulate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/example/tenantpipeline/internal/localrun/emulate/testruntime"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// With LOCALRUN_TEST_RUNTIME=1 the test binary is a Lambda function process (testruntime).
func init() { testruntime.ServeIfAsked() }

// TestLambdaInvokeAnswers checks the local Lambda Invoke API's answers against the Invoke API
// reference (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html): a function error is
// 200 with X-Amz-Function-Error; a process that ends without a response leaves errorType out (Step
// Functions: Lambda.Unknown); a function timeout is errorType Sandbox.Timedout; a throttled
// invocation is 429 TooManyRequestsException.
func TestLambdaInvokeAnswers(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	newFn := func(t *testing.T) (*Function, *httptest.Server) {
		f := &Function{Name: "fn", ARN: "arn:aws:lambda:us-east-1:000000000000:function:fn", Binary: self,
			Env: []string{"LOCALRUN_TEST_RUNTIME=1"}, Timeout: 2 * time.Second, Logs: io.Discard}
		svc := &LambdaService{}
		svc.Add(f)
		srv := httptest.NewServer(svc)
		t.Cleanup(func() { srv.Close(); f.Close() })
		return f, srv
	}
	invoke := func(t *testing.T, srv *httptest.Server, do string) (int, http.Header, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/2015-03-31/functions/fn/invocations", "application/json", bytes.NewReader([]byte(fmt.Sprintf(`{"do":%q}`, do))))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, resp.Header, body
	}

	for _, tc := range []struct {
		name string
		do   string
		// act runs while the invocation is in progress.
		act           func(f *Function)
		wantFnError   string // X-Amz-Function-Error
		wantErrorType any    // payload errorType; nil: absent
		wantMessage   string // in errorMessage
	}{
		{name: "answer", do: "answer"},
		{name: "process exits", do: "exit", wantFnError: "Unhandled", wantMessage: "Runtime exited with error: exit status 2"},
		{name: "process killed", do: "sleep", act: func(f *Function) { f.KillRunning() }, wantFnError: "Unhandled", wantMessage: "Runtime exited with error: signal: killed"},
		{name: "function timeout", do: "sleep", wantFnError: "Unhandled", wantErrorType: "Sandbox.Timedout", wantMessage: "Task timed out after 2.00 seconds"},
		{name: "frozen until the timeout", do: "sleep", act: func(f *Function) { f.FreezeRunning() }, wantFnError: "Unhandled", wantErrorType: "Sandbox.Timedout", wantMessage: "Task timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFn(t)
			if tc.act != nil {
				go func() {
					time.Sleep(500 * time.Millisecond)
					tc.act(f)
				}()
			}
			status, h, body := invoke(t, srv, tc.do)
			if status != http.StatusOK {
				t.Fatalf("status: got %d, want 200", status)
			}
			if got := h.Get("X-Amz-Function-Error"); got != tc.wantFnError {
				t.Errorf("X-Amz-Function-Error: got %q, want %q", got, tc.wantFnError)
			}
			if tc.wantFnError == "" {
				return
			}
			if got := body["errorType"]; got != tc.wantErrorType {
				t.Errorf("errorType: got %v, want %v", got, tc.wantErrorType)
			}
			if msg, _ := body["errorMessage"].(string); !strings.Contains(msg, tc.wantMessage) {
				t.Errorf("errorMessage: got %q, want it to contain %q", msg, tc.wantMessage)
			}
		})
	}

	t.Run("throttled by count", func(t *testing.T) {
		f, srv := newFn(t)
		f.SetThrottle(Throttle{Count: 2})
		var got []int
		for range 3 {
			status, h, _ := invoke(t, srv, "answer")
			got = append(got, status)
			if status == http.StatusTooManyRequests && h.Get("X-Amzn-ErrorType") != "TooManyRequestsException" {
				t.Errorf("X-Amzn-ErrorType: got %q, want TooManyRequestsException", h.Get("X-Amzn-ErrorType"))
			}
		}
		if fmt.Sprint(got) != "[429 429 200]" || f.Throttled() != 2 {
			t.Errorf("statuses: got %v (%d throttled), want [429 429 200] (2)", got, f.Throttled())
		}
	})
	t.Run("throttled for a while", func(t *testing.T) {
		f, srv := newFn(t)
		f.SetThrottle(Throttle{For: 400 * time.Millisecond})
		first, _, _ := invoke(t, srv, "answer")
		time.Sleep(100 * time.Millisecond)
		second, _, _ := invoke(t, srv, "answer")
		time.Sleep(400 * time.Millisecond)
		third, _, _ := invoke(t, srv, "answer")
		if first != 429 || second != 429 || third != 200 {
			t.Errorf("statuses at 0, 0.1 and 0.5 s: got %d %d %d, want 429 429 200", first, second, third)
		}
	})
}

// TestLambdaBilledDuration checks the billed usage against Lambda's pricing rules
// (https://aws.amazon.com/lambda/pricing/): each invocation's duration rounded up to 1 ms, the first
// one of an environment with its init phase, times the configured memory.
func TestLambdaBilledDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{time.Nanosecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + time.Nanosecond, 2},
		{1500 * time.Microsecond, 2},
		{100 * time.Millisecond, 100},
	} {
		if got := billedMillis(tc.d); got != tc.want {
			t.Errorf("billedMillis(%v): got %d, want %d", tc.d, got, tc.want)
		}
	}
	if got, want := (LambdaUsage{BilledMillis: 2000, MemoryMB: 256}).GBSeconds(), 0.5; got != want {
		t.Errorf("2,000 ms at 256 MB: got %v GB-s, want %v", got, want)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f := &Function{Name: "fn", ARN: "arn:aws:lambda:us-east-1:000000000000:function:fn", Binary: self,
		Env: []string{"LOCALRUN_TEST_RUNTIME=1"}, Timeout: 5 * time.Second, MemoryMB: 512, Logs: io.Discard}
	t.Cleanup(f.Close)
	for range 3 {
		if _, err := f.Invoke(t.Context(), []byte(`{"do":"pause"}`)); err != nil {
			t.Fatal(err)
		}
	}
	u := f.Usage()
	if u.Requests != 3 || u.MemoryMB != 512 {
		t.Errorf("usage: got %d requests at %d MB, want 3 at 512 MB", u.Requests, u.MemoryMB)
	}
	// Three pauses of 100 ms each, plus the process's start-up once; far less than a second more
	// even on a loaded machine.
	if u.BilledMillis < 300 || u.BilledMillis > 1300 {
		t.Errorf("billed duration of three 100 ms invocations: got %d ms, want 300 to 1,300", u.BilledMillis)
	}
	if got, want := u.GBSeconds(), float64(u.BilledMillis)/1000*0.5; got != want {
		t.Errorf("GB-s: got %v, want %v", got, want)
	}
}

// TestAccountConcurrency checks the account's concurrency limit against the Invoke API reference
// (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html): with N invocations in progress
// across the functions that share it, the next one is refused with 429 TooManyRequestsException,
// Reason ConcurrentInvocationLimitExceeded, without running; a unit comes back however an
// invocation ends; a function with a reserved concurrency is held to its reservation instead.
func TestAccountConcurrency(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// newFns makes functions sharing an account of limit, each signalling on started when an
	// invocation reaches an execution environment, and the Lambda API serving them.
	newFns := func(t *testing.T, limit int, timeout time.Duration, names ...string) (map[string]*Function, chan string, *lambda.Client) {
		account := NewAccountConcurrency(limit)
		started := make(chan string, 16)
		svc := &LambdaService{}
		fns := map[string]*Function{}
		for _, name := range names {
			f := &Function{Name: name, ARN: "arn:aws:lambda:us-east-1:000000000000:function:" + name, Binary: self,
				Env: []string{"LOCALRUN_TEST_RUNTIME=1"}, Timeout: timeout, Logs: io.Discard, Account: account,
				OnInvoke: func(f *Function) { started <- f.Name }}
			svc.Add(f)
			fns[name] = f
			t.Cleanup(f.Close)
		}
		srv := httptest.NewServer(svc)
		t.Cleanup(srv.Close)
		client := lambda.NewFromConfig(LocalAWS, func(o *lambda.Options) {
			o.BaseEndpoint = aws.String(srv.URL)
			o.Retryer = aws.NopRetryer{} // one attempt: the answer itself, not the SDK's retries
		})
		return fns, started, client
	}
	// hold starts an invocation that runs until the test ends it, and waits until it runs.
	hold := func(t *testing.T, f *Function, started chan string, do string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := f.Invoke(context.Background(), []byte(`{"do":"`+do+`"}`))
			done <- err
		}()
		select {
		case <-started:
		case <-time.After(time.Minute):
			t.Fatalf("%s: the invocation never started", f.Name)
		}
		return done
	}
	invokeAPI := func(client *lambda.Client, name string) error {
		_, err := client.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String(name), Payload: []byte(`{"do":"answer"}`)})
		return err
	}
	wantThrottle := func(t *testing.T, err error, reason string) {
		t.Helper()
		var tm *lambdatypes.TooManyRequestsException
		var re *awshttp.ResponseError
		if !errors.As(err, &tm) || !errors.As(err, &re) {
			t.Fatalf("got %v, want TooManyRequestsException", err)
		}
		if re.HTTPStatusCode() != http.StatusTooManyRequests || string(tm.Reason) != reason || aws.ToString(tm.Type) != "User" || tm.ErrorMessage() != "Rate Exceeded." {
			t.Errorf("got HTTP %d, Reason %q, Type %q, message %q; want 429, %s, User, Rate Exceeded.",
				re.HTTPStatusCode(), tm.Reason, aws.ToString(tm.Type), tm.ErrorMessage(), reason)
		}
	}

	t.Run("N at once across functions, the next refused, a unit back when one returns", func(t *testing.T) {
		fns, started, client := newFns(t, 2, time.Minute, "a", "b")
		a, b := fns["a"], fns["b"]
		doneA := hold(t, a, started, "sleep")
		hold(t, b, started, "sleep")
		for _, name := range []string{"a", "b"} {
			wantThrottle(t, invokeAPI(client, name), ReasonAccountConcurrency)
		}
		if _, err := a.Invoke(context.Background(), []byte(`{"do":"answer"}`)); !errors.Is(err, ErrThrottled) {
			t.Errorf("Function.Invoke: got %v, want ErrThrottled", err)
		}
		if got := a.Throttles() + b.Throttles(); got != 3 {
			t.Errorf("throttles: got %d, want 3", got)
		}
		if got := a.Invocations() + b.Invocations(); got != 2 {
			t.Errorf("invocations: got %d, want 2 (a refused invocation never runs)", got)
		}
		// a's invocation ends (Lambda.Unknown) once its process, which may not have taken it yet,
		// is killed: its unit comes back.
		for a.KillRunning() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		if err := <-doneA; err != nil {
			t.Fatal(err)
		}
		if err := invokeAPI(client, "b"); err != nil {
			t.Errorf("after a's invocation ended: got %v, want b invoked", err)
		}
	})
	t.Run("the function timeout gives the unit back", func(t *testing.T) {
		fns, started, client := newFns(t, 1, time.Second, "a")
		if err := <-hold(t, fns["a"], started, "sleep"); err != nil { // Sandbox.Timedout after 1 s
			t.Fatal(err)
		}
		if err := invokeAPI(client, "a"); err != nil {
			t.Errorf("after a timed-out invocation: got %v, want a invoked", err)
		}
	})
	t.Run("a panic on the way gives the unit back", func(t *testing.T) {
		fns, _, client := newFns(t, 1, time.Minute, "a")
		a := fns["a"]
		a.OnInvoke = func(*Function) { panic("hook") }
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("got no panic, want the hook's")
				}
			}()
			a.Invoke(context.Background(), []byte(`{"do":"answer"}`))
		}()
		a.OnInvoke = nil
		if err := invokeAPI(client, "a"); err != nil {
			t.Errorf("after a panic: got %v, want a invoked", err)
		}
	})
	t.Run("the caller giving up gives the unit back", func(t *testing.T) {
		fns, started, client := newFns(t, 1, time.Minute, "a")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := fns["a"].Invoke(ctx, []byte(`{"do":"sleep"}`))
			done <- err
		}()
		<-started
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if err := invokeAPI(client, "a"); err != nil {
			t.Errorf("after a cancelled invocation: got %v, want a invoked", err)
		}
	})
	t.Run("a reserved concurrency is its own", func(t *testing.T) {
		fns, started, client := newFns(t, 1, time.Minute, "a", "reserved")
		r := fns["reserved"]
		r.Concurrency = 1
		hold(t, fns["a"], started, "sleep") // the account's one unit is in use
		hold(t, r, started, "sleep")        // the reservation's one unit too
		wantThrottle(t, invokeAPI(client, "reserved"), ReasonReservedConcurrency)
		wantThrottle(t, invokeAPI(client, "a"), ReasonAccountConcurrency)
	})
}
