package split

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// A keyed tenant's file is checked for its keys at split time: a header without a key column
// fails it, and so does a record with an empty key under failFile, as a ValidationError before
// anything is written; under skipRecord that record is rejected like any invalid record.
func TestSplitKeyedFile(t *testing.T) {
	const key = "inbox/t1/f.csv"
	keyed := func(policy string, cols ...string) pipeline.Tenant {
		t := tenant()
		t.RecordOrder, t.KeyColumns = pipeline.RecordOrderKey, cols
		if policy == pipeline.OnInvalidSkipRecord {
			t.OnInvalidRecord, t.MaxInvalidRecords = policy, 10
		}
		return t
	}
	data := []byte("id,customer\r\n1,acme\r\n2,\r\n3,globex\r\n")
	partsKey := results.PartKey(pipeline.SiloOwner("t1"), "exec-1", results.SplitPart)
	for _, c := range []struct {
		name      string
		tenant    pipeline.Tenant
		wantErr   string // a ValidationError's message; "": success
		permanent string // a PermanentError's message
		rejected  int64
		reason    string // the one rejection's reason in the split part
	}{
		{"a key column not in the header", keyed(pipeline.OnInvalidFailFile, "customer", "shop"),
			`s3://ingest-bucket/inbox/t1/f.csv: line 1: keyColumns: column "shop" is not in the file's header ("id", "customer")`, "", 0, ""},
		{"a key column not in the header, skipRecord", keyed(pipeline.OnInvalidSkipRecord, "shop"),
			`s3://ingest-bucket/inbox/t1/f.csv: line 1: keyColumns: column "shop" is not in the file's header ("id", "customer")`, "", 0, ""},
		{"an empty key under failFile", keyed(pipeline.OnInvalidFailFile, "customer"),
			`s3://ingest-bucket/inbox/t1/f.csv: line 3: record 2 has an empty key (keyColumns "customer")`, "", 0, ""},
		{"an empty key under skipRecord", keyed(pipeline.OnInvalidSkipRecord, "customer"), "", "", 1, `record 2 has an empty key (keyColumns "customer")`},
		{"every key present", keyed(pipeline.OnInvalidFailFile, "id"), "", "", 0, ""},
		{"file order: no key check", func() pipeline.Tenant { t := tenant(); t.RecordOrder = pipeline.RecordOrderFile; return t }(), "", "", 0, ""},
		{"unknown recordOrder", func() pipeline.Tenant { t := tenant(); t.RecordOrder = "customer"; return t }(), "",
			`s3://ingest-bucket/inbox/t1/f.csv: tenant "t1" recordOrder "customer" is not "file" or "key"`, 0, ""},
		{"key order without keyColumns", func() pipeline.Tenant { t := tenant(); t.RecordOrder = pipeline.RecordOrderKey; return t }(), "",
			`s3://ingest-bucket/inbox/t1/f.csv: tenant "t1" recordOrder "key" has no keyColumns`, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := sourcetest.NewFakeS3()
			fake.Put(ingest, key, &sourcetest.Object{Data: data, ETag: "e1"})
			o := &orderedS3{FakeS3: fake}
			h := &Handler{S3: o, WorkBucket: work, Log: newHandler(fake).Log}
			res, err := h.Handle(context.Background(), pipeline.SplitRequest{Tenant: c.tenant,
				Source: pipeline.Source{Bucket: ingest, Key: key, ETag: "e1", Size: int64(len(data))}, ExecutionName: "exec-1"})
			var ve *pipeline.ValidationError
			var pe *pipeline.PermanentError
			switch {
			case c.wantErr != "":
				if !errors.As(err, &ve) || ve.Message != c.wantErr {
					t.Fatalf("got error %v, want a ValidationError %q", err, c.wantErr)
				}
			case c.permanent != "":
				if !errors.As(err, &pe) || pe.Message != c.permanent {
					t.Fatalf("got error %v, want a PermanentError %q", err, c.permanent)
				}
			case err != nil:
				t.Fatalf("got error %v, want none", err)
			}
			if err != nil {
				if len(o.keys) != 0 {
					t.Errorf("got writes %v, want none: the file fails before anything is written", o.keys)
				}
				return
			}
			if res.Records != 3 || res.Rejected != c.rejected {
				t.Errorf("got %d records, %d rejected; want 3, %d", res.Records, res.Rejected, c.rejected)
			}
			if c.reason == "" {
				return
			}
			var r results.Rejection
			part := fake.Puts[work+"/"+partsKey]
			if err := json.Unmarshal(bytes.TrimSpace(part), &r); err != nil {
				t.Fatalf("split part %q: %v", part, err)
			}
			if want := (results.Rejection{Line: 3, Record: 2, Error: c.reason, Raw: []byte("2,")}); !reflect.DeepEqual(r, want) {
				t.Errorf("got rejection %+v, want %+v", r, want)
			}
		})
	}
}
