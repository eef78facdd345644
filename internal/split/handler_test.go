package split

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
	"github.com/example/tenantpipeline/spec"
	"io"
	"log/slog"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
)

const (
	ingest = "ingest-bucket"
	work   = "work-bucket"
)

func tenant() pipeline.Tenant {
	return pipeline.Tenant{Tenant: spec.Tenant{ID: "t1", Prefix: "inbox/t1/", Format: "csv", Encoding: "utf-8", ChunkSize: 100}}
}

func csvRows(n int) []byte {
	var b strings.Builder
	b.WriteString("id,name\r\n")
	for i := range n {
		fmt.Fprintf(&b, "%d,\"名前 %d\"\r\n", i+1, i+1)
	}
	return []byte(b.String())
}

func newHandler(s3 *sourcetest.FakeS3) *Handler {
	return &Handler{S3: s3, WorkBucket: work, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
}

func TestSplit(t *testing.T) {
	keys := []string{
		"inbox/t1/plain.csv",
		"inbox/t1/red flower.csv",
		"inbox/t1/a+b%20c.csv",
		"inbox/t1/請求書 ①.csv",
	}
	for _, key := range keys {
		for _, versioned := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/versioned=%v", key, versioned), func(t *testing.T) {
				s3 := sourcetest.NewFakeS3()
				s3.Versioning = versioned
				data := csvRows(250)
				src := pipeline.Source{Bucket: ingest, Key: key, ETag: "abc123", Size: int64(len(data))}
				obj := &sourcetest.Object{Data: []byte("other content"), ETag: "abc123"}
				if versioned {
					src.VersionID = "v1"
					obj.Versions = map[string][]byte{"v1": data}
					obj.VersionETags = map[string]string{"v1": "abc123"}
					obj.ETag = "changed-since"
				} else {
					obj.Data = data
				}
				s3.Put(ingest, key, obj)
				res, err := newHandler(s3).Handle(context.Background(), pipeline.SplitRequest{Tenant: tenant(), Source: src, ExecutionName: "exec-1"})
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				// The manifest is pinned to the write Split made: its ETag, and its version id in a
				// versioned bucket (the fake numbers versions pv1, pv2 …).
				manifestLoc := pipeline.Location{Bucket: work, Key: "work/t1/exec-1/manifest"}
				manifestLoc.ETag = fmt.Sprintf(`"%x"`, md5.Sum(s3.Puts[work+"/work/t1/exec-1/manifest"]))
				if versioned {
					manifestLoc.VersionID = "pv1"
				}
				want := pipeline.SplitResult{
					Source:   src,
					Manifest: manifestLoc,
					Records:  250, Chunks: 3, Header: []string{"id", "name"},
					Segments: []pipeline.Segment{{Index: 0, FirstChunk: 0, LastChunk: 2}},
					// The version Split read, not the object's current bytes.
					SHA256: fmt.Sprintf("%x", sha256.Sum256(data)),
					// One segment: the file execution runs its Register loop from chunk 0.
					Cursor: &pipeline.Cursor{Chunk: 0},
				}
				if !reflect.DeepEqual(res, want) {
					t.Errorf("got %+v, want %+v", res, want)
				}
				if len(s3.Gets) != 1 {
					t.Fatalf("got %d GetObject calls, want 1", len(s3.Gets))
				}
				get := s3.Gets[0]
				if aws.ToString(get.Key) != key {
					t.Errorf("got key %q, want the raw key %q", aws.ToString(get.Key), key)
				}
				if versioned && (aws.ToString(get.VersionId) != "v1" || aws.ToString(get.IfMatch) != `"abc123"`) {
					t.Errorf("got VersionId %q IfMatch %q, want v1 and \"abc123\"", aws.ToString(get.VersionId), aws.ToString(get.IfMatch))
				}
				if !versioned && (get.VersionId != nil || aws.ToString(get.IfMatch) != `"abc123"`) {
					t.Errorf("got VersionId %q IfMatch %q, want none and \"abc123\"", aws.ToString(get.VersionId), aws.ToString(get.IfMatch))
				}
				manifest := s3.Puts[work+"/work/t1/exec-1/manifest"]
				if len(s3.Puts) != 1 || len(manifest) != 4*8 {
					t.Fatalf("got puts %d, manifest %d bytes, want one manifest of 32 bytes", len(s3.Puts), len(manifest))
				}
				// Chunk 1 is records 101..200: its range must start with record 101's line.
				start, end, err := pipeline.DecodeChunkRange(manifest[8:24])
				if err != nil {
					t.Fatal(err)
				}
				if got := string(data[start:end]); !strings.HasPrefix(got, "101,") || !strings.HasSuffix(got, "\"名前 200\"\r\n") {
					t.Errorf("got chunk 1 = %.20q…, want records 101..200", got)
				}
			})
		}
	}
}

