package register

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// multiLine is a CSV file whose earlier chunks (of 2 records) hold multi-line records and blank
// lines. Lines: 1 header, 2-4 record 1, 5 record 2, 6-7 record 3, 8 blank, 9 record 4, 10 blank
// (the 3rd chunk's first line), 11 record 5, 12 record 6.
const multiLine = "id,v\n1,\"a\nb\nc\"\n2,x\n3,\"d\ne\"\n\n4,y\n\n5,z\n6,w\n"

// linesFixture stores a file, its version 1 manifest and, unless lines is nil, a lines object
// whose entries are lines(each chunk's true first line), pinned to a version that is no longer
// current; it returns the chunk requests.
func linesFixture(t *testing.T, s3 *sourcetest.FakeS3, tenant pipeline.Tenant, src pipeline.Source, data []byte, lines func(int64) int64) []pipeline.ChunkRequest {
	t.Helper()
	f, err := records.FormatOf(tenant)
	if err != nil {
		t.Fatal(err)
	}
	var offsets, firsts []int64
	sum, err := records.SplitCut(bytes.NewReader(data), f, records.Cut{Records: tenant.ChunkSize, Lines: true}, func(b pipeline.Boundary) error {
		offsets = append(offsets, b.Offset)
		if lines != nil {
			firsts = append(firsts, lines(b.Line))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s3.Put(src.Bucket, src.Key, &sourcetest.Object{Data: data, ETag: src.ETag})
	manifest := pipeline.Location{Bucket: work, Key: pipeline.ManifestKey(pipeline.SiloOwner(tenant.ID), execName)}
	s3.Put(work, manifest.Key, &sourcetest.Object{Data: pipeline.EncodeManifest(offsets)})
	if lines != nil {
		manifest.Lines = &pipeline.Location{Bucket: work, Key: pipeline.LinesKey(pipeline.SiloOwner(tenant.ID), execName), VersionID: "lv1", ETag: `"lines-1"`}
		s3.Put(work, manifest.Lines.Key, &sourcetest.Object{Data: []byte("a later write"), ETag: "lines-2",
			Versions:     map[string][]byte{"lv1": pipeline.EncodeLines(firsts[:sum.Chunks])},
			VersionETags: map[string]string{"lv1": "lines-1"}})
	}
	var reqs []pipeline.ChunkRequest
	for i := range sum.Chunks {
		reqs = append(reqs, pipeline.ChunkRequest{Tenant: tenant, Source: src, ExecutionName: execName,
			Manifest: manifest, Records: sum.Records, Header: sum.Header, Chunk: i})
	}
	return reqs
}

// rejectingCore answers 422 to the records in reject, 201 to the others.
func rejectingCore(t *testing.T, reject map[int64]bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, _ := strconv.ParseInt(r.Header.Get("Idempotency-Key")[len(execName)+1:], 10, 64)
		if reject[rec] {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// lookups is what the invocations read to find their chunks' first lines: the ranged GETs of the
// lines object, and the bytes of the source read from its first byte (the old count).
func lookups(s3 *sourcetest.FakeS3, src pipeline.Source) (linesGets int, scanned int64) {
	for _, g := range s3.Gets {
		switch {
		case strings.HasSuffix(aws.ToString(g.Key), "/lines"):
			linesGets++
		case aws.ToString(g.Key) == src.Key && strings.HasPrefix(aws.ToString(g.Range), "bytes=0-"):
			var end int64
			fmt.Sscanf(aws.ToString(g.Range), "bytes=0-%d", &end)
			scanned += end + 1
		}
	}
	return linesGets, scanned
}

// A rejected record's line is its chunk's first line, from the lines object Split wrote (one ranged
// GET per chunk with rejections in an invocation, pinned), plus its line in the chunk; without a
// lines object (an execution split before Split wrote one) the source is counted from its first
// byte, with the same lines.
func TestRejectionLines(t *testing.T) {
	truth := func(l int64) int64 { return l }
	tests := []struct {
		name          string
		reject        []int64
		lines         func(int64) int64 // nil: no lines object
		oneInvocation bool              // chunks 0..2 in one invocation, else one per chunk
		want          []int64           // the rejections' lines, in record order
		wantLinesGets int
		wantScanned   bool
	}{
		{"3rd chunk after multi-line records, from the lines object", []int64{5, 6}, truth, false, []int64{11, 12}, 1, false},
		{"3rd chunk, no lines object: counted from the source", []int64{5, 6}, nil, false, []int64{11, 12}, 0, true},
		{"the line is the lines object's", []int64{5, 6}, func(l int64) int64 { return l + 100 }, false, []int64{111, 112}, 1, false},
		{"a multi-line record rejected", []int64{1, 3}, truth, false, []int64{2, 6}, 2, false},
		{"two chunks in one invocation: one GET each", []int64{3, 5, 6}, truth, true, []int64{6, 11, 12}, 2, false},
		{"two chunks in one invocation, no lines object", []int64{3, 5, 6}, nil, true, []int64{6, 11, 12}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reject := map[int64]bool{}
			for _, r := range tc.reject {
				reject[r] = true
			}
			srv := rejectingCore(t, reject)
			s3 := sourcetest.NewFakeS3()
			tenant := skipping(csvTenant(srv.URL), 422)
			tenant.ChunkSize = 2
			src := pipeline.Source{Bucket: ingest, Key: "inbox/t1/m.csv", ETag: "etag-1"}
			reqs := linesFixture(t, s3, tenant, src, []byte(multiLine), tc.lines)
			if len(reqs) != 3 {
				t.Fatalf("got %d chunks, want 3", len(reqs))
			}
			if tc.oneInvocation {
				reqs[0].LastChunk = 2
				reqs = reqs[:1]
			}
			h := newHandler(s3, &fakeSecrets{})
			for _, req := range reqs {
				if _, err := h.Handle(context.Background(), req); err != nil {
					t.Fatalf("chunk %d: %v", req.Chunk, err)
				}
			}
			var all []results.Rejection
			for _, list := range parts(t, s3) {
				all = append(all, list...)
			}
			slices.SortFunc(all, func(a, b results.Rejection) int { return cmp.Compare(a.Record, b.Record) })
			var got, gotRecords []int64
			for _, r := range all {
				got, gotRecords = append(got, r.Line), append(gotRecords, r.Record)
			}
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(gotRecords, tc.reject) {
				t.Errorf("got records %v on lines %v, want %v on %v", gotRecords, got, tc.reject, tc.want)
			}
			linesGets, scanned := lookups(s3, src)
			if linesGets != tc.wantLinesGets || (scanned > 0) != tc.wantScanned {
				t.Errorf("got %d GETs of the lines object and %d bytes counted from the source, want %d GETs and counting %v", linesGets, scanned, tc.wantLinesGets, tc.wantScanned)
			}
			for _, g := range s3.Gets {
				if strings.HasSuffix(aws.ToString(g.Key), "/lines") && (aws.ToString(g.VersionId) != "lv1" || aws.ToString(g.IfMatch) != `"lines-1"` || !strings.HasPrefix(aws.ToString(g.Range), "bytes=")) {
					t.Errorf("got a lines GET version %q if-match %q range %q, want lv1, \"lines-1\" and one entry", aws.ToString(g.VersionId), aws.ToString(g.IfMatch), aws.ToString(g.Range))
				}
			}
		})
	}
}

// A lines object that cannot be read fails the invocation before its part and cursor: permanently
// when it was overwritten, is gone or holds no line (a retry cannot mend it), else retryable.
func TestRejectionLinesErrors(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(s3 *sourcetest.FakeS3, lines *pipeline.Location)
		want  string
		msg   string
	}{
		{"overwritten", func(s3 *sourcetest.FakeS3, l *pipeline.Location) { l.VersionID = "" }, pipeline.ErrPermanent, "was overwritten after Split wrote it"},
		{"gone", func(s3 *sourcetest.FakeS3, l *pipeline.Location) { delete(s3.Objects, work+"/"+l.Key) }, pipeline.ErrPermanent, "reading the chunks' first lines"},
		{"no line in it", func(s3 *sourcetest.FakeS3, l *pipeline.Location) {
			s3.Objects[work+"/"+l.Key].Versions["lv1"] = pipeline.EncodeLines([]int64{0, 0, 0})
		}, pipeline.ErrPermanent, "is not a line number"},
		{"S3 unavailable", func(s3 *sourcetest.FakeS3, l *pipeline.Location) {
			s3.GetErrFor = map[string]error{l.Key: sourcetest.APIError("GetObject", 503, "SlowDown")}
		}, pipeline.ErrRetryable, "reading the chunks' first lines"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := rejectingCore(t, map[int64]bool{5: true})
			s3 := sourcetest.NewFakeS3()
			tenant := skipping(csvTenant(srv.URL), 422)
			tenant.ChunkSize = 2
			src := pipeline.Source{Bucket: ingest, Key: "inbox/t1/m.csv", ETag: "etag-1"}
			req := linesFixture(t, s3, tenant, src, []byte(multiLine), func(l int64) int64 { return l })[2]
			lines := *req.Manifest.Lines
			tc.spoil(s3, &lines)
			req.Manifest.Lines = &lines
			_, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), req)
			if got := source.ErrorType(err); got != tc.want || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v (%s), want a %s saying %q", err, got, tc.want, tc.msg)
			}
			if got := parts(t, s3); len(got) != 0 {
				t.Errorf("got parts %v, want none", got)
			}
		})
	}
}

