package split

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"golang.org/x/text/encoding/japanese"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// resultsFile is a CSV file of n records, chunks of 3, whose record 5 spans two lines (a quoted
// line break), so offsets inside a chunk must be found as Split found them.
func resultsFile(n int) []byte {
	var b strings.Builder
	b.WriteString("id,name\r\n")
	for i := 1; i <= n; i++ {
		if i == 5 {
			fmt.Fprintf(&b, "%d,\"line\r\nbreak\"\r\n", i)
			continue
		}
		fmt.Fprintf(&b, "%d,名前 %d\r\n", i, i)
	}
	return []byte(b.String())
}

// recordBytes returns the raw lines of records from..to of resultsFile-like data, with their line
// endings, as the file holds them.
func recordBytes(data []byte, from, to int) string {
	s := string(data)
	lines := strings.SplitAfter(s, "\r\n")
	var recs []string
	for i := 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "5,") { // the two-line record
			recs = append(recs, lines[i]+lines[i+1])
			i++
			continue
		}
		if lines[i] != "" {
			recs = append(recs, lines[i])
		}
	}
	return strings.Join(recs[from-1:to], "")
}

func splitFor(t *testing.T, fake *sourcetest.FakeS3, tn pipeline.Tenant, data []byte) pipeline.SplitResult {
	t.Helper()
	src := pipeline.Source{Bucket: ingest, Key: "inbox/t1/f.csv", VersionID: "v1", ETag: "e1", Size: int64(len(data)), EventTime: "2026-12-01T10:00:00Z"}
	fake.Put(ingest, src.Key, &sourcetest.Object{Versions: map[string][]byte{"v1": data}, VersionETags: map[string]string{"v1": "e1"}})
	res, err := newHandler(fake).Handle(context.Background(), pipeline.SplitRequest{Tenant: tn, Source: src, ExecutionName: "exec"})
	if err != nil {
		t.Fatalf("split: %v", err)
	}
	return res
}

func partBody(t *testing.T, rs ...results.Rejection) []byte {
	var b []byte
	for _, r := range rs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	return b
}

