//go:build e2e || figures

package localrun

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/results"
)

// The local PutEvents keeps the File Processed events in order and answers as EventBridge does;
// other events are routed but not kept.
func TestServePutEvents(t *testing.T) {
	r := &Run{Cloud: &Cloud{}}
	r.watch = r
	body := `{"Entries":[` +
		`{"Source":"tenantpipeline","DetailType":"File Processed","EventBusName":"default","Detail":"{\"eventId\":\"e1/0\",\"tenant\":\"acme\",\"status\":\"SUCCEEDED\"}"},` +
		`{"Source":"other","DetailType":"Other","Detail":"{}"},` +
		`{"Source":"tenantpipeline","DetailType":"File Processed","Detail":"not json"}]}`
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("X-Amz-Target", "AWSEvents.PutEvents")
	w := httptest.NewRecorder()
	r.servePutEvents(w, req)
	if got := w.Body.String(); !strings.Contains(got, `"FailedEntryCount":1`) || !strings.Contains(got, `"ErrorCode":"MalformedDetail"`) {
		t.Errorf("got answer %s, want one failed entry (the malformed detail)", got)
	}
	got := r.FileEvents()
	if len(got) != 1 || got[0].Detail.EventID != "e1/0" || got[0].Detail.Tenant != "acme" || got[0].Bus != "default" || got[0].ID == "" {
		t.Errorf("got file events %+v, want the one File Processed event e1/0 of acme on default", got)
	}
}

// Scenario: every file's end is announced once with a File Processed event, in both tiers, with
// the file's tenant, tier, execution, status and source key. The counts come from summary.json,
// which the results part writes; without it the event says countsFrom "none", which this checks
// too, so that a summary's arrival is seen here.
func TestScenarioFileEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, tenants, tier string
		ids                 []string
	}{
		{"silo", scenarioTenants, "silo", []string{"cont", "ov"}},
		{"pool", noisyTenants, "pool", []string{"q1", "q2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := startScenario(t, tc.tenants, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			var files []upload
			for _, id := range tc.ids {
				for i := range 2 {
					files = append(files, upload{id, fmt.Sprintf("e-%d.csv", i), csvOf(20 + 10*i)})
				}
			}
			uploadAll(t, ctx, r, files)
			rep := drain(t, ctx, r)
			byExecution := map[string][]report.FileEvent{}
			for _, ev := range rep.FileEvents {
				byExecution[ev.Detail.Execution] = append(byExecution[ev.Detail.Execution], ev)
			}
			for _, f := range files {
				fr := fileOf(t, rep, f.tenant, f.rel)
				evs := byExecution[fr.ExecutionName]
				if len(evs) != 1 {
					t.Errorf("%s/%s: got %d File Processed events, want 1", f.tenant, f.rel, len(evs))
					continue
				}
				d := evs[0].Detail
				if d.EventID != fr.ExecutionName+"/0" || d.Tenant != f.tenant || d.Tier != tc.tier || d.Status != fr.Status || d.Source.Key != fr.Key {
					t.Errorf("%s/%s: got event %+v, want id %s/0, tenant %s, tier %s, status %s, key %s",
						f.tenant, f.rel, d, fr.ExecutionName, f.tenant, tc.tier, fr.Status, fr.Key)
				}
				if want := results.URI(r.Bucket, results.Key(r.Tenant(f.tenant).Owner(), fr.ExecutionName, results.SummaryFile)); d.Summary != want {
					t.Errorf("%s/%s: got summary %s, want %s", f.tenant, f.rel, d.Summary, want)
				}
				switch d.CountsFrom {
				case results.CountsFromSummary:
					if d.Records != fr.Records || d.Registered != fr.Records {
						t.Errorf("%s/%s: got records %d registered %d, want %d each (the sink's count)", f.tenant, f.rel, d.Records, d.Registered, fr.Records)
					}
				case results.CountsFromNone:
				default:
					t.Errorf("%s/%s: got countsFrom %q", f.tenant, f.rel, d.CountsFrom)
				}
			}
			if len(rep.FileEvents) != len(files) {
				t.Errorf("got %d File Processed events, want %d (one per file)", len(rep.FileEvents), len(files))
			}
		})
	}
}
