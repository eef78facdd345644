package register

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
	"github.com/example/tenantpipeline/internal/split"
)

// smallFixture stores data as the tenant's file and returns the SmallFile task over store and the
// task's request for it.
func smallFixture(t *testing.T, store *sourcetest.FakeS3, tenant pipeline.Tenant, data []byte) (*SmallFile, pipeline.SmallFileRequest) {
	t.Helper()
	tenant.Prefix = "inbox/t1/"
	src := pipeline.Source{Bucket: ingest, Key: "inbox/t1/a.csv", ETag: "etag-1", Size: int64(len(data))}
	store.Put(ingest, src.Key, &sourcetest.Object{Data: data, ETag: "etag-1"})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	h := newHandler(store, &fakeSecrets{})
	s := &SmallFile{Register: h, Split: &split.Handler{S3: store, WorkBucket: work, Log: log},
		sleep: func(context.Context, time.Duration) error { return nil }}
	return s, pipeline.SmallFileRequest{
		Kind:          pipeline.TaskSmallFile,
		Input:         pipeline.WorkflowInput{Tenant: tenant, Source: src},
		ExecutionName: execName,
		ExecutionARN:  "arn:aws:states:us-east-1:123456789012:execution:file:" + execName,
		StartTime:     "2026-12-03T08:00:00Z",
		MaxBytes:      pipeline.DefaultSmallFileBytes,
	}
}

func summaryOf(t *testing.T, store *sourcetest.FakeS3) results.Summary {
	t.Helper()
	b, ok := store.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), execName, results.SummaryFile)]
	if !ok {
		t.Fatalf("no summary.json written; puts: %v", slices.Sorted(mapsKeys(store.Puts)))
	}
	var sum results.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

func mapsKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func recordNumbers(seen []seenRequest) []int64 {
	var n []int64
	for _, s := range seen {
		n = append(n, s.Body.RecordNumber)
	}
	return n
}

// A one-chunk file is split, registered and given its results in one invocation, which writes no
// segment progress (nothing follows it).
func TestSmallFileOneInvocation(t *testing.T) {
	c := newCore(t, nil)
	store := sourcetest.NewFakeS3()
	tenant := csvTenant(c.srv.URL)
	tenant.SmallFileBytes = 1000 // the tenant's own bound, above the file's 20 bytes
	s, req := smallFixture(t, store, tenant, []byte("id,name\n1,a\n2,b\n3,c\n"))
	req.MaxBytes = 10 // the state machine's, which the tenant's overrides

	res, err := s.Handle(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if want := (pipeline.SmallFileResult{Records: 3, Registered: 3}); res != want {
		t.Errorf("got %+v, want %+v", res, want)
	}
	if got := recordNumbers(c.seen); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("got records %v sent, want 1, 2, 3 once each in order", got)
	}
	sum := summaryOf(t, store)
	if sum.Status != pipeline.StatusSucceeded || sum.Records != 3 || sum.Registered != 3 || sum.Unprocessed != 0 || sum.ExecutionARN != req.ExecutionARN {
		t.Errorf("got summary %+v, want SUCCEEDED with 3 of 3 registered", sum)
	}
	if _, ok := store.Puts[work+"/"+pipeline.ProgressKey(pipeline.SiloOwner("t1"), execName, 0)]; ok {
		t.Error("got the segment's progress written, want none: no invocation follows the small file's")
	}
	// One GET of the object and one of the segment's progress (absent), one PUT of the results:
	// the chunk stays in memory, with no manifest written or read.
	var gets []string
	for _, g := range store.Gets {
		gets = append(gets, *g.Key)
	}
	if want := []string{"inbox/t1/a.csv", pipeline.ProgressKey(pipeline.SiloOwner("t1"), execName, 0)}; !slices.Equal(gets, want) {
		t.Errorf("got GETs %v, want %v", gets, want)
	}
	if puts := slices.Sorted(mapsKeys(store.Puts)); len(puts) != 1 {
		t.Errorf("got writes %v, want summary.json alone", puts)
	}
}

