//go:build e2e || figures

package localrun

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/localrun/report"
	"github.com/example/tenantpipeline/internal/localrun/report/reportpage"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// A core system answers 422 to two records of a tenant with onInvalidRecord skipRecord and
// rejectStatuses [422], in both tiers: those two are rejected (in the file's register parts, with
// their status and original bytes, then in rejected.csv with an _error naming 422), the others are
// registered in order, exactly once, the file succeeds, and its summary.json and File Processed
// event count the sink's registrations and the two rejections. Records 2 and 5 (the first of the
// second chunk) span lines, so a rejection's _line is the file's physical line only if the chunks'
// first lines are right: on the full path ("rej", which has no small-file path) those Split writes
// beside the manifest, on the small-file path ("rejsmall") those the SmallFile task's split keeps
// in memory, with no lines object written.
func TestScenarioCoreSystemRejects(t *testing.T) {
	t.Parallel()
	const tenantsJSON = `{"tenants": [{"id": "rej", "chunkSize": 4, "onInvalidRecord": "skipRecord", "rejectStatuses": [422],
	  "smallFileBytes": -1, "registerUrl": "https://core.example.com/records"},
	  {"id": "rejsmall", "chunkSize": 4, "onInvalidRecord": "skipRecord", "rejectStatuses": [422],
	  "registerUrl": "https://core.example.com/records"}]}`
	// Lines: 1 header, 2 record 1, 3-5 record 2, 6 record 3, 7 record 4, 8-9 record 5, 10 record 6,
	// 11 record 7, 12 record 8, 13 record 9, 14 record 10.
	src := bytes.Replace(bytes.Replace(csvOf(10), []byte("\n2,name 2\n"), []byte("\n2,\"name\n2\nlong\"\n"), 1),
		[]byte("\n5,name 5\n"), []byte("\n5,\"name\n5\"\n"), 1)
	forEachTier(t, tenantsJSON, func(t *testing.T, tenants string) {
		r := startScenario(t, tenants, Config{})
		r.Sink.SetFault(func(tenant, _ string, record int64, _ int) int {
			if (tenant == "rej" || tenant == "rejsmall") && (record == 3 || record == 7) {
				return 422
			}
			return 0
		})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		uploadAll(t, ctx, r, []upload{{"rej", "f.csv", src}, {"rejsmall", "f.csv", src}})
		rep := drain(t, ctx, r)
		// The harness's own invariants count every record of a file as registered; the two rejected
		// ones are the only gaps allowed. Order and exactly-once are asserted below.
		for _, v := range rep.Violations {
			if !strings.HasSuffix(v, "has 10 records but 8 were registered") && !strings.HasSuffix(v, "record 4 registered after record 2") &&
				!strings.HasSuffix(v, "record 8 registered after record 6") {
				t.Errorf("invariant violated: %s", v)
			}
		}

		for _, id := range []string{"rej", "rejsmall"} {
			t.Run(id, func(t *testing.T) { coreSystemRejected(t, ctx, r, rep, id, src) })
		}
		checkFileEvents(t, ctx, r, rep, []upload{{"rej", "f.csv", nil}, {"rejsmall", "f.csv", nil}})
	})
}

