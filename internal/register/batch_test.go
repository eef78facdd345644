package register

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// batchCore is a core system that keeps every batch POST's raw body.
type batchCore struct {
	mu    sync.Mutex
	seen  []batchSeen
	reply func(n int) int
	srv   *httptest.Server
}

type batchSeen struct {
	Key, Auth string
	Raw       []byte
	Body      struct {
		Tenant            string            `json:"tenant"`
		Source            map[string]string `json:"source"`
		FirstRecordNumber int64             `json:"firstRecordNumber"`
		Records           []json.RawMessage `json:"records"`
	}
}

func newBatchCore(t *testing.T, reply func(n int) int) *batchCore {
	c := &batchCore{reply: reply}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s batchSeen
		s.Key, s.Auth = r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization")
		s.Raw, _ = io.ReadAll(r.Body)
		dec := json.NewDecoder(bytes.NewReader(s.Raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s.Body); err != nil {
			t.Errorf("got a body that is not the batch format: %v", err)
		}
		c.mu.Lock()
		n := len(c.seen)
		c.seen = append(c.seen, s)
		c.mu.Unlock()
		status := http.StatusOK
		if c.reply != nil {
			status = c.reply(n)
		}
		if status >= 300 && status < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(status)
		fmt.Fprint(w, `{"echo":"SECRET-RECORD-CONTENT"}`)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// fixtureV2 stores a file and the version 2 manifest Split writes in batch mode, and returns the
// chunk requests.
func fixtureV2(t *testing.T, s3 *sourcetest.FakeS3, tenant pipeline.Tenant, src pipeline.Source, data []byte) []pipeline.ChunkRequest {
	t.Helper()
	f, err := records.FormatOf(tenant)
	if err != nil {
		t.Fatal(err)
	}
	var bs []pipeline.Boundary
	sum, err := records.SplitCut(bytes.NewReader(data), f, records.Cut{Records: tenant.ChunkSize, Bytes: int64(tenant.BatchBytes())}, func(b pipeline.Boundary) error {
		bs = append(bs, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s3.Put(src.Bucket, src.Key, &sourcetest.Object{Data: data, ETag: src.ETag})
	manifest := pipeline.Location{Bucket: work, Key: pipeline.ManifestKey(pipeline.SiloOwner(tenant.ID), execName), Version: pipeline.ManifestV2}
	s3.Put(work, manifest.Key, &sourcetest.Object{Data: pipeline.EncodeManifestV2(bs)})
	var reqs []pipeline.ChunkRequest
	for i := range sum.Chunks {
		reqs = append(reqs, pipeline.ChunkRequest{Tenant: tenant, Source: src, ExecutionName: execName,
			Manifest: manifest, Records: sum.Records, Header: sum.Header, Chunk: i})
	}
	return reqs
}

func batchTenant(url string) pipeline.Tenant {
	return pipeline.Tenant{Tenant: spec.Tenant{ID: "t1", Format: "csv", Encoding: "utf-8", ChunkSize: 1000, RegisterURL: url, RegisterMode: "batch", MaxBatchBytes: 1024}}
}

// batchRows is a CSV file of n records; each is {"id":"<4 digits>","v":"SECRET <33 x>"}: 60
// bytes as JSON, so 1,024 bytes of records hold 16 of them.
func batchRows(n int) []byte {
	var b strings.Builder
	b.WriteString("id,v\n")
	for i := range n {
		fmt.Fprintf(&b, "%04d,SECRET %s\n", i+1, strings.Repeat("x", 33))
	}
	return []byte(b.String())
}

func TestBatchWireFormat(t *testing.T) {
	c := newBatchCore(t, nil)
	s3 := sourcetest.NewFakeS3()
	src := pipeline.Source{Bucket: ingest, Key: "inbox/t1/b.csv", VersionID: "", ETag: "etag-1"}
	reqs := fixtureV2(t, s3, batchTenant(c.srv.URL), src, batchRows(40))
	if len(reqs) != 3 {
		t.Fatalf("got %d chunks, want 3 (16, 16 and 8 records)", len(reqs))
	}
	h := newHandler(s3, &fakeSecrets{})
	var next int64 = 1
	for i, req := range reqs {
		res, err := h.Handle(context.Background(), req)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if len(c.seen) != i+1 {
			t.Fatalf("chunk %d: got %d POSTs in all, want one per chunk", i, len(c.seen))
		}
		s := c.seen[i]
		if want := fmt.Sprintf("%s-c%d", execName, i); s.Key != want {
			t.Errorf("chunk %d: got Idempotency-Key %q, want %q", i, s.Key, want)
		}
		if s.Body.Tenant != "t1" || !reflect.DeepEqual(s.Body.Source, map[string]string{"bucket": ingest, "key": "inbox/t1/b.csv"}) {
			t.Errorf("chunk %d: got tenant %q source %v", i, s.Body.Tenant, s.Body.Source)
		}
		if s.Body.FirstRecordNumber != next {
			t.Errorf("chunk %d: got firstRecordNumber %d, want %d", i, s.Body.FirstRecordNumber, next)
		}
		for j, r := range s.Body.Records {
			var rec map[string]string
			if err := json.Unmarshal(r, &rec); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%04d", next+int64(j)); rec["id"] != want {
				t.Errorf("chunk %d record %d: got id %q, want %q (file order)", i, j, rec["id"], want)
			}
		}
		// The "records" array as it went over the wire, cut out of the raw body.
		raw := string(s.Raw)
		arr := raw[strings.Index(raw, `"records":`)+len(`"records":`) : len(raw)-1]
		if len(arr) > 1024 {
			t.Errorf("chunk %d: got %d bytes of records, want at most maxBatchBytes 1024", i, len(arr))
		}
		if res.Registered != int64(len(s.Body.Records)) {
			t.Errorf("chunk %d: got %d registered, want %d", i, res.Registered, len(s.Body.Records))
		}
		next += int64(len(s.Body.Records))
	}
	if next != 41 {
		t.Errorf("got records 1..%d registered, want 1..40", next-1)
	}
}

// TestBatchTrustsTheManifest: with a version 2 manifest the chunk's records come from the
// manifest, not from chunk × chunkSize: chunk 1 is records 17..32 although chunkSize is 1,000.
func TestBatchTrustsTheManifest(t *testing.T) {
	c := newBatchCore(t, nil)
	s3 := sourcetest.NewFakeS3()
	reqs := fixtureV2(t, s3, batchTenant(c.srv.URL), pipeline.Source{Bucket: ingest, Key: "k", ETag: "e"}, batchRows(40))
	req := reqs[1]
	req.Records = 5 // a request that, read as version 1, would hold no chunk 1 at all
	if _, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := c.seen[0].Body; got.FirstRecordNumber != 17 || len(got.Records) != 16 {
		t.Errorf("got records %d+%d, want 17+16", got.FirstRecordNumber, len(got.Records))
	}
	req.Chunk = 3 // past the manifest's end: 416
	if _, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), req); source.ErrorType(err) != pipeline.ErrPermanent {
		t.Errorf("chunk past the end: got %v, want PermanentError", err)
	}
}

func TestBatchStatusClasses(t *testing.T) {
	for _, tc := range []struct {
		status   int
		wantType string // "" for success
		wantMsg  string
	}{
		{200, "", ""}, {201, "", ""}, {202, "", ""}, {204, "", ""}, {409, "", ""},
		{408, pipeline.ErrRetryable, "answered 408 Request Timeout"},
		{500, pipeline.ErrRetryable, "answered 500"}, {502, pipeline.ErrRetryable, "answered 502"},
		{504, pipeline.ErrRetryable, "answered 504"},
		{301, pipeline.ErrPermanent, `answered 301 Moved Permanently with Location "/elsewhere": redirects are never followed`},
		{302, pipeline.ErrPermanent, "answered 302"}, {303, pipeline.ErrPermanent, "answered 303"},
		{307, pipeline.ErrPermanent, "answered 307"}, {308, pipeline.ErrPermanent, "answered 308"},
		{400, pipeline.ErrPermanent, "rejected it with 400 Bad Request"}, {401, pipeline.ErrPermanent, "rejected it with 401"},
		{403, pipeline.ErrPermanent, "rejected it with 403"}, {404, pipeline.ErrPermanent, "rejected it with 404"},
		{413, pipeline.ErrPermanent, "rejected it with 413"}, {422, pipeline.ErrPermanent, "rejected it with 422"},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			c := newBatchCore(t, func(int) int { return tc.status })
			s3 := sourcetest.NewFakeS3()
			reqs := fixtureV2(t, s3, batchTenant(c.srv.URL), pipeline.Source{Bucket: ingest, Key: "k.csv", ETag: "e"}, batchRows(20))
			res, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), reqs[1])
			if len(c.seen) != 1 {
				t.Fatalf("got %d POSTs, want 1", len(c.seen))
			}
			if tc.wantType == "" {
				if err != nil || res.Registered != 4 {
					t.Errorf("got %v, %d registered, want success with 4", err, res.Registered)
				}
				return
			}
			if got := source.ErrorType(err); got != tc.wantType {
				t.Fatalf("got %s (%v), want %s", got, err, tc.wantType)
			}
			want := "s3://ingest-bucket/k.csv: chunk 1 (records 17-20): the core system " + tc.wantMsg
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("got %q, want it to start with %q", err, want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("got %q, want no record or response contents", err)
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		s3 := sourcetest.NewFakeS3()
		reqs := fixtureV2(t, s3, batchTenant(url), pipeline.Source{Bucket: ingest, Key: "k.csv", ETag: "e"}, batchRows(3))
		_, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), reqs[0])
		if source.ErrorType(err) != pipeline.ErrRetryable || !strings.Contains(err.Error(), "chunk 0 (records 1-3): the core system did not answer") {
			t.Errorf("got %v (%s), want a RetryableError naming the chunk", err, source.ErrorType(err))
		}
	})
}

