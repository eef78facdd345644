package register

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
	"github.com/example/tenantpipeline/spec"
)

const (
	ingest    = "ingest-bucket"
	work      = "work-bucket"
	execName  = "t1-0123456789abcdef"
	secretARN = "arn:aws:secretsmanager:ap-northeast-1:123456789012:secret:core-auth"
)

// core is an httptest core system that records every request and answers with reply.
type core struct {
	mu    sync.Mutex
	seen  []seenRequest
	reply func(n int, r seenRequest) int // status for the n-th request (0-based)
	srv   *httptest.Server
	conns int
}

type seenRequest struct {
	Key, Auth, ContentType string
	Body                   wireRecord
}

func newCore(t *testing.T, reply func(int, seenRequest) int) *core {
	c := &core{reply: reply}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var rec wireRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Errorf("got an invalid JSON body: %v", err)
		}
		s := seenRequest{Key: r.Header.Get("Idempotency-Key"), Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: rec}
		c.mu.Lock()
		n := len(c.seen)
		c.seen = append(c.seen, s)
		c.mu.Unlock()
		status := http.StatusOK
		if c.reply != nil {
			status = c.reply(n, s)
		}
		w.WriteHeader(status)
		fmt.Fprint(w, `{"echo":"SECRET-RECORD-CONTENT"}`)
	}))
	c.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			c.mu.Lock()
			c.conns++
			c.mu.Unlock()
		}
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