// A file of exactly the bound takes the small-file path, and one of a byte more is handed on
// before anything is sent: the bound is the state machine's (the request's maxBytes) or the
// tenant's own, and the size is the object's, whatever the event said.
func TestSmallFileBound(t *testing.T) {
	data := []byte("id,name\n1,a\n2,b\n") // 16 bytes
	n := int64(len(data))
	tests := []struct {
		name          string
		maxBytes, own int64
		small         bool
	}{
		{"exactly the state machine's bound", n, 0, true},
		{"a byte over the state machine's bound", n - 1, 0, false},
		{"exactly the tenant's own bound", pipeline.MaxSmallFileBytes, n, true},
		{"a byte over the tenant's own bound", pipeline.MaxSmallFileBytes, n - 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCore(t, nil)
			store := sourcetest.NewFakeS3()
			s, req := smallFixture(t, store, csvTenant(c.srv.URL), data)
			req.MaxBytes, req.Input.Tenant.SmallFileBytes = tt.maxBytes, tt.own
			req.Input.Source.Size = 1 // the event's size is not what the task goes by
			res, err := s.Handle(context.Background(), req)
			switch {
			case tt.small && (err != nil || res.Registered != 2):
				t.Errorf("got %+v, %v; want both records registered on the small-file path", res, err)
			case !tt.small && (source.ErrorType(err) != pipeline.ErrNotSmall || len(c.seen) != 0):
				t.Errorf("got %s %v and %d POSTs, want NotSmallError before anything is sent", source.ErrorType(err), err, len(c.seen))
			}
		})
	}
}

// A file that is not small after all is handed on before anything is sent or written, so the full
// path splits it from the start.
func TestSmallFileNotSmall(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		chunkSize int // 0: csvTenant's 3
		maxBytes  int64
		own       int64 // the tenant's own bound
		want      string
	}{
		{"more than one segment", string(csvRecords(pipeline.SegmentChunks + 1)), 1, pipeline.DefaultSmallFileBytes, 0, "more than one segment (1000 chunks of 1 records)"},
		{"more bytes than the event said", "id,name\n1,a\n2,b\n", 0, 10, 0, "more than the small-file bound of 10"},
		{"more bytes than the tenant's own bound", "id,name\n1,a\n2,b\n", 0, pipeline.DefaultSmallFileBytes, 12, "more than the small-file bound of 12"},
		{"the tenant has none", "id,name\n1,a\n", 0, pipeline.DefaultSmallFileBytes, -1, "the tenant has no small-file path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCore(t, nil)
			store := sourcetest.NewFakeS3()
			tenant := csvTenant(c.srv.URL)
			if tt.chunkSize > 0 {
				tenant.ChunkSize = tt.chunkSize
			}
			s, req := smallFixture(t, store, tenant, []byte(tt.data))
			var logs bytes.Buffer
			s.Register.Log = slog.New(slog.NewJSONHandler(&logs, nil))
			req.MaxBytes, req.Input.Tenant.SmallFileBytes = tt.maxBytes, tt.own
			req.Input.Source.Size = 5 // the event's size was wrong
			_, err := s.Handle(context.Background(), req)
			var ns *pipeline.NotSmallError
			if !errors.As(err, &ns) || source.ErrorType(err) != pipeline.ErrNotSmall || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %s %v, want NotSmallError containing %q", source.ErrorType(err), err, tt.want)
			}
			if len(c.seen) != 0 || len(store.Puts) != 0 {
				t.Errorf("got %d POSTs and writes %v, want none", len(c.seen), slices.Sorted(mapsKeys(store.Puts)))
			}
			// A hand-off fails nothing: it must not raise the ERROR-log alarm.
			if strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), `"level":"INFO"`) {
				t.Errorf("got logs %s, want the hand-off at INFO and no ERROR", logs.String())
			}
		})
	}
}

