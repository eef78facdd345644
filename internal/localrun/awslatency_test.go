package localrun

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A call reaches the emulator at once without a latency, and not before the latency has passed with
// one: a caller that gives up first never reaches it. No clock is read.
func TestAWSLatencyHoldsEachCall(t *testing.T) {
	r := &Cloud{}
	var reached atomic.Int32
	h := r.awsLatency.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	call := func(ctx context.Context) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodPost, "/", nil))
	}
	call(t.Context())
	if got := reached.Load(); got != 1 {
		t.Fatalf("without latency: got %d calls through, want 1", got)
	}
	r.SetAWSCallLatency(time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { call(ctx); close(done) }()
	cancel()
	<-done
	if got := reached.Load(); got != 1 {
		t.Errorf("with an hour's latency, a call given up on: got %d calls through, want still 1", got)
	}
}