// fixture stores a file and the manifest Split would write for it, and returns the chunk requests.
func fixture(t testing.TB, s3 *sourcetest.FakeS3, tenant pipeline.Tenant, src pipeline.Source, data []byte) []pipeline.ChunkRequest {
	t.Helper()
	f, err := records.FormatOf(tenant)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	sum, err := records.Split(bytes.NewReader(data), f, tenant.ChunkSize, func(off int64) error {
		offsets = append(offsets, off)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	obj := &sourcetest.Object{Data: data, ETag: "etag-1"}
	if src.VersionID != "" {
		obj.Versions = map[string][]byte{src.VersionID: data}
		obj.VersionETags = map[string]string{src.VersionID: src.ETag}
		obj.Data = []byte("a newer version")
		obj.ETag = "etag-2"
	}
	s3.Put(src.Bucket, src.Key, obj)
	manifest := pipeline.Location{Bucket: work, Key: pipeline.ManifestKey(pipeline.SiloOwner(tenant.ID), execName)}
	s3.Put(work, manifest.Key, &sourcetest.Object{Data: pipeline.EncodeManifest(offsets)})
	var reqs []pipeline.ChunkRequest
	for i := range sum.Chunks {
		reqs = append(reqs, pipeline.ChunkRequest{Tenant: tenant, Source: src, ExecutionName: execName,
			Manifest: manifest, Records: sum.Records, Header: sum.Header, Chunk: i})
	}
	return reqs
}

func newHandler(s3 *sourcetest.FakeS3, secrets *fakeSecrets) *Handler {
	return &Handler{
		S3: s3, HTTP: NewHTTPClient(2 * time.Second), Secrets: NewSecretCache(secrets),
		HTTPTimeout: 2 * time.Second, Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
}

func csvTenant(url string) pipeline.Tenant {
	return pipeline.Tenant{Tenant: spec.Tenant{ID: "t1", Format: "csv", Encoding: "utf-8", ChunkSize: 3, RegisterURL: url}}
}

func TestRegisterWireFormat(t *testing.T) {
	cp932 := func(s string) []byte {
		b, err := japanese.ShiftJIS.NewEncoder().Bytes([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name     string
		format   string
		encoding string
		key      string
		version  string
		data     []byte
		chunk    int
		want     []string // the "record" objects of the chunk, in order
		firstNum int64
	}{
		{"csv utf-8 BOM", "csv", "utf-8", "inbox/t1/plain.csv", "",
			[]byte("\xEF\xBB\xBFid,名前,note\r\n1,①,a\r\n2,\"～,x\",b\r\n3,㎡,\"line\r\nbreak\"\r\n4,d,e\r\n"), 1,
			[]string{`{"id":"4","名前":"d","note":"e"}`}, 4},
		{"csv cp932, versioned, key with space", "csv", "cp932", "inbox/t1/red flower.csv", "v7",
			cp932("id,名前\r\n1,①\r\n2,～\r\n3,㎡\r\n"), 0,
			[]string{`{"id":"1","名前":"①"}`, `{"id":"2","名前":"～"}`, `{"id":"3","名前":"㎡"}`}, 1},
		{"jsonl, key with + and %", "jsonl", "utf-8", "inbox/t1/a+b%20c.jsonl", "",
			[]byte("{\"a\":1}\n{\"b\": [1, 2]}\n{}\n{\"名\":\"①\"}\n"), 1,
			[]string{`{"名":"①"}`}, 4},
		{"jsonl cp932, Japanese key", "jsonl", "cp932", "inbox/t1/請求書.jsonl", "",
			cp932("{\"品名\":\"①～㎡\"}\r\n"), 0,
			[]string{`{"品名":"①～㎡"}`}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCore(t, nil)
			s3 := sourcetest.NewFakeS3()
			tenant := csvTenant(c.srv.URL + "/register")
			tenant.Format, tenant.Encoding = tt.format, tt.encoding
			tenant.RegisterAuthSecretARN = secretARN
			src := pipeline.Source{Bucket: ingest, Key: tt.key, VersionID: tt.version, ETag: "etag-1"}
			reqs := fixture(t, s3, tenant, src, tt.data)
			res, err := newHandler(s3, &fakeSecrets{values: map[string]string{secretARN: "Bearer s3cr3t"}}).Handle(context.Background(), reqs[tt.chunk])
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if res.Registered != int64(len(tt.want)) || res.Chunk != tt.chunk {
				t.Errorf("got %+v, want chunk %d with %d registered", res, tt.chunk, len(tt.want))
			}
			if len(c.seen) != len(tt.want) {
				t.Fatalf("got %d requests, want %d", len(c.seen), len(tt.want))
			}
			for i, s := range c.seen {
				n := tt.firstNum + int64(i)
				wantBody := wireRecord{Tenant: "t1", Source: wireSource{Bucket: ingest, Key: tt.key, VersionID: tt.version}, RecordNumber: n, Record: json.RawMessage(tt.want[i])}
				if !reflect.DeepEqual(s.Body, wantBody) {
					t.Errorf("request %d: got body %+v (record %s), want %+v (record %s)", i, s.Body, s.Body.Record, wantBody, wantBody.Record)
				}
				if want := fmt.Sprintf("%s-%d", execName, n); s.Key != want {
					t.Errorf("request %d: got Idempotency-Key %q, want %q", i, s.Key, want)
				}
				if s.Auth != "Bearer s3cr3t" || s.ContentType != "application/json" {
					t.Errorf("request %d: got Authorization %q, Content-Type %q", i, s.Auth, s.ContentType)
				}
			}
			// One ranged manifest GET and one ranged source GET, pinned to the version.
			if len(s3.Gets) != 2 {
				t.Fatalf("got %d GetObject calls, want 2", len(s3.Gets))
			}
			if got, want := *s3.Gets[0].Range, pipeline.ManifestRange(tt.chunk); got != want {
				t.Errorf("got manifest range %q, want %q", got, want)
			}
			g := s3.Gets[1]
			if *g.Key != tt.key || g.Range == nil || (tt.version != "" && *g.VersionId != tt.version) || g.IfMatch == nil || *g.IfMatch != `"etag-1"` {
				t.Errorf("got source GET key %q range %v version %v if-match %v", *g.Key, g.Range, g.VersionId, g.IfMatch)
			}
		})
	}
}

func TestRegisterStatusClasses(t *testing.T) {
	tests := []struct {
		status   int
		wantType string // "" for success
	}{
		{200, ""}, {201, ""}, {202, ""}, {204, ""}, {409, ""},
		{500, pipeline.ErrRetryable}, {502, pipeline.ErrRetryable}, {504, pipeline.ErrRetryable},
		{408, pipeline.ErrRetryable},
		{400, pipeline.ErrPermanent}, {401, pipeline.ErrPermanent}, {403, pipeline.ErrPermanent}, {404, pipeline.ErrPermanent}, {422, pipeline.ErrPermanent},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			// Records 1 and 2 succeed; record 3 gets the status under test.
			c := newCore(t, func(n int, _ seenRequest) int {
				if n == 2 {
					return tt.status
				}
				return 200
			})
			s3 := sourcetest.NewFakeS3()
			tenant := csvTenant(c.srv.URL)
			tenant.ChunkSize = 10
			reqs := fixture(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k.csv", ETag: "etag-1"}, []byte("a\nSECRET-1\nSECRET-2\nSECRET-3\nSECRET-4\nSECRET-5\n"))
			res, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), reqs[0])
			if tt.wantType == "" {
				if err != nil || res.Registered != 5 || len(c.seen) != 5 {
					t.Errorf("got %v, %d registered, %d requests, want success with 5", err, res.Registered, len(c.seen))
				}
				return
			}
			if err == nil {
				t.Fatal("got no error")
			}
			if got := source.ErrorType(err); got != tt.wantType {
				t.Errorf("got %s (%v), want %s", got, err, tt.wantType)
			}
			if len(c.seen) != 3 {
				t.Errorf("got %d requests, want 3: registration must stop at the first failure", len(c.seen))
			}
			if want := fmt.Sprintf("s3://ingest-bucket/k.csv: record 3: the core system"); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("got %q, want it to start with %q", err, want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("got %q, want no record or response contents", err)
			}
		})
	}
}

// TestRegisterRedirectIsPermanent: a core system that redirects the POST to a GET endpoint
// answering 200 (an http:// registerUrl behind an HTTP→HTTPS redirect whose GET is a list page)
// must fail the file with a PermanentError naming the status and the Location, and nothing may
// count as registered. Following the redirect would resend the POST as a GET without a body
// (301, 302, 303) or resend the POST elsewhere (307, 308).
func TestRegisterRedirectIsPermanent(t *testing.T) {
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var mu sync.Mutex
			var followed []string
			mux := http.NewServeMux()
			mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/list", status)
			})
			mux.HandleFunc("/list", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				followed = append(followed, r.Method)
				mu.Unlock()
				fmt.Fprint(w, "<html>list page</html>")
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			s3 := sourcetest.NewFakeS3()
			reqs := fixture(t, s3, csvTenant(srv.URL+"/register"), pipeline.Source{Bucket: ingest, Key: "k.csv", ETag: "etag-1"}, []byte("a\n1\n2\n"))
			res, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), reqs[0])
			if got := source.ErrorType(err); got != pipeline.ErrPermanent {
				t.Fatalf("got %s (%v), %d registered, want PermanentError", got, err, res.Registered)
			}
			want := fmt.Sprintf(`record 1: the core system answered %d %s with Location "/list"`, status, http.StatusText(status))
			if !strings.Contains(err.Error(), want) {
				t.Errorf("got %q, want it to contain %q", err, want)
			}
			if len(followed) != 0 || res.Registered != 0 {
				t.Errorf("got the redirect followed with %q and %d registered, want it never followed and 0 registered", followed, res.Registered)
			}
		})
	}
}