func TestResults(t *testing.T) {
	data := resultsFile(10)
	permanent := &pipeline.TaskError{Error: "States.TaskFailed", Cause: `{"Error":"PermanentError","Cause":"{\"errorMessage\":\"record 5: 400\",\"errorType\":\"PermanentError\"}"}`}
	tests := []struct {
		name        string
		status      string
		noSplit     bool           // Split never returned: no split result in the state nor kept
		failFile    bool           // parts present although the tenant is failFile: never read
		progress    map[int]string // segment → progress body
		parts       map[string][]results.Rejection
		taskErr     *pipeline.TaskError
		wantCounts  results.Counts
		wantRej     string // rejected.csv; "" for none
		wantUnproc  string // unprocessed.csv; "" for none
		wantFailure *results.Failure
	}{
		{name: "a file that succeeded", status: pipeline.StatusSucceeded, progress: map[int]string{0: `{"version":1,"next":4}`},
			wantCounts: results.Counts{Records: 10, Registered: 10}},
		{name: "rejections of Split and Register, in record order", status: pipeline.StatusSucceeded,
			parts: map[string][]results.Rejection{
				results.RegisterPart(1, 4): {{Line: 7, Record: 6, Error: "the core system answered 409", Status: 409, Raw: []byte("6,名前 6")}},
				results.SplitPart:          {{Line: 3, Record: 2, Error: "bad", Raw: []byte("2,名前 2")}},
			},
			wantCounts: results.Counts{Records: 10, Registered: 8, Rejected: 2},
			wantRej:    "_line,_record,_error,id,name\n3,2,bad,2,名前 2\n7,6,the core system answered 409,6,名前 6\n"},
		{name: "halted inside a chunk: from the failed record on", status: pipeline.StatusFailed, taskErr: permanent,
			progress:    map[int]string{0: `{"version":1,"next":1,"record":5}`},
			wantCounts:  results.Counts{Records: 10, Registered: 4, Unprocessed: 6},
			wantUnproc:  "id,name\r\n" + recordBytes(data, 5, 10),
			wantFailure: &results.Failure{Type: "PermanentError", Message: "record 5: 400"}},
		{name: "halted at a chunk's start", status: pipeline.StatusFailed, taskErr: permanent,
			progress:   map[int]string{0: `{"version":1,"next":2}`},
			wantCounts: results.Counts{Records: 10, Registered: 6, Unprocessed: 4},
			wantUnproc: "id,name\r\n" + recordBytes(data, 7, 10), wantFailure: &results.Failure{Type: "PermanentError", Message: "record 5: 400"}},
		{name: "failed before any progress: every record", status: pipeline.StatusFailed, taskErr: permanent,
			wantCounts: results.Counts{Records: 10, Unprocessed: 10},
			wantUnproc: string(data), wantFailure: &results.Failure{Type: "PermanentError", Message: "record 5: 400"}},
		{name: "failed after the last record: nothing unprocessed", status: pipeline.StatusFailed, taskErr: permanent,
			progress:   map[int]string{0: `{"version":1,"next":4}`},
			wantCounts: results.Counts{Records: 10, Registered: 10}, wantFailure: &results.Failure{Type: "PermanentError", Message: "record 5: 400"}},
		{name: "a rejection after the stop is rejected, not unprocessed", status: pipeline.StatusFailed, taskErr: permanent,
			progress:   map[int]string{0: `{"version":1,"next":2}`},
			parts:      map[string][]results.Rejection{results.SplitPart: {{Line: 10, Record: 9, Error: "bad", Raw: []byte("9,名前 9")}}},
			wantCounts: results.Counts{Records: 10, Registered: 6, Rejected: 1, Unprocessed: 3},
			wantRej:    "_line,_record,_error,id,name\n10,9,bad,9,名前 9\n",
			wantUnproc: "id,name\r\n" + recordBytes(data, 7, 10), wantFailure: &results.Failure{Type: "PermanentError", Message: "record 5: 400"}},
		{name: "failFile: no parts are listed", status: pipeline.StatusSucceeded, failFile: true,
			progress:   map[int]string{0: `{"version":1,"next":4}`},
			parts:      map[string][]results.Rejection{results.SplitPart: {{Line: 3, Record: 2, Error: "bad", Raw: []byte("2,名前 2")}}},
			wantCounts: results.Counts{Records: 10, Registered: 10}},
		{name: "timed out: the unprocessed tail too", status: "TIMED_OUT",
			progress:   map[int]string{0: `{"version":1,"next":2}`},
			wantCounts: results.Counts{Records: 10, Registered: 6, Unprocessed: 4},
			wantUnproc: "id,name\r\n" + recordBytes(data, 7, 10)},
		{name: "Split failed: no unprocessed file, counts unknown, the failure's line", status: pipeline.StatusFailed, noSplit: true,
			taskErr:     &pipeline.TaskError{Error: "ValidationError", Cause: `{"errorMessage":"line 3: 1 field, want 2","errorType":"ValidationError"}`},
			wantFailure: &results.Failure{Type: "ValidationError", Message: "line 3: 1 field, want 2", Line: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := sourcetest.NewFakeS3()
			tn := tenant()
			tn.ChunkSize = 3
			if len(tt.parts) > 0 && !tt.failFile {
				tn.OnInvalidRecord = pipeline.OnInvalidSkipRecord // only skipRecord files have parts
			}
			sp := splitFor(t, fake, tn, data)
			for seg, body := range tt.progress {
				fake.Put(work, pipeline.ProgressKey(pipeline.SiloOwner("t1"), "exec", seg), &sourcetest.Object{Data: []byte(body)})
			}
			for name, rs := range tt.parts {
				fake.Put(work, results.PartKey(pipeline.SiloOwner("t1"), "exec", name), &sourcetest.Object{Data: partBody(t, rs...)})
			}
			fake.Put(work, results.PartKey(pipeline.SiloOwner("t1"), "exec", results.HeaderPart), &sourcetest.Object{Data: []byte("id,name")})
			st := pipeline.ResultsState{Tenant: tn, Source: sp.Source, Split: &sp, Error: tt.taskErr}
			if tt.noSplit {
				st.Split = nil
			}
			h := newHandler(fake)
			stopped := time.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC)
			h.Now = func() time.Time { return stopped }
			in, _ := json.Marshal(pipeline.ResultsRequest{Kind: pipeline.TaskResults, Status: tt.status, ExecutionName: "exec",
				ExecutionARN: "arn:exec", StartTime: "2026-12-01T10:01:00.123Z", State: st})
			if _, err := h.Invoke(context.Background(), in); err != nil {
				t.Fatalf("got %v, want success", err)
			}
			var sum results.Summary
			if err := json.Unmarshal(fake.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), "exec", results.SummaryFile)], &sum); err != nil {
				t.Fatalf("summary.json: %v", err)
			}
			got := results.Counts{Records: sum.Records, Registered: sum.Registered, Rejected: sum.Rejected, Unprocessed: sum.Unprocessed}
			if got != tt.wantCounts {
				t.Errorf("got counts %+v, want %+v", got, tt.wantCounts)
			}
			if got.Records != got.Registered+got.Rejected+got.Unprocessed {
				t.Errorf("got records %d, want registered + rejected + unprocessed = %d", got.Records, got.Registered+got.Rejected+got.Unprocessed)
			}
			if sum.Status != tt.status || sum.Tier != "silo" || sum.Execution != "exec" || sum.ExecutionARN != "arn:exec" {
				t.Errorf("got status %q tier %q execution %q %q, want %q silo exec arn:exec", sum.Status, sum.Tier, sum.Execution, sum.ExecutionARN, tt.status)
			}
			if sum.Source != (results.Source{Bucket: ingest, Key: "inbox/t1/f.csv", Version: "v1"}) {
				t.Errorf("got source %+v, want the object Split read", sum.Source)
			}
			if sum.Timings.Queued == nil || !sum.Timings.Queued.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) ||
				sum.Timings.Started == nil || !sum.Timings.Started.Equal(time.Date(2026, 12, 1, 10, 1, 0, 123e6, time.UTC)) ||
				sum.Timings.Stopped == nil || !sum.Timings.Stopped.Equal(stopped) {
				t.Errorf("got timings %+v, want queued at the event, started at the execution's start, stopped now", sum.Timings)
			}
			if fmt.Sprint(sum.Failure) != fmt.Sprint(tt.wantFailure) {
				t.Errorf("got failure %+v, want %+v", sum.Failure, tt.wantFailure)
			}
			for _, f := range []struct {
				name, uri, want string
			}{
				{results.RejectedCSV, sum.Files.Rejected, tt.wantRej},
				{results.UnprocessedCSV, sum.Files.Unprocessed, tt.wantUnproc},
			} {
				key := results.Key(pipeline.SiloOwner("t1"), "exec", f.name)
				body, ok := fake.Puts[work+"/"+key]
				if string(body) != f.want || ok != (f.want != "") {
					t.Errorf("got %s %q (written %v), want %q", f.name, body, ok, f.want)
				}
				if wantURI := "s3://" + work + "/" + key; ok && f.uri != wantURI || !ok && f.uri != "" {
					t.Errorf("got %s location %q, want %q when written", f.name, f.uri, wantURI)
				}
			}
		})
	}
}

