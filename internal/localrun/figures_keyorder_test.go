//go:build figures

package localrun

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The key-order pace figure's file and core system: keyPaceRecords records interleaving
// keyPaceKeys customers, keyPaceInFlight requests in flight, every answer keyPaceLatency late.
const (
	keyPaceRecords  = 400
	keyPaceKeys     = 50
	keyPaceInFlight = 8
	keyPaceLatency  = 20 * time.Millisecond
	keyPaceSamples  = 3
)

// keyPaceTenants: the same file in key order and in file order, side by side, once on their own
// and once as tenants of a core system of 30 requests in flight for 10 running files, whose
// static share per running file (3) bounds the keyed file's window when it runs alone.
var keyPaceTenants = fmt.Sprintf(`{"coreSystems": {"core": {"maxRequestsInFlight": 30, "maxRunningFiles": 10}}, "tenants": [
  {"id": "keyed", "recordOrder": "key", "keyColumns": ["customer"], "maxRecordsInFlight": %[1]d, "registerUrl": "https://core.example.com/records"},
  {"id": "ordered", "registerUrl": "https://core.example.com/records"},
  {"id": "keyedcore", "coreSystem": "core", "recordOrder": "key", "keyColumns": ["customer"], "maxRecordsInFlight": %[1]d, "registerUrl": "https://core.example.com/records"},
  {"id": "orderedcore", "coreSystem": "core", "registerUrl": "https://core.example.com/records"}
]}`, keyPaceInFlight)

// TestFiguresKeyOrderPace is make figures' "key-order-pace:" lines, in both tiers: how long a file
// of interleaved keys takes end to end, from its upload to its File Processed event, in key order
// beside file order, one file at a time on a warm, otherwise idle run (the median of
// keyPaceSamples). The window alone would make key order about keyPaceInFlight times faster than
// file order; what the file's fixed cost, the keyed schedule and the core system's share leave of
// it is the ratio. It asserts invariants (every file SUCCEEDED once, every record registered,
// never above the window), never a time.
func TestFiguresKeyOrderPace(t *testing.T) {
	shapes := []struct {
		keyed, ordered, what string
	}{
		{"keyed", "ordered", "no core system"},
		{"keyedcore", "orderedcore", "a core system of 30 requests for 10 running files"},
	}
	for _, tier := range []string{"silo", "pool"} {
		t.Run(tier, func(t *testing.T) {
			r := startScenario(t, withTierJSON(keyPaceTenants, tier), Config{Core: CoreOptions{Latency: keyPaceLatency}})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			body := csvKeyed(keyPaceRecords, keyPaceKeys)
			ids := []string{"keyed", "ordered", "keyedcore", "orderedcore"}
			// Warm every tenant's functions first: the figure is the pace, not a cold start.
			for _, id := range ids {
				up, err := r.Upload(ctx, id, "warm.csv", csvKeyed(10, 5))
				if err != nil {
					t.Fatal(err)
				}
				fileLatencies(t, ctx, r, tier, []*Upload{up})
			}
			took := map[string][]fileLatency{}
			for i := range keyPaceSamples {
				for _, id := range ids {
					up, err := r.Upload(ctx, id, fmt.Sprintf("pace-%02d.csv", i), body)
					if err != nil {
						t.Fatal(err)
					}
					took[id] = append(took[id], fileLatencies(t, ctx, r, tier, []*Upload{up})...)
				}
			}
			if t.Failed() {
				return
			}
			for _, id := range ids {
				if got, want := len(r.Sink.Registered(id)), 10+keyPaceSamples*keyPaceRecords; got != want {
					t.Errorf("%s: got %d records registered, want %d", id, got, want)
				}
			}
			for _, id := range []string{"keyed", "keyedcore"} {
				if peak := r.Sink.PeakInFlight(id); peak < 2 || peak > keyPaceInFlight {
					t.Errorf("%s: got at most %d requests in flight, want 2..%d", id, peak, keyPaceInFlight)
				}
			}
			for _, s := range shapes {
				key, file := percentile(took[s.keyed], processedOf, 50), percentile(took[s.ordered], processedOf, 50)
				fmt.Printf("key-order-pace: key order %.1f s, file order %.1f s end to end (%.1f×) for %d records, %d keys, %d in flight, %.0f ms (%s tier, %s; key order peaked at %d in flight)\n",
					key.Seconds(), file.Seconds(), file.Seconds()/key.Seconds(), keyPaceRecords, keyPaceKeys, keyPaceInFlight, keyPaceLatency.Seconds()*1000,
					tier, s.what, r.Sink.PeakInFlight(s.keyed))
			}
		})
	}
}
