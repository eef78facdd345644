package ops_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// TestReconcile: per file since the date, the results' counts and, with a lookupUrl, what the core
// system finds of the sampled (or all) records by key; every disagreement listed, and the report
// written to the tenant's results area. The file acme-1 has 10 records.
func TestReconcile(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	lookupURL := "/lookup/{key}"
	keys := func(ns ...int) map[string]int {
		m := map[string]int{}
		for _, n := range ns {
			m["acme-1-"+strconv.Itoa(n)] = 200
		}
		return m
	}
	all := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		name      string
		lookup    string // the core system's lookupUrl; "" none
		mode      string
		sample    int
		summary   results.Summary
		rejected  string         // rejected.jsonl; "" none
		core      map[string]int // key → lookup status; absent 404
		start     time.Time
		wantFiles int
		wantLook  []string // keys looked up
		wantFound int
		wantDiff  []string // in the differences, in order
	}{
		{name: "no lookupUrl: the results' counts", mode: ops.LookupSample,
			summary: results.Summary{Status: "SUCCEEDED", Records: 10, Registered: 10}, wantFiles: 1},
		{name: "all found", lookup: lookupURL, mode: ops.LookupAll, core: keys(all...),
			summary: results.Summary{Status: "SUCCEEDED", Records: 10, Registered: 10}, wantFiles: 1,
			wantLook: keysOf(all...), wantFound: 10},
		{name: "an acknowledged record missing", lookup: lookupURL, mode: ops.LookupAll, core: keys(1, 2, 3, 4, 6, 7, 8, 9, 10),
			summary: results.Summary{Status: "SUCCEEDED", Records: 10, Registered: 10}, wantFiles: 1,
			wantLook: keysOf(all...), wantFound: 9, wantDiff: []string{"1 acknowledged records not found in the core system: 5"}},
		{name: "a failed file: the record registered without its acknowledgement", lookup: lookupURL, mode: ops.LookupAll, core: keys(1, 2, 3, 4, 5, 6, 7),
			summary: results.Summary{Status: "FAILED", Records: 10, Registered: 6, Unprocessed: 4}, wantFiles: 1,
			wantLook: keysOf(all...), wantFound: 7, wantDiff: []string{"1 records found in the core system that the results do not count as registered: 7"}},
		{name: "a rejected record is not expected in the core system", lookup: lookupURL, mode: ops.LookupAll, core: keys(1, 2, 4, 5, 6, 7, 8, 9, 10),
			summary:  results.Summary{Status: "SUCCEEDED", Records: 10, Registered: 9, Rejected: 1, Files: results.Files{Rejected: "s3://ingest/results/acme/acme-1/rejected.jsonl"}},
			rejected: `{"line":4,"record":3,"error":"422"}` + "\n", wantFiles: 1, wantLook: keysOf(all...), wantFound: 9},
		{name: "a sample spreads over the file", lookup: lookupURL, mode: ops.LookupSample, sample: 3, core: keys(all...),
			summary: results.Summary{Status: "SUCCEEDED", Records: 10, Registered: 10}, wantFiles: 1,
			wantLook: keysOf(1, 5, 10), wantFound: 3},
		{name: "a lookup that fails is listed", lookup: lookupURL, mode: ops.LookupSample, sample: 1, core: map[string]int{"acme-1-1": 503},
			summary: results.Summary{Status: "SUCCEEDED", Records: 10, Registered: 10}, wantFiles: 1,
			wantLook: keysOf(1), wantDiff: []string{"1 lookups failed, records 1 (the lookup answered 503 Service Unavailable)"}},
		{name: "--lookup none", lookup: lookupURL, mode: ops.LookupNone, core: keys(),
			summary: results.Summary{Status: "SUCCEEDED", Records: 10, Registered: 10}, wantFiles: 1},
		{name: "a file before the date is left out", lookup: lookupURL, mode: ops.LookupAll, start: now.Add(-72 * time.Hour),
			summary: results.Summary{Status: "SUCCEEDED", Records: 10, Registered: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				looked []string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				key := strings.TrimPrefix(r.URL.Path, "/lookup/")
				mu.Lock()
				looked = append(looked, key)
				mu.Unlock()
				if st, ok := tc.core[key]; ok {
					w.WriteHeader(st)
					return
				}
				w.WriteHeader(http.StatusNotFound)
			}))
			defer srv.Close()
			w := opsfake.New(now)
			cs := &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 1}
			if tc.lookup != "" {
				cs.LookupURL = srv.URL + tc.lookup
			}
			w.CoreSystemOf["acme"] = cs
			tenant := opsfake.Tenant("acme", pipeline.OnFailureHalt)
			w.AddTenant("TenantPipeline-Tenants-1", tenant)
			start := tc.start
			if start.IsZero() {
				start = now.Add(-time.Hour)
			}
			w.AddExecution(tenant, "acme-1", sfntypes.ExecutionStatus(tc.summary.Status), "inbox/acme/a.csv", start)
			s := tc.summary
			s.Execution, s.Tenant, s.Source = "acme-1", "acme", results.Source{Bucket: "ingest", Key: "inbox/acme/a.csv", Version: "v-acme-1"}
			b, _ := json.Marshal(s)
			w.Objects["ingest/"+results.Key(w.OwnerOf("acme"), "acme-1", results.SummaryFile)] = &opsfake.Object{Body: string(b)}
			if tc.rejected != "" {
				w.Objects["ingest/results/acme/acme-1/rejected.jsonl"] = &opsfake.Object{Body: tc.rejected}
			}
			o := ops.New(w.Clients(), "TenantPipeline")
			o.Now = func() time.Time { return now }
			o.HTTP = srv.Client()
			rep, err := o.Reconcile(context.Background(), "acme", ops.ReconcileOptions{Since: now.Add(-24 * time.Hour), Lookup: tc.mode, Sample: tc.sample})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Files) != tc.wantFiles {
				t.Fatalf("got %d files, want %d", len(rep.Files), tc.wantFiles)
			}
			if !reflect.DeepEqual(looked, tc.wantLook) {
				t.Errorf("got lookups %v, want %v", looked, tc.wantLook)
			}
			var diffs []string
			for _, f := range rep.Files {
				diffs = append(diffs, f.Differences...)
				if f.Found != tc.wantFound || f.Sent != s.Records-s.Unprocessed || f.Acknowledged != s.Registered || f.Rejected != s.Rejected {
					t.Errorf("got %+v, want found %d and the summary's counts", f, tc.wantFound)
				}
			}
			if !reflect.DeepEqual(diffs, tc.wantDiff) || rep.Differences != len(tc.wantDiff) {
				t.Errorf("got differences %q (%d), want %q", diffs, rep.Differences, tc.wantDiff)
			}
			const key = "results/acme/reconcile/20261130T120000Z.json"
			if rep.Written != "s3://ingest/"+key {
				t.Errorf("got written %q, want s3://ingest/%s", rep.Written, key)
			}
			stored, ok := w.Objects["ingest/"+key]
			var back ops.ReconcileReport
			if !ok || json.Unmarshal([]byte(stored.Body), &back) != nil || len(back.Files) != len(rep.Files) || back.Differences != rep.Differences {
				t.Errorf("got the report stored %v, want it as printed", ok)
			}
		})
	}
}

func keysOf(ns ...int) []string {
	var ks []string
	for _, n := range ns {
		ks = append(ks, "acme-1-"+strconv.Itoa(n))
	}
	return ks
}
