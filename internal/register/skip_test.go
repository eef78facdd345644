package register

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// skipFixture is fixture for a file with invalid records, split as Split does under skipRecord.
func skipFixture(t *testing.T, s3 *sourcetest.FakeS3, tenant pipeline.Tenant, src pipeline.Source, data []byte) []pipeline.ChunkRequest {
	t.Helper()
	f, err := records.FormatOf(tenant)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	sum, err := records.SplitCutSkip(bytes.NewReader(data), f, records.Cut{Records: tenant.ChunkSize}, func(b pipeline.Boundary) error {
		offsets = append(offsets, b.Offset)
		return nil
	}, func(records.Invalid) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	s3.Put(src.Bucket, src.Key, &sourcetest.Object{Data: data, ETag: "etag-1"})
	manifest := pipeline.Location{Bucket: work, Key: pipeline.ManifestKey(pipeline.SiloOwner(tenant.ID), execName)}
	s3.Put(work, manifest.Key, &sourcetest.Object{Data: pipeline.EncodeManifest(offsets)})
	var reqs []pipeline.ChunkRequest
	for i := range sum.Chunks {
		reqs = append(reqs, pipeline.ChunkRequest{Tenant: tenant, Source: src, ExecutionName: execName,
			Manifest: manifest, Records: sum.Records, Header: sum.Header, Chunk: i})
	}
	return reqs
}

func TestRegisterSkipsInvalidRecords(t *testing.T) {
	// Records 2, 4 and 5 are invalid; with 3 records a chunk, chunk 1 holds 4, 5 and 6.
	data := []byte("id,name\n1,a\n2\n3,c\n4,d,x\n5\"e,x\n6,f\n7,g\n")
	cases := []struct {
		name    string
		policy  string
		numbers []int64 // recordNumber of each POST, in order
		keys    []string
		err     string // the error type of the first failing chunk
	}{
		{"skipRecord sends the valid records with their own numbers", pipeline.OnInvalidSkipRecord, []int64{1, 3, 6, 7},
			[]string{IdempotencyKey(execName, 1), IdempotencyKey(execName, 3), IdempotencyKey(execName, 6), IdempotencyKey(execName, 7)}, ""},
		{"failFile sends nothing of a chunk with an invalid record", pipeline.OnInvalidFailFile, nil, nil, pipeline.ErrValidation},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			core := newCore(t, nil)
			s3 := sourcetest.NewFakeS3()
			tenant := csvTenant(core.srv.URL)
			tenant.OnInvalidRecord = pipeline.OnInvalidSkipRecord // the manifest is the skipRecord one
			src := pipeline.Source{Bucket: ingest, Key: "inbox/t1/f.csv", ETag: "etag-1"}
			reqs := skipFixture(t, s3, tenant, src, data)
			if len(reqs) != 3 {
				t.Fatalf("got %d chunks, want 3", len(reqs))
			}
			h := newHandler(s3, &fakeSecrets{})
			var gotErr string
			for _, req := range reqs {
				req.Tenant.OnInvalidRecord = c.policy
				if _, err := h.Handle(context.Background(), req); err != nil {
					var ve *pipeline.ValidationError
					if errors.As(err, &ve) {
						gotErr = pipeline.ErrValidation
					} else {
						t.Fatalf("chunk %d: got %v", req.Chunk, err)
					}
					break
				}
			}
			if gotErr != c.err {
				t.Errorf("got error type %q, want %q", gotErr, c.err)
			}
			var numbers []int64
			var keys []string
			for _, s := range core.seen {
				numbers = append(numbers, s.Body.RecordNumber)
				keys = append(keys, s.Key)
			}
			if !reflect.DeepEqual(numbers, c.numbers) {
				t.Errorf("got record numbers %v, want %v", numbers, c.numbers)
			}
			if !reflect.DeepEqual(keys, c.keys) {
				t.Errorf("got keys %v, want %v", keys, c.keys)
			}
		})
	}
}
