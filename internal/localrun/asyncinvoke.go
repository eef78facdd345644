package localrun

// Asynchronous invocation of a rule's Lambda target, with Lambda's error handling for it.
// EventBridge invokes a Lambda target asynchronously
// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-lambda-permissions).
// Lambda queues the event and
//   - retries a function error up to MaximumRetryAttempts times (0 to 2, default 2), waiting at
//     least 1 minute before the first retry and 2 minutes before the second, and a throttle for as
//     long as the event is younger than MaximumEventAgeInSeconds (60 to 21,600, default 6 hours),
//     both from the function's AWS::Lambda::EventInvokeConfig: "For throttling errors (429) and
//     system errors (500-series), Lambda returns the event to the queue and attempts to run the
//     function again for up to 6 hours by default. The retry interval increases exponentially from
//     1 second after the first attempt to a maximum of 5 minutes"
//     (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html);
//   - sends an event that failed its last attempt, or grew too old, to the function's
//     DeadLetterConfig.TargetArn queue: the event as it is, with the message attributes RequestID
//     (String, the invocation's request id), ErrorCode (Number, the 3-digit HTTP status code) and
//     ErrorMessage (String, the first 1 KB of the error message)
//     (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html#invocation-dlq).
//     Without one the event is discarded.
// LambdaOptions.AsyncRetryScale scales the waits and the maximum age alike, so that a run need not wait
// minutes and a short maximum age still cuts the retries as it would on AWS.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// asyncRetryWaits are Lambda's waits before the first and the second retry of a function error.
var asyncRetryWaits = []time.Duration{time.Minute, 2 * time.Minute}

// defaultAsyncRetryScale makes the local waits 1 s and 2 s unless LambdaOptions.AsyncRetryScale says.
const defaultAsyncRetryScale = 1.0 / 60

// asyncScale is the factor of the asynchronous invocation waits and maximum age.
func (c *Cloud) asyncScale() float64 {
	if c.opts.lambda.AsyncRetryScale > 0 {
		return c.opts.lambda.AsyncRetryScale
	}
	return defaultAsyncRetryScale
}

func scaled(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

// invokeAsync queues one asynchronous invocation of f with payload and handles its failures.
func (c *Cloud) invokeAsync(f *emulate.Function, payload []byte) {
	st := c.status()
	st.async.Add(1)
	c.setBusy(1)
	queued := time.Now()
	go func() {
		defer st.async.Done()
		defer c.setBusy(-1)
		ctx := c.ctx
		cfg, scale := f.Async, c.asyncScale()
		maxAge := scaled(cfg.EventAge(), scale)
		failures, throttles := 0, 0
		count := func(p *int64) {
			st.mu.Lock()
			*p++
			st.mu.Unlock()
		}
		for ctx.Err() == nil {
			count(&st.counts.Invokes)
			res, err := f.Invoke(ctx, payload)
			var wait time.Duration
			switch {
			case isThrottle(err):
				// Retried until the event is too old (below), never given up on by count.
				wait = scaled(asyncThrottleWait(throttles), scale)
				throttles++
			case err != nil:
				if ctx.Err() == nil {
					fmt.Fprintf(c.logs, "lambda async %s: invoke: %v (event dropped)\n", f.Name, err)
				}
				return
			case res.ErrorType != "":
				if failures >= cfg.Retries() {
					// A function error answers the Invoke with 200 and X-Amz-Function-Error.
					c.asyncFailed(ctx, f, payload, res.RequestID, 200, errorMessage(res), fmt.Sprintf("function error %s after %d retries", res.ErrorType, failures))
					return
				}
				wait = scaled(asyncRetryWaits[min(failures, len(asyncRetryWaits)-1)], scale)
				failures++
				fmt.Fprintf(c.logs, "lambda async %s: function error %s; retry %d of %d in %s\n", f.Name, res.ErrorType, failures, cfg.Retries(), wait)
			default:
				return
			}
			if time.Since(queued)+wait > maxAge {
				code, msg := 200, errorMessage(res)
				if err != nil {
					code, msg = 429, "Rate Exceeded."
				}
				c.asyncFailed(ctx, f, payload, res.RequestID, code, msg, fmt.Sprintf("older than the maximum event age %s (scaled: %s)", cfg.EventAge(), maxAge))
				return
			}
			sleep(ctx, wait)
			count(&st.counts.Retries)
		}
	}()
}

// asyncThrottleWait is the wait before the retry of an event throttled n times before: 1 s, 2 s,
// 4 s, … up to 5 minutes.
func asyncThrottleWait(n int) time.Duration {
	if n >= 9 { // 2^9 s is past the maximum
		return emulate.AsyncThrottleMaxWait
	}
	return min(emulate.AsyncThrottleFirstWait<<n, emulate.AsyncThrottleMaxWait)
}

// errorMessage is a function error's errorMessage, or its payload.
func errorMessage(res emulate.Result) string {
	var e struct {
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal(res.Payload, &e) == nil && e.ErrorMessage != "" {
		return e.ErrorMessage
	}
	return string(res.Payload)
}

// asyncFailed ends an event Lambda gives up on: to the function's dead-letter queue, or discarded.
func (c *Cloud) asyncFailed(ctx context.Context, f *emulate.Function, payload []byte, requestID string, code int, message, why string) {
	st := c.status()
	q := c.queues[f.Async.DeadLetterTargetARN]
	if q == nil {
		st.mu.Lock()
		st.counts.Discarded++
		st.mu.Unlock()
		fmt.Fprintf(c.logs, "lambda async %s: %s; event discarded\n", f.Name, why)
		return
	}
	if len(message) > emulate.DLQErrorMessageBytes {
		message = message[:emulate.DLQErrorMessageBytes]
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(string(payload)),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"RequestID":    {DataType: aws.String("String"), StringValue: aws.String(cmp.Or(requestID, uuid()))},
			"ErrorCode":    {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(code))},
			"ErrorMessage": {DataType: aws.String("String"), StringValue: aws.String(cmp.Or(message, "-"))},
		}}
	for attempt := 0; ctx.Err() == nil && attempt < 5; attempt++ {
		if _, err := c.sqs.SendMessage(ctx, in); err != nil {
			fmt.Fprintf(c.logs, "lambda async %s: send to dead-letter queue %s: %v\n", f.Name, q.Name, err)
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		st.mu.Lock()
		st.counts.DeadLettered++
		st.mu.Unlock()
		fmt.Fprintf(c.logs, "lambda async %s: %s; event sent to dead-letter queue %s\n", f.Name, why, q.Name)
		return
	}
}