// TestBatchRetryIsIdentical: the state machine's retry of a chunk after a 502 sends the same key
// and the same body, and so does a fresh execution environment (redrive).
func TestBatchRetryIsIdentical(t *testing.T) {
	c := newBatchCore(t, func(n int) int {
		if n == 0 {
			return 502
		}
		return 200
	})
	s3 := sourcetest.NewFakeS3()
	reqs := fixtureV2(t, s3, batchTenant(c.srv.URL), pipeline.Source{Bucket: ingest, Key: "k.csv", ETag: "e"}, batchRows(20))
	if _, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), reqs[1]); source.ErrorType(err) != pipeline.ErrRetryable {
		t.Fatalf("first attempt: got %v, want RetryableError", err)
	}
	if _, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), reqs[1]); err != nil {
		t.Fatalf("retry: got %v", err)
	}
	if c.seen[0].Key != execName+"-c1" || c.seen[1].Key != c.seen[0].Key || !bytes.Equal(c.seen[0].Raw, c.seen[1].Raw) {
		t.Errorf("got keys %q and %q, bodies equal %v; want the same key %q and body twice", c.seen[0].Key, c.seen[1].Key, bytes.Equal(c.seen[0].Raw, c.seen[1].Raw), execName+"-c1")
	}
}

func TestBatchSecretRotation(t *testing.T) {
	c := newBatchCore(t, nil)
	c.reply = func(n int) int {
		if c.seen[n].Auth != "new" {
			return 401
		}
		return 200
	}
	sm := &fakeSecrets{values: map[string]string{secretARN: "old"}}
	s3 := sourcetest.NewFakeS3()
	tenant := batchTenant(c.srv.URL)
	tenant.RegisterAuthSecretARN = secretARN
	reqs := fixtureV2(t, s3, tenant, pipeline.Source{Bucket: ingest, Key: "k.csv", ETag: "e"}, batchRows(3))
	h := newHandler(s3, sm)
	if _, err := h.Secrets.Get(context.Background(), secretARN); err != nil {
		t.Fatal(err)
	}
	sm.values[secretARN] = "new"
	if _, err := h.Handle(context.Background(), reqs[0]); err != nil {
		t.Fatalf("got %v, want success after refetching the rotated secret", err)
	}
	if len(c.seen) != 2 || c.seen[1].Key != c.seen[0].Key {
		t.Errorf("got %d POSTs, want 2 with one key (a 401, then the resend)", len(c.seen))
	}
}

