package workflows

import (
	"fmt"
	"math"
	"testing"
	"time"

	sfn "github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// The history a throttle may fill, from Step Functions' quota of 25,000 events per execution
// (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html) and what each state
// machine writes of its own at its largest (test/limits_test.go counts both from the rendered
// definitions):
//   - a file execution of pipeline.MaxSegments segments: started 1, FileSize 2, a SmallFile task
//     that hands the file on 5, Split 5, OneSegment 2, the Segments Map 4, 8 a segment, Results 5,
//     succeeded 1;
//   - a file execution of one segment of pipeline.SegmentChunks chunks, which runs the segment's
//     loop itself, one Register invocation each: started 1, FileSize 2, SmallFile 5, Split 5,
//     OneSegment 2, Register and NextChunks 7 a chunk, Results 5, succeeded 1;
//   - a segment execution of pipeline.SegmentChunks chunks, one Register invocation each (its worst
//     case): started 1, Register and NextChunks 7 a chunk, SegmentDone 2, succeeded 1.
//
// An attempt that fails writes 3 events (TaskScheduled, TaskStarted, TaskFailed or
// TaskSubmitFailed); AWS documents no count per attempt, so 4 are counted.
const (
	testHistoryLimit     = 25000
	testEventsPerAttempt = 4
)

var throttleRoom = map[string]int{
	"file":    testHistoryLimit - max(1+2+5+5+2+4+8*pipeline.MaxSegments+5+1, 1+2+5+5+2+7*pipeline.SegmentChunks+5+1),
	"segment": testHistoryLimit - (1 + 7*pipeline.SegmentChunks + 2 + 1),
}

// meanAttempts is how many attempts a retrier makes, on average, while a throttle lasts seconds:
// its waits grow from IntervalSeconds by BackoffRate up to MaxDelaySeconds, and FULL jitter draws
// each uniformly below its cap, so a wait lasts half of it on average.
// https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html
func meanAttempts(t *testing.T, r map[string]any, seconds float64) int {
	t.Helper()
	interval, _ := r["IntervalSeconds"].(float64)
	backoff, _ := r["BackoffRate"].(float64)
	maxDelay, _ := r["MaxDelaySeconds"].(float64)
	if r["JitterStrategy"] != "FULL" || interval <= 0 || backoff < 1 || maxDelay <= 0 {
		t.Fatalf("retrier %v: want FULL jitter, IntervalSeconds, BackoffRate and MaxDelaySeconds", r)
	}
	n, elapsed, d := 0, 0.0, interval
	for elapsed+min(d, maxDelay)/2 <= seconds {
		elapsed += min(d, maxDelay) / 2
		d *= backoff
		n++
	}
	return n
}

// Known answers of the arithmetic: a 5 s cap makes 1,440 attempts an hour and writes the whole
// history of 25,000 events (at 3 an attempt) in 6 hours; the 5-minute cap makes 24 an hour.
func TestMeanAttempts(t *testing.T) {
	retrier := func(maxDelay float64) map[string]any {
		return map[string]any{"IntervalSeconds": 5.0, "BackoffRate": 2.0, "MaxDelaySeconds": maxDelay, "JitterStrategy": "FULL"}
	}
	tests := []struct {
		maxDelay float64
		hours    float64
		want     int
	}{
		{5, 1, 1440},
		{5, 6, 8640}, // × 3 events: 25,920, the whole history
		// 5, 10, 20, 40, 80 and 160 s (157.5 s on average), then 150 s each: 6 + 22 in the first hour.
		{300, 1, 28},
		{300, 24, 6 + 574},
	}
	for _, tt := range tests {
		if got := meanAttempts(t, retrier(tt.maxDelay), tt.hours*3600); got != tt.want {
			t.Errorf("cap %v s, %v h: got %d attempts, want %d", tt.maxDelay, tt.hours, got, tt.want)
		}
	}
}

// A throttle that lasts as long as the execution may run (its TimeoutSeconds) never fills the
// history: every retrier that waits out a throttle (MaxAttempts 99,999,999) has a cap long enough,
// in both state machines, for the default timeout and the longest the construct accepts.
func TestThrottleCapKeepsTheHistory(t *testing.T) {
	for _, timeout := range []time.Duration{time.Hour, 24 * time.Hour, 7*24*time.Hour - time.Second} {
		for name, which := range map[string]func(*Workflow) sfn.StateMachine{
			"file":    func(w *Workflow) sfn.StateMachine { return w.File },
			"segment": func(w *Workflow) sfn.StateMachine { return w.Segment },
		} {
			t.Run(fmt.Sprintf("%s %v", name, timeout), func(t *testing.T) {
				def := aslOf(t, timeout, true, which)
				seconds, _ := def["TimeoutSeconds"].(float64)
				if seconds != math.Round(timeout.Seconds()) {
					t.Fatalf("got TimeoutSeconds %v, want %v", def["TimeoutSeconds"], timeout.Seconds())
				}
				found := 0
				for state, r := range retriers(def) {
					if r["MaxAttempts"] != float64(maxRetryAttempts) {
						continue
					}
					found++
					events := testEventsPerAttempt * meanAttempts(t, r, seconds)
					if events > throttleRoom[name] {
						t.Errorf("%s: a throttle of %v writes %d events with MaxDelaySeconds %v, want at most the %d the %s execution leaves",
							state, timeout, events, r["MaxDelaySeconds"], throttleRoom[name], name)
					}
				}
				if found == 0 {
					t.Fatal("got no throttle retrier, want one on every task")
				}
			})
		}
	}
}

// retriers yields each retrier of the definition's Task states, Map iterations included, with its
// state's name.
func retriers(def map[string]any) func(yield func(string, map[string]any) bool) {
	return func(yield func(string, map[string]any) bool) {
		var walk func(states map[string]any) bool
		walk = func(states map[string]any) bool {
			for name, v := range states {
				st := v.(map[string]any)
				for _, key := range []string{"ItemProcessor", "Iterator"} {
					if sub, ok := st[key].(map[string]any); ok && !walk(sub["States"].(map[string]any)) {
						return false
					}
				}
				rs, _ := st["Retry"].([]any)
				for _, r := range rs {
					if !yield(name, r.(map[string]any)) {
						return false
					}
				}
			}
			return true
		}
		walk(def["States"].(map[string]any))
	}
}
