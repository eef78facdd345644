package emulate

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestParseOutage(t *testing.T) {
	cases := []struct {
		in      string
		want    Outage
		wantErr string
	}{
		{"30s:5m", Outage{At: 30 * time.Second, For: 5 * time.Minute}, ""},
		{"0s:1s", Outage{For: time.Second}, ""},
		{"30s", Outage{}, "want AT:FOR"},
		{"x:5m", Outage{}, "AT"},
		{"30s:0s", Outage{}, "FOR"},
		{"-1s:5m", Outage{}, "AT"},
	}
	for _, tc := range cases {
		got, err := ParseOutage(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one about %s", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// waitFor polls cond until it holds; the test's own timeout bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if t.Context().Err() != nil {
			t.Fatalf("never %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An outage refuses connections, as a core system that is down, and the server comes back on
// the same address.
func TestFaultyServerOutage(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "registered "+r.URL.Path) })
	s, base, err := ServeFaulty(ok, CoreFaults{Outages: []Outage{{At: 0, For: 300 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() (string, error) {
		resp, err := client.Get(base + "/t/a")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), nil
	}
	// The first request starts the outage clock, and the outage begins 0 after it, so it may be cut
	// while it is answered (a core system that goes down mid-request): any answer is one it could
	// give, and none but the served body is.
	if body, err := get(); err == nil && body != "registered /t/a" {
		t.Fatalf("first request: %q, want the handler's answer or a cut connection", body)
	}
	waitFor(t, "went down", s.Down)
	if _, err := get(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("during the outage: %v, want connection refused", err)
	}
	waitFor(t, "came back", func() bool { return !s.Down() })
	if body, err := get(); err != nil || body != "registered /t/a" {
		t.Errorf("after the outage: %q, %v", body, err)
	}
	if s.Outages() != 1 {
		t.Errorf("outages %d, want 1", s.Outages())
	}
}

// Rate5xx answers a 5xx other than 503 before the core system sees the request; through a proxy the
// target's path is kept.
func TestFaultyProxy5xx(t *testing.T) {
	var seen atomic.Int64
	target, stop, err := Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		io.WriteString(w, r.URL.Path)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, tc := range []struct {
		rate     float64
		wantSeen int64
	}{{1, 0}, {0, 5}} {
		seen.Store(0)
		s, front, err := ProxyFaulty(target+"/core/records", CoreFaults{Rate5xx: tc.rate})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(front, "/core/records") {
			t.Errorf("front %s: want the target's path kept", front)
		}
		for range 5 {
			resp, err := http.Post(front, "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case tc.rate == 1 && (resp.StatusCode < 500 || resp.StatusCode == http.StatusServiceUnavailable):
				t.Errorf("rate 1: status %d, want a 5xx other than 503", resp.StatusCode)
			case tc.rate == 0 && (resp.StatusCode != 200 || string(b) != "/core/records"):
				t.Errorf("rate 0: %d %q, want 200 with the target's path", resp.StatusCode, b)
			}
		}
		if seen.Load() != tc.wantSeen || (tc.rate == 1 && s.Injected() != 5) {
			t.Errorf("rate %v: the target saw %d, injected %d; want %d seen", tc.rate, seen.Load(), s.Injected(), tc.wantSeen)
		}
		s.Close()
	}
}
