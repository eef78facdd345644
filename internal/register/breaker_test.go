package register

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/breaker"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
	"github.com/example/tenantpipeline/spec"
)

// fakeBreaker is a breaker item in memory with the store's conditional semantics: a write from a
// state that is no longer the stored one is refused and decided again from the stored one.
type fakeBreaker struct {
	mu      sync.Mutex
	st      breaker.State
	reads   int
	writes  int
	readErr error
	// onRead, when set, changes the stored state before each read (the core system recovering,
	// another invocation writing).
	onRead func(n int, st *breaker.State)
}

func (f *fakeBreaker) Read(_ context.Context, _ bool) (breaker.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.readErr != nil {
		return breaker.State{}, f.readErr
	}
	if f.onRead != nil {
		f.onRead(f.reads, &f.st)
	}
	return f.st, nil
}

func (f *fakeBreaker) Apply(_ context.Context, cur breaker.State, decide func(breaker.State) (breaker.State, bool)) (breaker.State, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return cur, false, f.readErr
	}
	if cur.Version != f.st.Version {
		cur = f.st
	}
	next, changed := decide(cur)
	if !changed {
		return cur, false, nil
	}
	next.Version = cur.Version + 1
	f.st = next
	f.writes++
	return next, true, nil
}

func (f *fakeBreaker) state() breaker.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

var breakerCore = &pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 4, Table: "adm"}

// breakerHandler is a paced handler (fake clock) whose core system's breaker is b.
func breakerHandler(clock *fakeClock, b *fakeBreaker, out *bytes.Buffer) (*Handler, *[]time.Duration) {
	if out == nil {
		out = &bytes.Buffer{}
	}
	h, slept := pacedHandler(sourcetest.NewFakeS3(), clock, out)
	h.breakers = func(pipeline.CoreSystem) breakerStore { return b }
	return h, slept
}

func withCore(t pipeline.Tenant) pipeline.Tenant {
	t.CoreSystem = breakerCore
	return t
}

// TestBreakerCountsHealthFailures: 5xx other than 503 and no answer are the core system's health
// failures, counted in the breaker, and fail as they always did while it stays closed; a 4xx fails
// the file without touching the breaker, and a 503 stays the slow-down path.
func TestBreakerCountsHealthFailures(t *testing.T) {
	tests := []struct {
		name         string
		status       int // for record 2; 0: the connection is refused
		wantType     string
		wantFailures int
		wantWrites   int
	}{
		{"500", 500, pipeline.ErrRetryable, 1, 1},
		{"502", 502, pipeline.ErrRetryable, 1, 1},
		{"refused", 0, pipeline.ErrRetryable, 1, 1},
		{"404 fails the file, not the core system's health", 404, pipeline.ErrPermanent, 0, 0},
		{"400", 400, pipeline.ErrPermanent, 0, 0},
		{"503 waits and succeeds", 503, "", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now()}
			once := false
			c := newThrottlingCore(t, func(_ int, key string) (int, string) {
				if key == IdempotencyKey(execName, 2) && (tc.status != 503 || !once) {
					once = true
					return tc.status, "1"
				}
				return 200, ""
			})
			url := c.srv.URL
			if tc.status == 0 {
				url = refusedURL(t)
			}
			b := &fakeBreaker{}
			h, _ := breakerHandler(clock, b, nil)
			_, err := runPaced(t, h, clock, withCore(csvTenant(url)), 3, 60*time.Second)
			if got := errorType(err); got != tc.wantType {
				t.Fatalf("got error %q (%v), want %q", got, err, tc.wantType)
			}
			st := b.state()
			if st.Failures != tc.wantFailures || b.writes != tc.wantWrites || st.Effective(clock.now()) != breaker.Closed {
				t.Errorf("got breaker %+v after %d writes, want closed with %d failures after %d writes", st, b.writes, tc.wantFailures, tc.wantWrites)
			}
			if b.reads != 1 {
				t.Errorf("got %d reads, want the one at the invocation's start", b.reads)
			}
		})
	}
}

func errorType(err error) string {
	if err == nil {
		return ""
	}
	var re *pipeline.RetryableError
	var le *pipeline.RecordLatencyError
	var pe *pipeline.PermanentError
	switch {
	case errors.As(err, &re):
		return pipeline.ErrRetryable
	case errors.As(err, &le):
		return pipeline.ErrRecordLatency
	case errors.As(err, &pe):
		return pipeline.ErrPermanent
	}
	return "other"
}

// refusedURL is a URL whose port refuses connections.
func refusedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/records"
}