func TestRegisterTransportFailures(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
		defer srv.Close()
		defer close(release)
		s3 := sourcetest.NewFakeS3()
		reqs := fixture(t, s3, csvTenant(srv.URL), pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, []byte("a\n1\n"))
		h := newHandler(s3, &fakeSecrets{})
		h.HTTPTimeout = 100 * time.Millisecond
		var logs strings.Builder
		h.Log = slog.New(slog.NewJSONHandler(&logs, nil))
		_, err := h.Handle(context.Background(), reqs[0])
		// Retried by the state machine like a RetryableError: WARN, not the ERROR-log alarm.
		if !strings.Contains(logs.String(), `"level":"WARN"`) {
			t.Errorf("got log %s, want the RecordLatencyError at WARN", logs.String())
		}
		// The POST had a whole HTTP timeout: no retry can give it more.
		if source.ErrorType(err) != pipeline.ErrRecordLatency || !strings.Contains(err.Error(), "record 1 got no answer within the HTTP timeout 100ms") {
			t.Errorf("got %v (%s), want a RecordLatencyError naming the record and the timeout", err, source.ErrorType(err))
		}
		if !errors.Is(err, errNoAnswerInTime) {
			t.Errorf("got %v, want the timeout as its cause", err)
		}
		if strings.Contains(err.Error(), srv.URL) {
			t.Errorf("got %q, want no URL in the message", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		s3 := sourcetest.NewFakeS3()
		reqs := fixture(t, s3, csvTenant(url), pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, []byte("a\n1\n"))
		_, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), reqs[0])
		if source.ErrorType(err) != pipeline.ErrRetryable {
			t.Errorf("got %v (%s), want RetryableError", err, source.ErrorType(err))
		}
	})
}

