package register

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/shares"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
	"github.com/example/tenantpipeline/spec"
)

// fakeSharer is an invocation's membership of the shares, scripted: Join answers join (or
// joinErr), the n-th Refresh (from 1) answers refresh(n).
type fakeSharer struct {
	mu        sync.Mutex
	join      int
	joinErr   error
	refresh   func(n int) int
	refreshes int
	leaves    int
}

func (f *fakeSharer) Join(context.Context) (int, error) { return f.join, f.joinErr }

func (f *fakeSharer) Refresh(_ context.Context, _ int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshes++
	if f.refresh == nil {
		return f.join, nil
	}
	return f.refresh(f.refreshes), nil
}

func (f *fakeSharer) Leave(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaves++
	return nil
}

func (f *fakeSharer) left() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leaves
}

// TestSharesCapKeyedWindow: a key-ordered file keeps its grant in flight, not the static share
// (maxRequestsInFlight / maxRunningFiles) and not more than the grant; without a share (static
// shares) it keeps the static share; a join that failed waits for its next refresh.
func TestSharesCapKeyedWindow(t *testing.T) {
	// Static share 8/4 = 2; the tenant can use 8.
	core := &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 4, MaxRequestsInFlight: 8, Table: "adm"}
	tests := []struct {
		name      string
		sharer    *fakeSharer
		static    bool
		wantPeak  int
		wantLeave int
		wantLog   string
		// arrivals is how many requests the core system waits for before answering (0:
		// wantPeak); with fewer, the peak is only bounded by wantPeak.
		arrivals int
	}{
		{"a grant of 6: six in flight", &fakeSharer{join: 6}, false, 6, 1, "", 0},
		{"a grant of 8, the whole demand", &fakeSharer{join: 8}, false, 8, 1, "", 0},
		// Fail closed: it sends nothing outside the shares, and joins at its next refresh.
		{"the join fails: it waits and joins at its next refresh", &fakeSharer{joinErr: errors.New("throttled"), refresh: func(int) int { return 5 }}, false, 5, 1, "joins at its next refresh", 1},
		// Its first request waits for the refresh, under a window of one: the window opens
		// to the grant only as answers come back.
		{"the join loses every race: it joins at its next refresh", &fakeSharer{join: 0, joinErr: shares.ErrBusy, refresh: func(int) int { return 5 }}, false, 5, 1, "", 1},
		{"static shares: the static share, no item", nil, true, 2, 0, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant, data, keys := keyedFile(keysOf(48, func(i int) string { return fmt.Sprint("c", i) }), 8)
			tenant.CoreSystem = core
			fake := sourcetest.NewFakeS3()
			reqs := fixture(t, fake, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, data)
			kc := newKeyedCore(t, tt.wantPeak, keys, 1)
			arrivals := tt.arrivals
			if arrivals == 0 {
				arrivals = tt.wantPeak
			}
			kc.answer = barrier(arrivals)
			var logs bytes.Buffer
			h := keyedHandler(fake, kc, &logs)
			h.StaticShares = tt.static
			h.sharers = func(pipeline.ChunkRequest) sharer {
				if tt.sharer == nil {
					t.Errorf("got the shares joined, want none with static shares")
					return &fakeSharer{}
				}
				return tt.sharer
			}
			res, err := h.Handle(context.Background(), run(reqs, 0, len(reqs)-1))
			if err != nil || !res.Done || res.Registered != 48 {
				t.Fatalf("got %+v, %v; want all 48 registered", res, err)
			}
			if kc.peak != tt.wantPeak && (tt.arrivals == 0 || kc.peak > tt.wantPeak) {
				t.Errorf("got a peak of %d in flight, want %d", kc.peak, tt.wantPeak)
			}
			if tt.sharer != nil && tt.sharer.left() != tt.wantLeave {
				t.Errorf("got %d leaves, want %d", tt.sharer.left(), tt.wantLeave)
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("got log %s, want %q in it", logs.String(), tt.wantLog)
			}
		})
	}
}

