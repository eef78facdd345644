package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// tier is acme's controller in one of the two tiers: a silo Handler, or the pool's dispatcher.
type tier struct {
	name string
	// deliver hands acme's head message m1 (the event for key1, execution evID1) to the controller
	// as its receives'th receive and reports whether it was released; sent overrides its
	// SentTimestamp attribute ("" removes it).
	deliver func(t *testing.T, receives int, sent *string) bool
	// wake hands the controller the status event of evID1 with status.
	wake          func(t *testing.T, status string)
	sfn           *fakeSFN
	s3            *fakeS3
	wakeReleases  func(t *testing.T) float64
	errorLines    func(t *testing.T) int
	visibleChange func() bool // whether the last visibility change made m1 visible
	advance       func(d time.Duration)
	// headQueued is the HeadQueuedSeconds of the last delivery.
	headQueued func(t *testing.T) float64
}

// lastValue is metric name in the last of lines that has it; -1 if none does.
func lastValue(lines []map[string]any, name string) float64 {
	v := -1.0
	for _, l := range lines {
		if f, ok := l[name].(float64); ok {
			v = f
		}
	}
	return v
}

// tiers builds acme's controller in both tiers with wake events on and env on top.
func tiers(t *testing.T, env map[string]string) []tier {
	t.Helper()
	all := maps.Clone(wakeEnv)
	maps.Copy(all, env)
	w := newWakeRig(t, all)
	silo := tier{
		name: "silo",
		deliver: func(t *testing.T, receives int, sent *string) bool {
			msg := message("m1", eventBody(t, evID1, key1), receives)
			msg.ReceiptHandle = fmt.Sprintf("rh-%d", receives)
			setSent(msg, sent)
			w.q.receive(msg.ReceiptHandle)
			resp, err := w.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}})
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if len(resp.BatchItemFailures) == 0 {
				w.q.mu.Lock()
				w.q.deleted = true
				w.q.mu.Unlock()
				return true
			}
			return false
		},
		wake:          func(t *testing.T, status string) { w.wake(t, evID1, status) },
		sfn:           w.sfn,
		s3:            w.s3,
		wakeReleases:  func(t *testing.T) float64 { return w.metricSums(t)[metrics.WakeReleases] },
		errorLines:    func(t *testing.T) int { return w.countLevel(t, "ERROR") },
		visibleChange: w.q.visible,
		advance: func(d time.Duration) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.now = w.now.Add(d)
		},
		headQueued: func(t *testing.T) float64 { return lastValue(w.out.Lines(t), metrics.HeadQueuedSeconds) },
	}
	r := newPoolRig(t, all)
	poolNow, setup := testStart, r.p.setup
	r.p.setup = func(h *Handler) {
		setup(h)
		h.now = func() time.Time { return poolNow }
	}
	pool := tier{
		name: "pool",
		deliver: func(t *testing.T, receives int, sent *string) bool {
			msg := poolMessage("m1", eventBody(t, evID1, acmeKey), "acme")
			msg.Attributes["ApproximateReceiveCount"] = fmt.Sprint(receives)
			msg.ReceiptHandle = fmt.Sprintf("rh-%d", receives)
			setSent(msg, sent)
			resp, err := r.p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}})
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			return len(resp.BatchItemFailures) == 0
		},
		wake: func(t *testing.T, status string) {
			input, err := json.Marshal(string(mustJSON(t, r.sfn.input(t, arn1))))
			if err != nil {
				t.Fatal(err)
			}
			payload := strings.Replace(string(statusPayload(t, evID1, status)), `"input": "{}"`, `"input": `+string(input), 1)
			if _, err := r.p.Invoke(context.Background(), json.RawMessage(payload)); err != nil {
				t.Fatalf("wake: got error %v, want none", err)
			}
		},
		sfn: r.sfn,
		s3:  r.s3,
		wakeReleases: func(t *testing.T) float64 {
			return r.metricSum(t, metrics.DimensionTenant, "acme", metrics.WakeReleases)
		},
		errorLines: func(t *testing.T) int {
			n := 0
			for _, l := range r.logs(t) {
				if l["level"] == "ERROR" {
					n++
				}
			}
			return n
		},
		visibleChange: func() bool {
			return len(r.sqs.changes) > 0 && r.sqs.changes[len(r.sqs.changes)-1].Seconds == 0
		},
		advance:    func(d time.Duration) { poolNow = poolNow.Add(d) },
		headQueued: func(t *testing.T) float64 { return lastValue(r.emf(t), metrics.HeadQueuedSeconds) },
	}
	return []tier{silo, pool}
}

