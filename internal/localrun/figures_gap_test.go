//go:build figures

package localrun

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report"
)

// TestFigures measures the figures (docs/local-run.md, "Figures"): the same workload
// twice in one process, with the controller's normal backoff and with the old design's fixed 30 s
// wait. It takes minutes and measures time, so it is built only with the figures tag:
//
//	go test -tags figures ./internal/localrun -run TestFigures -v -timeout 30m
//
// It asserts the invariants, never a speed.
func TestFigures(t *testing.T) {
	const files, records = 6, 500
	tenants := []string{"cont", "halt", "ov"}
	type result struct {
		name string
		rep  *report.Report
	}
	var results []result
	for _, mode := range []struct {
		name string
		env  []string
	}{
		// Both modes are the designs before the wake-up on status events, which the
		// templates now turn on: TestFiguresControllerCalls measures that one.
		{"backoff (1 s doubling, 10 s in-process polling)", []string{"WAKE_EVENTS=false", "POLL_BUDGET_SECONDS=10", "MAX_WAIT_SECONDS=30"}},
		// The old design: look again every 30 s, no in-process polling.
		{"fixed 30 s wait (old design)", fixedWaitEnv},
	} {
		r := startScenario(t, scenarioTenants, Config{EnvFor: map[string][]string{controllerPkg: mode.env}})
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		var batch []upload
		for i := range files {
			for _, id := range tenants {
				batch = append(batch, upload{id, fmt.Sprintf("%02d.csv", i+1), csvOf(records)})
			}
		}
		uploadAll(t, ctx, r, batch)
		rep := drain(t, ctx, r)
		cancel()
		assertInvariants(t, r, rep, tenants, false)
		for _, id := range tenants {
			if got := rep.Tenants[id].RecordsRegistered; got != files*records {
				t.Errorf("%s %s: got %d records, want %d", mode.name, id, got, files*records)
			}
		}
		results = append(results, result{mode.name, rep})
		r.Close()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "workload: %d tenants × %d files × %d records, uploaded at once (%d records)\n\n", len(tenants), files, records, len(tenants)*files*records)
	fmt.Fprintf(&b, "| controller wait | inter-file gap mean | p95 | max (n) | first upload → drained | records/s end to end | API calls per 1,000 records: S3 | SQS | Step Functions | Lambda Invoke |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, res := range results {
		g, per := res.rep.InterFileGapSecond, res.rep.APICallsPer1000
		fmt.Fprintf(&b, "| %s | %.2f s | %.2f s | %.2f s (%d) | %.1f s | %.0f | %.1f | %.1f | %.1f | %.1f |\n",
			res.name, g.Mean, g.P95, g.Max, g.N, res.rep.WallSeconds, res.rep.RecordsPerSecond, per["s3"], per["sqs"], per["stepfunctions"], per["lambda"])
	}
	b.WriteString("\nAPI calls by operation:\n")
	for _, res := range results {
		fmt.Fprintf(&b, "- %s:", res.name)
		for _, svc := range sortedKeys(res.rep.APICalls) {
			for _, op := range sortedKeys(res.rep.APICalls[svc]) {
				fmt.Fprintf(&b, " %s.%s %d", svc, op, res.rep.APICalls[svc][op])
			}
		}
		b.WriteString("\n")
	}
	t.Log("\n" + b.String())
	var modes []modeGaps
	for _, res := range results {
		short, _, _ := strings.Cut(res.name, " (") // the chart's label column holds about 30 characters
		modes = append(modes, modeGaps{short, allGaps(res.rep, tenants)})
	}
	writeFigure(t, "inter-file-gap.svg", gapFigure(modes, 30,
		fmt.Sprintf("%d tenants × %d files × %d records uploaded at once", len(tenants), files, records)).SVG())
	if out := os.Getenv("LOCALRUN_FIGURES_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}
