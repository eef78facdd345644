//go:build e2e

package localrun

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The capacity scenario's core system: capacityScenarioLimit requests in flight across
// capacityScenarioRunning running files, fewer than one keyed file alone asks for
// (capacityScenarioWindow).
const (
	capacityScenarioLimit   = 6
	capacityScenarioRunning = 3
	capacityScenarioWindow  = 8
)

// capacityScenarioTenants: in both tiers together, one core system named by a keyed silo tenant, a
// keyed pooled tenant, and two pooled tenants in file order.
var capacityScenarioTenants = fmt.Sprintf(`{"coreSystems": {"ledger": {"maxRunningFiles": %d, "maxRequestsInFlight": %d}}, "pools": {"shared": {}}, "tenants": [
  {"id": "keyed", "coreSystem": "ledger", "chunkSize": 40, "recordOrder": "key", "keyColumns": ["customer"], "maxRecordsInFlight": %d, "registerUrl": "https://core.example.com/records"},
  {"id": "pkeyed", "tier": "pool", "pool": "shared", "coreSystem": "ledger", "chunkSize": 40, "recordOrder": "key", "keyColumns": ["customer"], "maxRecordsInFlight": %d, "registerUrl": "https://core.example.com/records"},
  {"id": "pa", "tier": "pool", "pool": "shared", "coreSystem": "ledger", "registerUrl": "https://core.example.com/records"},
  {"id": "pb", "tier": "pool", "pool": "shared", "coreSystem": "ledger", "registerUrl": "https://core.example.com/records"}
]}`, capacityScenarioRunning, capacityScenarioLimit, capacityScenarioWindow, capacityScenarioWindow)

// TestScenarioCapacity: keyed files that could each keep more requests in flight than their core
// system takes, beside files in file order, in a silo and a pool at once. Every record is
// registered once, each key's records in file order (assertInvariants), and the core system never
// had more requests in flight at once than its maxRequestsInFlight, however the running files
// divide it; the keyed files did keep several in flight, so the bound was under pressure.
func TestScenarioCapacity(t *testing.T) {
	t.Parallel()
	r := startScenario(t, capacityScenarioTenants, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Each answer takes 5 ms, so that requests sent together are in flight together.
	r.Sink.SetDelay(func(string, string, int64) time.Duration { return 5 * time.Millisecond })
	files := []upload{
		{"keyed", "1.csv", csvKeyed(240, 30)}, {"pkeyed", "1.csv", csvKeyed(240, 30)},
		{"pa", "1.csv", csvOf(60)}, {"pa", "2.csv", csvOf(60)},
		{"pb", "1.csv", csvOf(60)}, {"pb", "2.csv", csvOf(60)},
		{"keyed", "2.csv", csvKeyed(120, 30)},
	}
	uploadAll(t, ctx, r, files)
	rep := drain(t, ctx, r)
	assertInvariants(t, r, rep, nil, false)
	assertAllSucceeded(t, rep, files)

	flight, peak := r.Sink.FlightOf("ledger")
	first, last := flight.Span()
	if peak > capacityScenarioLimit {
		t.Errorf("requests in flight to ledger at once: got %d, want at most its maxRequestsInFlight %d (mean %.1f over the run)",
			peak, capacityScenarioLimit, flight.Mean(first, last))
	}
	t.Logf("ledger: at most %d of %d requests in flight, %.1f on average over the run", peak, capacityScenarioLimit, flight.Mean(first, last))
	// What the scenario exercised: every tenant's requests were counted as the core system's, and
	// the keyed files kept more than one in flight.
	if _, other := r.Sink.FlightOf(""); other != 0 {
		t.Errorf("requests in flight to no core system: got a peak of %d, want none (every tenant names ledger)", other)
	}
	for _, id := range []string{"keyed", "pkeyed"} {
		if got := r.Sink.PeakInFlight(id); got < 2 || got > capacityScenarioWindow {
			t.Errorf("%s: got at most %d requests in flight at once, want 2 to %d", id, got, capacityScenarioWindow)
		}
	}
}