// TestBreakerSuccessWrites: a success writes nothing unless failures in a row are recorded, which
// one conditional write resets.
func TestBreakerSuccessWrites(t *testing.T) {
	tests := []struct {
		name       string
		from       breaker.State
		wantWrites int
	}{
		{"no item", breaker.State{}, 0},
		{"closed, window failures only", breaker.State{Status: breaker.Closed, WindowFailures: 3, WindowStart: time.Now(), Version: 4}, 0},
		{"closed, failures in a row", breaker.State{Status: breaker.Closed, Failures: 3, WindowFailures: 3, WindowStart: time.Now(), Version: 4}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now()}
			c := newThrottlingCore(t, func(int, string) (int, string) { return 200, "" })
			b := &fakeBreaker{st: tc.from}
			h, _ := breakerHandler(clock, b, nil)
			res, err := runPaced(t, h, clock, withCore(csvTenant(c.srv.URL)), 6, 60*time.Second)
			if err != nil || !res.Done || res.Registered != 6 {
				t.Fatalf("got %+v, %v; want all 6 registered", res, err)
			}
			if b.writes != tc.wantWrites || b.state().Failures != 0 {
				t.Errorf("got %d writes, breaker %+v; want %d writes and no failures in a row", b.writes, b.state(), tc.wantWrites)
			}
		})
	}
}

// TestBreakerHolds: with the breaker open, or opened by the invocation's own failure, the
// invocation sends nothing more, fails nothing, and ends with its cursor at the unsent record,
// having waited what fits; in record, batch and keyed mode.
func TestBreakerHolds(t *testing.T) {
	far := func(now time.Time) breaker.State {
		return breaker.State{Status: breaker.Open, OpenedAt: now, NextProbe: now.Add(time.Hour), Backoff: time.Hour, Opens: 1, Version: 9}
	}
	fourFailures := func(time.Time) breaker.State {
		return breaker.State{Status: breaker.Closed, Failures: 4, Version: 3}
	}
	tests := []struct {
		name      string
		mode      string // "record", "batch", "keyed"
		from      func(time.Time) breaker.State
		failKey   string // answered 500 for ever; "" none
		wantKeys  []string
		wantCount int64
		wantOpens float64
	}{
		{"open at the start: nothing sent", "record", far, "", nil, 0, 0},
		{"open at the start, batch: nothing sent", "batch", far, "", nil, 0, 0},
		{"open at the start, keyed: nothing sent", "keyed", far, "", nil, 0, 0},
		{"the fifth failure opens it: the record holds", "record", fourFailures, IdempotencyKey(execName, 1), keys(1), 0, 1},
		{"the fifth failure opens it, keyed", "keyed", fourFailures, IdempotencyKey(execName, 1), keys(1), 0, 1},
		{"the fifth failure opens it, batch", "batch", fourFailures, BatchIdempotencyKey(execName, 0), []string{BatchIdempotencyKey(execName, 0)}, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now()}
			c := newThrottlingCore(t, func(_ int, key string) (int, string) {
				if key == tc.failKey {
					return 500, ""
				}
				return 200, ""
			})
			tenant := withCore(csvTenant(c.srv.URL))
			switch tc.mode {
			case "batch":
				tenant = withCore(batchTenant(c.srv.URL))
			case "keyed":
				tenant.RecordOrder, tenant.KeyColumns, tenant.MaxRecordsInFlight = pipeline.RecordOrderKey, []string{"id"}, 4
			}
			b := &fakeBreaker{st: tc.from(clock.now())}
			// No probe comes due: the probe time is far.
			b.onRead = func(_ int, st *breaker.State) {
				if st.Status == breaker.Open && st.NextProbe.Before(clock.now().Add(time.Hour)) {
					st.NextProbe = clock.now().Add(time.Hour)
				}
			}
			var out bytes.Buffer
			h, slept := breakerHandler(clock, b, &out)
			res, err := runPaced(t, h, clock, tenant, 6, 60*time.Second)
			if err != nil {
				t.Fatalf("got %v, want success with the cursor", err)
			}
			if res.Done || res.Registered != tc.wantCount || res.Next != 0 {
				t.Errorf("got %+v, want not done, %d registered, cursor at chunk 0", res, tc.wantCount)
			}
			if got := c.seen(); !reflect.DeepEqual(got, tc.wantKeys) {
				t.Errorf("got keys %q, want %q", got, tc.wantKeys)
			}
			var waited time.Duration
			for _, d := range *slept {
				waited += d
			}
			if waited < 40*time.Second {
				t.Errorf("got %v held, want most of the 60 s invocation", waited)
			}
			if st := b.state(); st.Status != breaker.Open {
				t.Errorf("got breaker %+v, want open", st)
			}
			if got := emfValue(t, out.String(), "CoreSystemBreakerHolds"); got != 1 {
				t.Errorf("got CoreSystemBreakerHolds %v, want 1", got)
			}
			if got := emfValue(t, out.String(), "CoreSystemBreakerOpen"); got != 1 {
				t.Errorf("got CoreSystemBreakerOpen %v, want 1", got)
			}
			if got := emfValue(t, out.String(), "CoreSystemBreakerOpens"); got != tc.wantOpens {
				t.Errorf("got CoreSystemBreakerOpens %v, want %v", got, tc.wantOpens)
			}
		})
	}
}

