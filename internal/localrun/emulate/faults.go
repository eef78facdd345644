package emulate

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Outage is a span of a core system's bad day: from At after its first request, for For, it
// refuses connections.
type Outage struct {
	At, For time.Duration
}

// ParseOutage reads "AT:FOR", two Go durations: "30s:5m" is an outage from 30 s after the core
// system's first request, for 5 minutes.
func ParseOutage(s string) (Outage, error) {
	at, dur, ok := strings.Cut(s, ":")
	if !ok {
		return Outage{}, fmt.Errorf("%q: want AT:FOR, two durations such as 30s:5m", s)
	}
	a, err := time.ParseDuration(at)
	if err != nil || a < 0 {
		return Outage{}, fmt.Errorf("%q: AT %q: want a duration of 0 or more, such as 30s", s, at)
	}
	f, err := time.ParseDuration(dur)
	if err != nil || f <= 0 {
		return Outage{}, fmt.Errorf("%q: FOR %q: want a duration above 0, such as 5m", s, dur)
	}
	return Outage{At: a, For: f}, nil
}

func (o Outage) String() string { return o.At.String() + ":" + o.For.String() }

// CoreFaults are the faults of a core system's bad day, for the embedded sink or, in front of
// --register-url, a proxy to it.
type CoreFaults struct {
	// Outages refuse connections: the listening socket is closed, so a connect is refused (ECONNREFUSED)
	// as when the core system's process or load balancer is down, and the connections open when an
	// outage starts are closed (a reset for a request in progress).
	Outages []Outage
	// Rate5xx is the fraction of requests answered 500, 502 or 504 (never 503, which asks to slow
	// down rather than failing), before the request reaches the core system.
	Rate5xx float64
}

// Active reports whether any fault is set.
func (f CoreFaults) Active() bool { return len(f.Outages) > 0 || f.Rate5xx > 0 }

// FaultyServer serves a handler on one fixed local address through the outages of CoreFaults:
// the clock of the outages starts at the first request it answers.
type FaultyServer struct {
	faults CoreFaults
	h      http.Handler
	addr   string

	mu      sync.Mutex
	srv     *http.Server
	first   time.Time
	closed  bool
	down    bool
	timers  []*time.Timer
	refused atomic.Int64 // outages begun (each closes the listener)
	failed  atomic.Int64 // requests answered with an injected 5xx
	rnd     *rand.Rand
}

// ServeFaulty serves h on a local address through f's faults.
func ServeFaulty(h http.Handler, f CoreFaults) (*FaultyServer, string, error) {
	s := &FaultyServer{faults: f, h: h, rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42))}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.listen("127.0.0.1:0"); err != nil {
		return nil, "", err
	}
	return s, "http://" + s.addr, nil
}

// ProxyFaulty serves a reverse proxy to target through f's faults: the address Register is given
// instead of target, with target's path kept.
func ProxyFaulty(target string, f CoreFaults) (*FaultyServer, string, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, "", fmt.Errorf("register URL %q: not an absolute URL", target)
	}
	origin := &url.URL{Scheme: u.Scheme, Host: u.Host}
	proxy := httputil.NewSingleHostReverseProxy(origin)
	s, base, err := ServeFaulty(proxy, f)
	if err != nil {
		return nil, "", err
	}
	front := *u
	front.Scheme, front.Host = "http", strings.TrimPrefix(base, "http://")
	return s, front.String(), nil
}

// listen opens the listener at addr and serves on it; s.mu is held.
func (s *FaultyServer) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.addr = ln.Addr().String()
	s.srv = &http.Server{Handler: http.HandlerFunc(s.answer), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return nil
}

// answer starts the outage clock on the first request, then injects a 5xx at Rate5xx or passes the
// request on.
func (s *FaultyServer) answer(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.first.IsZero() && !s.closed {
		s.first = time.Now()
		for _, o := range s.faults.Outages {
			s.timers = append(s.timers, time.AfterFunc(o.At, s.goDown), time.AfterFunc(o.At+o.For, s.comeBack))
		}
	}
	inject := s.faults.Rate5xx > 0 && s.rnd.Float64() < s.faults.Rate5xx
	status := []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout}[s.rnd.IntN(3)]
	s.mu.Unlock()
	if inject {
		s.failed.Add(1)
		http.Error(w, "injected fault (--sink-5xx)", status)
		return
	}
	s.h.ServeHTTP(w, r)
}

// goDown closes the listener and every open connection: connects are refused until comeBack.
func (s *FaultyServer) goDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.down {
		return
	}
	s.down = true
	s.refused.Add(1)
	s.srv.Close()
}

// comeBack listens again on the same address. The port was ours a moment ago; another process
// taking it in between is retried for a while, then reported on stderr by the failed requests.
func (s *FaultyServer) comeBack() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.down {
		return
	}
	var err error
	for i := 0; i < 50; i++ {
		if err = s.listen(s.addr); err == nil {
			s.down = false
			return
		}
		s.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		s.mu.Lock()
		if s.closed {
			return
		}
	}
}

// Outages is how many outages have begun; Injected how many requests got an injected 5xx.
func (s *FaultyServer) Outages() int64  { return s.refused.Load() }
func (s *FaultyServer) Injected() int64 { return s.failed.Load() }

// Down reports whether an outage is under way.
func (s *FaultyServer) Down() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

// Close stops serving for good.
func (s *FaultyServer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, t := range s.timers {
		t.Stop()
	}
	if s.srv != nil {
		s.srv.Close()
	}
}
