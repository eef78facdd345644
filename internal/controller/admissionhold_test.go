package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// A waiting file's entry is armed for exactly the hold its message is given: one safety net next
// in line, several further back. An entry armed for one safety net while its message is held for
// several is skipped as gone by the release whose turn it is, and the wake-up is lost.
func TestAdmissionArmsTheHoldItsMessageGets(t *testing.T) {
	for _, ahead := range []int{0, 3, 10} {
		t.Run(fmt.Sprintf("%d ahead", ahead), func(t *testing.T) {
			w, a := newAdmissionRig(t, nil, 1)
			a.leases["another-file"] = true
			for i := range ahead {
				a.waiting = append(a.waiting, fmt.Sprintf("ahead-%d", i))
			}
			if w.deliver(t, 1) {
				t.Fatal("got released, want held while no slot is free")
			}
			last := w.q.changes[len(w.q.changes)-1]
			exec := a.waiting[ahead]
			if got, want := a.holds[exec], time.Duration(last.Seconds)*time.Second; got != want {
				t.Fatalf("got the entry armed for %s, want the message's hold %s", got, want)
			}
			if safety := w.h.cfg.admissionHold(); ahead >= 2 && a.holds[exec] <= safety {
				t.Errorf("%d ahead of a limit of 1: got a hold of %s, want longer than one safety net (%s)", ahead, a.holds[exec], safety)
			}
		})
	}
}

// A redrive or a replay takes its running-file slots first, like a file: at a full gate it waits,
// with no RedriveExecution and no StartExecution.
func TestControlRunsWaitForAdmission(t *testing.T) {
	tests := []struct {
		action string
		setup  func(r *rig)
	}{
		{pipeline.ControlRedrive, func(r *rig) { r.sfn.set(arn1, sfntypes.ExecutionStatusFailed) }},
		{pipeline.ControlReplay, func(*rig) {}},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			r, rs := newControlRig(t, admissionEnv)
			a := newFakeAdmission(1)
			a.leases["another-file"] = true
			r.h.admission = a
			tt.setup(r)
			before := slices.Clone(r.sfn.created)
			resp, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", r.s3.recordControl(t, controlBody(t, tt.action, nil)), 1)}})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.failures(resp); !slices.Equal(got, []string{"m1"}) {
				t.Fatalf("got batch item failures %v, want the control message held", got)
			}
			if got := r.sfn.created[len(before):]; len(got) != 0 || len(rs.calls) != 0 {
				t.Fatalf("got executions started %v and %d redrives at a full gate, want none", got, len(rs.calls))
			}
			if len(a.waiting) != 1 || len(a.armed) != 1 {
				t.Fatalf("got waiting %v, armed %v, want the %s waiting, armed", a.waiting, a.armed, tt.action)
			}
		})
	}
}

// A wake-up that fails is counted as failed (AdmissionWakeFailures, by tenant and by core system for
// the core system's gate), never as a handover; a receipt no longer current is no failure: its
// message is being delivered and claims the slot.
func TestWakeFailuresCounted(t *testing.T) {
	tests := []struct {
		name           string
		current        string // the receipt in flight
		err            error
		wantHandovers  float64
		wantFailures   float64
		wantCoreFailed float64
	}{
		{"woken", "rh-1", nil, 1, 0, 0},
		{"being delivered already", "rh-2", nil, 1, 0, 0},
		{"refused", "rh-1", errors.New("connection reset by peer"), 0, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, _ := newAdmissionRig(t, nil, 1)
			var core bytes.Buffer
			w.h.coreMetrics = func(name string) *metrics.Emitter {
				return metrics.NewDimension(&core, "TenantPipeline", metrics.DimensionCoreSystem, name)
			}
			w.q.receive(tt.current)
			w.q.err = tt.err
			w.h.wakeWaiters(context.Background(), w.h.log, []admission.Wake{{Gate: "core#ledger", Tenant: "acme", Execution: "e1",
				QueueURL: testQueueURL, ReceiptHandle: "rh-1", MessageID: "m1"}})
			sums := w.metricSums(t)
			if sums[metrics.AdmissionHandovers] != tt.wantHandovers || sums[metrics.AdmissionWakeFailures] != tt.wantFailures {
				t.Errorf("got %v handovers and %v wake failures, want %v and %v", sums[metrics.AdmissionHandovers], sums[metrics.AdmissionWakeFailures],
					tt.wantHandovers, tt.wantFailures)
			}
			got := float64(strings.Count(core.String(), `"`+metrics.AdmissionWakeFailures+`":1`))
			if got != tt.wantCoreFailed {
				t.Errorf("got %v AdmissionWakeFailures by core system (%s), want %v", got, core.String(), tt.wantCoreFailed)
			}
		})
	}
}

// A long hold is counted from the message's receive, which SQS counts its 12 hours from: a file far
// back in line, held late in its invocation, is held for what is left of them, and its entry is
// armed for that same hold.
func TestAdmissionHoldCountsFromTheReceive(t *testing.T) {
	tests := []struct {
		name         string
		attempt      int
		firstReceive time.Duration // before now; 0: no timestamp
		invoked      time.Duration // before now
		want         time.Duration
	}{
		{"invoked 10 minutes ago", 2, 0, 10 * time.Minute, 12*time.Hour - 11*time.Minute},
		{"first receive 20 minutes ago", 1, 20 * time.Minute, time.Minute, 12*time.Hour - 21*time.Minute},
		{"a later receive: its first receive's time is not its own", 3, 5 * time.Hour, 2 * time.Minute, 12*time.Hour - 3*time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, a := newAdmissionRig(t, nil, 1)
			a.leases["another-file"] = true
			for i := range 1000 { // far back: WaitHold's maximum
				a.waiting = append(a.waiting, fmt.Sprintf("ahead-%d", i))
			}
			now := w.h.now()
			msg := message("m1", eventBody(t, evID1, key1), tt.attempt)
			msg.ReceiptHandle = "rh-1"
			if tt.firstReceive > 0 {
				msg.Attributes["ApproximateFirstReceiveTimestamp"] = fmt.Sprint(now.Add(-tt.firstReceive).UnixMilli())
			}
			w.q.receive(msg.ReceiptHandle)
			ctx := withInvoked(context.Background(), now.Add(-tt.invoked))
			if _, err := w.h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
				t.Fatal(err)
			}
			last := w.q.changes[len(w.q.changes)-1]
			if got := time.Duration(last.Seconds) * time.Second; got != tt.want {
				t.Errorf("got the message held %s, want %s", got, tt.want)
			}
			if got := a.holds[a.waiting[len(a.waiting)-1]]; got != tt.want {
				t.Errorf("got the entry armed for %s, want %s", got, tt.want)
			}
		})
	}
}