// TestSplitKeyForms: an EventBridge event may carry the key raw or form-encoded (as classic S3
// notifications do: "red flower.csv" → "red+flower.csv"). Split reads the event's object either
// way and returns the key S3 stores in its result's source, which Register then reads. The bucket
// also holds the objects that guessing the form from the characters would read instead.
func TestSplitKeyForms(t *testing.T) {
	formEncode := func(key string) string {
		parts := strings.Split(key, "/")
		for i, p := range parts {
			parts[i] = url.QueryEscape(p)
		}
		return strings.Join(parts, "/")
	}
	keys := []string{"inbox/t1/red flower.csv", "inbox/t1/a+b.csv", "inbox/t1/a b.csv", "inbox/t1/100%.csv", "inbox/t1/100%25.csv", "inbox/t1/請求書 ①.csv"}
	s3 := sourcetest.NewFakeS3()
	srcs := map[string]pipeline.Source{}
	for i, key := range keys {
		// Each object has a different number of records, so the result tells which one was read.
		data := csvRows(10 + i)
		src := pipeline.Source{Bucket: ingest, Key: key, VersionID: fmt.Sprint("v", i), ETag: fmt.Sprint("e", i), Size: int64(len(data))}
		s3.Put(ingest, key, &sourcetest.Object{Versions: map[string][]byte{src.VersionID: data}, VersionETags: map[string]string{src.VersionID: src.ETag}})
		srcs[key] = src
	}
	for i, key := range keys {
		for form, eventKey := range map[string]string{"raw": key, "form-encoded": formEncode(key)} {
			t.Run(key+"/"+form, func(t *testing.T) {
				event := srcs[key]
				event.Key = eventKey
				res, err := newHandler(s3).Handle(context.Background(), pipeline.SplitRequest{Tenant: tenant(), Source: event, ExecutionName: "exec"})
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				if res.Source != srcs[key] {
					t.Errorf("got source %+v, want %+v", res.Source, srcs[key])
				}
				if want := int64(10 + i); res.Records != want {
					t.Errorf("got %d records, want %d (the object of %q)", res.Records, want, key)
				}
			})
		}
	}
}

func TestSplitEmptyFile(t *testing.T) {
	for _, data := range []string{"", "id,name\r\n"} {
		s3 := sourcetest.NewFakeS3()
		s3.Put(ingest, "inbox/t1/k", &sourcetest.Object{Data: []byte(data), ETag: "e"})
		res, err := newHandler(s3).Handle(context.Background(), pipeline.SplitRequest{Tenant: tenant(), Source: pipeline.Source{Bucket: ingest, Key: "inbox/t1/k", ETag: "e"}, ExecutionName: "x"})
		if err != nil {
			t.Fatalf("%q: got error %v, want none", data, err)
		}
		if res.Chunks != 0 || res.Records != 0 || res.Segments == nil || len(res.Segments) != 0 {
			t.Errorf("%q: got %+v, want zero chunks and an empty (not null) segments list", data, res)
		}
		if got := len(s3.Puts[work+"/work/t1/x/manifest"]); got != 8 {
			t.Errorf("%q: got a manifest of %d bytes, want 8", data, got)
		}
	}
}

