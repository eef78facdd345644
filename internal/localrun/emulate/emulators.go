// Package emulate is the AWS of a local run, and the core system it registers to: S3 (gofakes3,
// with versions, sequencers and billed request classes), the Node emulators it starts (fauxqs for
// SQS, the Step Functions server, dynalite), the Lambda runtime that runs the real function
// binaries (invocations, concurrency, throttles, billed duration), EventBridge event patterns, the
// DynamoDB capacity meter, the counting proxies and the embedded sink. The local run
// (internal/localrun) wires them from the synthesized templates; nothing here reads a template.
package emulate

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/middleware"

	"github.com/example/tenantpipeline/internal/awsconfig"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// nodeProcess is one of the Node emulators (fauxqs, the Step Functions server), started on a free
// loopback port. It prints {"port": N} when ready and exits when its stdin closes, so it never
// outlives the harness, even when the harness is killed.
type nodeProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	URL   string
	done  chan struct{}
}

func StartNode(ctx context.Context, node, script string, args []string, logs io.Writer) (*nodeProcess, error) {
	cmd := exec.Command(node, append([]string{"--no-warnings", script}, args...)...)
	cmd.SysProcAttr = ownProcessGroup()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", script, err)
	}
	p := &nodeProcess{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			ready <- sc.Text()
		}
		io.Copy(logs, stdout)
	}()
	select {
	case line := <-ready:
		var v struct{ Port int }
		if err := json.Unmarshal([]byte(line), &v); err != nil || v.Port == 0 {
			p.Close()
			return nil, fmt.Errorf("%s: unexpected first line %q", script, line)
		}
		p.URL = fmt.Sprintf("http://127.0.0.1:%d", v.Port)
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before listening (see its log)", script)
	case <-time.After(30 * time.Second):
		p.Close()
		return nil, fmt.Errorf("%s did not start within 30s", script)
	case <-ctx.Done():
		p.Close()
		return nil, fmt.Errorf("start %s: %w", script, ctx.Err())
	}
}

// Close stops the process: closing stdin asks it to exit, a kill follows after a grace period.
func (p *nodeProcess) Close() {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// APICounter counts API calls by service and operation.
type APICounter struct {
	mu sync.Mutex
	m  map[string]map[string]int64
}

// Add counts one call.
func (c *APICounter) Add(service, op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]map[string]int64{}
	}
	if c.m[service] == nil {
		c.m[service] = map[string]int64{}
	}
	c.m[service][op]++
}

// Snapshot copies the counts.
func (c *APICounter) Snapshot() map[string]map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]map[string]int64{}
	for s, ops := range c.m {
		out[s] = map[string]int64{}
		for k, v := range ops {
			out[s][k] = v
		}
	}
	return out
}

// Total sums the counts of one service.
func (c *APICounter) Total(service string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, v := range c.m[service] {
		n += v
	}
	return n
}

// CountingProxy forwards a JSON-protocol service (X-Amz-Target: Service.Operation) and counts calls.
// Each call is also passed to the optional observers.
func CountingProxy(target string, service string, c *APICounter, observers ...func(op string)) http.Handler {
	return Counting(Proxy(target), service, c, observers...)
}

// Proxy forwards every request to target.
func Proxy(target string) http.Handler {
	u, _ := url.Parse(target)
	p := httputil.NewSingleHostReverseProxy(u)
	p.ErrorLog = log.New(io.Discard, "", 0) // calls cut short when the run stops
	return p
}

// Counting counts the calls of a JSON-protocol service (X-Amz-Target: Service.Operation) that pass
// to next, and passes each to the optional observers.
func Counting(next http.Handler, service string, c *APICounter, observers ...func(op string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.Header.Get("X-Amz-Target")
		if i := strings.LastIndex(op, "."); i >= 0 {
			op = op[i+1:]
		}
		c.Add(service, cmp.Or(op, "unknown"))
		for _, o := range observers {
			o(op)
		}
		next.ServeHTTP(w, r)
	})
}

// Serve starts an HTTP server on a free loopback port.
func Serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// S3 is gofakes3 in-process over plain HTTP (over TLS it corrupts multipart bodies),
// with two endpoints: the pipeline's, whose calls are counted, and the harness's. Every successful
// PutObject on either becomes an EventBridge "Object Created" event.
type S3 struct {
	Backend *s3mem.Backend
	fake    *gofakes3.GoFakeS3
	OnPut   func(bucket, key, versionID, etag string, size int64)
	counter *APICounter
	meter   *RequestMeter // billed requests by class and object key
	seq     *sequencers
	// missingForbidden answers the pipeline's reads of a missing key with 403 (Faults.S3MissingKeyForbidden).
	MissingKeyForbidden bool
}

