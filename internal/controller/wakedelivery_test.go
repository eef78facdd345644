package controller

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// A delivery with wake-up events on: what it writes, calls and waits.
func TestWakeDelivery(t *testing.T) {
	tests := []struct {
		name          string
		env           map[string]string
		setup         func(t *testing.T, w *wakeRig)
		receives      int
		wantRelease   bool
		wantChanges   []visibilityChange
		wantDescribes int
		wantStarts    int
		wantState     bool // wake.json names this delivery afterwards
		wantMetrics   map[string]float64
		wantSleeps    int
		wantErrors    int
	}{
		{
			name:        "first delivery: state, safety net, StartExecution without a describe",
			receives:    1,
			wantChanges: []visibilityChange{{"rh-1", 300}},
			wantStarts:  1,
			wantState:   true,
			wantMetrics: map[string]float64{metrics.Starts: 1, metrics.Waits: 1},
		},
		{
			name:        "first delivery of a finished execution: ExecutionAlreadyExists, then describe",
			setup:       func(t *testing.T, w *wakeRig) { w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded) },
			receives:    1,
			wantRelease: true,
			// The safety net was set before the lookup; the released message is deleted anyway.
			wantChanges:   []visibilityChange{{"rh-1", 300}},
			wantDescribes: 1,
			wantStarts:    1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Completions: 1, metrics.Starts: 0},
		},
		{
			name:          "safety-net delivery of a running execution: one describe, no poll",
			env:           map[string]string{pipeline.EnvPollBudgetSeconds: "10"},
			setup:         func(t *testing.T, w *wakeRig) { w.sfn.set(arn1, sfntypes.ExecutionStatusRunning) },
			receives:      5,
			wantChanges:   []visibilityChange{{"rh-5", 300}},
			wantDescribes: 1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Waits: 1},
		},
		{
			name:        "the delivery that starts the execution polls (budget 10 s)",
			env:         map[string]string{pipeline.EnvPollBudgetSeconds: "10"},
			receives:    1,
			wantChanges: []visibilityChange{{"rh-1", 300}},
			wantStarts:  1, wantDescribes: 3, wantSleeps: 3,
			wantState:   true,
			wantMetrics: map[string]float64{metrics.Waits: 1},
		},
		{
			name: "recorded SUCCEEDED: confirmed by one describe, released with no state and no visibility change",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				w.putDone(t, evID1, "SUCCEEDED")
			},
			receives:      3,
			wantRelease:   true,
			wantDescribes: 1,
			wantMetrics:   map[string]float64{metrics.Completions: 1, metrics.WakeReleases: 1},
		},
		{
			name: "recorded SUCCEEDED, control/ protected: released on the record, no describe, no state, no visibility change",
			env:  map[string]string{pipeline.EnvControlPrefixProtected: "true"},
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				w.putDone(t, evID1, "SUCCEEDED")
			},
			receives:    3,
			wantRelease: true,
			wantMetrics: map[string]float64{metrics.Completions: 1, metrics.WakeReleases: 1},
		},
		{
			// Anyone who may write control/ can write the record: Step Functions decides.
			name: "forged SUCCEEDED record of a running execution: not released",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				w.putDone(t, evID1, "SUCCEEDED")
			},
			receives:    3,
			wantChanges: []visibilityChange{{"rh-3", 300}},
			// The confirmation, then the lookup after the wake-up state is written (the order of
			// writes that keeps a real end from waiting for the safety net).
			wantDescribes: 2,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.WakeReleases: 0, metrics.Completions: 0, metrics.WakeStateErrors: 1},
			wantErrors:    1,
		},
		{
			name: "forged SUCCEEDED record of a failed execution: the failure policy applies",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				w.putDone(t, evID1, "SUCCEEDED")
			},
			receives:      3,
			wantRelease:   true,
			wantChanges:   []visibilityChange{{"rh-3", 300}},
			wantDescribes: 2,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.FailedFiles: 1, metrics.WakeReleases: 0, metrics.Completions: 0},
			wantErrors:    2, // the contradicted record and the failed file
		},
		{
			name: "recorded SUCCEEDED, the confirmation throttled: held, not released",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				w.putDone(t, evID1, "SUCCEEDED")
				w.sfn.describeErrs = []error{throttled()}
			},
			receives:      3,
			wantChanges:   []visibilityChange{{"rh-3", 4}}, // the throttled wait (no jitter in tests)
			wantDescribes: 1,
			wantMetrics:   map[string]float64{metrics.Throttles: 1, metrics.WakeReleases: 0, metrics.Completions: 0},
		},
		{
			name: "recorded FAILED is described: the policy needs its details",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusFailed)
				w.putDone(t, evID1, "FAILED")
			},
			receives:      3,
			wantRelease:   true,
			wantChanges:   []visibilityChange{{"rh-3", 300}},
			wantDescribes: 1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.FailedFiles: 1, metrics.WakeReleases: 0},
			wantErrors:    1, // the failed file's ERROR line
		},
		{
			name: "recorded SUCCEEDED of another execution is not this file's",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				w.putDone(t, evID2, "SUCCEEDED")
			},
			receives:      3,
			wantChanges:   []visibilityChange{{"rh-3", 300}},
			wantDescribes: 1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.WakeReleases: 0},
		},
		{
			name: "unreadable record: describe",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				w.s3.objects[wakeDoneObject] = "garbage"
			},
			receives:      3,
			wantChanges:   []visibilityChange{{"rh-3", 300}},
			wantDescribes: 1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.WakeStateErrors: 1},
			wantErrors:    1, // only this code writes the record: a corrupt one is a fault
		},
		{
			name: "no record and no s3:ListBucket: the 403 reads as no record, not an error",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				w.s3.noListBucket = true
			},
			receives:      3,
			wantChanges:   []visibilityChange{{"rh-3", 300}},
			wantDescribes: 1,
			wantState:     true,
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.WakeStateErrors: 0},
		},
		{
			name: "state not written: not armed, the backoff wait",
			setup: func(t *testing.T, w *wakeRig) {
				w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
				w.s3.putErr = throttled()
			},
			receives:      4,
			wantChanges:   []visibilityChange{{"rh-4", 8}},
			wantDescribes: 1,
			wantMetrics:   map[string]float64{metrics.Waits: 1, metrics.WakeStateErrors: 1},
		},
		{
			name:          "events off: no state, the backoff wait",
			env:           map[string]string{pipeline.EnvWakeEvents: "false"},
			setup:         func(t *testing.T, w *wakeRig) { w.sfn.set(arn1, sfntypes.ExecutionStatusRunning) },
			receives:      4,
			wantChanges:   []visibilityChange{{"rh-4", 8}},
			wantDescribes: 1,
			wantMetrics:   map[string]float64{metrics.Waits: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWakeRig(t, tt.env)
			if tt.setup != nil {
				tt.setup(t, w)
			}
			if got := w.deliver(t, tt.receives); got != tt.wantRelease {
				t.Errorf("got released %v, want %v", got, tt.wantRelease)
			}
			if !slices.Equal(w.q.changes, tt.wantChanges) {
				t.Errorf("got visibility changes %v, want %v", w.q.changes, tt.wantChanges)
			}
			if w.sfn.describes != tt.wantDescribes || w.sfn.starts != tt.wantStarts {
				t.Errorf("got %d describes and %d starts, want %d and %d", w.sfn.describes, w.sfn.starts, tt.wantDescribes, tt.wantStarts)
			}
			if len(w.sleeps) != tt.wantSleeps {
				t.Errorf("got sleeps %v, want %d", w.sleeps, tt.wantSleeps)
			}
			_, written := w.s3.objects[wakeStateObject]
			if written != tt.wantState {
				t.Fatalf("got wake state written %v, want %v", written, tt.wantState)
			}
			if written {
				s := w.state(t)
				want := pipeline.WakeState{Version: 1, ExecutionName: evID1, ExecutionARN: arn1, MessageID: "m1",
					ReceiptHandle: fmt.Sprintf("rh-%d", tt.receives), QueueURL: testQueueURL, WrittenAt: testStart}
				if s != want {
					t.Errorf("got wake state %+v, want %+v", s, want)
				}
			}
			w.checkMetrics(t, tt.wantMetrics)
			if got := w.countLevel(t, "ERROR"); got != tt.wantErrors {
				t.Errorf("got %d ERROR lines, want %d: %v", got, tt.wantErrors, w.logs(t))
			}
		})
	}
}

