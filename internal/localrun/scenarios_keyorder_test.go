//go:build e2e || figures

package localrun

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/results"
)

// keyOrderTenants: a halt tenant in key order over its customer column, 8 requests in flight.
const keyOrderTenants = `{"tenants": [
  {"id": "keyed", "onFailure": "halt", "chunkSize": 40, "recordOrder": "key", "keyColumns": ["customer"], "maxRecordsInFlight": 8, "registerUrl": "https://core.example.com/records"}
]}`

// The key-order scenario's file: keyOrderRecords records interleaving keyOrderKeys customers.
const (
	keyOrderRecords = 300
	keyOrderKeys    = 50
	keyOrderFailAt  = 123
)

// TestScenarioKeyOrder, in both tiers: a keyed tenant's file whose records interleave 50 keys,
// against a core system that checks per-key order and counts the requests in flight (the local
// sink, SetKeyColumns). Every record is registered once, each key's records in file order, more
// than one request was in flight and never two of one key. The same records in a second file,
// with a forced failure at one record, halt there: the summary and the unprocessed file say which
// records after it were registered (other keys) and which were not, exactly; a redrive after the
// fix registers the rest, none twice.
func TestScenarioKeyOrder(t *testing.T) {
	t.Parallel()
	forEachTier(t, keyOrderTenants, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		// Each answer takes 5 ms, so that requests sent together are in flight together. The
		// failing record's answer waits until a later record of fails.csv (another key's) is
		// registered, so that the halt has records after it to account for.
		// fails.csv fails at keyOrderFailAt until fixed; fails-first.csv at its first record, the
		// first its invocation sends, so that the records other keys registered past it are all
		// the invocation registered.
		var fixed atomic.Bool
		failsAt := func(source string) int64 {
			switch {
			case strings.HasSuffix(source, "/fails.csv") && !fixed.Load():
				return keyOrderFailAt
			case strings.HasSuffix(source, "/fails-first.csv"):
				return 1
			}
			return 0
		}
		laterRegistered := func(source string, at int64) bool {
			name := source[strings.LastIndex(source, "/"):]
			for _, rec := range r.Sink.Registered("keyed") {
				if strings.HasSuffix(rec.Source, name) && rec.RecordNumber > at {
					return true
				}
			}
			return false
		}
		r.Sink.SetDelay(func(_, source string, n int64) time.Duration {
			if at := failsAt(source); at > 0 && n == at {
				for end := time.Now().Add(time.Minute); !laterRegistered(source, at) && time.Now().Before(end); {
					time.Sleep(10 * time.Millisecond)
				}
			}
			return 5 * time.Millisecond
		})
		r.Sink.SetFault(func(tenant, source string, n int64, _ int) int {
			if at := failsAt(source); at > 0 && n == at {
				return 400 // permanent: the file fails at this record, the tenant halts
			}
			return 0
		})
		body := csvKeyed(keyOrderRecords, keyOrderKeys)
		uploadAll(t, ctx, r, []upload{{"keyed", "ok.csv", body}})
		rep := drain(t, ctx, r)
		assertInvariants(t, r, rep, nil, false)
		if f := fileOf(t, rep, "keyed", "ok.csv"); f.Status != "SUCCEEDED" || f.Records != keyOrderRecords {
			t.Fatalf("ok.csv: got %s with %d records registered, want SUCCEEDED with %d", f.Status, f.Records, keyOrderRecords)
		}
		// The sink's own checks: every record once (assertInvariants: one key per record), each
		// key in file order, never two of one key at once (rep.Violations); here, in flight.
		if peak := r.Sink.PeakInFlight("keyed"); peak < 2 || peak > 8 {
			t.Errorf("requests in flight at once: got at most %d, want 2 to 8", peak)
		}
		byKey := map[string][]int64{}
		for _, rec := range r.Sink.Registered("keyed") {
			byKey[rec.RecordKey] = append(byKey[rec.RecordKey], rec.RecordNumber)
		}
		if len(byKey) != keyOrderKeys {
			t.Errorf("ok.csv: got %d keys at the core system, want %d", len(byKey), keyOrderKeys)
		}
		for k, ns := range byKey {
			if !slices.IsSorted(ns) {
				t.Errorf("ok.csv key %s: records registered in the order %v, want file order", k, ns)
			}
		}

		// The same records with a failure at one record: the file halts there.
		fails := keyOrderHalt(t, ctx, r, "fails.csv", keyOrderFailAt, body)

		// Redriven after the fix: it resends from the low-water mark with the same keys; the core
		// system holds every record once.
		fixed.Store(true)
		pipectl(t, r, "redrive", "keyed", fails.ExecutionName, "--reason", "core system fixed", "--stack-prefix", opsPrefix)
		rep = waitFor(t, ctx, r, "fails.csv redriven", func(rep *report.Report) bool {
			f := maybeFile(rep, "keyed", "fails.csv")
			return f != nil && f.Status == "SUCCEEDED"
		})
		assertInvariants(t, r, rep, nil, false)
		n := 0
		for _, rec := range r.Sink.Registered("keyed") {
			if strings.HasSuffix(rec.Source, "/fails.csv") {
				n++
			}
		}
		if n != keyOrderRecords {
			t.Errorf("fails.csv after the redrive: the core system holds %d records, want %d", n, keyOrderRecords)
		}
		if sum := readSummary(t, ctx, r, "keyed", fails.ExecutionName); sum.Status != "SUCCEEDED" || sum.Registered != keyOrderRecords || sum.Unprocessed != 0 {
			t.Errorf("fails.csv after the redrive: got %s, %d registered, %d unprocessed; want SUCCEEDED, %d, 0", sum.Status, sum.Registered, sum.Unprocessed, keyOrderRecords)
		}

		// A file whose first record fails: the invocation registered nothing before it, only
		// other keys' records past it, and the results still list those as registered.
		keyOrderHalt(t, ctx, r, "fails-first.csv", 1, body)
	})
}

