package register

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// latencyCore is a core system that answers every POST 200 after latency.
type latencyCore time.Duration

func (l latencyCore) Do(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	time.Sleep(time.Duration(l))
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// BenchmarkKeyedVsRecord sends the same 2,000 records (two chunks of 1,000) through Register
// against a core system answering after 10 ms: in record mode (one at a time, file order), keyed
// with 1,000 distinct keys and 8 in flight, and keyed with every record under one key. It reports
// each mode's records/s and their ratios to record mode: keyed with 1,000 keys should approach the
// window (8x: the schedule crosses the chunks' ends), one key should match record mode.
//
//	go test ./internal/register -run '^$' -bench BenchmarkKeyedVsRecord -benchtime 1x
func BenchmarkKeyedVsRecord(b *testing.B) {
	const n = 2000
	modes := []struct {
		name string
		key  func(i int) string // nil: record mode
	}{
		{name: "record"},
		{name: "keyed-1000-keys", key: func(i int) string { return fmt.Sprint("c", i%1000) }},
		{name: "keyed-1-key", key: func(int) string { return "same" }},
	}
	elapsed := make([]time.Duration, len(modes))
	for range b.N {
		for m, mode := range modes {
			elapsed[m] += sendOnce(b, n, mode.key)
		}
	}
	rates := make([]float64, len(modes))
	for m, mode := range modes {
		rates[m] = float64(n*b.N) / elapsed[m].Seconds()
		b.ReportMetric(rates[m], mode.name+"-records/s")
	}
	for m, mode := range modes[1:] {
		b.ReportMetric(rates[m+1]/rates[0], mode.name+"/record")
	}
	b.ReportMetric(0, "ns/op") // the per-mode rates above are the measure
}

// sendOnce registers a file of n records (keyed by key, record mode when nil) and returns how long
// Register took.
func sendOnce(b *testing.B, n int, key func(int) string) time.Duration {
	b.Helper()
	keys := keysOf(n, func(i int) string {
		if key == nil {
			return "k"
		}
		return key(i)
	})
	tenant, data, _ := keyedFile(keys, pipeline.DefaultMaxRecordsInFlight)
	tenant.ChunkSize = pipeline.MaxChunkSize
	if key == nil {
		tenant.RecordOrder, tenant.KeyColumns = "", nil
	}
	fake := sourcetest.NewFakeS3()
	reqs := fixture(b, fake, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, data)
	h := keyedHandler(fake, latencyCore(10*time.Millisecond), io.Discard)
	start := time.Now()
	res, err := h.Handle(context.Background(), run(reqs, 0, len(reqs)-1))
	took := time.Since(start)
	if err != nil || res.Registered != int64(n) {
		b.Fatalf("got %v, %d registered; want all %d", err, res.Registered, n)
	}
	return took
}
