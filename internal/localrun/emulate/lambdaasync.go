package emulate

import (
	"time"
)

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
