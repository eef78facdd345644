package register

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// TestKeepAlive pins that a chunk's records, and the next chunk's, share one connection.
func TestKeepAlive(t *testing.T) {
	c := newCore(t, nil)
	s3 := sourcetest.NewFakeS3()
	tenant := csvTenant(c.srv.URL)
	tenant.ChunkSize = 20
	var b strings.Builder
	b.WriteString("a\n")
	for i := range 40 {
		fmt.Fprintf(&b, "%d\n", i)
	}
	reqs := fixture(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, []byte(b.String()))
	h := newHandler(s3, &fakeSecrets{})
	for _, r := range reqs {
		if _, err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.seen) != 40 || c.conns != 1 {
		t.Errorf("got %d requests over %d connections, want 40 over 1", len(c.seen), c.conns)
	}
}

func TestHTTPTimeoutEnv(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"", 10 * time.Second, false}, {"3", 3 * time.Second, false}, {"0", 0, true}, {"x", 0, true}, {"1.5", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseHTTPTimeout(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseHTTPTimeout(%q): got %v, %v, want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestIdleConnsCoverTheWindow: the client keeps as many idle connections to the core system as
// the largest window, so a keyed file's next round of POSTs reuses them instead of dialing. One
// round holds the window's worth of requests in flight at once (one connection each); a later
// round must find every one of them idle. Putting a connection back after its answer races the
// next round a little, so a few rounds are allowed; with fewer idle connections than the window
// no round ever reuses them all.
func TestIdleConnsCoverTheWindow(t *testing.T) {
	n := pipeline.MaxMaxRecordsInFlight
	var (
		mu      sync.Mutex
		arrived int
		round   = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		if arrived == n {
			close(round)
		}
		wait := round
		mu.Unlock()
		<-wait
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	client := NewHTTPClient(10 * time.Second)
	defer client.CloseIdleConnections()

	tr := client.Transport.(*http.Transport)
	if tr.MaxIdleConnsPerHost < n || tr.MaxIdleConns != 0 && tr.MaxIdleConns < n || tr.MaxConnsPerHost != 0 {
		t.Errorf("got MaxIdleConnsPerHost %d, MaxIdleConns %d, MaxConnsPerHost %d; want at least %d idle per host and in all, no cap per host",
			tr.MaxIdleConnsPerHost, tr.MaxIdleConns, tr.MaxConnsPerHost, n)
	}
	// fire sends n POSTs at once, held until all n are in flight, and counts those on a reused
	// connection.
	fire := func() int {
		mu.Lock()
		arrived, round = 0, make(chan struct{})
		mu.Unlock()
		var (
			wg     sync.WaitGroup
			reused atomic.Int64
		)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				trace := &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) {
					if c.Reused {
						reused.Add(1)
					}
				}}
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, srv.URL, strings.NewReader("{}"))
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
		}
		wg.Wait()
		return int(reused.Load())
	}
	fire()
	best := 0
	for range 20 {
		if best = max(best, fire()); best == n {
			return
		}
	}
	t.Errorf("got at most %d of %d requests in flight on reused connections, want all", best, n)
}
