//go:build e2e

package localrun

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// horizonTenants: three halt tenants, each with its own core system that keeps idempotency keys
// for a minute: hzlookup's answers lookups (its lookupUrl is the embedded sink's), hzrefuse's and
// hzaccept's do not.
const horizonTenants = `{"coreSystems": {
  "erpl": {"maxRunningFiles": 2, "idempotencyRetention": "1m", "lookupUrl": "https://core.example.com/lookup/{key}"},
  "erpr": {"maxRunningFiles": 2, "idempotencyRetention": "1m"},
  "erpa": {"maxRunningFiles": 2, "idempotencyRetention": "1m"}},
 "tenants": [
  {"id": "hzlookup", "onFailure": "halt", "coreSystem": "erpl", "registerUrl": "https://core.example.com/records"},
  {"id": "hzrefuse", "onFailure": "halt", "coreSystem": "erpr", "registerUrl": "https://core.example.com/records"},
  {"id": "hzaccept", "onFailure": "halt", "coreSystem": "erpa", "registerUrl": "https://core.example.com/records"}
]}`

// TestScenarioIdempotencyHorizon: a Register process killed after the sink committed part of an
// invocation, on every attempt, so the file fails and the tenant halts; the sink's key TTL and the
// core system's idempotencyRetention pass; then a redrive. With a lookupUrl it registers nothing
// twice and looks up at most one invocation's records; without one pipectl refuses the redrive and
// Register refuses it too; with --accept-duplicates the duplicates are exactly the killed
// invocation's committed records. pipectl reconcile agrees with the sink's ground truth.
func TestScenarioIdempotencyHorizon(t *testing.T) {
	t.Parallel()
	const (
		// Record 60 lies in the file's first chunk (of 100): the invocation that reaches it is
		// killed, or its held POST fails it, inside its first chunk, so it hands on no cursor and
		// the retries and the redrive re-send its records 1..59, which the sink committed.
		records, killAt = 600, 60
		retention       = time.Minute
		keyTTL          = 70 * time.Second // longer than the killed file's retries, shorter than the wait
	)
	r := startScenario(t, horizonTenants, Config{
		// The held record's POST may wait 3 s, far longer than the kill takes even on a busy
		// machine: it is always killed, never handed on as a cursor past the committed records.
		EnvFor: map[string][]string{registerPkg: {"HTTP_TIMEOUT_SECONDS=3"}, controllerPkg: {"REGISTER_TIMEOUT_SECONDS=10", "HALT_WAIT_SECONDS=1"}},
		Lambda: LambdaOptions{FunctionTimeout: map[string]time.Duration{registerPkg: 10 * time.Second}}, StepFunctions: StepFunctionsOptions{RetryIntervalScale: 0.1}, Core: CoreOptions{KeyTTL: keyTTL},
	})
	r.Sink.SetLookup(true)
	tenants := []string{"hzlookup", "hzrefuse", "hzaccept"}
	var fixed atomic.Bool
	r.Sink.SetFault(func(tenant, source string, n int64, _ int) int {
		if !strings.HasPrefix(tenant, "hz") || !strings.HasSuffix(source, "/big.csv") || n != killAt || fixed.Load() {
			return 0
		}
		go func() {
			for range 30 {
				time.Sleep(100 * time.Millisecond)
				if f := r.Function(registerPkg, tenant); f != nil && f.KillRunning() > 0 {
					return
				}
			}
		}()
		return -1 // no answer: the process is killed while it waits
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var files []upload
	for _, id := range tenants {
		files = append(files, upload{id, "big.csv", csvOf(records)}, upload{id, "after.csv", csvOf(30)})
	}
	uploadAll(t, ctx, r, files)
	waitFor(t, ctx, r, "every big.csv failed", func(rep *report.Report) bool {
		for _, id := range tenants {
			if tr := rep.Tenants[id]; tr == nil || len(tr.Files) == 0 || tr.Files[0].Status != "FAILED" {
				return false
			}
		}
		return true
	})
	// The killed invocation's records: re-sent by each retry, registered once (within the TTL).
	// Register records the killed invocation's first send just before it; the sink's TTL runs
	// from each record's registration, its first send.
	first, until := map[string]int64{}, time.Time{}
	for _, id := range tenants {
		sent, at := map[int64]int{}, map[int64]time.Time{}
		for _, q := range r.Sink.Requests(id) {
			if strings.HasSuffix(q.Source, "/big.csv") {
				if sent[q.RecordNumber]++; sent[q.RecordNumber] == 1 {
					at[q.RecordNumber] = q.Start
				}
			}
		}
		for n := int64(1); n <= killAt; n++ {
			if sent[n] > 1 && first[id] == 0 {
				first[id] = n
			}
			if first[id] != 0 {
				until = latest(until, at[first[id]].Add(retention), at[n].Add(keyTTL))
			}
		}
		if first[id] == 0 || first[id] >= killAt {
			t.Fatalf("%s: re-sent from record %d before the redrive: want the killed invocation's committed records re-sent, from before record %d", id, first[id], killAt)
		}
		if d := duplicatesOf(r, id, "big.csv"); d != 0 {
			t.Fatalf("%s: %d records registered twice before the redrive, want none (the retries fall within the key TTL)", id, d)
		}
	}
	// Past the retention and the sink's TTL.
	if wait := time.Until(until.Add(5 * time.Second)); wait > 0 {
		t.Logf("waiting %s for the key TTL (%s) and the retention (%s) to pass", wait.Round(time.Second), keyTTL, retention)
		time.Sleep(wait)
	}
	fixed.Store(true)
	rep, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}

	for _, id := range tenants {
		ex := fileOf(t, rep, id, "big.csv").ExecutionName
		out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(pipeline.ProgressKey(r.Tenant(id).Owner(), ex, 0))})
		var body []byte
		if err == nil {
			body, _ = io.ReadAll(out.Body)
			out.Body.Close()
		}
		// The scenario tests what it means to: the first send is recorded where a redrive reads it.
		p, perr := pipeline.DecodeProgress(body)
		if err != nil || perr != nil || p.SentAt == "" {
			t.Fatalf("%s: got progress %s (%v, %v), want one with the killed invocation's first send (core system %v)", id, body, err, perr, r.Tenant(id).Config["coreSystem"])
		}
	}
	// Without a lookupUrl: pipectl refuses, and a redrive that gets past it is refused by Register.
	refuse := fileOf(t, rep, "hzrefuse", "big.csv")
	code, out, errOut := pipectlIn(t, r, "", "redrive", "hzrefuse", "--reason", "core fixed", "--stack-prefix", opsPrefix)
	if code == 0 || !strings.Contains(out+errOut, "idempotencyRetention") || !strings.Contains(out+errOut, "--accept-duplicates") {
		t.Errorf("pipectl redrive hzrefuse: got exit %d, %s%s; want a refusal naming the retention and --accept-duplicates", code, out, errOut)
	}
	before := len(r.Sink.Requests("hzrefuse"))
	if _, err := r.StepFunctions().RedriveExecution(ctx, &sfn.RedriveExecutionInput{ExecutionArn: aws.String(executionARN(t, r, "hzrefuse", refuse.ExecutionName))}); err != nil {
		t.Fatal(err)
	}

	// With a lookupUrl, and with duplicates accepted.
	pipectl(t, r, "redrive", "hzlookup", "--reason", "core fixed", "--stack-prefix", opsPrefix)
	pipectl(t, r, "redrive", "hzaccept", "--reason", "core fixed, duplicates reconciled by hand", "--accept-duplicates", "--stack-prefix", opsPrefix)

	rep = waitFor(t, ctx, r, "the redrives ended", func(rep *report.Report) bool {
		done := func(id string, n int) bool {
			tr := rep.Tenants[id]
			ok := tr != nil && len(tr.Files) == 2
			for _, f := range tr.Files {
				ok = ok && f.Status == "SUCCEEDED"
			}
			return ok && fileOf(t, rep, id, "big.csv").RedriveCount == n
		}
		r := fileOf(t, rep, "hzrefuse", "big.csv")
		return done("hzlookup", 1) && done("hzaccept", 1) && r.RedriveCount == 1 && r.Status == "FAILED"
	})
	if f := fileOf(t, rep, "hzrefuse", "big.csv"); !strings.Contains(f.Cause, "idempotencyRetention") || !strings.Contains(f.Cause, "lookupUrl") {
		t.Errorf("hzrefuse big.csv after a redrive past pipectl: got %s %q, want Register's refusal naming the retention and lookupUrl", f.Error, f.Cause)
	}
	for _, q := range r.Sink.Requests("hzrefuse")[before:] {
		if strings.HasSuffix(q.Source, "/big.csv") {
			t.Errorf("hzrefuse: record %d sent after the refused redrive", q.RecordNumber)
			break
		}
	}
	if d := duplicatesOf(r, "hzlookup", "big.csv"); d != 0 {
		t.Errorf("hzlookup: %d records registered twice, want 0 (looked up first)", d)
	}
	if n, most := r.Sink.Lookups("hzlookup"), killAt-first["hzlookup"]+1; n == 0 || n > most {
		t.Errorf("hzlookup: %d lookups, want 1 to %d (the killed invocation's records, %d..%d)", n, most, first["hzlookup"], killAt)
	}
	if d, want := duplicatesOf(r, "hzaccept", "big.csv"), int(killAt-first["hzaccept"]); d != want {
		t.Errorf("hzaccept: %d records registered twice, want %d: the killed invocation's records the sink committed (%d..%d)", d, want, first["hzaccept"], killAt-1)
	}
	t.Logf("killed invocations started at %v; hzlookup looked up %d records; sink registered %d records again in all",
		first, r.Sink.Lookups("hzlookup"), r.Sink.Reregistered())

	// pipectl reconcile agrees with the sink's ground truth: each file's acknowledged records are
	// the records the sink holds of it, and (hzlookup) every one is found by its key.
	for _, id := range tenants {
		var rec ops.ReconcileReport
		stdout := pipectl(t, r, "reconcile", id, "--since", "2000-01-01", "--lookup", "all", "--json", "--stack-prefix", opsPrefix)
		if err := json.Unmarshal([]byte(stdout), &rec); err != nil {
			t.Fatalf("pipectl reconcile %s: %v\n%s", id, err, stdout)
		}
		if !strings.HasPrefix(rec.Written, "s3://") || !strings.Contains(rec.Written, "/"+pipeline.ResultsDir(r.Tenant(id).Owner())+"reconcile/") {
			t.Errorf("%s: reconcile written to %q, want the tenant's results area", id, rec.Written)
		}
		for _, f := range rec.Files {
			rel := f.File.Key[strings.LastIndex(f.File.Key, "/")+1:]
			held := distinctOf(r, id, rel)
			if f.Status == "SUCCEEDED" && f.Acknowledged != held {
				t.Errorf("%s %s: reconcile acknowledged %d, the sink holds %d distinct records", id, rel, f.Acknowledged, held)
			}
			if id == "hzlookup" && (f.Found != int(held) || f.LookedUp != int(f.Records) || len(f.Differences) != 0) {
				t.Errorf("%s %s: reconcile found %d of %d looked up (differences %q), the sink holds %d of %d", id, rel, f.Found, f.LookedUp, f.Differences, held, f.Records)
			}
		}
	}
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// duplicatesOf is how many records of the tenant's file the sink registered more than once.
func duplicatesOf(r *Run, tenant, rel string) int {
	seen, dup := map[int64]int{}, 0
	for _, rec := range r.Sink.Registered(tenant) {
		if strings.HasSuffix(rec.Source, "/"+rel) {
			seen[rec.RecordNumber]++
			if seen[rec.RecordNumber] == 2 {
				dup++
			}
		}
	}
	return dup
}

// distinctOf is how many distinct records of the tenant's file the sink holds.
func distinctOf(r *Run, tenant, rel string) int64 {
	seen := map[int64]bool{}
	for _, rec := range r.Sink.Registered(tenant) {
		if strings.HasSuffix(rec.Source, "/"+rel) {
			seen[rec.RecordNumber] = true
		}
	}
	return int64(len(seen))
}
