package split

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// orderedS3 records the keys Split writes, in order.
type orderedS3 struct {
	*sourcetest.FakeS3
	keys []string
}

func (o *orderedS3) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	o.keys = append(o.keys, aws.ToString(in.Key))
	return o.FakeS3.PutObject(ctx, in, opts...)
}

func TestSplitInvalidRecordPolicy(t *testing.T) {
	const key = "inbox/t1/f.csv"
	csvData := []byte("id,name\r\n1,a\r\n2\r\n3,c\r\n4,d,x\r\n5,e\r\n")
	jsonData := []byte("{\"id\":1}\n{\"id\":2}\n")
	skip := func(max int) pipeline.Tenant {
		t := tenant()
		t.ChunkSize = 2
		t.OnInvalidRecord, t.MaxInvalidRecords = pipeline.OnInvalidSkipRecord, max
		return t
	}
	partsKey := results.PartKey(pipeline.SiloOwner("t1"), "exec-1", results.SplitPart)
	headerKey := results.PartKey(pipeline.SiloOwner("t1"), "exec-1", results.HeaderPart)
	manifestKey := "work/t1/exec-1/manifest"
	cases := []struct {
		name     string
		tenant   pipeline.Tenant
		data     []byte
		wantErr  string // "": success
		rejected int64
		keys     []string
		parts    []results.Rejection
		header   string
	}{
		{"failFile fails at the first invalid record", tenant(), csvData,
			"s3://ingest-bucket/inbox/t1/f.csv: line 3: record has 1 fields, the header has 2", 0, nil, nil, ""},
		{"skipRecord writes the parts before the manifest", skip(0), csvData, "", 2,
			[]string{partsKey, headerKey, manifestKey},
			[]results.Rejection{
				{Line: 3, Record: 2, Error: "record has 1 fields, the header has 2", Raw: []byte("2")},
				{Line: 5, Record: 4, Error: "record has 3 fields, the header has 2", Raw: []byte("4,d,x")},
			}, "id,name"},
		{"skipRecord over maxInvalidRecords writes nothing", skip(1), csvData,
			"s3://ingest-bucket/inbox/t1/f.csv: 2 invalid records, more than maxInvalidRecords 1; first at line 3: record has 1 fields, the header has 2", 0, nil, nil, ""},
		{"skipRecord with no invalid record writes an empty part", func() pipeline.Tenant { t := skip(0); t.Format = pipeline.FormatJSONL; return t }(), jsonData, "", 0,
			[]string{partsKey, manifestKey}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := sourcetest.NewFakeS3()
			fake.Put(ingest, key, &sourcetest.Object{Data: c.data, ETag: "e1"})
			o := &orderedS3{FakeS3: fake}
			h := &Handler{S3: o, WorkBucket: work, Log: newHandler(fake).Log}
			res, err := h.Handle(context.Background(), pipeline.SplitRequest{Tenant: c.tenant,
				Source: pipeline.Source{Bucket: ingest, Key: key, ETag: "e1", Size: int64(len(c.data))}, ExecutionName: "exec-1"})
			if c.wantErr != "" {
				var ve *pipeline.ValidationError
				if !errors.As(err, &ve) || ve.Message != c.wantErr {
					t.Fatalf("got error %v, want a ValidationError %q", err, c.wantErr)
				}
				if len(o.keys) != 0 {
					t.Errorf("got writes %v, want none before the verdict", o.keys)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if res.Rejected != c.rejected {
				t.Errorf("got rejected %d, want %d", res.Rejected, c.rejected)
			}
			if !reflect.DeepEqual(o.keys, c.keys) {
				t.Errorf("got writes %v, want %v", o.keys, c.keys)
			}
			var parts []results.Rejection
			sc := bufio.NewScanner(bytes.NewReader(fake.Puts[work+"/"+partsKey]))
			for sc.Scan() {
				var r results.Rejection
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("part line %q: %v", sc.Text(), err)
				}
				parts = append(parts, r)
			}
			if !reflect.DeepEqual(parts, c.parts) {
				t.Errorf("got parts %+v, want %+v", parts, c.parts)
			}
			if got := string(fake.Puts[work+"/"+headerKey]); got != c.header {
				t.Errorf("got header part %q, want %q", got, c.header)
			}
		})
	}
}

// The result's JSON carries "rejected", which the state machine totals.
func TestSplitResultRejectedField(t *testing.T) {
	b, err := json.Marshal(pipeline.SplitResult{Rejected: 3})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if got, ok := m["rejected"]; !ok || got != float64(3) {
		t.Errorf("got rejected %v (present %v), want 3", got, ok)
	}
}
