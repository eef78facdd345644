//go:build e2e || figures

package localrun

import (
	"bytes"
	"context"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestScenarioExternalEndpointRecords: a run with --register-url (Config.RegisterURL) registers
// to an endpoint the harness does not watch, here a Sink of the test's own. The report's files
// show the records Split counted, not 0: the succeeded file its 25, the file Split refused none
// ("–"); the summary says the counts are Split's, and the endpoint did receive the 25.
func TestScenarioExternalEndpointRecords(t *testing.T) {
	t.Parallel()
	ext := &emulate.Sink{}
	srv := httptest.NewServer(ext)
	defer srv.Close()
	r := startScenario(t, scenarioTenants, Config{RegisterURL: emulate.SinkURL(srv.URL, "cont")})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	uploadAll(t, ctx, r, []upload{{"cont", "1.csv", csvOf(25)}, {"cont", "2-bad.csv", badCSV()}})
	rep := drain(t, ctx, r)
	noViolations(t, rep)
	if n := len(ext.Registered("cont")); n != 25 {
		t.Fatalf("the external endpoint: got %d records, want 25", n)
	}
	good, bad := fileOf(t, rep, "cont", "1.csv"), fileOf(t, rep, "cont", "2-bad.csv")
	if good.Status != "SUCCEEDED" || good.Records != 25 || good.RecordsCountedBy != "split" {
		t.Errorf("1.csv: got %s, %d records counted by %q; want SUCCEEDED, 25 by split", good.Status, good.Records, good.RecordsCountedBy)
	}
	if bad.Status != "FAILED" || bad.Records != 0 || bad.RecordsCountedBy != "none" {
		t.Errorf("2-bad.csv: got %s, %d records counted by %q; want FAILED, 0 by none", bad.Status, bad.Records, bad.RecordsCountedBy)
	}
	if got := rep.Tenants["cont"].RecordsRegistered; got != 0 {
		t.Errorf("recordsRegistered: got %d, want 0 (the harness saw none)", got)
	}
	var b bytes.Buffer
	report.WriteSummary(&b, rep, r.TenantIDs())
	for _, want := range []string{"RECORDS: the records Split counted", "record checks skipped: external endpoint"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary: got %q, want it to contain %q", b.String(), want)
		}
	}
	for _, line := range strings.Split(b.String(), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "cont" && strings.HasSuffix(f[1], "1.csv") && f[3] != "25" ||
			len(f) >= 4 && f[0] == "cont" && strings.HasSuffix(f[1], "2-bad.csv") && f[3] != "–" {
			t.Errorf("summary row: got %q, want RECORDS 25 for 1.csv and – for 2-bad.csv", line)
		}
	}
}