// The order of writes: whenever the execution ends and its status event is handled, relative to
// the delivery's steps, the end is noticed: the delivery releases the message, or the message is
// visible again when the delivery is over. A lost event aside, no end waits for the safety net.
func TestWakeWriteOrder(t *testing.T) {
	points := []string{
		"before the delivery",
		"after the wake-state write",
		"after the safety-net visibility",
		"after the describe",
		"after the delivery",
	}
	for _, protected := range []bool{false, true} {
		for _, receives := range []int{1, 3} { // the delivery that starts, and a safety-net delivery
			for _, at := range points {
				if receives == 1 && at == "before the delivery" {
					continue // the execution does not exist before its first delivery
				}
				t.Run(fmt.Sprintf("protected %v, receive %d, ends %s", protected, receives, at), func(t *testing.T) {
					w := newWakeRig(t, map[string]string{pipeline.EnvControlPrefixProtected: fmt.Sprint(protected)})
					if receives > 1 {
						w.sfn.set(arn1, sfntypes.ExecutionStatusRunning)
						w.putState(t, evID1, "rh-1") // the previous delivery's state
					}
					var once sync.Once
					end := func() {
						once.Do(func() {
							w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
							w.wake(t, evID1, "SUCCEEDED")
						})
					}
					switch at {
					case "before the delivery":
						end()
					case "after the wake-state write":
						w.s3h.afterPut = func(key string) {
							if key == pipeline.WakeStateKey(pipeline.SiloOwner("acme")) {
								end()
							}
						}
					case "after the safety-net visibility":
						w.q.afterChange = func(c visibilityChange) {
							if c.Seconds > 0 {
								end()
							}
						}
					case "after the describe":
						w.sfh.afterDescribe = end
						if receives == 1 {
							// The first delivery does not describe: it ends right after its start.
							w.sfn.afterStart = end
						}
					}
					released := w.deliver(t, receives)
					if at == "after the delivery" {
						end()
					}
					// An end before the lookup is noticed by the lookup, in this very delivery.
					beforeLookup := at != "after the describe" && at != "after the delivery"
					if beforeLookup && !released {
						t.Errorf("got the message kept, want it released in the same delivery (the lookup comes after the wake-up state)")
					}
					if !released && !w.q.visible() {
						t.Errorf("got the message neither released nor visible (changes %v): the end waits for the safety net", w.q.changes)
					}
					if w.sfn.describes > 1 {
						t.Errorf("got %d describes in one delivery, want at most 1", w.sfn.describes)
					}
					// The woken delivery releases the file from the record: confirmed by one describe, or
					// on the record alone when control/ is protected.
					if !released {
						before := w.sfn.describes
						if !w.deliver(t, receives+1) {
							t.Errorf("got the woken delivery kept, want it released")
						}
						want := 1
						if protected {
							want = 0
						}
						if w.sfn.describes != before+want {
							t.Errorf("got %d describes in the woken delivery, want %d", w.sfn.describes-before, want)
						}
					}
				})
			}
		}
	}
}