// TestResultsCP932: the unprocessed records and the rejected rows of a CP932 file come back in
// CP932, byte for byte.
func TestResultsCP932(t *testing.T) {
	enc := func(s string) []byte {
		b, err := japanese.ShiftJIS.NewEncoder().Bytes([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// "ソ" and "表" end in 0x5C, the byte of "\".
	data := enc("番号,名前\r\n1,ソニー\r\n2,\"表\r\n示\"\r\n3,山田\r\n4,田中\r\n")
	fake := sourcetest.NewFakeS3()
	tn := tenant()
	tn.ChunkSize, tn.Encoding, tn.OnInvalidRecord = 3, pipeline.EncodingCP932, pipeline.OnInvalidSkipRecord
	sp := splitFor(t, fake, tn, data)
	fake.Put(work, pipeline.ProgressKey(pipeline.SiloOwner("t1"), "exec", 0), &sourcetest.Object{Data: []byte(`{"version":1,"next":0,"record":2}`)})
	fake.Put(work, results.PartKey(pipeline.SiloOwner("t1"), "exec", results.HeaderPart), &sourcetest.Object{Data: enc("番号,名前")})
	fake.Put(work, results.PartKey(pipeline.SiloOwner("t1"), "exec", results.RegisterPart(0, 1)), &sourcetest.Object{Data: partBody(t,
		results.Rejection{Line: 2, Record: 1, Error: "重複", Status: 409, Raw: enc("1,ソニー")})})
	h := newHandler(fake)
	err := h.Results(context.Background(), pipeline.ResultsRequest{Kind: pipeline.TaskResults, Status: pipeline.StatusFailed, ExecutionName: "exec",
		State: pipeline.ResultsState{Tenant: tn, Source: sp.Source, Split: &sp, Error: &pipeline.TaskError{Error: "PermanentError", Cause: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fake.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), "exec", results.UnprocessedCSV)], enc("番号,名前\r\n2,\"表\r\n示\"\r\n3,山田\r\n4,田中\r\n"); !bytes.Equal(got, want) {
		t.Errorf("got unprocessed.csv %q, want %q", got, want)
	}
	if got, want := fake.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), "exec", results.RejectedCSV)], enc("_line,_record,_error,番号,名前\n2,1,重複,1,ソニー\n"); !bytes.Equal(got, want) {
		t.Errorf("got rejected.csv %q, want %q", got, want)
	}
}

// summary.json names the policy the file ran under; a tenant without one ran under failFile.
func TestResultsOnInvalidRecord(t *testing.T) {
	for _, tt := range []struct{ policy, want string }{
		{pipeline.OnInvalidSkipRecord, pipeline.OnInvalidSkipRecord},
		{pipeline.OnInvalidFailFile, pipeline.OnInvalidFailFile},
		{"", pipeline.OnInvalidFailFile},
	} {
		t.Run(tt.want+"/"+tt.policy, func(t *testing.T) {
			fake := sourcetest.NewFakeS3()
			tn := tenant()
			tn.OnInvalidRecord = tt.policy
			sp := splitFor(t, fake, tn, resultsFile(4))
			err := newHandler(fake).Results(context.Background(), pipeline.ResultsRequest{Kind: pipeline.TaskResults, Status: pipeline.StatusSucceeded,
				ExecutionName: "exec", State: pipeline.ResultsState{Tenant: tn, Source: sp.Source, Split: &sp}})
			if err != nil {
				t.Fatal(err)
			}
			var sum results.Summary
			if err := json.Unmarshal(fake.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), "exec", results.SummaryFile)], &sum); err != nil {
				t.Fatalf("summary.json: %v", err)
			}
			if sum.OnInvalidRecord != tt.want {
				t.Errorf("got onInvalidRecord %q, want %q", sum.OnInvalidRecord, tt.want)
			}
		})
	}
}

