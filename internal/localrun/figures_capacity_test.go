//go:build figures

package localrun

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// requestSharesKey is the CDK context key that selects how a core system's maxRequestsInFlight is
// divided among its running files: "shared" (the default: each file may use what the others leave)
// or "static" (an even split, maxRequestsInFlight / maxRunningFiles per running file, the design
// before it). An app that does not know the key ignores it.
const requestSharesKey = "requestShares"

// The capacity figure's shape: one core system of capacityLimit requests in flight and
// capacityRunning running files; one large key-ordered file (capacityLargeRecords records over
// capacityLargeKeys customers, capacityLargeWindow in flight at most) that runs alone for
// capacityAlone; then capacitySmallFiles small files in file order across capacitySmallTenants
// pooled tenants; every POST answered capacityLatency late.
const (
	capacityLimit         = 30
	capacityRunning       = 10
	capacityLargeRecords  = 20000
	capacityLargeKeys     = 1000
	capacityLargeWindow   = 30
	capacitySmallTenants  = 20
	capacitySmallFiles    = 100
	capacityAlone         = 8 * time.Second
	capacityLatency       = 20 * time.Millisecond
	capacityCore          = "erp"
	capacityLargeTenantID = "large"
)

// capacityTenants: the large file's silo tenant and the small files' pooled tenants, all naming
// one core system.
func capacityTenants() string {
	rows := []string{fmt.Sprintf(`{"id": %q, "coreSystem": %q, "recordOrder": "key", "keyColumns": ["customer"], "maxRecordsInFlight": %d, "registerUrl": "https://core.example.com/records"}`,
		capacityLargeTenantID, capacityCore, capacityLargeWindow)}
	for i := range capacitySmallTenants {
		rows = append(rows, fmt.Sprintf(`{"id": "s%02d", "tier": "pool", "pool": "small", "coreSystem": %q, "registerUrl": "https://core.example.com/records"}`, i, capacityCore))
	}
	return fmt.Sprintf(`{"coreSystems": {%q: {"maxRunningFiles": %d, "maxRequestsInFlight": %d}}, "pools": {"small": {}}, "tenants": [%s]}`,
		capacityCore, capacityRunning, capacityLimit, strings.Join(rows, ",\n"))
}

// smallCapacityFiles are the small files: five per tenant, of 20 to 200 records.
func smallCapacityFiles() []upload {
	var files []upload
	for i := range capacitySmallFiles {
		tenant := fmt.Sprintf("s%02d", i%capacitySmallTenants)
		files = append(files, upload{tenant, fmt.Sprintf("%03d.csv", i), csvOf(20 + (i*37)%181)})
	}
	return files
}

// capacityRun is what one run of the shape measured at the core system (the sink).
type capacityRun struct {
	alone, overall float64 // mean requests in flight while the large file ran alone, and over the run
	aloneFor       time.Duration
	largeRate      float64 // the large file's records over its first request to its last answer
	peak           int
	design         string // Register's REQUEST_SHARES, "" when the app sets none
	// perSecond is the mean in flight in each second while the large file ran alone: its ramp, and
	// what its chunks' ends cost once ramped.
	perSecond []float64
}

// TestFiguresCapacity measures the capacity figure (make figures): how much of a core system's
// maxRequestsInFlight a large key-ordered file uses while it runs alone, and after, when small
// files of other tenants start, with the default request shares and with requestShares=static side
// by side (two local runs, one after the other). The means are time-weighted, as the sink saw the
// core system's POSTs in flight (emulate.Flight). It asserts the invariants (every record once,
// per-key order, never more in flight than the core system's limit), never a rate.
func TestFiguresCapacity(t *testing.T) {
	shared := measureCapacity(t, nil)
	static := measureCapacity(t, map[string]string{requestSharesKey: "static"})
	peak := max(shared.peak, static.peak)
	fmt.Printf("capacity: shared %.1f of %d in flight while the large file ran alone (mean %.1f over the run), large file %s rec/s; static %.1f of %d (mean %.1f), %s rec/s; %.1f× the static design's rate; peak %d of %d (%s key-ordered records over %s keys, %d in flight at most, alone %.0f s; then %d small files of 20-200 records across %d pooled tenants; %d running files, %.0f ms core latency)\n",
		shared.alone, capacityLimit, shared.overall, thousands(shared.largeRate), static.alone, capacityLimit, static.overall, thousands(static.largeRate),
		shared.largeRate/static.largeRate, peak, capacityLimit, thousands(capacityLargeRecords), thousands(capacityLargeKeys), capacityLargeWindow,
		shared.aloneFor.Seconds(), capacitySmallFiles, capacitySmallTenants, capacityRunning, capacityLatency.Seconds()*1000)
	writeFigure(t, "capacity.svg", capacityFigure(capacityLimit,
		capacityBars{"shared", shared.alone, shared.overall, shared.largeRate}, capacityBars{"static", static.alone, static.overall, static.largeRate}).SVG())
	for _, g := range []struct {
		what       string
		got, goal  float64
		unit, goes string
	}{
		{"in flight while the large file ran alone", shared.alone, 0.8 * capacityLimit, fmt.Sprintf("of %d", capacityLimit), "at least"},
		{"the large file's rate against the static design's", shared.largeRate / static.largeRate, 4, "×", "at least"},
	} {
		verdict := "meets"
		if g.got < g.goal {
			verdict = "misses"
		}
		t.Logf("%s: %.1f %s %s the goal of %s %.1f", g.what, g.got, g.unit, verdict, g.goes, g.goal)
	}
	t.Logf("peak in flight: shared %d, static %d, never above %d", shared.peak, static.peak, capacityLimit)
	for _, d := range []struct {
		name string
		run  capacityRun
	}{{"shared", shared}, {"static", static}} {
		var each []string
		for _, m := range d.run.perSecond {
			each = append(each, fmt.Sprintf("%.1f", m))
		}
		t.Logf("%s: in flight second by second while the large file ran alone: %s", d.name, strings.Join(each, " "))
	}
	// An app that does not know requestShares measures one design twice.
	t.Logf("Register's %s: %q by default, %q with %s=static", pipeline.EnvRequestShares, shared.design, static.design, requestSharesKey)
}

