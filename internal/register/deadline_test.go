package register

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// fakeClock is a clock that tests move by hand; the core system's handler may move it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestRegisterStopsBeforeDeadline(t *testing.T) {
	// Each POST takes 3 s on the fake clock. The Lambda has 20 s; a POST needs its 10 s HTTP
	// timeout plus the 2 s margin. POSTs at 0, 3 and 6 s fit (≤ 20 s); at 9 s, 9+12 > 20: stop.
	clock := &fakeClock{t: time.Now()}
	c := newCore(t, func(int, seenRequest) int { clock.add(3 * time.Second); return 200 })
	s3 := sourcetest.NewFakeS3()
	tenant := csvTenant(c.srv.URL)
	tenant.ChunkSize = 100
	reqs := fixture(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, []byte("a\n1\n2\n3\n4\n5\n"))
	h := newHandler(s3, &fakeSecrets{})
	h.HTTPTimeout = 10 * time.Second
	h.now = clock.now
	ctx, cancel := context.WithDeadline(context.Background(), clock.now().Add(20*time.Second))
	defer cancel()
	res, err := h.Handle(ctx, reqs[0])
	if source.ErrorType(err) != pipeline.ErrRetryable {
		t.Fatalf("got %v, want RetryableError", err)
	}
	if len(c.seen) != 3 || !strings.Contains(err.Error(), "stopped before record 4 of chunk 0: the Lambda timeout is near") {
		t.Errorf("got %d requests and %q, want 3 sent and a stop before record 4", len(c.seen), err)
	}
	if res.Registered != 0 {
		t.Errorf("got result %+v, want the zero result with an error", res)
	}
}

// blockingS3 is an S3 whose reads of one key hang until the call's context ends, as a stalled
// connection does.
type blockingS3 struct {
	*sourcetest.FakeS3
	key string
}

func (b blockingS3) GetObject(ctx context.Context, in *s3.GetObjectInput, opt ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if *in.Key == b.key {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return b.FakeS3.GetObject(ctx, in, opt...)
}

// blockingSecrets is a Secrets Manager that hangs until the call's context ends.
type blockingSecrets struct{}

func (blockingSecrets) GetSecretValue(ctx context.Context, _ *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestRegisterDeadlineCoversEveryCall: every call an invocation makes (the manifest read, the chunk
// read, the secret fetch) ends the deadline margin before the Lambda deadline, with a
// RetryableError, even when the call itself hangs. Without the guard the call runs into the
// deadline, where Lambda kills the invocation before the handler can return.
func TestRegisterDeadlineCoversEveryCall(t *testing.T) {
	const margin, lambdaTimeout = 500 * time.Millisecond, 2 * time.Second
	tests := []struct {
		name    string
		hang    string // "manifest", "source" or "secret"
		wantMsg string
	}{
		{"manifest read hangs", "manifest", "reading the manifest"},
		{"chunk read hangs", "source", "reading the object failed"},
		{"secret fetch hangs", "secret", "fetching the registerAuthSecretArn secret failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCore(t, nil)
			fake := sourcetest.NewFakeS3()
			tenant := csvTenant(c.srv.URL)
			tenant.RegisterAuthSecretARN = secretARN
			reqs := fixture(t, fake, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, []byte("a\n1\n"))
			h := newHandler(fake, &fakeSecrets{values: map[string]string{secretARN: "x"}})
			h.DeadlineMargin = margin
			switch tt.hang {
			case "manifest":
				h.S3 = blockingS3{fake, reqs[0].Manifest.Key}
			case "source":
				h.S3 = blockingS3{fake, "k"}
			case "secret":
				h.Secrets = NewSecretCache(blockingSecrets{})
			}
			start := time.Now()
			deadline := start.Add(lambdaTimeout)
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			_, err := h.Handle(ctx, reqs[0])
			returned := time.Now()
			if source.ErrorType(err) != pipeline.ErrRetryable || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got %s %v, want a RetryableError containing %q", source.ErrorType(err), err, tt.wantMsg)
			}
			if latest := deadline.Add(-margin / 2); returned.After(latest) {
				t.Errorf("got the handler back %v after the start, want it back by %v (the deadline %v minus about the %v margin)",
					returned.Sub(start), latest.Sub(start), lambdaTimeout, margin)
			}
			if len(c.seen) != 0 {
				t.Errorf("got %d records sent, want none", len(c.seen))
			}
		})
	}
}

// TestRegisterNoCallWithoutTime: when less time is left than a call needs, the call does not start
// and the invocation returns a RetryableError at once.
func TestRegisterNoCallWithoutTime(t *testing.T) {
	tests := []struct {
		name        string
		left        time.Duration // before the 2 s margin
		secret      bool
		wantGets    int
		wantSecrets int
		wantMsg     string
	}{
		{"no time for the manifest read", 2*time.Second + 500*time.Millisecond, false, 0, 0, "stopped before reading the manifest of chunk 0"},
		{"no time for the secret fetch", 3*time.Second + 500*time.Millisecond, true, 2, 0, "stopped before fetching the registerAuthSecretArn secret of chunk 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCore(t, nil)
			s3 := sourcetest.NewFakeS3()
			tenant := csvTenant(c.srv.URL)
			if tt.secret {
				tenant.RegisterAuthSecretARN = secretARN
			}
			reqs := fixture(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, []byte("a\n1\n"))
			sm := &fakeSecrets{values: map[string]string{secretARN: "x"}}
			h := newHandler(s3, sm)
			// The clock stands still until the S3 reads are done, then jumps 600 ms.
			clock := &fakeClock{t: time.Now()}
			h.now = func() time.Time {
				if len(s3.Gets) == 2 {
					return clock.now().Add(600 * time.Millisecond)
				}
				return clock.now()
			}
			ctx, cancel := context.WithDeadline(context.Background(), clock.now().Add(tt.left))
			defer cancel()
			_, err := h.Handle(ctx, reqs[0])
			if source.ErrorType(err) != pipeline.ErrRetryable || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got %s %v, want a RetryableError containing %q", source.ErrorType(err), err, tt.wantMsg)
			}
			if len(s3.Gets) != tt.wantGets || sm.calls != tt.wantSecrets || len(c.seen) != 0 {
				t.Errorf("got %d S3 reads, %d secret fetches, %d POSTs, want %d, %d, 0", len(s3.Gets), sm.calls, len(c.seen), tt.wantGets, tt.wantSecrets)
			}
		})
	}
}