// TestResultsFailure: a results write that fails is an ERROR with a metric and a RetryableError
// for the state machine's Retry (after which the Catch lets the file end as it would have).
func TestResultsFailure(t *testing.T) {
	fake := sourcetest.NewFakeS3()
	tn := tenant()
	sp := splitFor(t, fake, tn, resultsFile(4))
	fake.PutErr = sourcetest.APIError("PutObject", 500, "InternalError")
	var logs, emf bytes.Buffer
	h := newHandler(fake)
	h.Log, h.Metrics = slog.New(slog.NewJSONHandler(&logs, nil)), &emf
	err := h.Results(context.Background(), pipeline.ResultsRequest{Kind: pipeline.TaskResults, Status: pipeline.StatusSucceeded, ExecutionName: "exec",
		State: pipeline.ResultsState{Tenant: tn, Source: sp.Source, Split: &sp}})
	var re *pipeline.RetryableError
	if !asRetryable(err, &re) {
		t.Fatalf("got %T %v, want a *pipeline.RetryableError", err, err)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "results not written") {
		t.Errorf("got logs %s, want an ERROR", logs.String())
	}
	if !strings.Contains(emf.String(), MetricResultsFailed) {
		t.Errorf("got metrics %q, want %s", emf.String(), MetricResultsFailed)
	}
}

