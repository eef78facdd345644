//go:build e2e || figures

package localrun

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/localrun/report/reportpage"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// The operator scenarios on the synthesized app, driven by the pipectl binary through the
// environment --serve exports (stack prefix TenantPipeline, the app's default), each once with the
// tenants in silos and once pooled. Each asserts the tenant's order and exactly-once by
// Idempotency-Key.

const opsPrefix = "TenantPipeline"

// halt tenant with a bad file: status shows it blocked with the cause naming the line; skip
// releases it, the next file registers, and the marker holds the reason and the caller.
func TestScenarioOpsHaltSkip(t *testing.T) {
	t.Parallel()
	forEachTier(t, scenarioTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{EnvFor: map[string][]string{controllerPkg: {"HALT_WAIT_SECONDS=1"}}})
		in := r.Tenant("halt").Prefix // inbox/halt/, or pools/default/halt/ pooled
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{{"halt", "1.csv", csvOf(20)}, {"halt", "2-bad.csv", badCSV()}, {"halt", "3.csv", csvOf(30)}})
		rep := waitFor(t, ctx, r, "halt halted", func(rep *report.Report) bool { return rep.Tenants["halt"].Halted != nil })
		h := rep.Tenants["halt"].Halted
		if !strings.HasSuffix(h.Key, "/2-bad.csv") {
			t.Fatalf("got halted at %s, want 2-bad.csv", h.Key)
		}
		st := pipectlStatus(t, r, opsPrefix, "halt")
		row := st.Tenants[0]
		if !row.Blocked || row.LastFailure == nil || !strings.Contains(row.LastFailure.Cause, "line 7") || row.LastFailure.ExecutionName != h.ExecutionName {
			t.Errorf("status: got blocked %v, last failure %+v; want blocked at %s with a cause naming line 7", row.Blocked, row.LastFailure, h.ExecutionName)
		}
		if n := len(r.Sink.Registered("halt")); n != 20 {
			t.Errorf("halted: got %d records, want 20 (1.csv only)", n)
		}
		// A run that is not served ends here: every tenant drained or halted, with its own error, and
		// the halt printed with the exact commands.
		var progress strings.Builder
		err := r.Wait(ctx, &progress, WaitOptions{Interval: 250 * time.Millisecond, StopWhenHalted: true})
		var he *HaltedError
		if !errors.As(err, &he) || strings.Join(he.Tenants, ",") != "halt" {
			t.Errorf("wait: got %v, want a HaltedError naming halt", err)
		}
		for _, want := range []string{"HALTED halt at " + in + "2-bad.csv", "pipectl skip halt " + h.ExecutionName + " --reason"} {
			if !strings.Contains(progress.String(), want) {
				t.Errorf("progress: got %q, want it to contain %q", progress.String(), want)
			}
		}
		// The file failed validation, whose redrive pipectl refuses: the runner does not suggest it.
		if strings.Contains(progress.String(), "pipectl redrive") {
			t.Errorf("progress: got %q, want no redrive hint for a ValidationError", progress.String())
		}
		reason := "bad export, resent as 3.csv"
		pipectl(t, r, "skip", "halt", h.ExecutionName, "--reason", reason, "--stack-prefix", opsPrefix)
		rep = drain(t, ctx, r)
		wantStatuses(t, rep, "halt", "SUCCEEDED", "FAILED", "SUCCEEDED")
		noViolations(t, rep)
		if f := fileOf(t, rep, "halt", "2-bad.csv"); !f.Skipped {
			t.Errorf("2-bad.csv in the report: got skipped false, want true (its skip marker was written)")
		}
		assertOrderedOnce(t, r, "halt", []string{in + "1.csv", in + "3.csv"}, map[string]int64{in + "1.csv": 20, in + "3.csv": 30})
		out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(pipeline.SkipMarkerKey(r.Tenant("halt").Owner(), h.ExecutionName))})
		if err != nil {
			t.Fatalf("skip marker: %v", err)
		}
		marker, _ := io.ReadAll(out.Body)
		out.Body.Close()
		for _, want := range []string{reason, "arn:aws:iam::" + emulate.Account + ":user/tester"} {
			if !strings.Contains(string(marker), want) {
				t.Errorf("skip marker: got %s, want it to hold %q", marker, want)
			}
		}
	})
}

// noViolations fails the test when the run's own summary flags a broken invariant: an operator's
// skip, redrive or replay is part of the tenant's order, not a break of it.
func noViolations(t *testing.T, rep *report.Report) {
	t.Helper()
	if len(rep.Violations) > 0 {
		t.Errorf("the run's summary flags violations, want none: %v", rep.Violations)
	}
}

