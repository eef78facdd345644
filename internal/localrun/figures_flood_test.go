//go:build figures

package localrun

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/tenants"
)

// TestFiguresFlood measures what one pooled tenant's burst does to its neighbours (make figures):
// each neighbour's time from its upload to its first record at the core system, without a flood
// and then right after the flooder (intakeFlooder) uploaded FLOOD_FILES small files (default
// 2,000), each AWS call of the functions taking intakeFigureAWSLatency. The neighbours
// (intakeNeighbours) are three whose ids begin with the flooder's character, three that shared its
// group of the sharded intake, and four others. It runs twice, one pool after the other: with the
// sharded intake as the reference, and with the per-tenant intake as deployed. It prints one
// "flood:" line a neighbour, a summary a design, the bound the design is held to (1.5 times the
// neighbour's time without the flood, plus 2 s) and the ratio; it asserts nothing about time.
// With FLOOD_DRAIN=1 it then waits, with the per-tenant intake, until every file of the flooder is
// registered, and fails unless each is, once and in upload order (files run one at a time, so
// 2,000 take most of an hour here: give go test a -timeout to match); without, the flooder's files
// are not waited for (TestScenarioIntakeGroups checks a smaller flood's order in every run).
func TestFiguresFlood(t *testing.T) {
	files := 2000
	if v, err := strconv.Atoi(os.Getenv("FLOOD_FILES")); err == nil && v > 0 {
		files = v
	}
	reference := flood(t, tenants.IntakeSharded, files)
	deployed := flood(t, tenants.IntakeTenant, files)
	fmt.Printf("flood: the slowest neighbour waited %.1f s after the flood with the per-tenant intake, %.1f s with the sharded one, ratio %.1f\n",
		deployed.Seconds(), reference.Seconds(), reference.Seconds()/deployed.Seconds())
}

// flood runs the flood once through the pool's intake and returns the longest wait of a
// neighbour after it.
func flood(t *testing.T, intake string, files int) time.Duration {
	t.Helper()
	r := startScenario(t, intakeTenantsJSON(intake), Config{})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r.SetAWSCallLatency(intakeFigureAWSLatency)

	// firstRecord waits for the first request at the core system of each neighbour's file name and
	// returns its delay after the upload.
	firstRecord := func(name string, uploaded map[string]time.Time) map[string]time.Duration {
		out := map[string]time.Duration{}
		last := time.Now()
		for len(out) < len(intakeNeighbours) {
			if ctx.Err() != nil {
				t.Fatalf("neighbours %v never reached the core system with %s", intakeNeighbours, name)
			}
			for _, id := range intakeNeighbours {
				for _, q := range r.Sink.Requests(id) {
					if _, done := out[id]; !done && strings.HasSuffix(q.Source, "/"+name) {
						out[id] = q.Start.Sub(uploaded[id])
					}
				}
			}
			sleep(ctx, 20*time.Millisecond)
			if time.Since(last) > 10*time.Second {
				last = time.Now()
				t.Logf("%s: %d of %d neighbours have a record", name, len(out), len(intakeNeighbours))
			}
		}
		return out
	}
	upload := func(name string) map[string]time.Time {
		at := map[string]time.Time{}
		for _, id := range intakeNeighbours {
			u, err := r.Upload(ctx, id, name, csvOf(5))
			if err != nil {
				t.Fatal(err)
			}
			at[id] = u.At
		}
		return at
	}
	baseline := firstRecord("quiet.csv", upload("quiet.csv"))
	floodStart := time.Now()
	for n := range files {
		if _, err := r.Upload(ctx, intakeFlooder, fmt.Sprintf("%05d.csv", n), []byte(fmt.Sprintf("id,name\n%d,file %d\n", n, n))); err != nil {
			t.Fatal(err)
		}
	}
	uploadSecs := time.Since(floodStart).Seconds()
	t.Logf("flood of %d files uploaded in %.1f s", files, uploadSecs)
	flooded := firstRecord("after.csv", upload("after.csv"))
	if os.Getenv("FLOOD_DRAIN") == "1" && intake == tenants.IntakeTenant {
		defer drainFlooder(t, r, files, floodStart)
	}

	group := func(id string) int {
		g, _ := tenantpipeline.IntakeGroupOf(id[0], tenants.DefaultPoolIntakeGroups)
		return g
	}
	var slowest time.Duration
	within := 0
	for _, id := range intakeNeighbours {
		b, f := baseline[id], flooded[id]
		bound := time.Duration(1.5*float64(b)) + 2*time.Second
		if f <= bound {
			within++
		}
		shared := map[bool]string{true: ", the flooder's sharded group"}[group(id) == group(intakeFlooder)]
		fmt.Printf("flood: intake %s: neighbour %s%s: baseline %.2f s, after the flood %.2f s, bound %.2f s, ratio %.1f\n",
			intake, id, shared, b.Seconds(), f.Seconds(), bound.Seconds(), f.Seconds()/b.Seconds())
		slowest = max(slowest, f)
	}
	fmt.Printf("flood: intake %s: %d files from %s uploaded in %.1f s; %d of %d neighbours within 1.5 times their baseline plus 2 s; the slowest %.1f s (emulated %d ms per AWS call)\n",
		intake, files, intakeFlooder, uploadSecs, within, len(intakeNeighbours), slowest.Seconds(), intakeFigureAWSLatency.Milliseconds())
	return slowest
}

// drainFlooder waits until the flooder's files are all registered (one record each), then checks
// that each was registered once and in upload order, and prints how long the flood took to drain.
func drainFlooder(t *testing.T, r *Run, files int, start time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	last := time.Now()
	for len(r.Sink.Registered(intakeFlooder)) < files {
		if ctx.Err() != nil {
			t.Fatalf("the flood: %d of %d files registered after %s", len(r.Sink.Registered(intakeFlooder)), files, time.Since(start).Round(time.Second))
		}
		sleep(ctx, 500*time.Millisecond)
		if time.Since(last) > time.Minute {
			last = time.Now()
			t.Logf("the flood: %d of %d files registered", len(r.Sink.Registered(intakeFlooder)), files)
		}
	}
	got := r.Sink.Registered(intakeFlooder)
	prefix := r.Tenant(intakeFlooder).Prefix
	for n, rec := range got {
		if want := prefix + fmt.Sprintf("%05d.csv", n); rec.Source != want {
			t.Fatalf("the flood: record %d of %d came from %s, want %s: each file once, in upload order", n+1, len(got), rec.Source, want)
		}
	}
	fmt.Printf("flood: the flooder's %d files registered, each once and in upload order, %.0f s after the flood began\n", len(got), time.Since(start).Seconds())
}