// A small file whose registration does not end in one invocation (the Lambda timeout comes near
// inside its only chunk, or after some of its chunks) is handed on with the segment's progress
// written, and the full path's Register of segment 0 resumes there: every record is sent once, in
// order. Each POST takes 3 s on the fake clock, with a 10 s HTTP timeout and a 2 s margin.
func TestSmallFileHandsOnWithoutResending(t *testing.T) {
	tests := []struct {
		name      string
		records   int
		chunkSize int
		deadline  time.Duration
		want      string // where the error says the full path resumes
		sent      int    // records the SmallFile task sent
	}{
		// Records 1-3 at 0, 3 and 6 s; record 4 at 9 s would need 9+10+2 > 20 s.
		{"inside its only chunk", 5, 100, 20 * time.Second, "it resumes at record 4", 3},
		// Chunks of 2 records take 6 s; a chunk starts while the slowest (6 s), the progress's
		// write (1 s), the results (1 s) and one HTTP timeout fit before the margin: at 6, 12 and
		// 18 s (43-18-2 ≥ 18), not at 24 s (43-24-2 < 18), which it would without the results.
		{"after its fourth chunk", 10, 2, 43 * time.Second, "it resumes at chunk 4", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Now()}
			c := newCore(t, func(int, seenRequest) int { clock.add(3 * time.Second); return 200 })
			store := sourcetest.NewFakeS3()
			tenant := csvTenant(c.srv.URL)
			tenant.ChunkSize = tt.chunkSize
			s, req := smallFixture(t, store, tenant, csvRecords(tt.records))
			tenant = req.Input.Tenant
			s.ResultsTime = time.Second
			s.Register.HTTPTimeout = 10 * time.Second
			s.Register.now = clock.now
			ctx, cancel := context.WithDeadline(context.Background(), clock.now().Add(tt.deadline))
			defer cancel()

			_, err := s.Handle(ctx, req)
			if source.ErrorType(err) != pipeline.ErrNotSmall || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %s %v, want NotSmallError saying %q", source.ErrorType(err), err, tt.want)
			}
			if got := recordNumbers(c.seen); !slices.Equal(got, oneTo(tt.sent)) {
				t.Errorf("got records %v sent by the SmallFile task, want 1 to %d", got, tt.sent)
			}
			if _, ok := store.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), execName, results.SummaryFile)]; ok {
				t.Error("got results written, want none: the full path writes them")
			}
			// The full path: Split writes the manifest, then segment 0's first Register.
			sp, err := s.Split.Handle(context.Background(), pipeline.SplitRequest{Tenant: tenant, Source: req.Input.Source, ExecutionName: execName})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := store.Puts[work+"/"+pipeline.ManifestKey(pipeline.SiloOwner("t1"), execName)]; !ok {
				t.Fatal("the full path's Split wrote no manifest")
			}
			s.Register.now = nil
			res, err := s.Register.Handle(context.Background(), s.chunkRequest(req, sp))
			if want := int64(tt.records - tt.sent); err != nil || !res.Done || res.Registered != want {
				t.Fatalf("got %+v, %v; want the %d records left registered, done", res, err, want)
			}
			if got := recordNumbers(c.seen); !slices.Equal(got, oneTo(tt.records)) {
				t.Errorf("got records %v sent, want 1 to %d once each in order", got, tt.records)
			}
		})
	}
}