// continue tenant: 1.csv fails at record 15, the slow 2.csv runs, 3.csv is queued behind it. A
// redrive of 1.csv goes through the tenant's message group: 1.csv's remaining records register only
// after 2.csv and 3.csv, never beside them, and 1.csv's first 14 records are not sent again.
func TestScenarioOpsContinueRedrive(t *testing.T) {
	t.Parallel()
	forEachTier(t, scenarioTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		in := r.Tenant("cont").Prefix
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var fixed atomic.Bool
		r.Sink.SetFault(func(tenant, source string, n int64, _ int) int {
			if tenant == "cont" && strings.HasSuffix(source, "/1.csv") && n == 15 && !fixed.Load() {
				return 400 // permanent: the file fails
			}
			return 0
		})
		r.Sink.SetDelay(func(tenant, source string, _ int64) time.Duration {
			if tenant == "cont" && strings.HasSuffix(source, "/2-slow.csv") {
				return 150 * time.Millisecond
			}
			return 0
		})
		uploadAll(t, ctx, r, []upload{{"cont", "1.csv", csvOf(40)}, {"cont", "2-slow.csv", csvOf(30)}, {"cont", "3.csv", csvOf(20)}})
		rep := waitFor(t, ctx, r, "1.csv failed and 2-slow.csv running", func(rep *report.Report) bool {
			return fileOf(t, rep, "cont", "1.csv").Status == "FAILED" && fileOf(t, rep, "cont", "2-slow.csv").Status == "RUNNING"
		})
		first := fileOf(t, rep, "cont", "1.csv")
		fixed.Store(true)
		// 2-slow.csv passed 1.csv, so the redrive registers 1.csv's records after its: refused
		// unless out of order (TestScenarioOutOfOrderRedrive has the refusal).
		pipectl(t, r, "redrive", "cont", first.ExecutionName, "--out-of-order", "--reason", "core system fixed", "--stack-prefix", opsPrefix)
		// Redriven through the queue, 1.csv waits for the running and the queued file.
		rep = waitFor(t, ctx, r, "every file succeeded", func(rep *report.Report) bool {
			for _, f := range rep.Tenants["cont"].Files {
				if f.Status != "SUCCEEDED" {
					return false
				}
			}
			return true
		})
		noViolations(t, rep)
		if f := fileOf(t, rep, "cont", "1.csv"); f.RedriveCount != 1 || f.Records != 40 {
			t.Errorf("1.csv: got redrive count %d, %d records, want 1 and 40", f.RedriveCount, f.Records)
		}
		redriveDrawn(t, r, rep, "cont", in+"1.csv", []string{"FAILED", "SUCCEEDED"})
		// The redrive's end wrote the summary: all 40 records registered, none rejected.
		countsShown(t, r, rep, "cont", in+"1.csv", "40", "0")
		var lastOther time.Time
		var firstRedriven time.Time
		for _, rec := range r.Sink.Registered("cont") {
			switch {
			case strings.HasSuffix(rec.Source, "/1.csv") && rec.RecordNumber >= 15:
				if firstRedriven.IsZero() {
					firstRedriven = rec.At
				}
			case !strings.HasSuffix(rec.Source, "/1.csv"):
				lastOther = rec.At
			}
		}
		if !firstRedriven.After(lastOther) {
			t.Errorf("1.csv's record 15 registered at %s, want after 2-slow.csv's and 3.csv's last (%s)", firstRedriven, lastOther)
		}
		// Order: 1.csv (records 1-14), 2-slow.csv, 3.csv, then 1.csv from record 15; each key once.
		assertOrderedOnce(t, r, "cont", []string{in + "1.csv", in + "2-slow.csv", in + "3.csv", in + "1.csv"},
			map[string]int64{in + "1.csv": 40, in + "2-slow.csv": 30, in + "3.csv": 20})
	})
}