// TestBreakerProbe: when the probe time comes the held invocation claims the probe and sends one
// request: a success closes the breaker and the invocation goes on sending; a failure reopens it
// with the wait doubled, and the invocation holds at the same record.
func TestBreakerProbe(t *testing.T) {
	tests := []struct {
		name        string
		probeStatus int
		wantStatus  breaker.Status
		wantDone    bool
		wantBackoff time.Duration
	}{
		{"the probe succeeds: closed, every record sent", 200, breaker.Closed, true, 0},
		{"the probe fails: reopened with the wait doubled", 500, breaker.Open, false, 4 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now()}
			c := newThrottlingCore(t, func(int, string) (int, string) { return tc.probeStatus, "" })
			start := clock.now()
			b := &fakeBreaker{st: breaker.State{Status: breaker.Open, OpenedAt: start, NextProbe: start.Add(1500 * time.Millisecond), Backoff: time.Second, Opens: 1, Version: 5}}
			if tc.probeStatus != 200 {
				// After the first failed probe the next ones are far: one probe is seen.
				b.onRead = func(_ int, st *breaker.State) {
					if st.Backoff > time.Second && st.Status == breaker.Open {
						st.NextProbe, st.Backoff = clock.now().Add(time.Hour), 4*time.Second
					}
				}
			}
			var out bytes.Buffer
			h, _ := breakerHandler(clock, b, &out)
			res, err := runPaced(t, h, clock, withCore(csvTenant(c.srv.URL)), 6, 60*time.Second)
			if err != nil {
				t.Fatalf("got %v, want success", err)
			}
			st := b.state()
			if st.Status != tc.wantStatus || res.Done != tc.wantDone || st.Prober != "" && tc.wantStatus == breaker.Closed {
				t.Fatalf("got breaker %+v, result %+v; want %s, done %v", st, res, tc.wantStatus, tc.wantDone)
			}
			seen := c.seen()
			if tc.wantDone {
				if !reflect.DeepEqual(seen, keys(1, 2, 3, 4, 5, 6)) {
					t.Errorf("got keys %q, want every record once", seen)
				}
				if got := emfValue(t, out.String(), "CoreSystemBreakerOpen"); got != 0 {
					t.Errorf("got CoreSystemBreakerOpen %v, want 0 from the invocation that closed it", got)
				}
				return
			}
			if !reflect.DeepEqual(seen, keys(1)) || st.Backoff != tc.wantBackoff {
				t.Errorf("got keys %q and backoff %v, want the one probe of record 1 and %v", seen, st.Backoff, tc.wantBackoff)
			}
			if res.Registered != 0 {
				t.Errorf("got %d registered, want none", res.Registered)
			}
		})
	}
}

// TestBreakerStoreFailsOpen: a breaker item that cannot be read or written leaves Register as it
// is without one: records are sent, and a failure fails as it always did.
func TestBreakerStoreFailsOpen(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	c := newThrottlingCore(t, func(_ int, key string) (int, string) {
		if key == IdempotencyKey(execName, 3) {
			return http.StatusInternalServerError, ""
		}
		return 200, ""
	})
	b := &fakeBreaker{readErr: errors.New("ProvisionedThroughputExceededException")}
	h, _ := breakerHandler(clock, b, nil)
	_, err := runPaced(t, h, clock, withCore(csvTenant(c.srv.URL)), 6, 60*time.Second)
	if got := errorType(err); got != pipeline.ErrRetryable {
		t.Fatalf("got %v, want the RetryableError of record 3", err)
	}
	if got := c.seen(); !reflect.DeepEqual(got, keys(1, 2, 3)) {
		t.Errorf("got keys %q, want records 1-3 sent", got)
	}
}

