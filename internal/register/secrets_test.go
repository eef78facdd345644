package register

import (
	"context"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

func TestSecretRotation(t *testing.T) {
	sm := &fakeSecrets{values: map[string]string{secretARN: "old"}}
	c := newCore(t, func(_ int, s seenRequest) int {
		if s.Auth != "new" {
			return 401
		}
		return 200
	})
	s3 := sourcetest.NewFakeS3()
	tenant := csvTenant(c.srv.URL)
	tenant.RegisterAuthSecretARN = secretARN
	reqs := fixture(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, []byte("a\n1\n2\n"))
	h := newHandler(s3, sm)
	if _, err := h.Secrets.Get(context.Background(), secretARN); err != nil { // cache "old"
		t.Fatal(err)
	}
	sm.values[secretARN] = "new"
	if _, err := h.Handle(context.Background(), reqs[0]); err != nil {
		t.Fatalf("got %v, want success after refetching the rotated secret", err)
	}
	if sm.calls != 2 || len(c.seen) != 3 {
		t.Errorf("got %d secret fetches and %d requests, want 2 and 3 (one 401, then records 1 and 2)", sm.calls, len(c.seen))
	}
	// Still 401 with a fresh secret: permanent.
	sm.values[secretARN] = "wrong"
	h.Secrets.Forget(secretARN)
	if _, err := h.Handle(context.Background(), reqs[0]); source.ErrorType(err) != pipeline.ErrPermanent {
		t.Errorf("got %v, want PermanentError", err)
	}
}

func TestSecretCache(t *testing.T) {
	sm := &fakeSecrets{values: map[string]string{secretARN: "v"}}
	c := NewSecretCache(sm)
	now := time.Unix(0, 0)
	c.now = func() time.Time { return now }
	for range 3 {
		if v, err := c.Get(context.Background(), secretARN); err != nil || v != "v" {
			t.Fatalf("got %q, %v, want v", v, err)
		}
	}
	if sm.calls != 1 {
		t.Errorf("got %d fetches, want 1", sm.calls)
	}
	now = now.Add(SecretTTL)
	if _, err := c.Get(context.Background(), secretARN); err != nil || sm.calls != 2 {
		t.Errorf("got %d fetches after the TTL, want 2", sm.calls)
	}
}