// coreSystemRejected checks one tenant's f.csv of TestScenarioCoreSystemRejects.
func coreSystemRejected(t *testing.T, ctx context.Context, r *Run, rep *report.Report, id string, src []byte) {
	f := fileOf(t, rep, id, "f.csv")
	if f.Executions != 1 {
		t.Errorf("f.csv: got %d executions, want 1", f.Executions)
	}
	if f.Status != "SUCCEEDED" {
		t.Fatalf("f.csv: got %s (%s), want SUCCEEDED", f.Status, f.Cause)
	}
	var registered []int64
	for _, rec := range r.Sink.Registered(id) {
		registered = append(registered, rec.RecordNumber)
	}
	if want := []int64{1, 2, 4, 5, 6, 8, 9, 10}; !reflect.DeepEqual(registered, want) {
		t.Errorf("got registered %v, want %v (in order, once each)", registered, want)
	}

	prefix := results.PartsPrefix(r.Tenant(id).Owner(), f.ExecutionName)
	out, err := r.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var got []results.Rejection
	for _, o := range out.Contents {
		if !strings.Contains(aws.ToString(o.Key), "/register-") {
			continue
		}
		obj, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(obj.Body)
		obj.Body.Close()
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var rj results.Rejection
			if err := json.Unmarshal([]byte(line), &rj); err != nil {
				t.Fatalf("%s: %q: %v", aws.ToString(o.Key), line, err)
			}
			got = append(got, rj)
		}
	}
	want := []results.Rejection{
		{Line: 6, Record: 3, Error: "the core system answered 422: Unprocessable Entity", Status: 422, Raw: []byte("3,name 3")},
		{Line: 11, Record: 7, Error: "the core system answered 422: Unprocessable Entity", Status: 422, Raw: []byte("7,name 7")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got rejections %+v under %s, want %+v", got, prefix, want)
	}
	// The chunks' first lines, which Register read those lines from: the lines object on the
	// full path; none on the small-file path, which keeps them in memory.
	obj, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(pipeline.LinesKey(r.Tenant(id).Owner(), f.ExecutionName))})
	switch {
	case id == "rejsmall" && err == nil:
		obj.Body.Close()
		t.Error("got a lines object, want none: the small-file path keeps the chunks' first lines in memory")
	case id == "rej" && err != nil:
		t.Fatalf("the lines object: %v", err)
	case id == "rej":
		lines, _ := io.ReadAll(obj.Body)
		obj.Body.Close()
		if want := pipeline.EncodeLines([]int64{2, 8, 13}); !bytes.Equal(lines, want) {
			t.Errorf("got the lines object %x, want %x (lines 2, 8 and 13)", lines, want)
		}
	}
	countsShown(t, r, rep, id, f.Key, "8", "2")

	// What the tenant gets back: rejected.csv with exactly those two, the summary's counts
	// those of the sink, and one File Processed event with the summary's counts.
	body := mustResult(t, ctx, r, id, f.ExecutionName, results.RejectedCSV)
	errs := checkRejectedCSV(t, body, src, nil, []string{"_line", "_record", "_error", "id", "name"}, []rejectedRow{{6, 3}, {11, 7}})
	for _, e := range errs {
		if !strings.Contains(e, "422") {
			t.Errorf("got rejected.csv _error %q, want it to name the core system's 422", e)
		}
	}
	sum := checkSucceededSummary(t, ctx, r, rep, id, f, results.Counts{Records: 10, Registered: 8, Rejected: 2}, pipeline.OnInvalidSkipRecord, results.RejectedCSV)
	if sink := int64(len(registeredOf(r, id, f.Key))); sum.Registered != sink || sum.Rejected != int64(len(errs)) {
		t.Errorf("got summary registered %d rejected %d, want the sink's %d and rejected.csv's %d", sum.Registered, sum.Rejected, sink, len(errs))
	}
}

// countsShown checks that report.json and report.html give a file the registered and rejected
// counts of its summary.json, the rejected one highlighted when above 0.
func countsShown(t *testing.T, r *Run, rep *report.Report, tenant, key, registered, rejected string) {
	t.Helper()
	var f *report.FileReport
	for i := range rep.Tenants[tenant].Files {
		if rep.Tenants[tenant].Files[i].Key == key {
			f = &rep.Tenants[tenant].Files[i]
		}
	}
	if f == nil {
		t.Fatalf("%s: no file %s in the report", tenant, key)
	}
	if report.CountText(f.Registered) != registered || report.CountText(f.Rejected) != rejected || report.CountText(f.Unprocessed) != "0" {
		t.Errorf("report.json %s: got registered %s, rejected %s, unprocessed %s; want %s, %s, 0 (its summary.json)",
			key, report.CountText(f.Registered), report.CountText(f.Rejected), report.CountText(f.Unprocessed), registered, rejected)
	}
	var b bytes.Buffer
	if err := report.WriteHTML(&b, rep, r.TenantIDs(), time.Now()); err != nil {
		t.Fatal(err)
	}
	els, _ := reportpage.Parse(t, b.Bytes())
	for _, row := range reportpage.FileTable(els) {
		if row.Attrs["data-key"] != key {
			continue
		}
		reg, rej := strings.TrimSpace(row.Cells["registered"].Text), strings.TrimSpace(row.Cells["rejected"].Text)
		if reg != registered || rej != rejected || row.Cells["rejected"].HasClass("some") != (rejected != "0") {
			t.Errorf("report.html %s: got registered %s, rejected %s (class %q); want %s, %s, highlighted when above 0",
				key, reg, rej, row.Cells["rejected"].Attrs["class"], registered, rejected)
		}
		return
	}
	t.Errorf("report.html: no row for %s in the table of files", key)
}
