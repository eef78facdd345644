package localrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
)

// Step Functions status change events, the EventBridge rules with a Lambda target, and throttling of
// the pipeline's Step Functions calls (docs/local-run.md, "Status change events and throttling").

// StatusEvents configures the delivery of the Step Functions server's "Step Functions Execution
// Status Change" events. EventBridge delivers AWS service events on a best-effort basis: an event
// can be lost or arrive twice
// (https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html,
// https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html).
type StatusEvents struct {
	// Drop is the fraction (0 to 1) of status change events that are lost before routing. It is
	// drawn for the events that match a rule only (the file executions' ends): losing an event no
	// rule matches changes nothing, and so the number of drops in a run depends on the seed, not
	// on the order in which executions of different tenants happen to end.
	Drop float64
	// Duplicate routes every status change event twice (same id, same body).
	Duplicate bool
	// Seed makes the drops deterministic (0: a fixed default seed).
	Seed uint64
}

// SFNThrottle makes the pipeline's Step Functions endpoint answer ThrottlingException (HTTP 400,
// __type ThrottlingException) to a fraction of calls, as Step Functions does when the account's
// token bucket of an API action is empty
// (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html#service-limits-api-action-throttling-general,
// https://docs.aws.amazon.com/step-functions/latest/apireference/CommonErrors.html). Only the
// pipeline's calls are throttled, not the harness's own monitoring.
type SFNThrottle struct {
	DescribeExecution float64 // fraction (0 to 1) of DescribeExecution calls refused
	StartExecution    float64 // fraction (0 to 1) of StartExecution calls refused
	Seed              uint64  // 0: a fixed default seed
}

// StatusEventCounts counts the status change events of a run.
type StatusEventCounts struct {
	Emitted int64 // sent by the Step Functions server
	Dropped int64 // lost by EventBridgeOptions.StatusEvents.Drop (events that match a rule)
	Routed  int64 // routed to the rules (a duplicated event counts twice)
	Invokes int64 // asynchronous invocations of rule targets, retries included
	Retries int64 // retries after a function error or a throttle
	// DeadLettered counts the events sent to a function's dead-letter queue; Discarded the events
	// dropped after their last attempt or their maximum age without one (asyncinvoke.go).
	DeadLettered int64
	Discarded    int64
	Throttled    map[string]int64
}

// statusState is the run's state for status events and Step Functions throttling.
type statusState struct {
	mu       sync.Mutex
	events   *rand.Rand
	throttle *rand.Rand
	counts   StatusEventCounts
	// starts counts, per Lambda invocation id, the StartExecution calls that reached the server.
	starts map[string]int64
	async  sync.WaitGroup
}

func (c *Cloud) status() *statusState {
	c.statusOnce.Do(func() {
		seed := func(s uint64) uint64 {
			if s == 0 {
				return 12
			}
			return s
		}
		c.statusSt = &statusState{
			events:   rand.New(rand.NewPCG(seed(c.opts.events.StatusEvents.Seed), 1)),
			throttle: rand.New(rand.NewPCG(seed(c.opts.sfn.Throttle.Seed), 2)),
			starts:   map[string]int64{},
			counts:   StatusEventCounts{Throttled: map[string]int64{}},
		}
	})
	return c.statusSt
}

// StatusEventCounts returns the counts of status change events and throttled calls so far.
func (c *Cloud) StatusEventCounts() StatusEventCounts {
	st := c.status()
	st.mu.Lock()
	defer st.mu.Unlock()
	counts := st.counts
	counts.Throttled = map[string]int64{}
	for k, v := range st.counts.Throttled {
		counts.Throttled[k] = v
	}
	return counts
}

// invocationOfTrace returns the Lambda invocation id a request was made for, from its X-Amzn-Trace-Id
// header: inside Lambda, aws-lambda-go sets _X_AMZN_TRACE_ID to the invocation's
// Lambda-Runtime-Trace-Id for each invocation, and the AWS SDK for Go v2 sends it as X-Amzn-Trace-Id
// (its recursion detection middleware, aws/middleware/recursion_detection.go). The harness's runtime
// API builds the trace id from the invocation id ("Root=1-<id[:8]>-<id[8:32]>").
func invocationOfTrace(h string) string {
	for _, part := range strings.Split(h, ";") {
		v, ok := strings.CutPrefix(strings.TrimSpace(part), "Root=1-")
		if !ok {
			continue
		}
		a, b, ok := strings.Cut(v, "-")
		if ok && len(a) == 8 && len(b) == 24 {
			return a + b
		}
	}
	return ""
}

// sfnGate wraps the pipeline's Step Functions endpoint: it refuses the configured fraction of calls
// with ThrottlingException (counted as calls, since the pipeline made them) and counts the
// StartExecution calls of each Lambda invocation.
func (c *Cloud) sfnGate(inner http.Handler) http.Handler {
	st := c.status()
	th := c.opts.sfn.Throttle
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		op := req.Header.Get("X-Amz-Target")
		if i := strings.LastIndex(op, "."); i >= 0 {
			op = op[i+1:]
		}
		frac := 0.0
		switch op {
		case "DescribeExecution":
			frac = th.DescribeExecution
		case "StartExecution":
			frac = th.StartExecution
		}
		st.mu.Lock()
		refuse := frac > 0 && st.throttle.Float64() < frac
		if refuse {
			st.counts.Throttled[op]++
		} else if op == "StartExecution" {
			if id := invocationOfTrace(req.Header.Get("X-Amzn-Trace-Id")); id != "" {
				st.starts[id]++
			}
		}
		st.mu.Unlock()
		if refuse {
			c.Counter.Add("stepfunctions", op)
			io.Copy(io.Discard, req.Body)
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("X-Amzn-ErrorType", "ThrottlingException")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"__type":"ThrottlingException","message":"Rate exceeded"}`)
			return
		}
		inner.ServeHTTP(w, req)
	})
}

// startsOf returns and forgets the StartExecution calls made for one Lambda invocation.
func (c *Cloud) startsOf(invocationID string) int64 {
	st := c.status()
	st.mu.Lock()
	defer st.mu.Unlock()
	n := st.starts[invocationID]
	delete(st.starts, invocationID)
	return n
}

// eventsHandler receives the events the Step Functions server emits (POST, one event per request)
// and routes them as EventBridge routes events of the default bus: through every rule's pattern.
func (c *Cloud) eventsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var ev map[string]any
		if err := json.NewDecoder(req.Body).Decode(&ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		st := c.status()
		routable := c.matchesRule(ev)
		st.mu.Lock()
		st.counts.Emitted++
		drop := routable && c.opts.events.StatusEvents.Drop > 0 && st.events.Float64() < c.opts.events.StatusEvents.Drop
		if drop {
			st.counts.Dropped++
		}
		st.mu.Unlock()
		if drop {
			return
		}
		copies := 1
		if c.opts.events.StatusEvents.Duplicate {
			copies = 2
		}
		for range copies {
			st.mu.Lock()
			st.counts.Routed++
			st.mu.Unlock()
			c.PutEvent(context.Background(), ev)
		}
	})
}

// matchesRule reports whether any rule of the templates matches the event.
func (c *Cloud) matchesRule(ev map[string]any) bool {
	for _, rl := range c.rules {
		if rl.pattern.Match(ev) {
			return true
		}
	}
	return false
}

func isThrottle(err error) bool { return errors.Is(err, emulate.ErrThrottled) }
