package register

import (
	"context"
	"fmt"
	"strings"
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
