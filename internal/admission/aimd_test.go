package admission

import (
	"testing"
	"time"
)

func TestDecrease(t *testing.T) {
	tests := []struct{ limit, want int }{
		{16, 8}, {9, 4}, {3, 1}, {2, 1}, {1, 1}, {0, 1},
	}
	for _, tc := range tests {
		if got := Decrease(tc.limit); got != tc.want {
			t.Errorf("Decrease(%d): got %d, want %d", tc.limit, got, tc.want)
		}
	}
}

func TestIncrease(t *testing.T) {
	tests := []struct{ limit, max, want int }{
		{1, 8, 2}, {7, 8, 8}, {8, 8, 8}, {12, 8, 8}, {0, 8, 1},
	}
	for _, tc := range tests {
		if got := Increase(tc.limit, tc.max); got != tc.want {
			t.Errorf("Increase(%d, %d): got %d, want %d", tc.limit, tc.max, got, tc.want)
		}
	}
}

func TestClamp(t *testing.T) {
	tests := []struct{ limit, max, want int }{
		{4, 8, 4}, {12, 8, 8}, {0, 8, 1}, {-3, 8, 1},
	}
	for _, tc := range tests {
		if got := Clamp(tc.limit, tc.max); got != tc.want {
			t.Errorf("Clamp(%d, %d): got %d, want %d", tc.limit, tc.max, got, tc.want)
		}
	}
}

func TestCooldowns(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	tests := []struct {
		name     string
		since    time.Duration
		decrease bool
		increase bool
	}{
		{"just changed", 0, false, false},
		{"inside the decrease cooldown", DecreaseCooldown - time.Millisecond, false, false},
		{"at the decrease cooldown", DecreaseCooldown, true, false},
		{"inside the increase interval", IncreaseInterval - time.Millisecond, true, false},
		{"at the increase interval", IncreaseInterval, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := at.Add(tc.since)
			if got := decreaseDue(at, now); got != tc.decrease {
				t.Errorf("decrease due: got %v, want %v", got, tc.decrease)
			}
			if got := increaseDue(at, now); got != tc.increase {
				t.Errorf("increase due: got %v, want %v", got, tc.increase)
			}
		})
	}
}