func setSent(msg events.SQSMessage, sent *string) {
	if sent == nil {
		return
	}
	if *sent == "" {
		delete(msg.Attributes, "SentTimestamp")
		return
	}
	msg.Attributes["SentTimestamp"] = *sent
}

// protectedEnv is a controller whose bucket denies writes under control/ to all but the pipeline.
var protectedEnv = map[string]string{pipeline.EnvControlPrefixProtected: "true"}

// A recorded SUCCEEDED releases the file without a DescribeExecution only when control/ is
// protected and the record is this message's; every forged or foreign record leaves a running file
// held, in both tiers.
func TestReleaseOnRecord(t *testing.T) {
	// The record the wake-up handler writes for evID1's SUCCEEDED event, after the message was sent
	// (message: testStart - 90 s).
	genuine := pipeline.WakeDone{Version: 1, ExecutionName: evID1, ExecutionARN: arn1, Status: pipeline.StatusSucceeded,
		EventID: statusEventID, WrittenAt: testStart}
	noSent := ""
	tests := []struct {
		name          string
		env           map[string]string
		exec          sfntypes.ExecutionStatus // the execution's status in Step Functions
		record        func(d *pipeline.WakeDone)
		sent          *string // the message's SentTimestamp; nil: the fixture's
		wantRelease   bool
		wantDescribes int
		wantOnRecord  float64 // WakeReleases
		wantErrors    int
	}{
		{name: "protected: released on the record, no describe", env: protectedEnv, exec: sfntypes.ExecutionStatusSucceeded,
			wantRelease: true, wantOnRecord: 1},
		{name: "not protected: confirmed by exactly one describe", exec: sfntypes.ExecutionStatusSucceeded,
			wantRelease: true, wantDescribes: 1, wantOnRecord: 1},
		{name: "flag false: confirmed by exactly one describe", env: map[string]string{pipeline.EnvControlPrefixProtected: "false"},
			exec: sfntypes.ExecutionStatusSucceeded, wantRelease: true, wantDescribes: 1, wantOnRecord: 1},
		{name: "protected, forged: another execution's name", env: protectedEnv, exec: sfntypes.ExecutionStatusRunning,
			record: func(d *pipeline.WakeDone) { d.ExecutionName, d.ExecutionARN = evID2, testExecPrefix+evID2 }, wantDescribes: 1},
		{name: "protected, forged: the right name, another execution's ARN", env: protectedEnv, exec: sfntypes.ExecutionStatusRunning,
			record: func(d *pipeline.WakeDone) {
				d.ExecutionARN = "arn:aws:states:eu-west-1:123456789012:execution:globex-files:" + evID1
			}, wantDescribes: 1},
		{name: "protected, forged: wrong status", env: protectedEnv, exec: sfntypes.ExecutionStatusRunning,
			record: func(d *pipeline.WakeDone) { d.Status = pipeline.StatusAborted }, wantDescribes: 1},
		{name: "protected, forged: stale, written before the message was sent", env: protectedEnv, exec: sfntypes.ExecutionStatusRunning,
			record: func(d *pipeline.WakeDone) { d.WrittenAt = testStart.Add(-91 * time.Second) },
			// The confirmation contradicts it (ERROR), then the lookup after the wake-up state.
			wantDescribes: 2, wantErrors: 1},
		{name: "protected, forged: no event id", env: protectedEnv, exec: sfntypes.ExecutionStatusRunning,
			record: func(d *pipeline.WakeDone) { d.EventID = "" }, wantDescribes: 2, wantErrors: 1},
		{name: "protected: a stale record of a finished execution is confirmed, then released", env: protectedEnv,
			exec: sfntypes.ExecutionStatusSucceeded, record: func(d *pipeline.WakeDone) { d.WrittenAt = testStart.Add(-24 * time.Hour) },
			wantRelease: true, wantDescribes: 1, wantOnRecord: 1},
		{name: "protected: a message without SentTimestamp is confirmed", env: protectedEnv, exec: sfntypes.ExecutionStatusSucceeded,
			sent: &noSent, wantRelease: true, wantDescribes: 1, wantOnRecord: 1},
		{name: "not protected, forged: this execution's record while it runs is contradicted", exec: sfntypes.ExecutionStatusRunning,
			wantDescribes: 2, wantErrors: 1},
	}
	for _, tt := range tests {
		for _, tr := range tiers(t, tt.env) {
			t.Run(tr.name+"/"+tt.name, func(t *testing.T) {
				tr.sfn.set(arn1, tt.exec)
				d := genuine
				if tt.record != nil {
					tt.record(&d)
				}
				b, err := json.Marshal(d) // not EncodeWakeDone: a forged record need not be one this code writes
				if err != nil {
					t.Fatal(err)
				}
				tr.s3.objects[wakeDoneObjectOf(tr.s3.keysPool)] = string(b)
				if got := tr.deliver(t, 3, tt.sent); got != tt.wantRelease {
					t.Errorf("got released %v, want %v", got, tt.wantRelease)
				}
				if tr.sfn.describes != tt.wantDescribes {
					t.Errorf("got %d DescribeExecution calls, want %d", tr.sfn.describes, tt.wantDescribes)
				}
				if got := tr.wakeReleases(t); got != tt.wantOnRecord {
					t.Errorf("got WakeReleases %v, want %v", got, tt.wantOnRecord)
				}
				if got := tr.errorLines(t); got != tt.wantErrors {
					t.Errorf("got %d ERROR lines, want %d", got, tt.wantErrors)
				}
			})
		}
	}
}

