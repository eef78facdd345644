package emulate

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestFlightMeanAndPeak checks the gauge's arithmetic against answers worked by hand, on a step
// function of known shape: 0 until 1 s, 2 from 1 s, 3 from 3 s, 1 from 4 s, 0 from 6 s.
func TestFlightMeanAndPeak(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	f := Flight{Steps: []FlightStep{{at(1), 1}, {at(1), 2}, {at(3), 3}, {at(4), 1}, {at(6), 0}}}
	for _, c := range []struct {
		name     string
		from, to float64
		mean     float64
		peak     int
	}{
		// (2*2 + 3*1 + 1*2) / 6 = 9/6
		{"the whole span", 0, 6, 1.5, 3},
		{"before anything arrived", -5, 1, 0, 2}, // the steps at 1 s count for the peak, not the mean
		{"within one step", 1.5, 2.5, 2, 2},
		{"across a rise and a fall", 2, 5, (2*1 + 3*1 + 1*1) / 3.0, 3},
		{"after the last answer", 6, 10, 0, 0},
		{"from the last answer on", 5, 10, 1.0 / 5, 1},
		{"an empty interval", 3, 3, 0, 3},
		{"a reversed interval", 5, 2, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := f.Mean(at(c.from), at(c.to)); math.Abs(got-c.mean) > 1e-9 {
				t.Errorf("Mean: got %v, want %v", got, c.mean)
			}
			if got := f.Peak(at(c.from), at(c.to)); got != c.peak {
				t.Errorf("Peak: got %d, want %d", got, c.peak)
			}
		})
	}
	if first, last := f.Span(); !first.Equal(at(1)) || !last.Equal(at(6)) {
		t.Errorf("Span: got %v..%v, want 1 s..6 s", first.Sub(t0), last.Sub(t0))
	}
	if first, last := (Flight{}).Span(); !first.IsZero() || !last.IsZero() || (Flight{}).Mean(t0, at(1)) != 0 {
		t.Errorf("the empty flight: got span %v..%v, want zero times and a mean of 0", first, last)
	}
}

// TestSinkGaugesCoreSystems holds POSTs of three tenants in the sink at once: two of core system
// "ledger", one of "crm", one of a tenant that names none. Each core system's gauge sees its own
// tenants' POSTs only, peaks at what it held, and falls back to 0 once all are answered; the mean
// over the interval they were held is their number, within what the test's own scheduling adds.
func TestSinkGaugesCoreSystems(t *testing.T) {
	s := &Sink{}
	s.SetCoreSystem("a", "ledger")
	s.SetCoreSystem("b", "ledger")
	s.SetCoreSystem("c", "crm")
	const held = 4 // a, a, b, c; "solo" names no core system
	posts := []string{"a", "a", "b", "c", "solo"}
	arrived, release := make(chan struct{}, len(posts)), make(chan struct{})
	s.SetDelay(func(string, string, int64) time.Duration {
		arrived <- struct{}{}
		<-release
		return 0
	})
	srv := httptest.NewServer(s)
	defer srv.Close()
	var wg sync.WaitGroup
	for i, tenant := range posts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"tenant":%q,"source":{"bucket":"b","key":"in.csv","versionId":"v1"},"recordNumber":%d,"record":{}}`, tenant, i+1)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/"+tenant+"/records", bytes.NewReader([]byte(body)))
			req.Header.Set("Idempotency-Key", fmt.Sprintf("exec-%d", i+1))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
	}
	for range posts {
		<-arrived
	}
	from := time.Now()
	time.Sleep(50 * time.Millisecond)
	to := time.Now()
	close(release)
	wg.Wait()

	for _, c := range []struct {
		coreSystem string
		want       int
	}{{"ledger", 3}, {"crm", 1}, {"", 1}, {"billing", 0}} {
		t.Run(c.coreSystem, func(t *testing.T) {
			f, peak := s.FlightOf(c.coreSystem)
			if peak != c.want {
				t.Errorf("peak: got %d, want %d", peak, c.want)
			}
			if got := f.Peak(from, to); got != c.want {
				t.Errorf("peak while held: got %d, want %d", got, c.want)
			}
			// Every POST was in the sink from before from until after to.
			if got := f.Mean(from, to); math.Abs(got-float64(c.want)) > 1e-9 {
				t.Errorf("mean while held: got %v, want %d", got, c.want)
			}
			if len(f.Steps) != 2*c.want || (c.want > 0 && f.Steps[len(f.Steps)-1].N != 0) {
				t.Errorf("steps: got %v, want %d ending at 0", f.Steps, 2*c.want)
			}
			for i := 1; i < len(f.Steps); i++ {
				if f.Steps[i].At.Before(f.Steps[i-1].At) {
					t.Errorf("steps: got %v before %v, want time order", f.Steps[i].At, f.Steps[i-1].At)
				}
			}
		})
	}
	if peak, _ := s.InFlight(); peak != held+1 {
		t.Errorf("the sink's own peak: got %d, want %d", peak, held+1)
	}
}