// TestSharesHold: while the grant is 0 nothing is sent; once a refresh grants one the file goes
// on, and when none comes within the invocation it ends at its cursor without failing. It leaves
// the shares however it ends.
func TestSharesHold(t *testing.T) {
	core := &pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 4, Table: "adm"}
	tests := []struct {
		name       string
		refresh    func(n int) int
		status     int // the core system's answer
		wantType   string
		wantDone   bool
		wantSent   int
		wantHolds  float64
		wantWaited time.Duration // at least
	}{
		{"a share comes free after two polls", func(n int) int { return min(1, max(0, n-2)) }, 200, "", true, 6, 1, 2 * time.Second},
		{"none comes: ends at the cursor", func(int) int { return 0 }, 200, "", false, 0, 1, 40 * time.Second},
		{"a share from the start: no hold", func(int) int { return 1 }, 200, "", true, 6, 0, 0},
		{"the file fails: it still leaves", func(int) int { return 1 }, 400, pipeline.ErrPermanent, false, 1, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now()}
			c := newThrottlingCore(t, func(int, string) (int, string) { return tc.status, "" })
			var out bytes.Buffer
			h, slept := pacedHandler(sourcetest.NewFakeS3(), clock, &out)
			f := &fakeSharer{join: tc.refresh(0), refresh: tc.refresh}
			h.sharers = func(pipeline.ChunkRequest) sharer { return f }
			tenant := csvTenant(c.srv.URL)
			tenant.CoreSystem = core
			res, err := runPaced(t, h, clock, tenant, 6, 60*time.Second)
			if got := errorType(err); got != tc.wantType {
				t.Fatalf("got error %q (%v), want %q", got, err, tc.wantType)
			}
			if err == nil && (res.Done != tc.wantDone || !tc.wantDone && (res.Registered != 0 || res.Next != 0)) {
				t.Errorf("got %+v, want done %v (else nothing registered, the cursor at chunk 0)", res, tc.wantDone)
			}
			if got := len(c.seen()); got != tc.wantSent {
				t.Errorf("got %d requests, want %d", got, tc.wantSent)
			}
			var waited time.Duration
			for _, d := range *slept {
				waited += d
			}
			if waited < tc.wantWaited {
				t.Errorf("got %v held, want at least %v", waited, tc.wantWaited)
			}
			if f.left() != 1 {
				t.Errorf("got %d leaves, want 1", f.left())
			}
			if got := emfValue(t, out.String(), "CoreSystemShareHolds"); got != tc.wantHolds {
				t.Errorf("got CoreSystemShareHolds %v, want %v", got, tc.wantHolds)
			}
		})
	}
}

// TestSharesEntry: the entry an invocation joins with: a key-ordered file's demand is its
// maxRecordsInFlight, whatever the static share; file order and batch use one; the weight is the
// tenant's.
func TestSharesEntry(t *testing.T) {
	core := &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 10, MaxRequestsInFlight: 10, Table: "adm"}
	tests := []struct {
		name                   string
		tenant                 spec.Tenant
		wantDemand, wantWeight int
	}{
		{"key order", spec.Tenant{RecordOrder: pipeline.RecordOrderKey, MaxRecordsInFlight: 16, Weight: 3}, 16, 3},
		{"file order", spec.Tenant{MaxRecordsInFlight: 0}, 1, pipeline.DefaultWeight},
		{"batch", spec.Tenant{RecordOrder: pipeline.RecordOrderKey, RegisterMode: pipeline.RegisterModeBatch, Weight: 2}, 1, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandler(sourcetest.NewFakeS3(), &fakeSecrets{})
			h.DynamoDB = newFakeDynamo("id") // never called: the entry is built, not joined
			req := pipeline.ChunkRequest{ExecutionName: execName, Tenant: pipeline.Tenant{Tenant: tc.tenant, CoreSystem: core}}
			p := h.newPace(req)
			m, ok := p.shares.member.(*shares.Member)
			if !ok {
				t.Fatalf("got member %T, want a *shares.Member", p.shares.member)
			}
			if m.Self.Demand != tc.wantDemand || m.Self.Weight != tc.wantWeight || m.Self.Execution != execName || m.Core.Name != "erp" || m.Store.Table != "adm" {
				t.Errorf("got %+v in %+v, want demand %d, weight %d", m.Self, m.Store, tc.wantDemand, tc.wantWeight)
			}
		})
	}
}

func TestParseRequestShares(t *testing.T) {
	for _, c := range []struct {
		v          string
		wantStatic bool
		wantErr    bool
	}{{"", false, false}, {"shared", false, false}, {"static", true, false}, {"even", false, true}} {
		static, err := ParseRequestShares(c.v)
		if static != c.wantStatic || (err != nil) != c.wantErr {
			t.Errorf("%q: got %v, %v; want static %v, error %v", c.v, static, err, c.wantStatic, c.wantErr)
		}
	}
}

// TestSharesAdmitCountsOut: admit lets at most the limit through until their places are released,
// whatever the window let go.
func TestSharesAdmitCountsOut(t *testing.T) {
	k := &keeper{limit: 2, poll: time.Second, now: time.Now, sleep: sleepContext, released: make(chan struct{}),
		log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	ctx := context.Background()
	b := budget{now: time.Now, margin: 0, deadline: time.Now().Add(time.Minute)}
	for i := range 2 {
		if err := k.admit(ctx, b, "r", 0); err != nil {
			t.Fatalf("admit %d: %v", i, err)
		}
	}
	third := make(chan error, 1)
	go func() { third <- k.admit(ctx, b, "r", 0) }()
	select {
	case err := <-third:
		t.Fatalf("got the third admitted (%v) with two out of a limit of 2, want it held", err)
	case <-time.After(50 * time.Millisecond):
	}
	k.release()
	if err := <-third; err != nil {
		t.Fatalf("got %v after a release, want the third admitted", err)
	}
	if k.out != 2 {
		t.Errorf("got %d out, want 2", k.out)
	}
}