func asRetryable(err error, re **pipeline.RetryableError) bool {
	r, ok := err.(*pipeline.RetryableError)
	*re = r
	return ok
}

// TestResultsRunFacts: the summary of a redriven run carries its redrive count, the admission the
// execution's input recorded, the stop the controller gives, and the tenant's policy.
func TestResultsRunFacts(t *testing.T) {
	tests := []struct {
		name        string
		stopTime    string
		admitted    string
		policy      string
		wantStop    time.Time
		wantAdmit   *time.Time
		wantPolicy  string
		redrive     int
		wantRedrive int
	}{
		{name: "the controller's request for a redriven run", stopTime: "2026-12-01T10:09:00Z", admitted: "2026-12-01T10:00:30Z",
			policy: pipeline.OnInvalidSkipRecord, redrive: 2, wantRedrive: 2,
			wantStop:  time.Date(2026, 12, 1, 10, 9, 0, 0, time.UTC),
			wantAdmit: aws.Time(time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC)), wantPolicy: pipeline.OnInvalidSkipRecord},
		{name: "the state machine's request: stopped now, no admission recorded, failFile by default",
			wantStop: time.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC), wantPolicy: pipeline.OnInvalidFailFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := sourcetest.NewFakeS3()
			tn := tenant()
			tn.OnInvalidRecord = tt.policy
			sp := splitFor(t, fake, tn, resultsFile(4))
			h := newHandler(fake)
			h.Now = func() time.Time { return time.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC) }
			in, _ := json.Marshal(pipeline.ResultsRequest{Kind: pipeline.TaskResults, Status: pipeline.StatusSucceeded, ExecutionName: "exec",
				RedriveCount: tt.redrive, StopTime: tt.stopTime,
				State: pipeline.ResultsState{Tenant: tn, Source: sp.Source, Split: &sp, Admitted: tt.admitted}})
			if _, err := h.Invoke(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			var sum results.Summary
			if err := json.Unmarshal(fake.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), "exec", results.SummaryFile)], &sum); err != nil {
				t.Fatal(err)
			}
			if sum.RedriveCount != tt.wantRedrive || sum.OnInvalidRecord != tt.wantPolicy {
				t.Errorf("got redriveCount %d onInvalidRecord %q, want %d %q", sum.RedriveCount, sum.OnInvalidRecord, tt.wantRedrive, tt.wantPolicy)
			}
			if sum.Timings.Stopped == nil || !sum.Timings.Stopped.Equal(tt.wantStop) {
				t.Errorf("got stopped %v, want %v", sum.Timings.Stopped, tt.wantStop)
			}
			if fmt.Sprint(sum.Timings.Admitted) != fmt.Sprint(tt.wantAdmit) {
				t.Errorf("got admitted %v, want %v", sum.Timings.Admitted, tt.wantAdmit)
			}
		})
	}
}
