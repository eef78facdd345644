package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestSummarizeBreaker(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	ev := func(s int, e string) BreakerEvent {
		return BreakerEvent{At: t0.Add(time.Duration(s) * time.Second), CoreSystem: "ledger", Event: e, Reason: "refused"}
	}
	tests := []struct {
		name                                 string
		events                               []BreakerEvent
		state                                string
		opens, probes, probeFailures, closes int
	}{
		{"none", nil, "closed", 0, 0, 0, 0},
		{"opened, out of order in the logs", []BreakerEvent{ev(3, BreakerProbe), ev(1, BreakerOpened)}, "half-open", 1, 1, 0, 0},
		{"a failed probe, then closed", []BreakerEvent{ev(1, BreakerOpened), ev(2, BreakerProbe), ev(3, BreakerProbeFailed), ev(5, BreakerProbe), ev(6, BreakerClosed)}, "closed", 1, 2, 1, 1},
		{"still open", []BreakerEvent{ev(1, BreakerOpened), ev(2, BreakerProbe), ev(3, BreakerProbeFailed)}, "open", 1, 1, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := SummarizeBreaker(tc.events)
			if b.State != tc.state || b.Opens != tc.opens || b.Probes != tc.probes || b.ProbeFailures != tc.probeFailures || b.Closes != tc.closes {
				t.Errorf("got %s %d/%d/%d/%d, want %s %d/%d/%d/%d", b.State, b.Opens, b.Probes, b.ProbeFailures, b.Closes,
					tc.state, tc.opens, tc.probes, tc.probeFailures, tc.closes)
			}
		})
	}
}

// The HTML report has a row per core system whose breaker changed, and no section without one.
func TestHTMLBreakers(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		breakers map[string]CoreSystemBreaker
		want     string
		absent   bool
	}{
		{"none", nil, `id="breakers"`, true},
		{"closed after an outage", map[string]CoreSystemBreaker{"ledger": SummarizeBreaker([]BreakerEvent{
			{At: t0, CoreSystem: "ledger", Event: BreakerOpened, Reason: "the core system did not answer: connection refused"},
			{At: t0.Add(time.Second), CoreSystem: "ledger", Event: BreakerProbe},
			{At: t0.Add(time.Second), CoreSystem: "ledger", Event: BreakerClosed}})},
			`data-core-system="ledger" data-breaker="closed"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &Report{Tenants: map[string]*TenantReport{}, CoreSystemBreakers: tc.breakers}
			var b bytes.Buffer
			if err := WriteHTML(&b, rep, nil, t0); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(b.String(), tc.want); got == tc.absent {
				t.Errorf("got %q in the page %v, want %v", tc.want, got, !tc.absent)
			}
		})
	}
}
