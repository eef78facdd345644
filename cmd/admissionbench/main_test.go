//go:build e2e

package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// The simulation runs on its own clock, one event at a time, so its figures do not depend on how
// busy the machine is: a small burst must keep the slots busy, admit every tenant close to the
// ideal, and beat the polling reference on the same input.
func TestBurstKeepsSlotsBusy(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := emulate.StartDynalite(context.Background(), deploy.NodeBinary(root), root, io.Discard)
	if err != nil {
		t.Fatalf("dynalite (make setup): %v", err)
	}
	defer stop()
	o := options{slots: 10, fileDur: 10 * time.Second, controllers: 4, invocation: 5 * time.Millisecond, perCall: 4 * time.Millisecond,
		delivery: 50 * time.Millisecond, event: 150 * time.Millisecond, safetyNet: 5 * time.Minute, pollWindow: time.Hour, maxWallClock: 5 * time.Minute}
	push, err := simulate(context.Background(), o, url, "push", 100, false)
	if err != nil {
		t.Fatal(err)
	}
	poll, err := simulate(context.Background(), o, url, "poll", 100, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(push.line(o))
	t.Log(poll.line(o))
	if !push.allStarted || push.utilization() < 0.9 || push.lastFirst.Seconds() > 1.2*push.ideal(o).Seconds() || push.invocationsPerFile() > 3 {
		t.Errorf("push: got %s, want every tenant started, utilization ≥ 90 %%, the last first start within 1.2x of the ideal, ≤ 3 invocations a file", push.line(o))
	}
	if push.utilization() < 1.3*poll.utilization() || push.readUnitsPerFile() >= poll.readUnitsPerFile() {
		t.Errorf("push against poll: utilization %.2f vs %.2f, read units %.1f vs %.1f, want push 1.3x as busy and cheaper",
			push.utilization(), poll.utilization(), push.readUnitsPerFile(), poll.readUnitsPerFile())
	}
	weights, err := simulate(context.Background(), o, url, "push", 100, true)
	if err != nil {
		t.Fatal(err)
	}
	if weights.light == 0 || weights.heavy < 4*weights.light {
		t.Errorf("weights: got %s heavy:light, want at least 4x", ratio(weights.heavy, weights.light))
	}
}

// A lost wake-up is handed on within one reconciler period once the gate is also reconciled on
// its schedule; with the reconciler run only by asks and releases, a wake-up lost at the burst's
// tail waits for its waiter's hold.
func TestLostWakeUpsHandedOnBySchedule(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := emulate.StartDynalite(context.Background(), deploy.NodeBinary(root), root, io.Discard)
	if err != nil {
		t.Fatalf("dynalite (make setup): %v", err)
	}
	defer stop()
	tests := []struct {
		name      string
		timer     time.Duration
		wantAllIn bool // every lost wake-up handed on within one reconciler period
	}{
		{name: "scheduled every minute", timer: time.Minute, wantAllIn: true},
		{name: "asks and releases only", timer: 0, wantAllIn: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options{slots: 10, fileDur: 10 * time.Second, controllers: 4, invocation: 5 * time.Millisecond, perCall: 4 * time.Millisecond,
				delivery: 50 * time.Millisecond, event: 150 * time.Millisecond, safetyNet: 5 * time.Minute, pollWindow: time.Hour,
				maxWallClock: 5 * time.Minute, loseEvery: 10, reconcileTimer: tt.timer}
			res, err := simulate(context.Background(), o, url, "push", 200, false)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d lost, %d within one reconciler period, the slowest %s", res.lost, res.inTimer, res.slowestHandOn)
			if res.lost == 0 {
				t.Fatal("got no lost wake-up, want some")
			}
			if allIn := res.inTimer == res.lost; allIn != tt.wantAllIn {
				t.Errorf("got %d of %d lost wake-ups handed on within one reconciler period, want all: %v", res.inTimer, res.lost, tt.wantAllIn)
			}
		})
	}
}
