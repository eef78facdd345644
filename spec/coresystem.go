package spec

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// CoreSystem is a core system's configuration: an entry of the tenants file's "coreSystems", and
// (with its Name) the constructs' CoreSystemProps. Its settings travel with every execution of
// its tenants (pipeline.CoreSystem). Checks of the running-file and rate fields are the tenants
// package's; CheckHealth checks the fields of a core system's bad day.
type CoreSystem struct {
	// MaxRunningFiles bounds the files of every tenant naming the core system that run at once, in
	// both tiers together. Required: 1 to 1,000.
	MaxRunningFiles int `json:"maxRunningFiles"`
	// MaxRecordsPerSecond bounds the records sent to the core system per second, across all its
	// running files. Default: no rate limit.
	MaxRecordsPerSecond float64 `json:"maxRecordsPerSecond,omitempty"`
	// Adaptive lets the effective running-file limit fall when the core system answers 429 or 503
	// and grow back on success, never above MaxRunningFiles. Default: false.
	Adaptive bool `json:"adaptive,omitempty"`
	// MaxRequestsInFlight bounds the requests in flight to the core system across all its running
	// files, which share it by what each can use (keyed tenants, recordOrder "key", up to their
	// maxRecordsInFlight; the others one), by weight when they want more than there is, at least
	// one each: at least maxRunningFiles, since each running file sends at least one request, and
	// at most 10,000. Default: maxRunningFiles, one request per running file.
	MaxRequestsInFlight int `json:"maxRequestsInFlight,omitempty"`

	// Breaker tunes the core system's circuit breaker: failures of the core system (5xx other
	// than 503, timeouts, refused or reset connections) open it, and while it is open the core
	// system's files hold at their cursor instead of failing. Default: on, with Breaker's defaults.
	Breaker *Breaker `json:"breaker,omitempty"`
	// Maintenance declares windows, in UTC, during which nothing of the core system is admitted
	// and running files hold at their cursor. Default: none. At most MaxMaintenanceWindows.
	Maintenance []MaintenanceWindow `json:"maintenance,omitempty"`
	// IdempotencyRetention is how long the core system keeps an Idempotency-Key, as a Go
	// duration ("24h"), at least 1m. Records whose first send is older are looked up
	// (LookupURL) before they are sent again. Default: unset, keys are kept forever.
	IdempotencyRetention string `json:"idempotencyRetention,omitempty"`
	// LookupURL answers whether a record is registered: an absolute http(s) URL template with
	// "{key}", the record's Idempotency-Key. 200 means registered, 404 not registered, anything
	// else holds like a 503. Default: none.
	LookupURL string `json:"lookupUrl,omitempty"`
	// CompleteURL receives one POST per file after its last record (file name, execution, record
	// count, SHA-256 of the file); its answer is recorded in the file's summary. An absolute
	// http(s) URL. Default: none.
	CompleteURL string `json:"completeUrl,omitempty"`
}

// Breaker tunes a core system's circuit breaker. It opens after ConsecutiveFailures failures in a
// row, or WindowFailures failures within Window, whichever comes first. While open, one probe
// request at a time is let through (half-open), first ProbeInterval after opening, then at
// doubling intervals up to MaxProbeInterval; the first success closes it.
type Breaker struct {
	// Disabled turns the breaker off: failures are retried and then fail the file, as the
	// Register task's retry budget says. Default: false.
	Disabled bool `json:"disabled,omitempty"`
	// ConsecutiveFailures in a row open the breaker, 1 to 1,000. Default: 5, fewer than the
	// Register task's 8 attempts, so that one file alone opens it before its retries run out.
	ConsecutiveFailures int `json:"consecutiveFailures,omitempty"`
	// WindowFailures within Window open the breaker even between successes, 1 to 100,000.
	// Default: 20.
	WindowFailures int `json:"windowFailures,omitempty"`
	// Window is the span WindowFailures are counted over, a Go duration from 1s to 1h.
	// Default: "60s".
	Window string `json:"window,omitempty"`
	// ProbeInterval is the wait after opening before the first probe, a Go duration from 100ms to
	// 1h. Default: "1s".
	ProbeInterval string `json:"probeInterval,omitempty"`
	// MaxProbeInterval caps the doubling wait between probes, a Go duration from ProbeInterval to
	// 1h: the core system's recovery is seen within about this long. Default: "4s".
	MaxProbeInterval string `json:"maxProbeInterval,omitempty"`
}

