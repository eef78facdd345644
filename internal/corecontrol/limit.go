package corecontrol

import (
	"context"
	"time"

	"github.com/example/tenantpipeline/spec"
)

// Settings are what a core system's configuration says about its running-file limit, as its
// admission gate carries them (from the execution's settings, pipeline.CoreSystem).
type Settings struct {
	Name string
	// MaxRunningFiles is the configured limit; MaxRequestsInFlight bounds an override
	// (pipeline.CoreSystem.RequestsInFlight: never 0).
	MaxRunningFiles     int
	MaxRequestsInFlight int
	Maintenance         []spec.MaintenanceWindow
}

// Why a core system's limit is what it is.
const (
	WhyConfigured  = "configured"
	WhyPaused      = "paused"
	WhyMaintenance = "maintenance"
	WhyOverride    = "override"
)

// Limit is a core system's running-file limit at one moment, before its adaptive limit lowers it.
type Limit struct {
	Value int
	Why   string
	// Until is when the limit rises by itself: the end of the open maintenance window, or of an
	// override below the configured limit. Zero when it does not (a pause ends on resume).
	Until time.Time
}

// Effective is the limit c leaves at now: 0 while paused or inside a maintenance window, else
// the active override (bounded by MaxRequestsInFlight), else MaxRunningFiles. An expired
// override is ignored.
func Effective(s Settings, c Control, now time.Time) Limit {
	if c.Paused {
		return Limit{Value: 0, Why: WhyPaused}
	}
	if open, end, _ := spec.Maintenance(s.Maintenance, now); open {
		return Limit{Value: 0, Why: WhyMaintenance, Until: end}
	}
	if o := c.Active(now); o != nil {
		l := Limit{Value: min(o.Limit, Bound(s)), Why: WhyOverride}
		if l.Value < s.MaxRunningFiles {
			l.Until = o.Until
		}
		return l
	}
	return Limit{Value: s.MaxRunningFiles, Why: WhyConfigured}
}

// Bound is the highest limit an override may set: maxRequestsInFlight, since each running file
// sends at least one request.
func Bound(s Settings) int { return max(s.MaxRequestsInFlight, s.MaxRunningFiles) }

// Limit reads the core system's control item and returns the limit it leaves now. A control item
// that cannot be read is an error: admission then admits nothing (fail closed).
func (s *Store) Limit(ctx context.Context, table string, set Settings) (Limit, error) {
	c, err := s.Read(ctx, table, set.Name)
	if err != nil {
		return Limit{}, err
	}
	return Effective(set, c, s.now()), nil
}

// Hold bounds how long a file waiting for the core system is held when a maintenance window is
// open: until the window's end, so that the first file back finds the gate open and hands the
// free slots on (the admission reconciler), instead of waiting out its full hold.
func Hold(hold time.Duration, windows []spec.MaintenanceWindow, now time.Time) time.Duration {
	open, end, _ := spec.Maintenance(windows, now)
	if !open {
		return hold
	}
	// One second past the end: the window is open over [start, end).
	return max(time.Second, min(hold, end.Sub(now)+time.Second))
}
