//go:build figures

package localrun

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// TestFiguresBreaker is make figures' "breaker:" line: the same outage (scenarios_breaker_test.go:
// 50 tenants, 40 under "continue" and 10 under "halt", one core system refusing connections for
// longer than a file's retries in the middle of a burst, in the pooled tier) with the core
// system's breaker on and with it disabled, side by side: failed files, halted tenants and files
// out of order. It asserts the breaker's run (no failure, no halt, order kept) and that the
// disabled run shows damage, else the outage proved nothing.
func TestFiguresBreaker(t *testing.T) {
	designs := []struct {
		name    string
		breaker map[string]any
	}{
		{"breaker on", nil},
		{"breaker disabled", map[string]any{"disabled": true}},
	}
	outcomes := make([]breakerOutcome, len(designs))
	var wg sync.WaitGroup
	for i, d := range designs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, rep, _ := runBreakerOutage(t, withTierJSON(breakerTenantsJSON(d.breaker), "pool"))
			defer r.Close()
			outcomes[i] = outcomeOf(r, rep)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	on, off := outcomes[0], outcomes[1]
	line := fmt.Sprintf("breaker: outage %s after the first request, retries ×%.1f, %d tenants (%d continue, %d halt) × %d files; "+
		"breaker on: %s (opened %d, probed %d, closed %d); breaker disabled: %s",
		breakerOutage.For, breakerRetryScale, breakerContinue+breakerHalt, breakerContinue, breakerHalt, breakerFiles,
		on, on.breaker.Opens, on.breaker.Probes, on.breaker.Closes, off)
	fmt.Println(line)
	if on.failed != 0 || on.halted != 0 || on.outOfOrder != 0 || on.breaker.Opens < 1 {
		t.Errorf("breaker on: got %s, opened %d times; want no damage and the breaker opened", on, on.breaker.Opens)
	}
	if off.failed == 0 || off.breaker.Opens != 0 {
		t.Errorf("breaker disabled: got %s, opened %d times; want failed files (else the outage was shorter than the retries) and no opening",
			off, off.breaker.Opens)
	}
	if out := os.Getenv("LOCALRUN_FIGURES_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}