func TestValidateRequestSinks(t *testing.T) {
	base := pipeline.ChunkRequest{Source: pipeline.Source{Bucket: "b", Key: "k", EventTime: "2026-11-30T12:00:00Z"}, ExecutionName: "e", Records: 10, Chunk: 3}
	for _, tc := range []struct {
		name    string
		tenant  pipeline.Tenant
		mutate  func(*pipeline.ChunkRequest)
		target  string
		wantMsg string // "" for valid
	}{
		{"batch", batchTenant("https://core.example.com/r"), nil, "https://core.example.com/r", ""},
		{"version 2: the chunk index is not checked against chunkSize", batchTenant("https://core.example.com/r"),
			func(r *pipeline.ChunkRequest) { r.Manifest.Version = 2; r.Chunk = 50 }, "https://core.example.com/r", ""},
		{"version 2, negative chunk", batchTenant("https://core.example.com/r"),
			func(r *pipeline.ChunkRequest) { r.Manifest.Version = 2; r.Chunk = -1 }, "", "chunk -1 is outside the file"},
		{"unknown manifest version", batchTenant("https://core.example.com/r"),
			func(r *pipeline.ChunkRequest) { r.Manifest.Version = 3 }, "", "manifest version 3 is not 1 or 2"},
		{"dynamodb needs no registerUrl", ddbTenant("csv", "id"), nil, "", ""},
		{"dynamodb without a table", func() pipeline.Tenant { t := ddbTenant("csv", "id"); t.DynamoDB.Table = ""; return t }(), nil, "", "dynamodb needs a table"},
		{"dynamodb with three keys", ddbTenant("csv", "a", "b", "c"), nil, "", "1 or 2 key fields"},
		{"dynamodb, bad event time", ddbTenant("csv", "id"), func(r *pipeline.ChunkRequest) { r.Source.EventTime = "noon" }, "", "cannot order this file's records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			r.Tenant = tc.tenant
			r.Tenant.ChunkSize = 3
			if tc.mutate != nil {
				tc.mutate(&r)
			}
			_, target, err := validateRequest(r)
			if tc.wantMsg == "" {
				if err != nil || target != tc.target {
					t.Errorf("got %q, %v, want %q and no error", target, err, tc.target)
				}
				return
			}
			if source.ErrorType(err) != pipeline.ErrPermanent || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("got %s %v, want a PermanentError containing %q", source.ErrorType(err), err, tc.wantMsg)
			}
		})
	}
}