// Lost and duplicated events over a run of several files: each file's end either wakes its head
// message or is found by the safety-net delivery; nothing is started twice.
func TestWakeLostAndDuplicatedEvents(t *testing.T) {
	tests := []struct {
		name             string
		deliver          int // copies of the status event delivered: 0 lost, 2 duplicated
		wantNextDelivery time.Duration
	}{
		{"delivered once", 1, 0},
		{"duplicated", 2, 0},
		{"lost", 0, 300 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWakeRig(t, nil)
			if w.deliver(t, 1) {
				t.Fatal("first delivery: got released, want the file waited for")
			}
			w.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
			for range tt.deliver {
				w.wake(t, evID1, "SUCCEEDED")
			}
			next := 300 * time.Second
			if w.q.visible() {
				next = 0
			}
			if next != tt.wantNextDelivery {
				t.Errorf("got the next delivery after %v, want %v", next, tt.wantNextDelivery)
			}
			if !w.deliver(t, 2) {
				t.Errorf("got the next delivery kept, want it released")
			}
			if got := len(w.sfn.created); got != 1 {
				t.Errorf("got %d executions, want 1", got)
			}
			// A copy that arrives after the release finds a deleted message.
			w.wake(t, evID1, "SUCCEEDED")
			if w.countLevel(t, "ERROR") != 0 {
				t.Errorf("got ERROR lines, want none: %v", w.logs(t))
			}
		})
	}
}