// TestIdempotencyKeysStableAcrossRetry runs one chunk twice, as the state machine's Retry does
// after a 502: the records sent twice carry the same keys.
func TestIdempotencyKeysStableAcrossRetry(t *testing.T) {
	fail := true
	c := newCore(t, func(n int, s seenRequest) int {
		if fail && s.Body.RecordNumber == 5 {
			fail = false
			return 502
		}
		return 200
	})
	s3 := sourcetest.NewFakeS3()
	reqs := fixture(t, s3, csvTenant(c.srv.URL), pipeline.Source{Bucket: ingest, Key: "k", VersionID: "v1"}, []byte("a\n1\n2\n3\n4\n5\n6\n"))
	h := newHandler(s3, &fakeSecrets{})
	if _, err := h.Handle(context.Background(), reqs[1]); source.ErrorType(err) != pipeline.ErrRetryable {
		t.Fatalf("first attempt: got %v, want RetryableError", err)
	}
	// A redrive may run in a new execution environment: a fresh handler must give the same keys.
	if _, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), reqs[1]); err != nil {
		t.Fatalf("retry: got %v, want success", err)
	}
	var got []string
	for _, s := range c.seen {
		got = append(got, s.Key)
	}
	want := []string{execName + "-4", execName + "-5", execName + "-4", execName + "-5", execName + "-6"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got keys %q, want %q", got, want)
	}
}