func TestSplitErrors(t *testing.T) {
	const key = "inbox/t1/売上 a+b.csv"
	tests := []struct {
		name     string
		mutate   func(*sourcetest.FakeS3, *pipeline.SplitRequest, *Handler)
		wantType string
		wantMsg  string
	}{
		{"etag changed", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) { r.Source.ETag = "old" },
			pipeline.ErrObjectChanged, "s3://ingest-bucket/inbox/t1/売上 a+b.csv: the object changed after the event"},
		{"version gone", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) { r.Source.VersionID = "v-deleted" },
			pipeline.ErrObjectChanged, "no longer exists"},
		{"object gone", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) { delete(s.Objects, ingest+"/"+key) },
			pipeline.ErrObjectChanged, "no longer exists"},
		{"versioning suspended, version null overwritten", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) {
			r.Source.VersionID = "null"
			o := s.Objects[ingest+"/"+key]
			o.Versions = map[string][]byte{"null": csvRows(5)}
			o.VersionETags = map[string]string{"null": "e2"}
		}, pipeline.ErrObjectChanged, "the object changed after the event: its ETag is no longer e1"},
		{"object gone, no s3:ListBucket", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) {
			delete(s.Objects, ingest+"/"+key)
			s.NoListBucket = true
		}, pipeline.ErrPermanent, "without s3:ListBucket"},
		{"other bucket", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) { r.Source.Bucket = "other" },
			pipeline.ErrObjectChanged, "s3://other/"},
		{"access denied", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) {
			s.GetErr = sourcetest.APIError("GetObject", 403, "AccessDenied")
		},
			pipeline.ErrPermanent, "access denied reading the object"},
		{"throttled", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) {
			s.GetErr = sourcetest.APIError("GetObject", 503, "SlowDown")
		},
			pipeline.ErrRetryable, "reading the object failed"},
		{"invalid file", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) {
			s.Objects[ingest+"/"+key].Data = []byte("id,name\n1,SECRET\n2\n")
		}, pipeline.ErrValidation, "s3://ingest-bucket/inbox/t1/売上 a+b.csv: line 3: record has 1 fields, the header has 2"},
		{"header too wide", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) {
			s.Objects[ingest+"/"+key].Data = []byte(strings.Repeat("h", pipeline.MaxHeaderBytes) + "\nSECRET\n")
		}, pipeline.ErrValidation, "s3://ingest-bucket/inbox/t1/売上 a+b.csv: line 1: the header is 16388 bytes as JSON, over the 16384-byte limit"},
		{"over its upload URL's bound", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) {
			s.Objects[ingest+"/"+key].Metadata = map[string]string{pipeline.MaxBytesMetadata: "1024"}
		}, pipeline.ErrValidation, fmt.Sprintf("s3://ingest-bucket/inbox/t1/売上 a+b.csv: the object has %d bytes, more than the 1024 its upload URL allowed", len(csvRows(300)))},
		{"an upload URL's bound that is no number", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) {
			s.Objects[ingest+"/"+key].Metadata = map[string]string{pipeline.MaxBytesMetadata: "1k"}
		}, pipeline.ErrValidation, `its upload's x-amz-meta-max-bytes "1k" is not a number of bytes`},
		{"too many chunks", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, h *Handler) { h.MaxChunks = 2 },
			pipeline.ErrValidation, "the file is too large: it has more than 2 chunks of 100 records"},
		{"read fails", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) { s.FailRead = 1000 },
			pipeline.ErrRetryable, "reading the object failed"},
		{"manifest write fails", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) {
			s.PutErr = sourcetest.APIError("PutObject", 503, "SlowDown")
		},
			pipeline.ErrRetryable, "writing the manifest s3://work-bucket/work/t1/exec/manifest failed"},
		{"manifest write denied", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) {
			s.PutErr = sourcetest.APIError("PutObject", 403, "AccessDenied")
		},
			pipeline.ErrPermanent, "writing the manifest"},
		{"no pin", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) { r.Source.ETag = "" },
			pipeline.ErrPermanent, "neither a versionId nor an etag"},
		{"bad chunk size", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) { r.Tenant.ChunkSize = 0 },
			pipeline.ErrPermanent, "chunkSize 0 is outside 1..1000"},
		{"bad encoding", func(s *sourcetest.FakeS3, r *pipeline.SplitRequest, _ *Handler) { r.Tenant.Encoding = "euc-jp" },
			pipeline.ErrPermanent, `encoding "euc-jp" is not`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s3 := sourcetest.NewFakeS3()
			s3.Put(ingest, key, &sourcetest.Object{Data: csvRows(300), ETag: "e1"})
			req := pipeline.SplitRequest{Tenant: tenant(), Source: pipeline.Source{Bucket: ingest, Key: key, ETag: "e1"}, ExecutionName: "exec"}
			h := newHandler(s3)
			tt.mutate(s3, &req, h)
			_, err := h.Handle(context.Background(), req)
			if err == nil {
				t.Fatal("got no error")
			}
			if got := source.ErrorType(err); got != tt.wantType {
				t.Errorf("got error type %s (%v), want %s", got, err, tt.wantType)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got %q, want it to contain %q", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("got %q, want no record contents", err)
			}
			if tt.wantType != pipeline.ErrRetryable && tt.wantType != pipeline.ErrPermanent && len(s3.Puts) != 0 {
				t.Errorf("got %d manifests written, want none for a failed file", len(s3.Puts))
			}
		})
	}
}

