package split

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// TestSplitLines: for a tenant whose records the core system can reject, Split writes each chunk's
// first physical line beside the manifest, before it, and the manifest's location carries the
// write's location, pinned; for any other tenant nothing changes.
func TestSplitLines(t *testing.T) {
	rejecting := func(format string, chunkSize int) pipeline.Tenant {
		tn := tenant()
		tn.Format, tn.ChunkSize = format, chunkSize
		tn.OnInvalidRecord = pipeline.OnInvalidSkipRecord
		tn.RejectStatuses = []int{422}
		return tn
	}
	sjis := func(s string) []byte {
		b, err := japanese.ShiftJIS.NewEncoder().Bytes([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Lines: 1 header, 2-3 record 1, 4 blank, 5 record 2, 6-8 record 3, 9-10 blank, 11 record 4,
	// 12 record 5.
	quoted := []byte("id,v\r\n1,\"a\r\nb\"\r\n\r\n2,c\r\n3,\"d\ne\nf\"\r\n\n\n4,g\r\n5,h\r\n")
	cases := []struct {
		name   string
		tenant func() pipeline.Tenant
		data   []byte
		want   []int64 // nil: no lines object
	}{
		{"CSV with quoted line breaks and blank lines", func() pipeline.Tenant { return rejecting("csv", 2) }, quoted, []int64{2, 6, 12}},
		{"CSV, an invalid record of three lines skipped", func() pipeline.Tenant { return rejecting("csv", 2) },
			[]byte("id,v\n1,a\n2,\"b\nc\nd\",x\n3,e\n4,f\n"), []int64{2, 6}},
		{"CSV in batch mode", func() pipeline.Tenant {
			tn := rejecting("csv", 2)
			tn.RegisterMode = pipeline.RegisterModeBatch
			return tn
		}, quoted, []int64{2, 6, 12}},
		{"CSV in CP932", func() pipeline.Tenant {
			tn := rejecting("csv", 1)
			tn.Encoding = pipeline.EncodingCP932
			return tn
		}, sjis("番号,品名\r\n1,\"改行\r\nあり\"\r\n2,①\r\n"), []int64{2, 4}},
		{"JSON Lines with blank lines", func() pipeline.Tenant { return rejecting("jsonl", 2) },
			[]byte("{\"a\":1}\n\n{\"a\":2}\n{\"a\":3}\n\n\n{\"a\":4}\n{\"a\":5}"), []int64{1, 4, 8}},
		{"the DynamoDB sink under skipRecord", func() pipeline.Tenant {
			tn := tenant()
			tn.ChunkSize, tn.OnInvalidRecord = 2, pipeline.OnInvalidSkipRecord
			tn.DynamoDB = &pipeline.DynamoDBSink{Table: "t", Key: []string{"id"}}
			return tn
		}, quoted, []int64{2, 6, 12}},
		{"an empty file", func() pipeline.Tenant { return rejecting("csv", 2) }, []byte("id,v\r\n"), []int64{}},
		{"skipRecord without rejectStatuses", func() pipeline.Tenant {
			tn := rejecting("csv", 2)
			tn.RejectStatuses = nil
			return tn
		}, quoted, nil},
		{"rejectStatuses under failFile", func() pipeline.Tenant {
			tn := rejecting("csv", 2)
			tn.OnInvalidRecord = pipeline.OnInvalidFailFile
			return tn
		}, quoted, nil},
	}
	const key = "inbox/t1/f.csv"
	linesKey, manifestKey := pipeline.LinesKey(pipeline.SiloOwner("t1"), "exec-1"), pipeline.ManifestKey(pipeline.SiloOwner("t1"), "exec-1")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := sourcetest.NewFakeS3()
			fake.Versioning = true
			fake.Put(ingest, key, &sourcetest.Object{Data: c.data, ETag: "e1"})
			o := &orderedS3{FakeS3: fake}
			h := &Handler{S3: o, WorkBucket: work, Log: newHandler(fake).Log}
			req := pipeline.SplitRequest{Tenant: c.tenant(), Source: pipeline.Source{Bucket: ingest, Key: key, ETag: "e1"}, ExecutionName: "exec-1"}
			res, err := h.Handle(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			body, written := fake.Puts[work+"/"+linesKey]
			if c.want == nil {
				if written || res.Manifest.Lines != nil {
					t.Errorf("got a lines object %v and manifest lines %+v, want neither", body, res.Manifest.Lines)
				}
				return
			}
			if want := pipeline.EncodeLines(c.want); !bytes.Equal(body, want) {
				t.Errorf("got lines object %x, want %x (lines %v)", body, want, c.want)
			}
			if i, j := slices.Index(o.keys, linesKey), slices.Index(o.keys, manifestKey); i < 0 || i > j {
				t.Errorf("got writes %v, want the lines object before the manifest", o.keys)
			}
			version := fmt.Sprintf("pv%d", 1+slices.Index(o.keys, linesKey))
			if want := (&pipeline.Location{Bucket: work, Key: linesKey, VersionID: version, ETag: fmt.Sprintf(`"%x"`, md5.Sum(body))}); !reflect.DeepEqual(res.Manifest.Lines, want) {
				t.Errorf("got manifest lines %+v, want %+v", res.Manifest.Lines, want)
			}
			// Each entry is the line Register would count from the source's first byte to the chunk's.
			manifest := fake.Puts[work+"/"+manifestKey]
			for i, line := range c.want {
				rng := pipeline.ManifestRange(i)
				if res.Manifest.Version == pipeline.ManifestV2 {
					rng = pipeline.ManifestRangeV2(i)
				}
				var first, last int64
				if _, err := fmt.Sscanf(rng, "bytes=%d-%d", &first, &last); err != nil {
					t.Fatal(err)
				}
				start := int64(0)
				for k := range int64(8) {
					start = start<<8 | int64(manifest[first+k])
				}
				if counted := 1 + int64(bytes.Count(c.data[:start], []byte{'\n'})); counted != line {
					t.Errorf("chunk %d at byte %d: got line %d, the source's line ends before it say %d", i, start, line, counted)
				}
			}
			// A retry rewrites the same key with the same bytes.
			again, err := h.Handle(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fake.Puts[work+"/"+linesKey], body) || again.Manifest.Lines.Key != linesKey {
				t.Errorf("retry: got lines object %x at %s, want %x at %s", fake.Puts[work+"/"+linesKey], again.Manifest.Lines.Key, body, linesKey)
			}
		})
	}
}

// A lines object that cannot be written fails Split before the manifest: retryable, or permanent
// for a 403.
func TestSplitLinesWriteFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"throttled", sourcetest.APIError("PutObject", 503, "SlowDown"), pipeline.ErrRetryable},
		{"access denied", sourcetest.APIError("PutObject", 403, "AccessDenied"), pipeline.ErrPermanent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := sourcetest.NewFakeS3()
			fake.Put(ingest, "inbox/t1/f.csv", &sourcetest.Object{Data: csvRows(3), ETag: "e1"})
			o := &failingPut{orderedS3: orderedS3{FakeS3: fake}, key: pipeline.LinesKey(pipeline.SiloOwner("t1"), "exec-1"), err: tc.err}
			tn := tenant()
			tn.OnInvalidRecord = pipeline.OnInvalidSkipRecord
			tn.RejectStatuses = []int{422}
			h := &Handler{S3: o, WorkBucket: work, Log: newHandler(fake).Log}
			_, err := h.Handle(context.Background(), pipeline.SplitRequest{Tenant: tn, Source: pipeline.Source{Bucket: ingest, Key: "inbox/t1/f.csv", ETag: "e1"}, ExecutionName: "exec-1"})
			if got := source.ErrorType(err); got != tc.want {
				t.Fatalf("got %v (%s), want %s", err, got, tc.want)
			}
			if slices.Contains(o.keys, pipeline.ManifestKey(pipeline.SiloOwner("t1"), "exec-1")) {
				t.Errorf("got writes %v, want no manifest", o.keys)
			}
			if !slices.Contains(o.keys, results.PartKey(pipeline.SiloOwner("t1"), "exec-1", results.SplitPart)) {
				t.Errorf("got writes %v, want the split part first", o.keys)
			}
		})
	}
}

// failingPut fails the PutObject of one key with err, and records every key written as orderedS3.
type failingPut struct {
	orderedS3
	key string
	err error
}

func (f *failingPut) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if aws.ToString(in.Key) == f.key {
		f.keys = append(f.keys, f.key)
		return nil, f.err
	}
	return f.orderedS3.PutObject(ctx, in, opts...)
}
