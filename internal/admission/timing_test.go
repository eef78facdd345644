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
