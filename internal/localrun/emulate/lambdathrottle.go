package emulate

import (
	"errors"
	"time"

	"golang.org/x/sync/semaphore"
)

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
