package register

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
	"github.com/example/tenantpipeline/spec"
)

// TestMaintenanceHolds: while a maintenance window of the tenant's core system is open, Register
// sends nothing and ends the invocation successfully with the cursor at the unsent record, as a
// long Retry-After does; a window that opens mid-file stops it at the first record after the
// start. Once the window has ended, the next invocation sends the held record with its same key.
func TestMaintenanceHolds(t *testing.T) {
	// Now, not a fixed date: the invocation's context carries a real deadline. The window opens
	// at the next whole minute (start), for 5 minutes.
	start := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	window := spec.MaintenanceWindow{Cron: fmt.Sprintf("%d %d * * *", start.Minute(), start.Hour()), Duration: "5m"}
	tests := []struct {
		name      string
		from      time.Time // the clock at the invocation's start
		openAfter int       // the clock reaches start once this record is answered (0: from the start)
		wantNext  int
		wantCount int64
		wantKeys  []string
	}{
		{"open from the start", start.Add(time.Minute), 0, 0, 0, nil},
		{"opens in the first chunk", start.Add(-time.Second), 2, 0, 2, keys(1, 2)},
		{"opens in a later chunk", start.Add(-time.Second), 4, 1, 4, keys(1, 2, 3, 4)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: tc.from}
			c := newThrottlingCore(t, func(n int, _ string) (int, string) {
				if n+1 == tc.openAfter {
					clock.add(start.Sub(clock.now()))
				}
				return 200, ""
			})
			tenant := csvTenant(c.srv.URL)
			tenant.CoreSystem = &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 1, Maintenance: []spec.MaintenanceWindow{window}}
			h, slept := pacedHandler(sourcetest.NewFakeS3(), clock, nil)
			res, err := runPaced(t, h, clock, tenant, 6, 60*time.Second)
			if err != nil {
				t.Fatalf("got %v, want success with the cursor", err)
			}
			if res.Next != tc.wantNext || res.Done || res.Registered != tc.wantCount {
				t.Errorf("got %+v, want next %d, not done, %d registered", res, tc.wantNext, tc.wantCount)
			}
			if got := c.seen(); !reflect.DeepEqual(got, tc.wantKeys) {
				t.Errorf("got keys %q, want %q: nothing sent inside the window", got, tc.wantKeys)
			}
			if len(*slept) == 0 {
				t.Errorf("got no wait, want part of the window waited out")
			}
			// After the window, the next invocation sends the held record first.
			clock.add(start.Add(5 * time.Minute).Sub(clock.now()))
			before := len(c.seen())
			next, err := runPacedWith(t, h, clock, tenant, 6, 0, func(r *pipeline.ChunkRequest) {
				r.Chunk = res.Next
			})
			if err != nil || !next.Done {
				t.Fatalf("next invocation: got %+v, %v; want done", next, err)
			}
			held := IdempotencyKey(execName, tc.wantCount+1)
			if got := c.seen(); !slices.Contains(got[before:], held) {
				t.Errorf("got keys %q after the window, want the held record's %s", got[before:], held)
			}
		})
	}
}