// TestValidateRequest pins what fails before any call: the tenant settings, the chunk and the
// execution name.
func TestValidateRequest(t *testing.T) {
	good := pipeline.ChunkRequest{Tenant: csvTenant("https://core.example.com/r"), Source: pipeline.Source{Bucket: "b", Key: "k"},
		ExecutionName: "e", Records: 10, Chunk: 3}
	tests := []struct {
		name    string
		mutate  func(*pipeline.ChunkRequest)
		wantMsg string // "" for valid
	}{
		{"valid", func(*pipeline.ChunkRequest) {}, ""},
		{"last chunk of one record", func(r *pipeline.ChunkRequest) { r.Chunk = 3 }, ""},
		{"chunk past the end", func(r *pipeline.ChunkRequest) { r.Chunk = 4 }, "chunk 4 is outside the file's 10 records"},
		{"negative chunk", func(r *pipeline.ChunkRequest) { r.Chunk = -1 }, "chunk -1 is outside"},
		{"no execution name", func(r *pipeline.ChunkRequest) { r.ExecutionName = "" }, "no executionName"},
		{"bad url", func(r *pipeline.ChunkRequest) { r.Tenant.RegisterURL = "core.example.com/r" }, "registerUrl is not an http(s) URL"},
		{"chunk size 0", func(r *pipeline.ChunkRequest) { r.Tenant.ChunkSize = 0 }, "chunkSize 0 is outside 1..1000"},
		{"bad format", func(r *pipeline.ChunkRequest) { r.Tenant.Format = "xml" }, `format "xml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good
			tt.mutate(&r)
			_, target, err := validateRequest(r)
			if tt.wantMsg == "" {
				if err != nil || target != r.Tenant.RegisterURL {
					t.Errorf("got %q, %v, want the URL and no error", target, err)
				}
				return
			}
			if source.ErrorType(err) != pipeline.ErrPermanent || !strings.Contains(err.Error(), "s3://b/k: ") || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got %s %v, want a PermanentError naming the file and containing %q", source.ErrorType(err), err, tt.wantMsg)
			}
		})
	}
}

func TestRegisterErrors(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*sourcetest.FakeS3, *fakeSecrets, *pipeline.ChunkRequest)
		wantType string
		wantMsg  string
	}{
		{"object overwritten", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) {
			s.Objects[ingest+"/k"].ETag = "new"
		},
			pipeline.ErrObjectChanged, "s3://ingest-bucket/k: the object changed after the event"},
		{"object deleted", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) { delete(s.Objects, ingest+"/k") },
			pipeline.ErrObjectChanged, "no longer exists"},
		{"versioning suspended, version null overwritten", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) {
			r.Source.VersionID = "null"
			o := s.Objects[ingest+"/k"]
			o.Versions = map[string][]byte{"null": []byte("a\n7\n8\n9\n10\n11\n12\n")}
			o.VersionETags = map[string]string{"null": "etag-2"}
		}, pipeline.ErrObjectChanged, "its ETag is no longer etag-1"},
		{"object shorter", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) {
			s.Objects[ingest+"/k"].Data = []byte("a\n1\n")
		},
			pipeline.ErrObjectChanged, "got 2 bytes of the range 2-9, want 8"},
		{"more records than the request says", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) { r.Records = 3 },
			pipeline.ErrPermanent, "chunk 0 holds more than 3 records: the manifest does not match the request"},
		{"fewer records than the request says", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) {
			s.Objects[work+"/"+r.Manifest.Key].Data = pipeline.EncodeManifest([]int64{2, 6, 14})
		}, pipeline.ErrPermanent, "chunk 0 holds 2 records, want 4"},
		{"chunk past the end", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) { r.Chunk = 2 },
			pipeline.ErrPermanent, "chunk 2 is outside the file's 6 records"},
		{"manifest missing", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) {
			r.Manifest.Key = "work/t1/other/manifest"
		},
			pipeline.ErrPermanent, "reading the manifest s3://work-bucket/work/t1/other/manifest failed"},
		{"manifest throttled", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) {
			s.GetErr = sourcetest.APIError("GetObject", 503, "SlowDown")
		},
			pipeline.ErrRetryable, "reading the manifest"},
		{"changed bytes fail validation", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) {
			s.Objects[ingest+"/k"].Data = []byte("a\n1\n\xff\n3\n4\n5\n6\n")
		}, pipeline.ErrValidation, "s3://ingest-bucket/k: chunk 0: record 2: field 1 has bytes that are not valid utf-8"},
		{"secret missing", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) {
			r.Tenant.RegisterAuthSecretARN = secretARN + "-gone"
		},
			pipeline.ErrPermanent, "fetching the registerAuthSecretArn secret failed"},
		{"secret throttled", func(s *sourcetest.FakeS3, sm *fakeSecrets, r *pipeline.ChunkRequest) {
			r.Tenant.RegisterAuthSecretARN = secretARN
			sm.err = sourcetest.APIError("GetSecretValue", 400, "ThrottlingException")
		}, pipeline.ErrRetryable, "fetching the registerAuthSecretArn secret failed"},
		{"bad url", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) {
			r.Tenant.RegisterURL = "ftp://core"
		},
			pipeline.ErrPermanent, `tenant "t1" registerUrl is not an http(s) URL`},
		{"no execution name", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) { r.ExecutionName = "" },
			pipeline.ErrPermanent, "no executionName"},
		{"bad chunk size", func(s *sourcetest.FakeS3, _ *fakeSecrets, r *pipeline.ChunkRequest) { r.Tenant.ChunkSize = 5000 },
			pipeline.ErrPermanent, "chunkSize 5000 is outside 1..1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCore(t, nil)
			s3 := sourcetest.NewFakeS3()
			tenant := csvTenant(c.srv.URL)
			tenant.ChunkSize = 4
			reqs := fixture(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, []byte("a\n1\n2\n3\n4\n5\n6\n"))
			sm := &fakeSecrets{values: map[string]string{secretARN: "x"}}
			req := reqs[0]
			tt.mutate(s3, sm, &req)
			_, err := newHandler(s3, sm).Handle(context.Background(), req)
			if got := source.ErrorType(err); got != tt.wantType || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got %s %q, want %s containing %q", got, err, tt.wantType, tt.wantMsg)
			}
			if len(c.seen) != 0 {
				t.Errorf("got %d records sent, want none", len(c.seen))
			}
		})
	}
}

// TestRegisterLogLevels: a RetryableError, which the state machine's Retry usually absorbs, is
// logged at WARN so it does not raise the ERROR-log alarm; a failure that fails the file at ERROR.
func TestRegisterLogLevels(t *testing.T) {
	tests := []struct {
		status    int
		wantLevel string
	}{
		{500, "WARN"}, {502, "WARN"}, {400, "ERROR"}, {301, "ERROR"}, {200, "INFO"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			c := newCore(t, func(int, seenRequest) int { return tt.status })
			s3 := sourcetest.NewFakeS3()
			reqs := fixture(t, s3, csvTenant(c.srv.URL), pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, []byte("a\n1\n"))
			var logs strings.Builder
			h := newHandler(s3, &fakeSecrets{})
			h.Log = slog.New(slog.NewJSONHandler(&logs, nil))
			_, _ = h.Handle(context.Background(), reqs[0])
			var line struct{ Level, Msg string }
			if err := json.Unmarshal([]byte(logs.String()), &line); err != nil {
				t.Fatalf("got log %q, want one JSON line: %v", logs.String(), err)
			}
			if line.Level != tt.wantLevel {
				t.Errorf("got level %s (%s), want %s", line.Level, line.Msg, tt.wantLevel)
			}
			if strings.Contains(logs.String(), "SECRET") {
				t.Errorf("got log %q, want no record or response contents", logs.String())
			}
		})
	}
}

// TestRegisterReadsTheManifestSplitWrote: Register reads the manifest by the version id and ETag
// that Split's PutObject answered, so a manifest written under the same key after Split (by anyone
// who may write under work/) is never read: in a versioned bucket Register reads Split's version,
// in an unversioned one If-Match fails and the chunk fails without a POST.
func TestRegisterReadsTheManifestSplitWrote(t *testing.T) {
	data := []byte("id,name\r\n1,a\r\n2,b\r\n3,c\r\n4,d\r\n5,e\r\n6,f\r\n7,g\r\n")
	for _, versioned := range []bool{true, false} {
		t.Run(fmt.Sprintf("versioned=%v", versioned), func(t *testing.T) {
			c := newCore(t, nil)
			store := sourcetest.NewFakeS3()
			store.Versioning = versioned
			src := pipeline.Source{Bucket: ingest, Key: "inbox/t1/a.csv", ETag: "etag-1"}
			reqs := fixture(t, store, csvTenant(c.srv.URL+"/register"), src, data)
			put := func(body []byte) *s3.PutObjectOutput {
				out, err := store.PutObject(context.Background(), &s3.PutObjectInput{
					Bucket: aws.String(work), Key: aws.String(reqs[0].Manifest.Key), Body: bytes.NewReader(body)})
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			// Split's write, as Split records it, then a forged manifest under the same key.
			split := put(store.Objects[work+"/"+reqs[0].Manifest.Key].Data)
			put(pipeline.EncodeManifest([]int64{0, 0, 0}))
			req := reqs[1]
			req.Manifest.VersionID, req.Manifest.ETag = aws.ToString(split.VersionId), aws.ToString(split.ETag)

			res, err := newHandler(store, &fakeSecrets{}).Handle(context.Background(), req)
			if g := store.Gets[0]; aws.ToString(g.IfMatch) != aws.ToString(split.ETag) || aws.ToString(g.VersionId) != aws.ToString(split.VersionId) {
				t.Errorf("got manifest GET version %q if-match %q, want %q and %q", aws.ToString(g.VersionId), aws.ToString(g.IfMatch),
					aws.ToString(split.VersionId), aws.ToString(split.ETag))
			}
			if versioned {
				if err != nil || res.Registered != 3 || len(c.seen) != 3 || c.seen[0].Body.RecordNumber != 4 {
					t.Fatalf("got %+v, %v, %d POSTs; want records 4-6 of Split's manifest", res, err, len(c.seen))
				}
				return
			}
			want := "the manifest s3://work-bucket/" + req.Manifest.Key + " was overwritten after Split wrote it"
			if source.ErrorType(err) != pipeline.ErrPermanent || !strings.Contains(err.Error(), want) {
				t.Errorf("got %s %v, want %s containing %q", source.ErrorType(err), err, pipeline.ErrPermanent, want)
			}
			if len(c.seen) != 0 {
				t.Errorf("got %d POSTs, want none", len(c.seen))
			}
		})
	}
}

// In a pool, Register reads the manifest and the chunk and fetches the secret with the clients of
// the execution input's tenant: the function's own clients are never used for tenant data, and
// no clients means nothing is read or sent.
func TestRegisterActsForTheInputsTenant(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refuse   bool
		wantErr  string
		wantPOST int
	}{
		{"the tenant's clients", false, "", 2},
		{"no session", true, pipeline.ErrPermanent, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, nil)
			tenantS3, tenantSecrets := sourcetest.NewFakeS3(), &fakeSecrets{values: map[string]string{secretARN: "Bearer t1"}}
			tenant := csvTenant(c.srv.URL)
			tenant.RegisterAuthSecretARN = secretARN
			reqs := fixture(t, tenantS3, tenant, pipeline.Source{Bucket: ingest, Key: "pools/p/t1/k", ETag: "etag-1"}, []byte("a\n1\n2\n"))
			reqs[0].Segment = &pipeline.Segment{Index: 0, FirstChunk: 0, LastChunk: 0} // its progress is read and written too
			own, ownSecrets := sourcetest.NewFakeS3(), &fakeSecrets{values: map[string]string{secretARN: "Bearer own"}}
			h := newHandler(own, ownSecrets)
			var asked []string
			h.ForTenant = func(id string) (*TenantClients, error) {
				asked = append(asked, id)
				if tc.refuse {
					return nil, errors.New("no session")
				}
				return &TenantClients{S3: tenantS3, Secrets: NewSecretCache(tenantSecrets)}, nil
			}
			_, err := h.Handle(context.Background(), reqs[0])
			if got := source.ErrorType(err); tc.wantErr != "" && got != tc.wantErr {
				t.Fatalf("got %v (%s), want %s", err, got, tc.wantErr)
			}
			if tc.wantErr == "" && err != nil {
				t.Fatalf("got %v, want success", err)
			}
			if len(asked) == 0 || slices.ContainsFunc(asked, func(id string) bool { return id != "t1" }) {
				t.Errorf("got sessions asked for %q, want t1's only", asked)
			}
			if ownSecrets.calls != 0 || len(own.Puts) != 0 {
				t.Errorf("got %d secret fetches and %d puts with the function's own clients, want 0", ownSecrets.calls, len(own.Puts))
			}
			if _, ok := tenantS3.Puts[work+"/"+pipeline.ProgressKey(pipeline.SiloOwner("t1"), execName, 0)]; tc.wantErr == "" && !ok {
				t.Errorf("got no progress written with t1's client, want %s", pipeline.ProgressKey(pipeline.SiloOwner("t1"), execName, 0))
			}
			if len(c.seen) != tc.wantPOST {
				t.Fatalf("got %d POSTs, want %d", len(c.seen), tc.wantPOST)
			}
			for _, s := range c.seen {
				if s.Auth != "Bearer t1" {
					t.Errorf("got Authorization %q, want t1's secret", s.Auth)
				}
			}
		})
	}
}