// A registration that ends with less than two S3 calls' time left (the progress's and the
// summary's) hands the file on with the progress at the segment's end: the full path's Register
// sends nothing again.
func TestSmallFileHandsOnForItsResults(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	c := newCore(t, func(int, seenRequest) int { clock.add(3 * time.Second); return 200 })
	store := sourcetest.NewFakeS3()
	s, req := smallFixture(t, store, csvTenant(c.srv.URL), csvRecords(2))
	s.Register.HTTPTimeout, s.Register.now = time.Second, clock.now
	// Records 1 and 2 at 0 and 3 s (each with its HTTP timeout left); after them, 9.5-6-2 = 1.5 s.
	ctx, cancel := context.WithDeadline(context.Background(), clock.now().Add(9500*time.Millisecond))
	defer cancel()
	_, err := s.Handle(ctx, req)
	if source.ErrorType(err) != pipeline.ErrNotSmall || !strings.Contains(err.Error(), "too little of the invocation left for its results") {
		t.Fatalf("got %s %v, want NotSmallError for the results", source.ErrorType(err), err)
	}
	p, ok := store.Puts[work+"/"+pipeline.ProgressKey(pipeline.SiloOwner("t1"), execName, 0)]
	if !ok {
		t.Fatal("got no progress written, want it at the segment's end")
	}
	sp, err := s.Split.Handle(context.Background(), pipeline.SplitRequest{Tenant: req.Input.Tenant, Source: req.Input.Source, ExecutionName: execName})
	if err != nil {
		t.Fatal(err)
	}
	s.Register.now = nil
	res, err := s.Register.Handle(context.Background(), s.chunkRequest(req, sp))
	if err != nil || !res.Done || res.Registered != 0 {
		t.Fatalf("got %+v, %v (progress %s); want done with nothing sent again", res, err, p)
	}
	if got := recordNumbers(c.seen); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("got records %v sent, want 1 and 2 once each", got)
	}
}

// A file of several chunks, within one segment, is registered chunk after chunk in the one
// invocation, from memory: every record once in order, the core system's rejection at its line
// (the chunks' first lines come from Split's scan, not from reading the object again), and nothing
// read but the object, the absent progress and the results' parts, nor any progress written.
func TestSmallFileSeveralChunks(t *testing.T) {
	c := newCore(t, func(_ int, r seenRequest) int {
		if r.Body.RecordNumber == 5 {
			return http.StatusUnprocessableEntity
		}
		return 200
	})
	store := sourcetest.NewFakeS3()
	tenant := csvTenant(c.srv.URL) // chunks of 3: records 1-3, 4-6, 7-9, 10
	tenant.OnInvalidRecord, tenant.RejectStatuses = pipeline.OnInvalidSkipRecord, []int{http.StatusUnprocessableEntity}
	s, req := smallFixture(t, store, tenant, csvRecords(10))
	res, err := s.Handle(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if want := (pipeline.SmallFileResult{Records: 10, Registered: 9, Rejected: 1}); res != want {
		t.Errorf("got %+v, want %+v", res, want)
	}
	if got := recordNumbers(c.seen); !slices.Equal(got, oneTo(10)) {
		t.Errorf("got records %v sent, want 1 to 10 once each in order", got)
	}
	var gets []string
	for _, g := range store.Gets {
		if !strings.HasPrefix(*g.Key, results.PartsPrefix(pipeline.SiloOwner("t1"), execName)) {
			gets = append(gets, *g.Key)
		}
	}
	if want := []string{"inbox/t1/a.csv", pipeline.ProgressKey(pipeline.SiloOwner("t1"), execName, 0)}; !slices.Equal(gets, want) {
		t.Errorf("got GETs %v besides the results' parts, want %v", gets, want)
	}
	part := store.Puts[ingest+"/"+results.RegisterPartKey(pipeline.SiloOwner("t1"), execName, 0, 1)]
	if !strings.Contains(string(part), `"line":6,"record":5`) {
		t.Errorf("got the rejections' part %q, want record 5 at line 6", part)
	}
	sum := summaryOf(t, store)
	if sum.Status != pipeline.StatusSucceeded || sum.Records != 10 {
		t.Errorf("got summary %+v, want SUCCEEDED with 10 records", sum)
	}
	if _, ok := store.Puts[work+"/"+pipeline.ProgressKey(pipeline.SiloOwner("t1"), execName, 0)]; ok {
		t.Error("got the segment's progress written, want none: no invocation follows the small file's")
	}
}

// csvRecords is a CSV file of n records: the header id,name, then record i on line i+1.
func csvRecords(n int) []byte {
	var b strings.Builder
	b.WriteString("id,name\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d,n%d\n", i, i)
	}
	return []byte(b.String())
}

