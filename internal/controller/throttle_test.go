package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

func tooManyRequests() error {
	return &smithy.GenericAPIError{Code: "TooManyRequestsException", Message: "Rate exceeded"}
}

func TestThrottledErr(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"ThrottlingException", throttled(), true},
		{"TooManyRequestsException", tooManyRequests(), true},
		{"after the SDK's retries", &retry.MaxAttemptsError{Attempt: 3, Err: throttled()}, true},
		{"wrapped", fmt.Errorf("start execution x: %w", throttled()), true},
		{"access denied", accessDenied(), false},
		{"execution does not exist", &sfntypes.ExecutionDoesNotExist{}, false},
		{"deadline", context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := throttledErr(tt.err); got != tt.want {
				t.Errorf("got throttled %v, want %v", got, tt.want)
			}
		})
	}
}

// The wait of a throttled delivery is the SDK's full-jitter draw, in whole seconds, at least 1 s and
// at most the longest wait, and it is spread: tenants throttled together come back apart.
func TestThrottleWait(t *testing.T) {
	h := newHandler(mustConfig(t, map[string]string{pipeline.EnvMaxWaitSeconds: "60"}), nil, nil, nil, nil, nil)
	for _, attempt := range []int{0, 1, 2, 3, 5, 8, 30} {
		t.Run(fmt.Sprintf("attempt %d", attempt), func(t *testing.T) {
			// ExponentialJitterBackoff draws uniformly from [0, 2^attempt s); the attempt is kept at
			// most log2(60) = 5, where the draw is still jittered.
			hi := time.Duration(1<<min(max(attempt, 1), 5)) * time.Second
			seen := map[time.Duration]bool{}
			for range 400 {
				w := h.throttleWait(attempt, throttled())
				if w < time.Second || w > hi || w%time.Second != 0 {
					t.Fatalf("got wait %v, want whole seconds in [1s, %v]", w, hi)
				}
				seen[w] = true
			}
			if hi >= 4*time.Second && len(seen) < 3 {
				t.Errorf("got waits %v, want them spread over [1s, %v]", seen, hi)
			}
		})
	}
	fixed := func(d time.Duration) retry.BackoffDelayer {
		return retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return d, nil })
	}
	for _, tt := range []struct{ draw, want time.Duration }{
		{0, time.Second}, {1200 * time.Millisecond, 2 * time.Second}, {time.Hour, time.Minute},
	} {
		h.throttleBackoff = fixed(tt.draw)
		if got := h.throttleWait(4, throttled()); got != tt.want {
			t.Errorf("draw %v: got wait %v, want %v", tt.draw, got, tt.want)
		}
	}
}

// Throttling of DescribeExecution or StartExecution is never an error: the message is held with
// the jittered wait, WARN, and Throttles.
func TestThrottledCallsHold(t *testing.T) {
	const draw = 7 * time.Second
	tests := []struct {
		name       string
		env        map[string]string
		setup      func(r *rig)
		receives   int
		wantWait   int32
		wantStarts int
	}{
		{
			name: "DescribeExecution throttled",
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				r.sfn.describeErrs = []error{throttled()}
			},
			receives: 3,
			wantWait: 7,
		},
		{
			name:       "StartExecution throttled",
			setup:      func(r *rig) { r.sfn.startErrs = []error{tooManyRequests()} },
			wantWait:   7,
			wantStarts: 1,
		},
		{
			name: "DescribeExecution throttled while polling: polling stops, the running wait",
			env:  map[string]string{pipeline.EnvPollBudgetSeconds: "10"},
			setup: func(r *rig) {
				r.sfn.onDescribe = func(n int, f *fakeSFN) {
					// The first describe finds nothing, nor does the one under the other
					// idempotency key's name (renamed.go); the first poll is throttled.
					if n == 3 {
						f.describeErrs = []error{throttled()}
					}
				}
			},
			wantWait:   1, // the backoff of a running execution at attempt 1, not the throttle draw
			wantStarts: 1,
		},
		{
			name:       "with wake-up events: StartExecution throttled on the first delivery",
			env:        wakeEnv,
			setup:      func(r *rig) { r.sfn.startErrs = []error{throttled()} },
			wantWait:   7,
			wantStarts: 1,
		},
		{
			name: "with wake-up events: DescribeExecution throttled on a safety-net delivery",
			env:  wakeEnv,
			setup: func(r *rig) {
				r.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				r.sfn.describeErrs = []error{throttled()}
			},
			receives: 9,
			wantWait: 7,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.env)
			var drawnFor []int
			r.h.throttleBackoff = retry.BackoffDelayerFunc(func(attempt int, err error) (time.Duration, error) {
				drawnFor = append(drawnFor, attempt)
				if !throttledErr(err) {
					t.Errorf("got a draw for %v, want one for a throttling error", err)
				}
				return draw, nil
			})
			tt.setup(r)
			receives := max(tt.receives, 1)
			resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", eventBody(t, evID1, key1), receives)}})
			if err != nil {
				t.Fatalf("got error %v, want none: throttling is never an error", err)
			}
			if got := r.failures(resp); !slices.Equal(got, []string{"m1"}) {
				t.Errorf("got failures %v, want [m1] (held)", got)
			}
			if got := r.sqs.changes[len(r.sqs.changes)-1]; got.Seconds != tt.wantWait {
				t.Errorf("got last visibility %d s, want %d s (changes %v)", got.Seconds, tt.wantWait, r.sqs.changes)
			}
			if tt.wantWait == int32(draw/time.Second) && len(drawnFor) != 1 {
				t.Errorf("got draws for attempts %v, want one", drawnFor)
			}
			if r.sfn.starts != tt.wantStarts {
				t.Errorf("got %d starts, want %d", r.sfn.starts, tt.wantStarts)
			}
			if got := r.metricSums(t)[metrics.Throttles]; got != 1 {
				t.Errorf("got metric Throttles = %v, want 1", got)
			}
			if got := r.countLevel(t, "ERROR"); got != 0 {
				t.Errorf("got %d ERROR lines, want none: %v", got, r.logs(t))
			}
			r.findLog(t, "WARN", "throttled")
		})
	}
}