// TestBreakerDisabled: a disabled breaker is never read, and failures fail as they always did.
func TestBreakerDisabled(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	c := newThrottlingCore(t, func(int, string) (int, string) { return 500, "" })
	b := &fakeBreaker{st: breaker.State{Status: breaker.Open, NextProbe: clock.now().Add(time.Hour), Version: 2}}
	h, _ := breakerHandler(clock, b, nil)
	core := *breakerCore
	core.Breaker = &specBreakerDisabled
	tenant := csvTenant(c.srv.URL)
	tenant.CoreSystem = &core
	_, err := runPaced(t, h, clock, tenant, 3, 60*time.Second)
	if got := errorType(err); got != pipeline.ErrRetryable || b.reads != 0 {
		t.Fatalf("got %v after %d reads, want the RetryableError and no read", err, b.reads)
	}
}

var specBreakerDisabled = spec.Breaker{Disabled: true}

// TestBreakerSmallFile: the small-file path holds as Register does: with the breaker open nothing
// is sent, and the file is handed to the full path, which resumes at its first record.
func TestBreakerSmallFile(t *testing.T) {
	tests := []struct {
		name     string
		from     breaker.State
		wantSent int
	}{
		{"closed: registered in one invocation", breaker.State{}, 3},
		{"open: handed on, nothing sent", breaker.State{Status: breaker.Open, NextProbe: time.Now().Add(time.Hour), Version: 2}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, nil)
			tenant := withCore(csvTenant(c.srv.URL))
			s, req := smallFixture(t, sourcetest.NewFakeS3(), tenant, []byte("id,name\n1,a\n2,b\n3,c\n"))
			clock := &fakeClock{t: time.Now()}
			b := &fakeBreaker{st: tc.from}
			s.Register.now = clock.now
			s.Register.sleep = func(_ context.Context, d time.Duration) error { clock.add(d); return nil }
			s.Register.breakers = func(pipeline.CoreSystem) breakerStore { return b }
			ctx, cancel := context.WithDeadline(context.Background(), clock.now().Add(60*time.Second))
			defer cancel()
			_, err := s.Handle(ctx, req)
			var ns *pipeline.NotSmallError
			if tc.wantSent == 0 && !errors.As(err, &ns) || tc.wantSent > 0 && err != nil {
				t.Fatalf("got %v", err)
			}
			if len(c.seen) != tc.wantSent {
				t.Errorf("got %d records sent, want %d", len(c.seen), tc.wantSent)
			}
		})
	}
}

// TestBreakerProbeIsAlone: under key order, with several requests allowed in flight, the probe
// goes alone: no other request is sent until its answer closes the breaker; then the rest go.
func TestBreakerProbeIsAlone(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	var mu sync.Mutex
	alone := true
	var c *throttlingCore
	c = newThrottlingCore(t, func(n int, _ string) (int, string) {
		if n == 0 {
			// Hold the probe's answer a moment: a request sent meanwhile would be seen here.
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			alone = len(c.seen()) == 1
			mu.Unlock()
		}
		return 200, ""
	})
	start := clock.now()
	b := &fakeBreaker{st: breaker.State{Status: breaker.Open, OpenedAt: start, NextProbe: start, Backoff: time.Second, Opens: 1, Version: 5}}
	h, _ := breakerHandler(clock, b, nil)
	// The holds wait a little for real, so that the probe's answer comes within the invocation's
	// time on the fake clock.
	h.sleep = func(_ context.Context, d time.Duration) error {
		time.Sleep(5 * time.Millisecond)
		clock.add(d)
		return nil
	}
	tenant := csvTenant(c.srv.URL)
	core := *breakerCore
	core.MaxRequestsInFlight = 16 // four a running file
	tenant.CoreSystem = &core
	tenant.RecordOrder, tenant.KeyColumns, tenant.MaxRecordsInFlight = pipeline.RecordOrderKey, []string{"id"}, 4
	tenant.ChunkSize = 100
	// The holds advance the fake clock by a poll each: a long invocation, so none runs out.
	res, err := runPaced(t, h, clock, tenant, 6, time.Hour)
	if err != nil || res.Registered != 6 {
		t.Fatalf("got %+v, %v; want all 6 registered", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !alone {
		t.Errorf("got other requests sent while the probe was in flight, want the probe alone")
	}
	if st := b.state(); st.Status != breaker.Closed || len(c.seen()) != 6 {
		t.Errorf("got breaker %s and %d requests, want closed and 6", st.Status, len(c.seen()))
	}
}