func NewS3(counter *APICounter, meter *RequestMeter, seq *sequencers) *S3 {
	b := s3mem.New()
	s := &S3{Backend: b, counter: counter, meter: meter, seq: seq}
	s.fake = gofakes3.New(b, gofakes3.WithIntegrityCheck(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	return s
}

// Handler returns the S3 endpoint; counted endpoints add to the API counter.
func (s *S3) Handler(counted bool) http.Handler {
	inner := s.fake.Server()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := S3Operation(r)
		if counted {
			s.counter.Add("s3", op)
			if class := s3Class(op); class != "" {
				_, key := SplitPath(r.URL.Path)
				s.meter.Add(class, key, 1)
			}
		}
		if counted && s.MissingKeyForbidden && (op == "GetObject" || op == "HeadObject") {
			w = &forbiddenWriter{ResponseWriter: w, head: r.Method == http.MethodHead}
		}
		if (op == "GetObject" || op == "HeadObject") && serveVersion(inner, w, r) {
			return
		}
		if serveConditionalWrite(s.Backend, w, r, op) || serveBucketEncryption(s.Backend, w, r, op) {
			return
		}
		if op == "GetObject" && r.Header.Get("Range") != "" {
			// S3 sends no full-object checksum with a ranged GET; gofakes3 does, and the SDK would
			// then reject the partial body.
			inner.ServeHTTP(&rangeWriter{ResponseWriter: w}, r)
			return
		}
		if op != "PutObject" {
			inner.ServeHTTP(w, r)
			return
		}
		rec := &StatusRecorder{ResponseWriter: w, Status: http.StatusOK}
		inner.ServeHTTP(rec, r)
		if rec.Status != http.StatusOK || s.OnPut == nil {
			return
		}
		bucket, key := SplitPath(r.URL.Path)
		size := r.ContentLength
		if d := r.Header.Get("X-Amz-Decoded-Content-Length"); d != "" {
			fmt.Sscan(d, &size)
		}
		s.OnPut(bucket, key, w.Header().Get("X-Amz-Version-Id"), strings.Trim(w.Header().Get("ETag"), `"`), size)
	})
}

// Sequencer returns the sequencer of a new event of bucket/key (sequencer.go, Faults.Sequencers).
func (s *S3) Sequencer(bucket, key string) string { return s.seq.next(bucket, key) }

// forbiddenWriter turns a 404 answer (NoSuchKey, NoSuchVersion) into the 403 AccessDenied that S3
// gives a reader without s3:ListBucket on the bucket
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions"): the error
// body S3 sends (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html), none for a
// HEAD. Any other answer passes through.
type forbiddenWriter struct {
	http.ResponseWriter
	head     bool
	rewrote  bool
	wroteHdr bool
}

const AccessDeniedBody = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
	`<Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>LOCAL</RequestId><HostId>LOCAL</HostId></Error>`

func (w *forbiddenWriter) WriteHeader(code int) {
	if w.wroteHdr {
		return
	}
	w.wroteHdr = true
	if code != http.StatusNotFound {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.rewrote = true
	h := w.Header()
	h.Del("Content-Length")
	h.Del("X-Amz-Version-Id")
	h.Del("X-Amz-Delete-Marker")
	h.Set("Content-Type", "application/xml")
	if !w.head {
		h.Set("Content-Length", fmt.Sprint(len(AccessDeniedBody)))
	}
	w.ResponseWriter.WriteHeader(http.StatusForbidden)
	if !w.head {
		io.WriteString(w.ResponseWriter, AccessDeniedBody)
	}
}

func (w *forbiddenWriter) Write(b []byte) (int, error) {
	if !w.wroteHdr {
		w.WriteHeader(http.StatusOK)
	}
	if w.rewrote {
		return len(b), nil // the 404's own body is replaced
	}
	return w.ResponseWriter.Write(b)
}

type StatusRecorder struct {
	http.ResponseWriter
	Status int
}

func (r *StatusRecorder) WriteHeader(code int) {
	r.Status = code
	r.ResponseWriter.WriteHeader(code)
}

type rangeWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *rangeWriter) WriteHeader(code int) {
	w.wrote = true
	for k := range w.Header() {
		if strings.HasPrefix(strings.ToLower(k), "x-amz-checksum-") {
			w.Header().Del(k)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *rangeWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func SplitPath(p string) (bucket, key string) {
	p = strings.TrimPrefix(p, "/")
	bucket, key, _ = strings.Cut(p, "/")
	return bucket, key
}

func S3Operation(r *http.Request) string {
	_, key := SplitPath(r.URL.Path)
	q := r.URL.Query()
	switch {
	case q.Has("uploadId") || q.Has("uploads"):
		return "Multipart" + r.Method
	case key == "" && r.Method == http.MethodGet:
		return "ListObjects"
	case key == "":
		return "Bucket" + r.Method
	case r.Method == http.MethodGet:
		return "GetObject"
	case r.Method == http.MethodHead:
		return "HeadObject"
	case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		return "CopyObject"
	case r.Method == http.MethodPut:
		return "PutObject"
	case r.Method == http.MethodDelete:
		return "DeleteObject"
	}
	return r.Method
}

// StartDynalite starts the project's DynamoDB emulator (dynalite, local/dynalite/server.mjs under
// root) with the Node binary node on a free loopback port, for tools and benchmarks that need
// DynamoDB's own semantics without a whole local run. It returns the endpoint URL and the function
// that stops it.
func StartDynalite(ctx context.Context, node, root string, logs io.Writer) (string, func(), error) {
	p, err := StartNode(ctx, node, filepath.Join(root, "local/dynalite/server.mjs"), nil, logs)
	if err != nil {
		return "", nil, err
	}
	return p.URL, p.Close, nil
}

const (
	Region  = "us-east-1"
	Account = "000000000000" // the account fauxqs puts in queue URLs and ARNs
)

// LocalAWS is the SDK configuration of the harness's own clients; a read cut short is asked again,
// as pipectl asks it.
var LocalAWS = aws.Config{Region: Region, Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
	APIOptions: []func(*middleware.Stack) error{awsconfig.RetryTruncatedReads}}
