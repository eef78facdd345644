package admission

import (
	"testing"
	"time"
)

// A hold is counted from the receive: what is left of the 12 hours SQS allows from it, less the
// margin, never more, whenever in the invocation it is set.
func TestHoldLeftCountsFromTheReceive(t *testing.T) {
	received := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		since time.Duration
		want  time.Duration
	}{
		{0, 12*time.Hour - time.Minute},
		{10 * time.Minute, 12*time.Hour - 11*time.Minute},
		{-time.Second, 12*time.Hour - time.Minute}, // a clock behind the receive: no more than the whole
		{13 * time.Hour, 0},
	}
	for _, tt := range tests {
		got := HoldLeft(received, received.Add(tt.since))
		if got != tt.want {
			t.Errorf("%s after the receive: got %s, want %s", tt.since, got, tt.want)
		}
		if got > 0 && got+tt.since > MaxVisibility {
			t.Errorf("%s after the receive: a hold of %s ends past SQS's 12 hours from the receive", tt.since, got)
		}
	}
}

// A far-back waiter's hold is sized from its expected wait at the gate's pace, when known: twice
// that wait, at least the safety net, never more than the rounds of safety nets ahead of it.
func TestHoldSizedFromTheExpectedWait(t *testing.T) {
	const net = 5 * time.Minute
	tests := []struct {
		name     string
		ahead    int
		expected time.Duration
		want     time.Duration
	}{
		{"pace unknown: rounds of safety nets", 1000, 0, 101 * net},
		{"far back at a brisk pace", 1000, 20 * time.Minute, 40 * time.Minute},
		{"next in line", 0, 10 * time.Second, net},
		{"slower than the rounds", 1000, 10 * time.Hour, 101 * net},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decision{Ahead: tt.ahead, ExpectedWait: tt.expected}
			if got := d.Hold(net, 10); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}