// TestErrorsAreUnwrapped pins that each named type is returned as itself: the Lambda runtime
// reports the dynamic type's name, so a wrapper would hide it from the state machine's Retry.
func TestErrorsAreUnwrapped(t *testing.T) {
	s3 := sourcetest.NewFakeS3()
	s3.Put(ingest, "inbox/t1/k", &sourcetest.Object{Data: []byte("a\n\xff\n"), ETag: "e"})
	_, err := newHandler(s3).Handle(context.Background(), pipeline.SplitRequest{Tenant: tenant(), Source: pipeline.Source{Bucket: ingest, Key: "inbox/t1/k", ETag: "e"}, ExecutionName: "x"})
	if _, ok := err.(*pipeline.ValidationError); !ok {
		t.Fatalf("got %T, want *pipeline.ValidationError", err)
	}
	var ve *pipeline.ValidationError
	if !errors.As(err, &ve) || ve.Message != "s3://ingest-bucket/inbox/t1/k: line 2: field 1 has bytes that are not valid utf-8" {
		t.Errorf("got %q", err)
	}
}

// TestStateSizeFor2MRecords pins the arithmetic of docs/data-path.md: a 2,000,000-record file
// returns a Split result far below the 256 KiB state payload limit, and its segments keep every
// execution far below 25,000 history events.
func TestStateSizeFor2MRecords(t *testing.T) {
	header := []string{"id", "name", "email", "city", "amount", "qty", "sku", "date", "note", "status"}
	const records = 2_000_000
	chunks := records / pipeline.DefaultChunkSize
	// S3 keys are at most 1,024 bytes (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
	res := pipeline.SplitResult{
		Source: pipeline.Source{Bucket: strings.Repeat("b", 63), Key: strings.Repeat("k", 1024), VersionID: strings.Repeat("v", 32),
			ETag: strings.Repeat("e", 32) + "-10000", Size: 1 << 40, Sequencer: strings.Repeat("0", 18)},
		Manifest: pipeline.Location{Bucket: strings.Repeat("b", 63), Key: pipeline.ManifestKey(pipeline.SiloOwner(strings.Repeat("t", 64)), strings.Repeat("e", 80))},
		Records:  records, Chunks: chunks, Header: header, Segments: pipeline.Segments(chunks),
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 4096 {
		t.Errorf("got a Split result of %d bytes, want at most 4 KiB", len(b))
	}
	t.Logf("Split result: %d bytes", len(b))
	if got := len(res.Segments); got != 20 {
		t.Errorf("got %d segments, want 20", got)
	}
	// ~7 events per Register iteration plus a handful per segment execution.
	if perSegment := 7*pipeline.SegmentChunks + 20; perSegment > 25000 {
		t.Errorf("got %d history events per segment execution, want at most 25,000", perSegment)
	}
	if manifest := len(pipeline.EncodeManifest(make([]int64, chunks+1))); manifest != 160_008 {
		t.Errorf("got a manifest of %d bytes, want 160,008", manifest)
	}
}

// TestSplitLogLevels: a RetryableError, which the state machine's Retry usually absorbs, is logged
// at WARN so it does not raise the ERROR-log alarm; a failure that fails the file at ERROR.
func TestSplitLogLevels(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*sourcetest.FakeS3)
		wantLevel string
	}{
		{"retryable", func(s *sourcetest.FakeS3) { s.GetErr = sourcetest.APIError("GetObject", 503, "SlowDown") }, "WARN"},
		{"permanent", func(s *sourcetest.FakeS3) { s.GetErr = sourcetest.APIError("GetObject", 403, "AccessDenied") }, "ERROR"},
		{"validation", func(s *sourcetest.FakeS3) { s.Objects[ingest+"/inbox/t1/k"].Data = []byte("a\n\xff\n") }, "ERROR"},
		{"success", func(*sourcetest.FakeS3) {}, "INFO"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s3 := sourcetest.NewFakeS3()
			s3.Put(ingest, "inbox/t1/k", &sourcetest.Object{Data: csvRows(3), ETag: "e"})
			tt.mutate(s3)
			var logs strings.Builder
			h := newHandler(s3)
			h.Log = slog.New(slog.NewJSONHandler(&logs, nil))
			_, _ = h.Handle(context.Background(), pipeline.SplitRequest{Tenant: tenant(), Source: pipeline.Source{Bucket: ingest, Key: "inbox/t1/k", ETag: "e"}, ExecutionName: "x"})
			var line struct{ Level, Msg string }
			if err := json.Unmarshal([]byte(logs.String()), &line); err != nil {
				t.Fatalf("got log %q, want one JSON line: %v", logs.String(), err)
			}
			if line.Level != tt.wantLevel {
				t.Errorf("got level %s (%s), want %s", line.Level, line.Msg, tt.wantLevel)
			}
		})
	}
}

