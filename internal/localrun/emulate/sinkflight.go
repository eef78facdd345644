package emulate

import (
	"sort"
	"time"
)

// The core systems' requests in flight over time: every tenant's POSTs go to one sink (SinkURL), and
// the tenants of one core system share its maxRequestsInFlight, so the sink gauges them together.

// FlightStep is a change of a core system's POSTs in flight: from At on, N were in progress.
type FlightStep struct {
	At time.Time
	N  int
}

// Flight is one core system's POSTs in flight over time, as the sink saw them: a step function
// that rises when a POST arrives and falls when it is answered (those answered 429 included), in
// time order. Its zero value is a core system that received nothing.
type Flight struct {
	Steps []FlightStep
}

// at is the number in flight at t: the last step at or before t, 0 before the first.
func (f Flight) at(t time.Time) int {
	i := sort.Search(len(f.Steps), func(i int) bool { return f.Steps[i].At.After(t) })
	if i == 0 {
		return 0
	}
	return f.Steps[i-1].N
}

// Mean is the time-weighted mean of the POSTs in flight between from and to: the integral of the
// count over the interval divided by its length. 0 when to is not after from.
func (f Flight) Mean(from, to time.Time) float64 {
	if !to.After(from) {
		return 0
	}
	var area float64 // POST-seconds
	n, last := f.at(from), from
	for _, s := range f.Steps {
		if !s.At.After(from) {
			continue
		}
		if !s.At.Before(to) {
			break
		}
		area += float64(n) * s.At.Sub(last).Seconds()
		n, last = s.N, s.At
	}
	area += float64(n) * to.Sub(last).Seconds()
	return area / to.Sub(from).Seconds()
}

// Peak is the most POSTs in flight at any instant from from to to, both included.
func (f Flight) Peak(from, to time.Time) int {
	peak := f.at(from)
	for _, s := range f.Steps {
		if s.At.After(from) && !s.At.After(to) {
			peak = max(peak, s.N)
		}
	}
	return peak
}

// Span is the first arrival and the last answer; zero times when nothing arrived.
func (f Flight) Span() (first, last time.Time) {
	if len(f.Steps) == 0 {
		return time.Time{}, time.Time{}
	}
	return f.Steps[0].At, f.Steps[len(f.Steps)-1].At
}

// SetCoreSystem names the core system a tenant's POSTs are for, so that the sink gauges them with
// those of the core system's other tenants (FlightOf). A tenant without one is gauged under "".
// Set it before the run starts.
func (s *Sink) SetCoreSystem(tenant, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.coreSystem == nil {
		s.coreSystem = map[string]string{}
	}
	s.coreSystem[tenant] = name
}

// FlightOf is a core system's POSTs in flight over time so far, and the most it had at once.
func (s *Sink) FlightOf(coreSystem string) (Flight, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.flights[coreSystem]
	if g == nil {
		return Flight{}, 0
	}
	return Flight{Steps: append([]FlightStep(nil), g.steps...)}, g.peak
}

// flightGauge is one core system's count of POSTs in flight and its history.
type flightGauge struct {
	n, peak int
	steps   []FlightStep
}

// fly counts one of the tenant's POSTs arriving (+1) or answered (-1) at now. Called with mu held;
// now is read under it, so that the steps of a core system are in time order.
func (s *Sink) fly(tenant string, delta int) {
	if s.flights == nil {
		s.flights = map[string]*flightGauge{}
	}
	name := s.coreSystem[tenant]
	g := s.flights[name]
	if g == nil {
		g = &flightGauge{}
		s.flights[name] = g
	}
	g.n += delta
	g.peak = max(g.peak, g.n)
	g.steps = append(g.steps, FlightStep{At: time.Now(), N: g.n})
}