// oneTo is 1, 2, …, n.
func oneTo(n int) []int64 {
	ns := make([]int64, n)
	for i := range ns {
		ns[i] = int64(i + 1)
	}
	return ns
}

// A record the core system refuses (in the second of the file's three chunks) fails the file at it,
// with the progress there; the results the controller then asks for split the file again in memory
// and list the rest as unprocessed; and a redrive re-runs the task, which sends only the records
// from the failed one.
func TestSmallFileFailsAndRedrives(t *testing.T) {
	refuse := true
	c := newCore(t, func(_ int, r seenRequest) int {
		if refuse && r.Body.RecordNumber == 5 {
			return http.StatusBadRequest
		}
		return 200
	})
	store := sourcetest.NewFakeS3()
	tenant := csvTenant(c.srv.URL)
	s, req := smallFixture(t, store, tenant, csvRecords(7))
	tenant = req.Input.Tenant

	_, err := s.Handle(context.Background(), req)
	if source.ErrorType(err) != pipeline.ErrPermanent {
		t.Fatalf("got %s %v, want PermanentError", source.ErrorType(err), err)
	}
	// The controller's request: the execution's history has SmallFile and no Split result.
	rr := pipeline.ResultsRequest{Kind: pipeline.TaskResults, Status: pipeline.StatusFailed, ExecutionName: execName, ExecutionARN: req.ExecutionARN,
		State: pipeline.ResultsState{Tenant: tenant, Source: req.Input.Source, SmallFile: true,
			Error: &pipeline.TaskError{Error: pipeline.ErrPermanent, Cause: err.Error()}}}
	writes := len(store.Puts)
	if err := s.Split.Results(context.Background(), rr); err != nil {
		t.Fatal(err)
	}
	sum := summaryOf(t, store)
	if sum.Records != 7 || sum.Registered != 4 || sum.Unprocessed != 3 {
		t.Errorf("got summary records %d registered %d unprocessed %d, want 7, 4, 3", sum.Records, sum.Registered, sum.Unprocessed)
	}
	if got := string(store.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), execName, results.UnprocessedCSV)]); got != "id,name\n5,n5\n6,n6\n7,n7\n" {
		t.Errorf("got unprocessed.csv %q, want the header and records 5 to 7", got)
	}
	if n := len(store.Puts) - writes; n != 2 || store.Puts[work+"/"+pipeline.ManifestKey(pipeline.SiloOwner("t1"), execName)] != nil {
		t.Errorf("got %d writes by the results task, want 2 (unprocessed.csv, summary.json): splitting again writes nothing", n)
	}

	refuse = false
	req.RedriveCount = 1
	if _, err := s.Handle(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := recordNumbers(c.seen); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 5, 6, 7}) {
		t.Errorf("got records %v sent, want 1 to 5 (refused), then the redrive's 5 to 7", got)
	}
	if sum := summaryOf(t, store); sum.Status != pipeline.StatusSucceeded || sum.Registered != 7 || sum.RedriveCount != 1 {
		t.Errorf("got summary %+v, want the redrive's SUCCEEDED with 7 registered", sum)
	}
}