// The measure: a rejection near the end of a file of 100,000 records, before (counted from the
// source's first byte) and after (the chunk's entry of the lines object). Bytes, not time, so it
// holds on any machine.
func TestLineLookupBytes(t *testing.T) {
	const n, chunkSize, rejected = 100_000, 1000, 99_990
	var b strings.Builder
	b.WriteString("id,name,note\n")
	for i := range n {
		if i%10 == 0 {
			fmt.Fprintf(&b, "%d,name %d,\"two\nlines\"\n", i+1, i+1)
		} else {
			fmt.Fprintf(&b, "%d,name %d,plain\n", i+1, i+1)
		}
	}
	data := []byte(b.String())
	wantLine := 1 + int64(bytes.Count(data[:bytes.Index(data, []byte(fmt.Sprintf("\n%d,", rejected)))+1], []byte{'\n'}))
	srv := rejectingCore(t, map[int64]bool{rejected: true})
	read := map[bool]int64{}
	for _, withLines := range []bool{false, true} {
		s3 := sourcetest.NewFakeS3()
		tenant := skipping(csvTenant(srv.URL), 422)
		tenant.ChunkSize = chunkSize
		src := pipeline.Source{Bucket: ingest, Key: "inbox/t1/big.csv", ETag: "etag-1"}
		var lines func(int64) int64
		if withLines {
			lines = func(l int64) int64 { return l }
		}
		req := linesFixture(t, s3, tenant, src, data, lines)[rejected/chunkSize]
		if _, err := newHandler(s3, &fakeSecrets{}).Handle(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		got := parts(t, s3)
		if len(got) != 1 {
			t.Fatalf("got parts %v, want one", got)
		}
		for _, list := range got {
			if len(list) != 1 || list[0].Line != wantLine {
				t.Fatalf("lines object %v: got rejections %+v, want record %d on line %d", withLines, list, rejected, wantLine)
			}
		}
		linesGets, scanned := lookups(s3, src)
		read[withLines] = scanned + 8*int64(linesGets)
	}
	t.Logf("line lookup for record %d of %d (a %d-byte file, line %d): %d bytes counted from the source; %d bytes of the lines object",
		rejected, n, len(data), wantLine, read[false], read[true])
	if read[true] != 8 || read[false] < int64(len(data))*9/10 {
		t.Errorf("got %d bytes read with the lines object and %d without, want 8 and most of the file", read[true], read[false])
	}
}