// MaintenanceWindow is a planned window of a core system: it starts at each time Cron names, in
// UTC, and lasts Duration.
type MaintenanceWindow struct {
	// Cron is a standard five-field cron expression (minute hour day-of-month month day-of-week,
	// names such as SUN allowed), in UTC: "0 2 * * SUN" is 02:00 UTC every Sunday. Required.
	Cron string `json:"cron"`
	// Duration is how long each window lasts, a Go duration from 1m to 168h. Required.
	Duration string `json:"duration"`
}

// Limits and defaults of a core system's bad-day fields.
const (
	DefaultBreakerConsecutiveFailures = 5
	MaxBreakerConsecutiveFailures     = 1000
	DefaultBreakerWindowFailures      = 20
	MaxBreakerWindowFailures          = 100000
	DefaultBreakerWindow              = 60 * time.Second
	MinBreakerWindow                  = time.Second
	MaxBreakerWindow                  = time.Hour
	DefaultBreakerProbeInterval       = time.Second
	MinBreakerProbeInterval           = 100 * time.Millisecond
	DefaultBreakerMaxProbeInterval    = 4 * time.Second
	MaxBreakerProbeInterval           = time.Hour

	MaxMaintenanceWindows     = 20
	MinMaintenanceDuration    = time.Minute
	MaxMaintenanceDuration    = 168 * time.Hour
	MinIdempotencyRetention   = time.Minute
	LookupKeyPlaceholder      = "{key}"
	maxCoreSystemURLBytes     = 2048
	maintenanceCronFieldCount = 5
	maxChainedWindows         = 64
)

// BreakerSettings is a breaker's configuration with its defaults filled in and its durations
// parsed.
type BreakerSettings struct {
	Disabled            bool
	ConsecutiveFailures int
	WindowFailures      int
	Window              time.Duration
	ProbeInterval       time.Duration
	MaxProbeInterval    time.Duration
}

// BreakerSettings is c's breaker with defaults; values that do not parse take their defaults
// (CheckHealth reports them).
func (c CoreSystem) BreakerSettings() BreakerSettings {
	s := BreakerSettings{ConsecutiveFailures: DefaultBreakerConsecutiveFailures, WindowFailures: DefaultBreakerWindowFailures,
		Window: DefaultBreakerWindow, ProbeInterval: DefaultBreakerProbeInterval, MaxProbeInterval: DefaultBreakerMaxProbeInterval}
	b := c.Breaker
	if b == nil {
		return s
	}
	s.Disabled = b.Disabled
	if b.ConsecutiveFailures > 0 {
		s.ConsecutiveFailures = b.ConsecutiveFailures
	}
	if b.WindowFailures > 0 {
		s.WindowFailures = b.WindowFailures
	}
	for _, d := range []struct {
		v   string
		dst *time.Duration
	}{{b.Window, &s.Window}, {b.ProbeInterval, &s.ProbeInterval}, {b.MaxProbeInterval, &s.MaxProbeInterval}} {
		if v, err := time.ParseDuration(d.v); err == nil && v > 0 {
			*d.dst = v
		}
	}
	s.MaxProbeInterval = max(s.MaxProbeInterval, s.ProbeInterval)
	return s
}