// measureCapacity runs the shape once on the app synthesized with extra context.
func measureCapacity(t *testing.T, extra map[string]string) capacityRun {
	t.Helper()
	r := startScenarioWith(t, capacityTenants(), extra, Config{})
	defer r.Close()
	r.Sink.SetDelay(func(string, string, int64) time.Duration { return capacityLatency })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	large := []upload{{capacityLargeTenantID, "large.csv", csvKeyed(capacityLargeRecords, capacityLargeKeys)}}
	uploadAll(t, ctx, r, large)
	for len(r.Sink.Requests(capacityLargeTenantID)) == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the large file sent nothing: %v", ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(capacityAlone)
	small := smallCapacityFiles()
	uploadAll(t, ctx, r, small)
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	assertAllSucceeded(t, rep, append(large, small...))

	flight, peak := r.Sink.FlightOf(capacityCore)
	if peak > capacityLimit {
		t.Errorf("requests in flight to %s at once: got %d, want at most its maxRequestsInFlight %d", capacityCore, peak, capacityLimit)
	}
	if got := len(r.Sink.Registered(capacityLargeTenantID)); got != capacityLargeRecords {
		t.Errorf("%s: got %d records registered, want %d", capacityLargeTenantID, got, capacityLargeRecords)
	}
	// The large file ran alone from its first request to the first request of a small file.
	largeFrom, largeTo := requestSpan(r.Sink.Requests(capacityLargeTenantID))
	aloneTo := largeTo
	for i := range capacitySmallTenants {
		id := fmt.Sprintf("s%02d", i)
		if from, _ := requestSpan(r.Sink.Requests(id)); !from.IsZero() && from.Before(aloneTo) {
			aloneTo = from
		}
	}
	var perSecond []float64
	for at := largeFrom; at.Before(aloneTo); at = at.Add(time.Second) {
		end := at.Add(time.Second)
		if end.After(aloneTo) {
			end = aloneTo
		}
		perSecond = append(perSecond, flight.Mean(at, end))
	}
	first, last := flight.Span()
	return capacityRun{design: requestSharesOf(r), perSecond: perSecond,
		alone: flight.Mean(largeFrom, aloneTo), overall: flight.Mean(first, last), aloneFor: aloneTo.Sub(largeFrom),
		largeRate: capacityLargeRecords / largeTo.Sub(largeFrom).Seconds(), peak: peak,
	}
}

// requestSharesOf is the request-shares design the run's Register functions were given (the
// environment variable the requestShares context key renders), "" when none.
func requestSharesOf(r *Run) string {
	for _, f := range functionsOf(r, registerPkg) {
		for _, kv := range f.Env {
			if v, ok := strings.CutPrefix(kv, pipeline.EnvRequestShares+"="); ok {
				return v
			}
		}
	}
	return ""
}

// requestSpan is the first arrival and the last answer of requests; zero times when none.
func requestSpan(reqs []emulate.SinkRequest) (from, to time.Time) {
	for _, q := range reqs {
		if from.IsZero() || q.Start.Before(from) {
			from = q.Start
		}
		if q.End.After(to) {
			to = q.End
		}
	}
	return from, to
}

// thousands prints a rate whole, with commas between thousands.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
