package controller

import (
	"context"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/example/tenantpipeline/internal/metrics"
)

// Step Functions throttles DescribeExecution and StartExecution per account and region with a token
// bucket (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html, "API action
// throttling"): it answers ThrottlingException once the bucket is empty. The SDK's standard retryer
// retries it a few times first (internal/awsconfig); a call still throttled after that is never an
// error: the message is held with a jittered backoff, so that many tenants throttled together do
// not come back together.

// throttledErr reports whether err is a throttling error by the SDK's own list
// (ThrottlingException, TooManyRequestsException, an unmodeled 429, ...).
func throttledErr(err error) bool {
	return retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary
}

// throttled holds a message whose Step Functions call was throttled: WARN, Throttles (and
// ServiceErrors, of which throttling is one kind), and a wait
// drawn by the SDK's exponential full-jitter backoff for this delivery's attempt.
func (h *Handler) throttled(ctx context.Context, d *delivery, what string, err error) decision {
	wait := h.throttleWait(d.attempt, err)
	d.log.WarnContext(ctx, "could not "+what+"; message kept (Step Functions throttled the call)", "throttled", true, "error", err, "nextWaitSeconds", wait.Seconds())
	d.count(metrics.Throttles)
	d.count(metrics.ServiceErrors)
	return h.hold(ctx, d, wait)
}

// throttleWait is the jittered wait before a throttled delivery is looked at again: the SDK's
// ExponentialJitterBackoff (uniform in [0, 2^attempt s), the attempt kept below log2(MaxWait)),
// rounded up to the whole
// seconds a visibility timeout takes, and at least 1 s.
func (h *Handler) throttleWait(attempt int, err error) time.Duration {
	// Beyond log2(MaxWait in seconds) attempts the SDK's formula returns its maximum itself, with no
	// jitter, which would bring throttled tenants back together: keep the attempt below that.
	a := min(max(attempt, 1), int(math.Log2(max(h.cfg.MaxWait.Seconds(), 1))))
	d, derr := h.throttleBackoff.BackoffDelay(a, err)
	if derr != nil {
		d = backoff(h.cfg.FirstWait, h.cfg.MaxWait, attempt)
	}
	d = min(d, h.cfg.MaxWait)
	return time.Duration(math.Ceil(max(d.Seconds(), 1))) * time.Second
}