// TestSplitRefusesKeysOutsidePrefix: Split reads and registers only an object under its tenant's
// prefix, whichever form of the event's key resolves it. Tenant "plussy" lies under "inbox/a+b/"
// and tenant "spacey" under "inbox/a b/": the form-decoded key of plussy's event key
// "inbox/a+b/f.csv" is spacey's object, which must never become plussy's file.
func TestSplitRefusesKeysOutsidePrefix(t *testing.T) {
	const plussy = "inbox/a+b/"
	tests := []struct {
		name     string
		prefix   string
		eventKey string
		stored   string // the key the event's object is stored under
		wantKey  string // the key read; "" for a refusal
	}{
		{"raw key under the prefix", plussy, "inbox/a+b/f.csv", "inbox/a+b/f.csv", "inbox/a+b/f.csv"},
		{"decoded key under the prefix: + is a space", "inbox/t1/", "inbox/t1/a+b.csv", "inbox/t1/a b.csv", "inbox/t1/a b.csv"},
		{"decoded key under the prefix: %20 is a space", "inbox/t1/", "inbox/t1/a%20b.csv", "inbox/t1/a b.csv", "inbox/t1/a b.csv"},
		{"decoded key under the prefix: %2B is a +", "inbox/t1/", "inbox/t1/a%2Bb.csv", "inbox/t1/a+b.csv", "inbox/t1/a+b.csv"},
		{"raw %20 stored as given", "inbox/t1/", "inbox/t1/a%20b.csv", "inbox/t1/a%20b.csv", "inbox/t1/a%20b.csv"},
		{"raw key outside the prefix, decoded under it: only the decoded is read", "inbox/t1/", "inbox%2Ft1%2Fa.csv", "inbox/t1/a.csv", "inbox/t1/a.csv"},
		{"decoded key under another prefix: + as a space", plussy, "inbox/a+b/f.csv", "inbox/a b/f.csv", ""},
		{"decoded key under another prefix: %20", "inbox/a%20b/", "inbox/a%20b/f.csv", "inbox/a b/f.csv", ""},
		{"decoded key under another prefix: %2B", "inbox/a%2Bb/", "inbox/a%2Bb/f.csv", "inbox/a+b/f.csv", ""},
		{"raw key under another prefix", "inbox/t1/", "inbox/t2/f.csv", "inbox/t2/f.csv", ""},
		{"no prefix", "", "inbox/t1/f.csv", "inbox/t1/f.csv", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s3 := sourcetest.NewFakeS3()
			s3.Put(ingest, tt.stored, &sourcetest.Object{Data: csvRows(3), ETag: "e1"})
			ten := tenant()
			ten.Prefix = tt.prefix
			res, err := newHandler(s3).Handle(context.Background(), pipeline.SplitRequest{Tenant: ten,
				Source: pipeline.Source{Bucket: ingest, Key: tt.eventKey, ETag: "e1"}, ExecutionName: "exec"})
			for _, g := range s3.Gets {
				if k := aws.ToString(g.Key); !strings.HasPrefix(k, tt.prefix) || tt.prefix == "" {
					t.Errorf("got a read of %q, want no read outside the prefix %q", k, tt.prefix)
				}
			}
			if tt.wantKey != "" {
				if err != nil || res.Source.Key != tt.wantKey || res.Records != 3 {
					t.Fatalf("got key %q, %d records, error %v; want key %q, 3 records", res.Source.Key, res.Records, err, tt.wantKey)
				}
				return
			}
			if _, ok := err.(*pipeline.KeyOutsidePrefixError); !ok {
				t.Fatalf("got %T %v, want *pipeline.KeyOutsidePrefixError, unwrapped", err, err)
			}
			if !strings.Contains(err.Error(), strconv.Quote(tt.eventKey)) || !strings.Contains(err.Error(), strconv.Quote(tt.prefix)) {
				t.Errorf("got %q, want the key %q and the prefix %q named", err, tt.eventKey, tt.prefix)
			}
			if len(s3.Puts) != 0 {
				t.Errorf("got %d manifests written, want none: nothing of a refused object is registered", len(s3.Puts))
			}
		})
	}
}