// keyOrderHalt uploads body as rel, which the core system fails at record failAt, and checks the
// halt: the failed record and its key's later records not registered, the summary's counts, the
// records registered after the failed one (other keys') as the core system holds them, and the
// unprocessed file, exactly the records not registered. It returns the failed file.
func keyOrderHalt(t *testing.T, ctx context.Context, r *Run, rel string, failAt int64, body []byte) report.FileReport {
	t.Helper()
	uploadAll(t, ctx, r, []upload{{"keyed", rel, body}})
	rep := waitFor(t, ctx, r, rel+" failed and its results written", func(rep *report.Report) bool {
		f := maybeFile(rep, "keyed", rel)
		if f == nil || f.Status != "FAILED" {
			return false
		}
		for _, ev := range rep.FileEvents {
			if ev.Detail.Execution == f.ExecutionName {
				return true
			}
		}
		return false
	})
	fails := fileOf(t, rep, "keyed", rel)
	failKey := fmt.Sprintf("%q", keyOfRecord(int(failAt), keyOrderKeys))
	var registered []int64
	for _, rec := range r.Sink.Registered("keyed") {
		if !strings.HasSuffix(rec.Source, "/"+rel) {
			continue
		}
		registered = append(registered, rec.RecordNumber)
		if rec.RecordKey == failKey && rec.RecordNumber > failAt {
			t.Errorf("%s: record %d of the failed record's key %s was registered after it", rel, rec.RecordNumber, failKey)
		}
	}
	slices.Sort(registered)
	var after []int64
	for _, n := range registered {
		if n == failAt {
			t.Errorf("%s: the failed record %d is registered", rel, n)
		}
		if n > failAt {
			after = append(after, n)
		}
	}
	sum := readSummary(t, ctx, r, "keyed", fails.ExecutionName)
	if sum.Status != "FAILED" || sum.Failure == nil || !strings.Contains(sum.Failure.Message, "record "+strconv.FormatInt(failAt, 10)+":") {
		t.Errorf("%s summary: got %s, failure %+v; want FAILED at record %d", rel, sum.Status, sum.Failure, failAt)
	}
	if sum.Records != keyOrderRecords || sum.Registered != int64(len(registered)) || sum.Unprocessed != keyOrderRecords-int64(len(registered)) {
		t.Errorf("%s summary: got %d records, %d registered, %d unprocessed; the core system holds %d of %d",
			rel, sum.Records, sum.Registered, sum.Unprocessed, len(registered), keyOrderRecords)
	}
	if len(after) == 0 {
		t.Errorf("%s: no record after the failed one was registered, want other keys' records past it", rel)
	}
	t.Logf("%s halted at record %d with %d records registered, %d of them after it; at most %d requests in flight",
		rel, failAt, len(registered), len(after), r.Sink.PeakInFlight("keyed"))
	if got := registeredAfterHalt(sum); !slices.Equal(got, after) {
		t.Errorf("%s summary: got records %v registered after the failed one, want %v (the core system's)", rel, got, after)
	}
	// The unprocessed file: the header and exactly the records not registered, as uploaded.
	unprocessed := readObject(t, ctx, r, results.Key(r.Tenant("keyed").Owner(), fails.ExecutionName, results.UnprocessedCSV))
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	want := []string{lines[0]}
	for i, line := range lines[1:] {
		if _, ok := slices.BinarySearch(registered, int64(i+1)); !ok {
			want = append(want, line)
		}
	}
	if got := strings.TrimSuffix(string(unprocessed), "\n"); got != strings.Join(want, "\n") {
		t.Errorf("%s unprocessed.csv: got %d lines, want the header and the %d records not registered, byte for byte", rel, strings.Count(got, "\n")+1, len(want)-1)
	}
	return fails
}

// registeredAfterHalt lists, one by one, the records a summary's registeredAfterHalt ranges hold.
func registeredAfterHalt(sum results.Summary) []int64 {
	var ns []int64
	for _, r := range sum.RegisteredAfterHalt {
		for n := r.First; n <= r.Last; n++ {
			ns = append(ns, n)
		}
	}
	return ns
}