// A file's whole life with wake events, in both tiers: started without a describe, woken by its
// status event, released on the record. A lost or late event costs the safety-net delivery and one
// describe; nothing is started twice.
func TestReleaseFlow(t *testing.T) {
	tests := []struct {
		name          string
		env           map[string]string
		event         string // "on time": before the safety-net delivery; "late": after it; "lost"
		wantDescribes int
	}{
		{"protected, event on time", protectedEnv, "on time", 0},
		{"not protected, event on time", nil, "on time", 1},
		{"protected, event lost", protectedEnv, "lost", 1},
		{"protected, file ends before its event arrives", protectedEnv, "late", 1},
		{"not protected, event lost", nil, "lost", 1},
	}
	for _, tt := range tests {
		for _, tr := range tiers(t, tt.env) {
			t.Run(tr.name+"/"+tt.name, func(t *testing.T) {
				if tr.deliver(t, 1, nil) {
					t.Fatal("first delivery: got released, want the file waited for")
				}
				if tr.sfn.describes != 0 || tr.sfn.starts != 1 {
					t.Fatalf("first delivery: got %d describes and %d starts, want 0 and 1", tr.sfn.describes, tr.sfn.starts)
				}
				tr.advance(10 * time.Minute)
				tr.sfn.set(arn1, sfntypes.ExecutionStatusSucceeded)
				if tt.event == "on time" {
					tr.wake(t, pipeline.StatusSucceeded)
					if !tr.visibleChange() {
						t.Fatal("got the head message not made visible, want it woken")
					}
				}
				// The woken delivery, or the one after the safety net.
				if !tr.deliver(t, 2, nil) {
					t.Fatal("second delivery: got held, want released")
				}
				if tt.event == "late" {
					tr.wake(t, pipeline.StatusSucceeded) // finds the message deleted: harmless
				}
				if tt.event == "on time" && tr.headQueued(t) != 90 {
					// Sent at testStart - 90 s, started at testStart: the record's start date, not
					// the time to the release.
					t.Errorf("got HeadQueuedSeconds %v on the release, want 90", tr.headQueued(t))
				}
				if tr.sfn.describes != tt.wantDescribes || tr.sfn.starts != 1 || len(tr.sfn.created) != 1 {
					t.Errorf("got %d describes, %d starts, %d executions, want %d, 1, 1", tr.sfn.describes, tr.sfn.starts, len(tr.sfn.created), tt.wantDescribes)
				}
				if got := tr.errorLines(t); got != 0 {
					t.Errorf("got %d ERROR lines, want none", got)
				}
			})
		}
	}
}