// The Register function serves both requests by their kind.
func TestSmallFileInvokeDispatches(t *testing.T) {
	c := newCore(t, nil)
	store := sourcetest.NewFakeS3()
	s, req := smallFixture(t, store, csvTenant(c.srv.URL), []byte("id,name\n1,a\n"))
	b, _ := json.Marshal(req)
	out, err := s.Invoke(context.Background(), b)
	if err != nil || out.(pipeline.SmallFileResult).Registered != 1 {
		t.Fatalf("got %+v, %v; want the small file registered", out, err)
	}
	sp, err := s.Split.Handle(context.Background(), pipeline.SplitRequest{Tenant: req.Input.Tenant, Source: req.Input.Source, ExecutionName: "other"})
	if err != nil {
		t.Fatal(err)
	}
	cr := s.chunkRequest(req, sp)
	cr.ExecutionName = "other"
	b, _ = json.Marshal(cr)
	if out, err := s.Invoke(context.Background(), b); err != nil || out.(pipeline.ChunkResult).Registered != 1 {
		t.Fatalf("got %+v, %v; want the chunk registered", out, err)
	}
	if _, err := s.Invoke(context.Background(), []byte(`[1]`)); source.ErrorType(err) != pipeline.ErrPermanent {
		t.Errorf("got %v for a request that is not an object, want PermanentError", err)
	}
}