// replay of a processed file, behind two files queued (while paused) before it: its records are
// registered again with new Idempotency-Keys, after the files queued before the replay.
func TestScenarioOpsReplay(t *testing.T) {
	t.Parallel()
	forEachTier(t, scenarioTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		in := r.Tenant("cont").Prefix
		uploadAll(t, ctx, r, []upload{{"cont", "x.csv", csvOf(10)}})
		drain(t, ctx, r)
		pipectl(t, r, "pause", "cont", "--stack-prefix", opsPrefix)
		uploadAll(t, ctx, r, []upload{{"cont", "y.csv", csvOf(12)}, {"cont", "z.csv", csvOf(14)}})
		// y.csv and z.csv are queued ahead of the replay and run first: it runs out of order, on
		// purpose (a silo tenant's queue says so; a pool without a bound cannot count them).
		pipectl(t, r, "replay", "cont", in+"x.csv", "--out-of-order", "--reason", "core system lost them", "--stack-prefix", opsPrefix)
		st := pipectlStatus(t, r, opsPrefix, "cont")
		row := st.Tenants[0]
		if row.Paused == nil || !*row.Paused {
			t.Errorf("status: got paused %v, want true", row.Paused)
		}
		switch q := row.Queue; row.Tier {
		case "silo":
			if q.Visible == nil || *q.Visible != 3 {
				t.Errorf("paused: got queue %+v, want 3 visible (y, z and the replay)", q)
			}
		case "pool":
			// SQS counts no message group: a pooled tenant's visible messages are unknown.
			if q.Visible != nil || row.Pool == nil || *row.Pool != "default" {
				t.Errorf("paused pooled tenant: got queue %+v, pool %v; want visible null, pool default", q, row.Pool)
			}
		default:
			t.Errorf("status: tier %q", row.Tier)
		}
		pipectl(t, r, "resume", "cont", "--stack-prefix", opsPrefix)
		waitFor(t, ctx, r, "the replay registered", func(*report.Report) bool { return len(r.Sink.Registered("cont")) >= 10+12+14+10 })
		rep := drain(t, ctx, r)
		noViolations(t, rep)
		assertOrderedOnce(t, r, "cont", []string{in + "x.csv", in + "y.csv", in + "z.csv", in + "x.csv"},
			map[string]int64{in + "x.csv": 20, in + "y.csv": 12, in + "z.csv": 14})
		// The report shows the replay as its own run of x.csv, after z.csv's.
		replays := rep.Tenants["cont"].Replays
		z := fileOf(t, rep, "cont", "z.csv")
		if len(replays) != 1 || replays[0].Key != in+"x.csv" || !replays[0].Replay || replays[0].Status != "SUCCEEDED" ||
			z.StoppedAt == nil || replays[0].StartedAt.Before(*z.StoppedAt) {
			t.Fatalf("replays in the report: got %+v, want one of %sx.csv, SUCCEEDED, started after z.csv stopped", replays, in)
		}
		if x := fileOf(t, rep, "cont", "x.csv"); x.Replay || x.ExecutionName == replays[0].ExecutionName {
			t.Errorf("x.csv's upload: got %+v, want its first execution, not the replay", x)
		}
		// The replay's counts are its own execution's summary.json's.
		if rp := replays[0]; report.CountText(rp.Registered) != "10" || report.CountText(rp.Rejected) != "0" || report.CountText(rp.Unprocessed) != "0" {
			t.Errorf("the replay's counts: got registered %s, rejected %s, unprocessed %s; want 10, 0, 0",
				report.CountText(rp.Registered), report.CountText(rp.Rejected), report.CountText(rp.Unprocessed))
		}
	})
}

// redriveDrawn checks a real report after a redrive: the redriven file is one bar per execution
// in report.html, with the statuses want, the tenant's bars never run at once, and no gap, in
// the page or in report.json, is negative.
func redriveDrawn(t *testing.T, r *Run, rep *report.Report, tenant, key string, want []string) {
	t.Helper()
	if g := rep.InterFileGapSecond; g.N > 0 && (g.Mean < 0 || g.Max < 0) {
		t.Errorf("interFileGapSeconds: got %+v, want no negative gap", g)
	}
	for _, g := range rep.Tenants[tenant].Gaps() {
		if g < 0 {
			t.Errorf("%s: got gap %v s, want none negative", tenant, g)
		}
	}
	var b bytes.Buffer
	if err := report.WriteHTML(&b, rep, r.TenantIDs(), time.Now()); err != nil {
		t.Fatal(err)
	}
	els, lanes := reportpage.Parse(t, b.Bytes())
	var got []string
	for _, bar := range lanes.Bars[tenant] {
		if bar.Attrs["data-key"] == key {
			got = append(got, bar.Attrs["data-status"])
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s bars: got statuses %v, want one bar per execution: %v", key, got, want)
	}
	if o := reportpage.RunningOverlaps(t, lanes.Bars[tenant]); len(o) > 0 {
		t.Errorf("%s: bars run at once: %v", tenant, o)
	}
	for _, e := range els {
		if e.HasClass("gap") && strings.Contains(e.Attrs["style"], "width: -") {
			t.Errorf("gap mark %q: got a negative width", e.Attrs["style"])
		}
	}
}