// In a pool, Split reads and writes with the client of the execution input's tenant, never the
// function's own and never one chosen by the object's key; no client, no read.
func TestSplitActsForTheInputsTenant(t *testing.T) {
	data := csvRows(3)
	for _, tc := range []struct {
		name    string
		key     string
		refuse  bool
		wantErr string
	}{
		{"the tenant's own key", "pools/p/t1/a.csv", false, ""},
		{"another tenant's key is refused, still by t1's session", "pools/p/t2/a.csv", false, "KeyOutsidePrefixError"},
		{"no session", "pools/p/t1/a.csv", true, "PermanentError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own, tenantS3 := sourcetest.NewFakeS3(), sourcetest.NewFakeS3()
			tenantS3.Put(ingest, tc.key, &sourcetest.Object{Data: data, ETag: "e"})
			var asked []string
			h := newHandler(own)
			h.ForTenant = func(id string) (ObjectAPI, error) {
				asked = append(asked, id)
				if tc.refuse {
					return nil, errors.New("no session")
				}
				return tenantS3, nil
			}
			ten := tenant()
			ten.Prefix = "pools/p/t1/"
			_, err := h.Handle(context.Background(), pipeline.SplitRequest{Tenant: ten,
				Source: pipeline.Source{Bucket: ingest, Key: tc.key, ETag: "e", Size: int64(len(data))}, ExecutionName: "exec-1"})
			if got := fmt.Sprintf("%T", err); tc.wantErr != "" && !strings.Contains(got, tc.wantErr) {
				t.Fatalf("got error %T %v, want %s", err, err, tc.wantErr)
			}
			if tc.wantErr == "" && err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !reflect.DeepEqual(asked, []string{"t1"}) {
				t.Errorf("got sessions asked for %q, want [t1] (the execution input's tenant)", asked)
			}
			if len(own.Puts) != 0 {
				t.Errorf("got %d puts with the function's own client, want 0", len(own.Puts))
			}
			if _, ok := tenantS3.Puts[work+"/work/t1/exec-1/manifest"]; tc.wantErr == "" && !ok {
				t.Errorf("got puts %v, want the manifest written with t1's client", keysOf(tenantS3.Puts))
			}
		})
	}
}