// Under skipRecord the SmallFile task rejects an invalid record as Split does (its part, then the
// results' rejected file) and registers the others.
func TestSmallFileSkipsInvalidRecords(t *testing.T) {
	c := newCore(t, nil)
	store := sourcetest.NewFakeS3()
	tenant := csvTenant(c.srv.URL)
	tenant.OnInvalidRecord = pipeline.OnInvalidSkipRecord
	s, req := smallFixture(t, store, tenant, []byte("id,name\n1,a\n2\n3,c\n"))
	res, err := s.Handle(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Registered != 2 || res.Rejected != 1 {
		t.Errorf("got %+v, want 2 registered and 1 rejected", res)
	}
	if got := recordNumbers(c.seen); !slices.Equal(got, []int64{1, 3}) {
		t.Errorf("got records %v sent, want 1 and 3", got)
	}
	sum := summaryOf(t, store)
	if sum.Registered != 2 || sum.Rejected != 1 || sum.Files.Rejected == "" {
		t.Errorf("got summary %+v, want 2 registered, 1 rejected, with the rejected file", sum)
	}
}

// hangingPuts is an S3 whose writes hang until the call's context ends.
type hangingPuts struct{ *sourcetest.FakeS3 }

func (h hangingPuts) PutObject(ctx context.Context, _ *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// Results that hang end before the Lambda deadline: the task succeeds with its records registered,
// rather than being killed and retried whole, which would send every record again.
func TestSmallFileResultsEndBeforeTheDeadline(t *testing.T) {
	c := newCore(t, nil)
	store := sourcetest.NewFakeS3()
	s, req := smallFixture(t, store, csvTenant(c.srv.URL), []byte("id,name\n1,a\n2,b\n"))
	s.Register.DeadlineMargin, s.Register.HTTPTimeout = time.Second, 500*time.Millisecond
	s.ResultsTime = time.Second // 3 s are left after the margin
	s.Split.S3 = hangingPuts{store}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	res, err := s.Handle(ctx, req)
	if err != nil || res.Registered != 2 {
		t.Fatalf("got %+v, %v; want both records registered and the task succeeded without its results", res, err)
	}
	if ctx.Err() != nil {
		t.Error("the task returned after the Lambda deadline, want before it")
	}
}

// The SmallFile task's one chunk carries the file's start (its admission), as a segment of the full
// path does: the adaptive limit lets only a 429 of a file admitted after its last decrease lower it
// again, so a request without it could never lower the limit.
func TestSmallFileChunkCarriesTheFileStart(t *testing.T) {
	tests := []struct {
		start string
		want  time.Time
	}{
		{"2026-12-03T08:00:00Z", time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)},
		{"2026-12-03T08:00:00.123Z", time.Date(2026, 12, 3, 8, 0, 0, 123_000_000, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.start, func(t *testing.T) {
			s, req := smallFixture(t, sourcetest.NewFakeS3(), pipeline.Tenant{}, []byte("id\n1\n"))
			req.StartTime = tt.start
			if got := fileAdmitted(s.chunkRequest(req, pipeline.SplitResult{})); !got.Equal(tt.want) {
				t.Errorf("got the chunk's file admitted at %v, want %v", got, tt.want)
			}
		})
	}
}

// A core system that asks for a wait longer than the invocation has (a 429 with a Retry-After of
// 10 minutes, in the file's second chunk) makes the SmallFile task hand on at the record that
// waits, after Register wrote the progress there: the full path sends it again with the same key,
// and nothing before it.
func TestSmallFileHandsOnToWait(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	waiting := true
	c := newThrottlingCore(t, func(_ int, key string) (int, string) {
		if waiting && strings.HasSuffix(key, "-5") {
			return http.StatusTooManyRequests, "600"
		}
		return http.StatusOK, ""
	})
	store := sourcetest.NewFakeS3()
	s, req := smallFixture(t, store, csvTenant(c.srv.URL), csvRecords(7)) // chunks of 3
	s.Register.now = clock.now
	s.Register.sleep = func(_ context.Context, d time.Duration) error { clock.add(d); return nil }
	ctx, cancel := context.WithDeadline(context.Background(), clock.now().Add(60*time.Second))
	defer cancel()
	_, err := s.Handle(ctx, req)
	if source.ErrorType(err) != pipeline.ErrNotSmall || !strings.Contains(err.Error(), "it resumes at record 5") {
		t.Fatalf("got %s %v, want NotSmallError resuming at record 5", source.ErrorType(err), err)
	}
	waiting = false
	sp, err := s.Split.Handle(context.Background(), pipeline.SplitRequest{Tenant: req.Input.Tenant, Source: req.Input.Source, ExecutionName: execName})
	if err != nil {
		t.Fatal(err)
	}
	s.Register.now = nil
	if res, err := s.Register.Handle(context.Background(), s.chunkRequest(req, sp)); err != nil || !res.Done || res.Registered != 3 {
		t.Fatalf("got %+v, %v; want records 5 to 7 registered, done", res, err)
	}
	var want []string
	for _, n := range []int{1, 2, 3, 4, 5, 5, 6, 7} {
		want = append(want, fmt.Sprintf("%s-%d", execName, n))
	}
	if got := c.seen(); !slices.Equal(got, want) {
		t.Errorf("got keys %q, want %q: record 5 again after the wait, nothing else twice", got, want)
	}
}

// A small-file request whose core system URL is not the deployed one is refused before the file
// is read: no GET, no write, nothing sent; the deployed URL's request runs.
func TestSmallFileRefusesSettingsNotDeployed(t *testing.T) {
	c := newCore(t, nil)
	for _, tc := range []struct {
		name string
		url  string
		want bool // refused
	}{
		{"the deployed URL", c.srv.URL, false},
		{"another URL", "https://evil.example.net/records", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := sourcetest.NewFakeS3()
			s, req := smallFixture(t, store, csvTenant(tc.url), []byte("id,name\n1,a\n"))
			deployed := req.Input.Tenant
			deployed.RegisterURL = c.srv.URL
			s.Register.Deployed = func(string) (pipeline.Tenant, error) { return deployed, nil }
			_, err := s.Handle(context.Background(), req)
			var pe *pipeline.PermanentError
			if !tc.want {
				if err != nil {
					t.Fatalf("got %v, want the file registered", err)
				}
				return
			}
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), "registerUrl") {
				t.Fatalf("got %v, want a PermanentError naming registerUrl", err)
			}
			if len(store.Gets) != 0 || len(store.Puts) != 0 {
				t.Errorf("got %d GETs and %d writes, want none", len(store.Gets), len(store.Puts))
			}
		})
	}
}