// TestRegisterDeadlineAfter401: a 401 uses up the time, so neither the secret refresh nor the
// resent POST may start when they no longer fit.
func TestRegisterDeadlineAfter401(t *testing.T) {
	tests := []struct {
		name        string
		spent       time.Duration // by the first POST, which answers 401
		wantPOSTs   int
		wantSecrets int // fetches, the first one included
		wantMsg     string
	}{
		// 20 s to the deadline, 2 s margin, 2 s HTTP timeout.
		{"no time for the refresh", 17*time.Second + 500*time.Millisecond, 1, 1, "stopped before fetching the registerAuthSecretArn secret"},
		{"no time for the second POST", 16*time.Second + 500*time.Millisecond, 1, 2, "stopped before resending record 1 after a 401 of chunk 0"},
		{"time for both", 10 * time.Second, 2, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now()}
			sm := &fakeSecrets{values: map[string]string{secretARN: "old"}}
			c := newCore(t, func(n int, s seenRequest) int {
				if s.Auth == "old" {
					clock.add(tt.spent)
					sm.mu.Lock()
					sm.values[secretARN] = "new"
					sm.mu.Unlock()
					return 401
				}
				return 200
			})
			s3 := sourcetest.NewFakeS3()
			tenant := csvTenant(c.srv.URL)
			tenant.RegisterAuthSecretARN = secretARN
			reqs := fixture(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, []byte("a\n1\n"))
			h := newHandler(s3, sm)
			h.now = clock.now
			ctx, cancel := context.WithDeadline(context.Background(), clock.now().Add(20*time.Second))
			defer cancel()
			_, err := h.Handle(ctx, reqs[0])
			if tt.wantMsg == "" {
				if err != nil {
					t.Errorf("got %v, want success", err)
				}
			} else if source.ErrorType(err) != pipeline.ErrRetryable || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got %s %v, want a RetryableError containing %q", source.ErrorType(err), err, tt.wantMsg)
			}
			if len(c.seen) != tt.wantPOSTs || sm.calls != tt.wantSecrets {
				t.Errorf("got %d POSTs and %d secret fetches, want %d and %d", len(c.seen), sm.calls, tt.wantPOSTs, tt.wantSecrets)
			}
		})
	}
}

// TestBudget pins the guard's arithmetic on a fake clock.
func TestBudget(t *testing.T) {
	base := time.Unix(1_000_000, 0)
	tests := []struct {
		name      string
		deadline  time.Time // zero: none
		need      time.Duration
		limit     time.Duration
		wantErr   bool
		wantUntil time.Duration // the call context's deadline, from base; 0: none
	}{
		{"no deadline, no limit", time.Time{}, time.Second, 0, false, 0},
		{"no deadline, limit", time.Time{}, time.Second, 5 * time.Second, false, 5 * time.Second},
		{"time left bounds the call", base.Add(10 * time.Second), time.Second, 0, false, 8 * time.Second},
		{"limit shorter than the time left", base.Add(10 * time.Second), time.Second, 3 * time.Second, false, 3 * time.Second},
		{"exactly enough", base.Add(10 * time.Second), 8 * time.Second, 8 * time.Second, false, 8 * time.Second},
		{"not enough", base.Add(10 * time.Second), 8*time.Second + time.Millisecond, 0, true, 0},
		{"past the deadline", base.Add(-time.Second), 0, 0, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := budget{deadline: tt.deadline, margin: 2 * time.Second, now: func() time.Time { return base }, file: "f", chunk: 3, first: 301}
			// Context deadlines use the real clock: compare them as durations from the real now.
			realStart := time.Now()
			ctx, cancel, err := b.call(context.Background(), "x", tt.need, tt.limit)
			if tt.wantErr {
				if source.ErrorType(err) != pipeline.ErrRetryable || !strings.Contains(err.Error(), "from record 301") {
					t.Errorf("got %v, want a RetryableError naming record 301", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer cancel()
			d, ok := ctx.Deadline()
			if tt.wantUntil == 0 {
				if ok {
					t.Errorf("got a deadline in %v, want none", d.Sub(realStart))
				}
				return
			}
			if got := d.Sub(realStart); !ok || got < tt.wantUntil || got > tt.wantUntil+time.Second {
				t.Errorf("got a deadline in %v, want %v", got, tt.wantUntil)
			}
		})
	}
}
