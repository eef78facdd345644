package register

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// syntheticS3 serves a CSV file of fixed-width rows ("%08d,xxx…\n", rowLen bytes each, after the
// header "id,v\n") and its manifest, generating the bytes of each ranged GET as they are read, so
// that the measuring process holds nothing but what Register itself holds.
type syntheticS3 struct {
	rows, rowLen, perChunk int64
	v2                     bool
}

const syntheticHeader = "id,v\n"

// PutObject accepts a segment's progress and keeps nothing.
func (syntheticS3) PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return &s3.PutObjectOutput{}, nil
}

func (s syntheticS3) chunks() int64 { return (s.rows + s.perChunk - 1) / s.perChunk }

// first is the 0-based first row of chunk j (the end for j = chunks).
func (s syntheticS3) first(j int64) int64 { return min(j*s.perChunk, s.rows) }

func (s syntheticS3) offset(row int64) int64 { return int64(len(syntheticHeader)) + row*s.rowLen }

func (s syntheticS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	var a, b int64
	if _, err := fmt.Sscanf(aws.ToString(in.Range), "bytes=%d-%d", &a, &b); err != nil {
		return nil, err
	}
	if aws.ToString(in.Key) == "manifest" {
		var m []byte
		for j := int64(0); j <= s.chunks(); j++ {
			m = binary.BigEndian.AppendUint64(m, uint64(s.offset(s.first(j))))
			if s.v2 {
				m = binary.BigEndian.AppendUint64(m, uint64(s.first(j)+1))
			}
		}
		return &s3.GetObjectOutput{Body: io.NopCloser(strings.NewReader(string(m[a : b+1])))}, nil
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(io.LimitReader(&rowReader{s: s, pos: a}, b-a+1))}, nil
}

// rowReader generates the file's bytes from pos on.
type rowReader struct {
	s   syntheticS3
	pos int64
	row []byte
}

func (r *rowReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		i := (r.pos - int64(len(syntheticHeader))) / r.s.rowLen
		if i >= r.s.rows {
			if n == 0 {
				return 0, io.EOF
			}
			break
		}
		r.row = append(r.row[:0], fmt.Sprintf("%08d,", i+1)...)
		for int64(len(r.row)) < r.s.rowLen-1 {
			r.row = append(r.row, 'x')
		}
		r.row = append(r.row, '\n')
		c := copy(p[n:], r.row[r.pos-r.s.offset(i):])
		n += c
		r.pos += int64(c)
	}
	return n, nil
}

// peakRSS is the process's peak resident set size (VmHWM): what Lambda's memory limit applies to.
func peakRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

const memoryChildEnv = "REGISTER_PEAK_MEMORY_CHILD"

// TestRegisterPeakMemory sizes the Register function's memory (the construct's
// DefaultRegisterMemoryMB). A fresh process (this test binary, run again) registers, in one
// invocation each, 20 record-mode chunks of 1,000 records of 1 KB, and 4 batch-mode chunks at the
// default maxBatchBytes of 5 MiB (1,000 records of 5 KB), against a core system that discards the
// bodies; it reports its peak RSS. Register holds one chunk at a time, so the peak does not grow
// with the number of chunks an invocation registers.
func TestRegisterPeakMemory(t *testing.T) {
	if os.Getenv(memoryChildEnv) != "" {
		measurePeakMemory(t)
		return
	}
	if _, err := peakRSS(); err != nil {
		t.Skipf("cannot read the peak RSS here: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRegisterPeakMemory$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), memoryChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("measuring process: %v\n%s", err, out)
	}
	var rss int64
	for _, line := range strings.Split(string(out), "\n") {
		if _, after, ok := strings.Cut(line, "peakRSS="); ok {
			rss, _ = strconv.ParseInt(strings.Fields(after)[0], 10, 64)
		}
	}
	t.Logf("Register's peak RSS: %.1f MiB", float64(rss)/(1<<20))
	// 128 MB is Lambda's smallest size; keep a quarter of it for the runtime client and the
	// deployed binary's own pages.
	if rss == 0 || rss > 96<<20 {
		t.Errorf("peak RSS: got %.1f MiB, want more than 0 and at most 96 MiB, so that 128 MB holds it", float64(rss)/(1<<20))
	}
}

func measurePeakMemory(t *testing.T) {
	core := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer core.Close()
	for _, tc := range []struct {
		name   string
		s      syntheticS3
		tenant pipeline.Tenant
	}{
		{"record", syntheticS3{rows: 20_000, rowLen: 1024, perChunk: 1000},
			pipeline.Tenant{Tenant: spec.Tenant{ID: "t1", Format: "csv", Encoding: "utf-8", ChunkSize: 1000, RegisterURL: core.URL}}},
		{"batch", syntheticS3{rows: 4_000, rowLen: 5 * 1024, perChunk: 1000, v2: true},
			pipeline.Tenant{Tenant: spec.Tenant{ID: "t1", Format: "csv", Encoding: "utf-8", ChunkSize: 1000, RegisterURL: core.URL, RegisterMode: pipeline.RegisterModeBatch, MaxBatchBytes: pipeline.DefaultMaxBatchBytes}}},
	} {
		manifest := pipeline.Location{Bucket: work, Key: "manifest"}
		if tc.s.v2 {
			manifest.Version = pipeline.ManifestV2
		}
		h := &Handler{S3: tc.s, HTTP: NewHTTPClient(10 * time.Second), Secrets: NewSecretCache(&fakeSecrets{}),
			HTTPTimeout: 10 * time.Second, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
		req := pipeline.ChunkRequest{Tenant: tc.tenant, Source: pipeline.Source{Bucket: ingest, Key: "k", ETag: "e"},
			ExecutionName: execName, Manifest: manifest, Records: tc.s.rows, Header: []string{"id", "v"},
			Chunk: 0, LastChunk: int(tc.s.chunks() - 1)}
		res, err := h.Handle(context.Background(), req)
		if err != nil || !res.Done || res.Registered != tc.s.rows {
			t.Fatalf("%s: got %+v, %v; want %d records registered", tc.name, res, err, tc.s.rows)
		}
		if rss, err := peakRSS(); err == nil {
			fmt.Printf("after %s mode: peak RSS %.1f MiB\n", tc.name, float64(rss)/(1<<20))
		}
	}
	rss, err := peakRSS()
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("peakRSS=%d heapSys=%d\n", rss, ms.HeapSys)
}
