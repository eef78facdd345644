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

// TestDecreaseAllowed is the generation rule: one decrease per generation of running files, and
// a file of unknown admission lowers the limit only once between two raises.
func TestDecreaseAllowed(t *testing.T) {
	dec := time.UnixMilli(1_700_000_000_000) // the last decrease
	unknown := time.Time{}
	stored := func(limit int, decreasedAt, updatedAt time.Time) AdaptiveLimit {
		return AdaptiveLimit{Value: limit, Stored: true, DecreasedAt: decreasedAt, UpdatedAt: updatedAt}
	}
	tests := []struct {
		name     string
		cur      AdaptiveLimit
		admitted time.Time
		want     bool
	}{
		{"no item: the first 429 is heard", AdaptiveLimit{Value: 8}, dec.Add(-time.Hour), true},
		{"no item, unknown admission", AdaptiveLimit{Value: 8}, unknown, true},
		{"no item at maxRunningFiles 1", AdaptiveLimit{Value: 1}, dec, false},
		{"an item never decreased (written before decreasedAt)", stored(6, time.Time{}, dec), dec.Add(-time.Hour), true},
		{"never decreased, unknown admission", stored(6, time.Time{}, dec), unknown, true},
		{"admitted after the last decrease", stored(6, dec, dec), dec.Add(time.Millisecond), true},
		{"admitted at the last decrease", stored(6, dec, dec), dec, false},
		{"admitted before the last decrease", stored(6, dec, dec), dec.Add(-time.Second), false},
		{"admitted before the last decrease, raised since", stored(7, dec, dec.Add(time.Minute)), dec.Add(-time.Second), false},
		{"admitted after the last decrease, raised since", stored(7, dec, dec.Add(time.Minute)), dec.Add(time.Second), true},
		{"unknown admission right after a decrease", stored(6, dec, dec), unknown, false},
		{"unknown admission, raised since the last decrease", stored(7, dec, dec.Add(time.Minute)), unknown, true},
		{"a limit of 1 never falls", stored(1, dec, dec), dec.Add(time.Hour), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := decreaseAllowed(tc.cur, tc.admitted); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestIncreaseDue: a limit's worth of clean invocations raise it.
func TestIncreaseDue(t *testing.T) {
	tests := []struct {
		clean, limit int
		want         bool
	}{
		{0, 1, false}, {1, 1, true}, {3, 4, false}, {4, 4, true}, {5, 4, true}, {1, 0, true},
	}
	for _, tc := range tests {
		if got := increaseDue(tc.clean, tc.limit); got != tc.want {
			t.Errorf("increaseDue(%d, %d): got %v, want %v", tc.clean, tc.limit, got, tc.want)
		}
	}
}