// Retention is IdempotencyRetention parsed: 0 when unset (keys are kept forever) or unreadable
// (CheckHealth reports it).
func (c CoreSystem) Retention() time.Duration {
	d, err := time.ParseDuration(c.IdempotencyRetention)
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// LookupFor is LookupURL with the key put in place of {key}, path-escaped.
func (c CoreSystem) LookupFor(key string) string {
	return strings.ReplaceAll(c.LookupURL, LookupKeyPlaceholder, url.PathEscape(key))
}

// cronParser reads the standard five fields, with names (SUN, JAN) and descriptors (@daily).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule parses the window's cron expression.
func (w MaintenanceWindow) Schedule() (cron.Schedule, error) {
	return cronParser.Parse(w.Cron)
}

// Maintenance tells, at now, whether one of windows is open and when the last open one ends (end),
// or else when the next one starts (next; zero when none ever does). Windows that do not parse
// are ignored here (CheckHealth reports them). A window is open over [start, start+duration).
func Maintenance(windows []MaintenanceWindow, now time.Time) (open bool, end, next time.Time) {
	now = now.UTC()
	for _, w := range windows {
		sched, err := w.Schedule()
		d, derr := time.ParseDuration(w.Duration)
		if err != nil || derr != nil || d <= 0 {
			continue
		}
		// The first start at or before now whose window has not ended: the starts from the first
		// after now-d-1s (cron's resolution is a minute, and Next is strictly after its argument)
		// up to now, at most one a minute. The first of them may have ended while a later one is
		// still open (a window every minute that lasts two, at the turn of a minute).
		if s, ok := firstOpenStart(sched, now, d); ok {
			open = true
			e := s.Add(d)
			// A later start within the window extends it; windows that chain for ever are
			// followed a bounded number of times.
			for i, ns := 0, sched.Next(s); i < maxChainedWindows && !ns.IsZero() && !ns.After(e); i, ns = i+1, sched.Next(ns) {
				e = ns.Add(d)
			}
			if e.After(end) {
				end = e
			}
			continue
		}
		if s := sched.Next(now); !s.IsZero() && (next.IsZero() || s.Before(next)) {
			next = s
		}
	}
	if open {
		next = time.Time{}
	}
	return open, end, next
}

// firstOpenStart is the earliest start of sched in (now-d, now] whose window of d is still open
// at now. Starts are a minute apart at least, so it looks at no more than d's minutes of them.
func firstOpenStart(sched cron.Schedule, now time.Time, d time.Duration) (time.Time, bool) {
	for s, i := sched.Next(now.Add(-d).Add(-time.Second)), 0; !s.IsZero() && !s.After(now) && i <= int(d/time.Minute)+1; s, i = sched.Next(s), i+1 {
		if s.Add(d).After(now) {
			return s, true
		}
	}
	return time.Time{}, false
}

// CheckHealth reports every problem of the bad-day fields, by JSON path inside the core system
// ("breaker.window", "maintenance[0].cron").
func (c CoreSystem) CheckHealth() []Problem {
	var ps []Problem
	bad := func(path, format string, args ...any) { ps = append(ps, Problemf(path, format, args...)) }
	if b := c.Breaker; b != nil {
		if b.ConsecutiveFailures < 0 || b.ConsecutiveFailures > MaxBreakerConsecutiveFailures {
			bad("breaker.consecutiveFailures", "%d must be 1 to %d, or left out for %d", b.ConsecutiveFailures, MaxBreakerConsecutiveFailures, DefaultBreakerConsecutiveFailures)
		}
		if b.WindowFailures < 0 || b.WindowFailures > MaxBreakerWindowFailures {
			bad("breaker.windowFailures", "%d must be 1 to %d, or left out for %d", b.WindowFailures, MaxBreakerWindowFailures, DefaultBreakerWindowFailures)
		}
		checkDuration(bad, "breaker.window", b.Window, MinBreakerWindow, MaxBreakerWindow, DefaultBreakerWindow)
		checkDuration(bad, "breaker.probeInterval", b.ProbeInterval, MinBreakerProbeInterval, MaxBreakerProbeInterval, DefaultBreakerProbeInterval)
		checkDuration(bad, "breaker.maxProbeInterval", b.MaxProbeInterval, MinBreakerProbeInterval, MaxBreakerProbeInterval, DefaultBreakerMaxProbeInterval)
		s := c.BreakerSettings()
		if p, err := time.ParseDuration(b.MaxProbeInterval); err == nil && b.MaxProbeInterval != "" && p < s.ProbeInterval {
			bad("breaker.maxProbeInterval", "%q must be at least %s (probeInterval)", b.MaxProbeInterval, Field("breaker.probeInterval"))
		}
	}
	if len(c.Maintenance) > MaxMaintenanceWindows {
		bad("maintenance", "has %d windows: at most %d", len(c.Maintenance), MaxMaintenanceWindows)
	}
	for i, w := range c.Maintenance {
		path := fmt.Sprintf("maintenance[%d]", i)
		switch {
		case strings.TrimSpace(w.Cron) == "":
			bad(path+".cron", `is required: a five-field cron expression in UTC, such as "0 2 * * SUN" (02:00 UTC every Sunday)`)
		case !strings.HasPrefix(w.Cron, "@") && len(strings.Fields(w.Cron)) != maintenanceCronFieldCount:
			bad(path+".cron", "%q must have five fields (minute hour day-of-month month day-of-week), in UTC, such as \"0 2 * * SUN\"", w.Cron)
		default:
			if _, err := w.Schedule(); err != nil {
				bad(path+".cron", "%q is not a cron expression: %v", w.Cron, err)
			}
		}
		if w.Duration == "" {
			bad(path+".duration", `is required: how long each window lasts, such as "1h"`)
		} else {
			checkDuration(bad, path+".duration", w.Duration, MinMaintenanceDuration, MaxMaintenanceDuration, 0)
		}
	}
	if c.IdempotencyRetention != "" {
		d, err := time.ParseDuration(c.IdempotencyRetention)
		if err != nil || d < MinIdempotencyRetention {
			bad("idempotencyRetention", "%q must be a Go duration of at least %s (such as \"24h\"), or left out when the core system keeps keys forever",
				c.IdempotencyRetention, MinIdempotencyRetention)
		}
	}
	if c.LookupURL != "" {
		switch {
		case len(c.LookupURL) > maxCoreSystemURLBytes:
			bad("lookupUrl", "is %d bytes: at most %d", len(c.LookupURL), maxCoreSystemURLBytes)
		case !strings.Contains(c.LookupURL, LookupKeyPlaceholder):
			bad("lookupUrl", "%q must contain %s, where the record's Idempotency-Key goes", c.LookupURL, LookupKeyPlaceholder)
		case !ValidURL(strings.ReplaceAll(c.LookupURL, LookupKeyPlaceholder, "k")):
			bad("lookupUrl", "%q must be an absolute http(s) URL", c.LookupURL)
		}
	}
	if c.CompleteURL != "" {
		switch {
		case len(c.CompleteURL) > maxCoreSystemURLBytes:
			bad("completeUrl", "is %d bytes: at most %d", len(c.CompleteURL), maxCoreSystemURLBytes)
		case !ValidURL(c.CompleteURL):
			bad("completeUrl", "%q must be an absolute http(s) URL", c.CompleteURL)
		}
	}
	return ps
}

// checkDuration reports v unless it is empty or a Go duration within [lo, hi]; def is the default
// (0: none) the message offers.
func checkDuration(bad func(path, format string, args ...any), path, v string, lo, hi, def time.Duration) {
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err == nil && d >= lo && d <= hi {
		return
	}
	if def > 0 {
		bad(path, "%q must be a Go duration from %s to %s (such as %q), or left out for %s", v, lo, hi, def.String(), def)
		return
	}
	bad(path, "%q must be a Go duration from %s to %s", v, lo, hi)
}
