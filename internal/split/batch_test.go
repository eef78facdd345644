package split

import (
	"context"
	"fmt"
	"github.com/example/tenantpipeline/spec"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// TestSplitBatchManifest: in batch mode Split cuts chunks by maxBatchBytes too and writes a
// version 2 manifest holding each chunk's first record; record mode keeps version 1 (TestSplit).
func TestSplitBatchManifest(t *testing.T) {
	// Each record of rows(n) is {"id":"<4 digits>","v":"<40 x>"}: 60 bytes; n records make an
	// array of 1+61n bytes, so 1,024 bytes hold 16 records (977; 17 would be 1,038).
	rows := func(n int) []byte {
		var b strings.Builder
		b.WriteString("id,v\n")
		for i := range n {
			fmt.Fprintf(&b, "%04d,%s\n", i+1, strings.Repeat("x", 40))
		}
		return []byte(b.String())
	}
	for _, tc := range []struct {
		name      string
		records   int
		chunkSize int
		maxBytes  int
		firsts    []int64
	}{
		{"bytes cut first", 40, 1000, 1024, []int64{1, 17, 33, 41}},
		{"records cut first", 40, 10, 1024, []int64{1, 11, 21, 31, 41}},
		{"default 5 MiB", 40, 1000, 0, []int64{1, 41}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s3 := sourcetest.NewFakeS3()
			data := rows(tc.records)
			s3.Put(ingest, "inbox/t1/k.csv", &sourcetest.Object{Data: data, ETag: "e"})
			ten := pipeline.Tenant{Tenant: spec.Tenant{ID: "t1", Prefix: "inbox/t1/", Format: "csv", Encoding: "utf-8", ChunkSize: tc.chunkSize, RegisterMode: "batch", MaxBatchBytes: tc.maxBytes}}
			res, err := newHandler(s3).Handle(context.Background(), pipeline.SplitRequest{Tenant: ten,
				Source: pipeline.Source{Bucket: ingest, Key: "inbox/t1/k.csv", ETag: "e"}, ExecutionName: "exec-1"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Manifest.Version != pipeline.ManifestV2 || res.Chunks != len(tc.firsts)-1 || res.Records != int64(tc.records) {
				t.Fatalf("got manifest version %d, %d chunks, %d records; want 2, %d, %d", res.Manifest.Version, res.Chunks, res.Records, len(tc.firsts)-1, tc.records)
			}
			m := s3.Puts[work+"/"+res.Manifest.Key]
			if len(m) != 16*len(tc.firsts) {
				t.Fatalf("got a %d-byte manifest, want %d", len(m), 16*len(tc.firsts))
			}
			for i := range res.Chunks {
				span, err := pipeline.DecodeChunkSpan(m[16*i : 16*i+32])
				if err != nil {
					t.Fatal(err)
				}
				if span.FirstRecord != tc.firsts[i] || span.Records != tc.firsts[i+1]-tc.firsts[i] {
					t.Errorf("chunk %d: got records %d+%d, want %d+%d", i, span.FirstRecord, span.Records, tc.firsts[i], tc.firsts[i+1]-tc.firsts[i])
				}
				if want := fmt.Sprintf("%04d,", tc.firsts[i]); !strings.HasPrefix(string(data[span.Start:span.End]), want) {
					t.Errorf("chunk %d: got range starting %.10q, want record %d's line", i, data[span.Start:span.End], tc.firsts[i])
				}
			}
		})
	}
}

func TestSplitBatchErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBytes int
		data     string
		errType  string
		want     string
	}{
		{"record over maxBatchBytes", 1024, "id,v\n1,a\n2," + strings.Repeat("b", 1100) + "\n", pipeline.ErrValidation,
			"inbox/t1/k.csv: line 3: record is 1117 bytes as JSON, so a batch holding it alone is over the maxBatchBytes limit of 1024"},
		{"maxBatchBytes out of range", 100, "id\n1\n", pipeline.ErrPermanent, `maxBatchBytes 100 is outside 1024..67108864`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s3 := sourcetest.NewFakeS3()
			s3.Put(ingest, "inbox/t1/k.csv", &sourcetest.Object{Data: []byte(tc.data), ETag: "e"})
			ten := pipeline.Tenant{Tenant: spec.Tenant{ID: "t1", Prefix: "inbox/t1/", Format: "csv", Encoding: "utf-8", ChunkSize: 1000, RegisterMode: "batch", MaxBatchBytes: tc.maxBytes}}
			_, err := newHandler(s3).Handle(context.Background(), pipeline.SplitRequest{Tenant: ten,
				Source: pipeline.Source{Bucket: ingest, Key: "inbox/t1/k.csv", ETag: "e"}, ExecutionName: "exec-1"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || fmt.Sprintf("%T", err) != "*pipeline."+tc.errType {
				t.Errorf("got %T %v, want *pipeline.%s containing %q", err, err, tc.errType, tc.want)
			}
			if len(s3.Puts) != 0 {
				t.Errorf("got %d manifests written, want none", len(s3.Puts))
			}
		})
	}
}

// TestSplitDynamoDBKeyColumns: a CSV file whose header lacks a dynamodb.key column fails in Split,
// naming line 1 and the column, before anything is written.
func TestSplitDynamoDBKeyColumns(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		key        []string
		want       string
	}{
		{"key present", "id,at,v\n1,2,3\n", []string{"id", "at"}, ""},
		{"sort key missing", "id,v\n1,3\n", []string{"id", "at"}, `inbox/t1/k.csv: line 1: the header has no column "at", which the tenant's dynamodb.key names`},
		{"header only is an empty file", "v\n", []string{"id"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s3 := sourcetest.NewFakeS3()
			s3.Put(ingest, "inbox/t1/k.csv", &sourcetest.Object{Data: []byte(tc.data), ETag: "e"})
			ten := pipeline.Tenant{Tenant: spec.Tenant{ID: "t1", Prefix: "inbox/t1/", Format: "csv", Encoding: "utf-8", ChunkSize: 100, DynamoDB: &pipeline.DynamoDBSink{Key: tc.key, Table: "tbl"}}}
			_, err := newHandler(s3).Handle(context.Background(), pipeline.SplitRequest{Tenant: ten,
				Source: pipeline.Source{Bucket: ingest, Key: "inbox/t1/k.csv", ETag: "e"}, ExecutionName: "exec-1"})
			if tc.want == "" {
				if err != nil {
					t.Errorf("got %v, want no error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || fmt.Sprintf("%T", err) != "*pipeline.ValidationError" {
				t.Errorf("got %T %v, want a ValidationError containing %q", err, err, tc.want)
			}
		})
	}
}
