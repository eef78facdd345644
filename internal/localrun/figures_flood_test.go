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
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/tenants"
)

// floodNeighbours are the ten tenants beside the flooder f00: three whose ids begin with its
// character, so that they share its intake group whatever intakeGroups is, and seven others.
var floodNeighbours = []string{"f01", "f02", "f03", "a01", "b01", "c01", "d01", "e01", "g01", "h01"}

// TestFiguresFlood measures what one pooled tenant's burst does to its neighbours (make figures):
// each neighbour's time from its upload to its first record at the core system, without a flood
// and then right after the flooder uploaded FLOOD_FILES small files (default 300; 2,000 take
// several minutes), each AWS call of the functions taking
// intakeFigureAWSLatency. It runs twice, one pool after the other: with the router's reference
// (ROUTER_PARK_EACH=true, each parked file counted and fed back) and as deployed. It prints one
// "flood:" line a neighbour, a summary a router and the ratio; it asserts nothing about time. The
// flooder's files are not waited for.
func TestFiguresFlood(t *testing.T) {
	files := 300
	if v, err := strconv.Atoi(os.Getenv("FLOOD_FILES")); err == nil && v > 0 {
		files = v
	}
	reference := flood(t, "park-each", []string{pipeline.EnvRouterParkEach + "=true"}, files)
	deployed := flood(t, "deployed", nil, files)
	fmt.Printf("flood: the flooder's intake group waited %.1f s with the deployed router, %.1f s with the reference, ratio %.1f\n",
		deployed.Seconds(), reference.Seconds(), reference.Seconds()/deployed.Seconds())
}

// flood runs the flood once with routerEnv on the pool's router and returns the longest wait of
// the neighbours in the flooder's intake group after it.
func flood(t *testing.T, name string, routerEnv []string, files int) time.Duration {
	t.Helper()
	rows := []string{`{"id": "f00", "tier": "pool", "registerUrl": "https://core.example.com/records"}`}
	for _, id := range floodNeighbours {
		rows = append(rows, fmt.Sprintf(`{"id": %q, "tier": "pool", "registerUrl": "https://core.example.com/records"}`, id))
	}
	r := startScenario(t, `{"tenants": [`+strings.Join(rows, ",\n")+`]}`, Config{EnvForPool: map[string][]string{tenants.DefaultPool: routerEnv}})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r.SetAWSCallLatency(intakeFigureAWSLatency)

	// firstRecord waits for the first request at the core system of each neighbour's file name and
	// returns its delay after the upload.
	firstRecord := func(name string, uploaded map[string]time.Time) map[string]time.Duration {
		out := map[string]time.Duration{}
		last := time.Now()
		for len(out) < len(floodNeighbours) {
			if ctx.Err() != nil {
				t.Fatalf("neighbours %v never reached the core system with %s", floodNeighbours, name)
			}
			for _, id := range floodNeighbours {
				for _, q := range r.Sink.Requests(id) {
					if _, done := out[id]; !done && strings.HasSuffix(q.Source, "/"+name) {
						out[id] = q.Start.Sub(uploaded[id])
					}
				}
			}
			sleep(ctx, 20*time.Millisecond)
			if time.Since(last) > 10*time.Second {
				last = time.Now()
				t.Logf("%s: %d of %d neighbours have a record", name, len(out), len(floodNeighbours))
			}
		}
		return out
	}
	upload := func(name string) map[string]time.Time {
		at := map[string]time.Time{}
		for _, id := range floodNeighbours {
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
		if _, err := r.Upload(ctx, "f00", fmt.Sprintf("%05d.csv", n), []byte(fmt.Sprintf("id,name\n%d,file %d\n", n, n))); err != nil {
			t.Fatal(err)
		}
	}
	uploadSecs := time.Since(floodStart).Seconds()
	t.Logf("flood of %d files uploaded in %.1f s", files, uploadSecs)
	flooded := firstRecord("after.csv", upload("after.csv"))

	group := func(id string) int {
		g, _ := tenantpipeline.IntakeGroupOf(id[0], tenants.DefaultPoolIntakeGroups)
		return g
	}
	var shared, others [2]time.Duration // [baseline, flooded] maxima
	for _, id := range floodNeighbours {
		b, f := baseline[id], flooded[id]
		fmt.Printf("flood: %s: neighbour %s (intake group %d%s) baseline %.2f s, after the flood %.2f s, ratio %.1f\n",
			name, id, group(id), map[bool]string{true: ", the flooder's"}[group(id) == group("f00")], b.Seconds(), f.Seconds(), f.Seconds()/b.Seconds())
		m := &others
		if group(id) == group("f00") {
			m = &shared
		}
		m[0], m[1] = max(m[0], b), max(m[1], f)
	}
	fmt.Printf("flood: %s: %d files from f00 uploaded in %.1f s; neighbours in its intake group: at most %.1f s after the flood (%.1f s before); the others: at most %.1f s (%.1f s) (emulated %d ms per AWS call)\n",
		name, files, uploadSecs, shared[1].Seconds(), shared[0].Seconds(), others[1].Seconds(), others[0].Seconds(), intakeFigureAWSLatency.Milliseconds())
	return shared[1]
}
