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
	keyPaceSamples  = 2
)

// keyPaceTenants: the same file in key order and in file order, side by side.
var keyPaceTenants = fmt.Sprintf(`{"tenants": [
  {"id": "keyed", "recordOrder": "key", "keyColumns": ["customer"], "maxRecordsInFlight": %d, "registerUrl": "https://core.example.com/records"},
  {"id": "ordered", "registerUrl": "https://core.example.com/records"}
]}`, keyPaceInFlight)

// TestFiguresKeyOrderPace is make figures' "key-order-pace:" line, in both tiers: how long a file
// of interleaved keys takes end to end, from its upload to its File Processed event, in key order
// beside file order, one file at a time on an idle run. The window alone would make key order
// about keyPaceInFlight times faster than file order; what the file's fixed cost and the keyed
// schedule leave of it is the ratio. It asserts invariants (every file SUCCEEDED once, every
// record registered, never above the window), never a time.
func TestFiguresKeyOrderPace(t *testing.T) {
	for _, tier := range []string{"silo", "pool"} {
		t.Run(tier, func(t *testing.T) {
			r := startScenario(t, withTierJSON(keyPaceTenants, tier), Config{Faults: Faults{SinkLatency: keyPaceLatency}})
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			body := csvKeyed(keyPaceRecords, keyPaceKeys)
			took := map[string][]fileLatency{}
			for i := range keyPaceSamples {
				for _, id := range []string{"keyed", "ordered"} {
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
			for _, id := range []string{"keyed", "ordered"} {
				if got, want := len(r.Sink.Registered(id)), keyPaceSamples*keyPaceRecords; got != want {
					t.Errorf("%s: got %d records registered, want %d", id, got, want)
				}
			}
			if peak := r.Sink.PeakInFlight("keyed"); peak < 2 || peak > keyPaceInFlight {
				t.Errorf("keyed: got at most %d requests in flight, want 2..%d", peak, keyPaceInFlight)
			}
			key, file := percentile(took["keyed"], processedOf, 50), percentile(took["ordered"], processedOf, 50)
			fmt.Printf("key-order-pace: key order %.1f s, file order %.1f s end to end (%.1f×) for %d records, %d keys, %d in flight, %.0f ms (%s tier)\n",
				key.Seconds(), file.Seconds(), file.Seconds()/key.Seconds(), keyPaceRecords, keyPaceKeys, keyPaceInFlight, keyPaceLatency.Seconds()*1000, tier)
		})
	}
}