func keysOf(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// Invoke refuses a Split or results request for a tenant the function was not deployed for, or
// whose core system URLs differ from the deployed settings', before any session is asked for or
// object read; the deployed settings' request runs.
func TestInvokeRefusesSettingsNotDeployed(t *testing.T) {
	data := csvRows(3)
	deployedTenant := tenant()
	deployedTenant.Prefix = "pools/p/t1/"
	deployedTenant.CoreSystem = &pipeline.CoreSystem{Name: "core", CompleteURL: "https://core.example.com/done"}
	settings := func(id string) (pipeline.Tenant, error) {
		if id != deployedTenant.ID {
			return pipeline.Tenant{}, fmt.Errorf("tenant %q is not a tenant of pool p", id)
		}
		return deployedTenant, nil
	}
	src := pipeline.Source{Bucket: ingest, Key: "pools/p/t1/a.csv", ETag: "e", Size: int64(len(data))}
	for _, tc := range []struct {
		name string
		kind string
		edit func(*pipeline.Tenant)
		want string // "" for accepted
	}{
		{"split, the deployed settings", "", nil, ""},
		{"split, another completeUrl", "", func(t *pipeline.Tenant) {
			t.CoreSystem = &pipeline.CoreSystem{Name: "core", CompleteURL: "https://evil.example.net/"}
		},
			`the request's coreSystem.completeUrl "https://evil.example.net/"`},
		{"split, a tenant of no deployed settings", "", func(t *pipeline.Tenant) { t.ID = "acme" }, `tenant "acme" is not a tenant of pool p`},
		{"results, a tenant of no deployed settings", pipeline.TaskResults, func(t *pipeline.Tenant) { t.ID = "acme" }, `tenant "acme" is not a tenant of pool p`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := sourcetest.NewFakeS3()
			store.Put(ingest, src.Key, &sourcetest.Object{Data: data, ETag: "e"})
			var asked []string
			h := newHandler(store)
			h.Deployed = settings
			h.ForTenant = func(id string) (ObjectAPI, error) { asked = append(asked, id); return store, nil }
			ten := deployedTenant
			if tc.edit != nil {
				tc.edit(&ten)
			}
			var in []byte
			if tc.kind == pipeline.TaskResults {
				in, _ = json.Marshal(pipeline.ResultsRequest{Kind: pipeline.TaskResults, Status: pipeline.StatusFailed, ExecutionName: "exec-1",
					State: pipeline.ResultsState{Tenant: ten, Source: src}})
			} else {
				in, _ = json.Marshal(pipeline.SplitRequest{Tenant: ten, Source: src, ExecutionName: "exec-1"})
			}
			_, err := h.Invoke(context.Background(), in)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want the file split", err)
				}
				return
			}
			var pe *pipeline.PermanentError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a PermanentError containing %q", err, tc.want)
			}
			if len(asked) != 0 || len(store.Gets) != 0 || len(store.Puts) != 0 {
				t.Errorf("got sessions %v, %d GETs and %d writes, want none", asked, len(store.Gets), len(store.Puts))
			}
		})
	}
}

// A file within the bound its upload URL signed (pipectl upload-url --max-bytes) is split as any
// other, at the bound exactly too.
func TestSplitWithinItsUploadBound(t *testing.T) {
	const key = "inbox/t1/bounded.csv"
	data := csvRows(120)
	for _, bound := range []int{len(data), len(data) + 1, 5 << 30} {
		t.Run(strconv.Itoa(bound), func(t *testing.T) {
			s3 := sourcetest.NewFakeS3()
			s3.Put(ingest, key, &sourcetest.Object{Data: data, ETag: "e1", Metadata: map[string]string{pipeline.MaxBytesMetadata: strconv.Itoa(bound)}})
			req := pipeline.SplitRequest{Tenant: tenant(), Source: pipeline.Source{Bucket: ingest, Key: key, ETag: "e1"}, ExecutionName: "exec"}
			res, err := newHandler(s3).Handle(context.Background(), req)
			if err != nil || res.Records != 120 {
				t.Fatalf("got %d records, error %v; want 120 and none", res.Records, err)
			}
		})
	}
}
