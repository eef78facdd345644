package localrun

import (
	"reflect"
	"testing"
	"time"
)

func TestTenantGaps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) *time.Time { x := t0.Add(time.Duration(s * float64(time.Second))); return &x }
	file := func(up, start, stop float64) FileReport {
		f := FileReport{UploadedAt: *at(up)}
		if start >= 0 {
			f.StartedAt = at(start)
		}
		if stop >= 0 {
			f.StoppedAt = at(stop)
		}
		return f
	}
	tests := []struct {
		name  string
		files []FileReport
		want  []float64
	}{
		{"none", nil, nil},
		{"one file", []FileReport{file(0, 1, 2)}, nil},
		{"queued behind each other", []FileReport{file(0, 0.5, 3), file(0, 3.25, 5), file(0, 6, 7)}, []float64{0.25, 1}},
		{"uploaded after the previous stopped: no gap", []FileReport{file(0, 1, 2), file(10, 10.5, 11)}, nil},
		{"the next still waiting", []FileReport{file(0, 1, 2), file(0, -1, -1)}, nil},
		{"the previous still running", []FileReport{file(0, 1, -1), file(0, -1, -1)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := (&TenantReport{Files: tt.files}).Gaps()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
