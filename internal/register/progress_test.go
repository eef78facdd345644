package register

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// TestRegisterRunProgress pins the segment's progress: written after each successful invocation
// with the cursor it returns, and after a permanent failure that follows registered records at
// the failed record (so a redrive resumes there and the file's results know what was never sent),
// and read by every invocation, which starts at the stored cursor when it lies ahead of its own
// and inside the segment: a new segment execution (as a redrive of a file of several segments
// starts) and the failed task of a file of one segment, which a redrive re-runs at its own first
// chunk and record. The file has 30 records in chunks of 3 (chunks
// 0..9); the segment is index 1, chunks 2..9 (records 7..30).
func TestRegisterRunProgress(t *testing.T) {
	seg := &pipeline.Segment{Index: 1, FirstChunk: 2, LastChunk: 9}
	key := pipeline.ProgressKey(pipeline.SiloOwner("t1"), execName, 1)
	tests := []struct {
		name     string
		stored   string // the progress object's body; "" for none
		getErr   error  // GetObject of the progress fails with it
		noList   bool   // a missing key answers 403
		putErr   error  // every PutObject fails with it
		first    int    // the request's first chunk
		segment  *pipeline.Segment
		fail     map[int64]int // record number → status of its first POST
		wantErr  string        // error type; "" for success
		wantSent []int64
		wantNext int
		wantDone bool
		// wantRecord is the result's nextRecord.
		wantRecord int64
		wantPut    string // the progress written; "" for none
		wantWarn   string // a WARN message expected in the log
		noRead     bool   // the progress is not read
		noWarn     bool   // no WARN is logged
	}{
		{name: "written after a successful invocation", first: 2,
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "an invocation stopped at a failing later chunk writes its cursor", first: 2, fail: map[int64]int{14: 502},
			wantSent: seq(7, 14), wantNext: 4, wantRecord: 14, wantPut: `{"version":1,"next":4,"record":14}`},
		{name: "a new segment execution starts at the stored record inside a chunk", first: 2, stored: `{"version":1,"next":4,"record":14}`,
			wantSent: seq(14, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "a stored record that is not the chunk's fails the chunk, nothing sent", first: 2, stored: `{"version":1,"next":4,"record":3}`,
			wantErr: pipeline.ErrPermanent},
		{name: "a stored record past the segment's end: ignored", first: 2, stored: `{"version":1,"next":10,"record":31}`, wantWarn: "past the segment's end",
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "a failed invocation writes the failed record", first: 2, fail: map[int64]int{14: 400},
			wantErr: pipeline.ErrPermanent, wantSent: seq(7, 14), wantPut: `{"version":1,"next":4,"record":14}`},
		{name: "not written when the first record fails", first: 2, fail: map[int64]int{7: 502},
			wantErr: pipeline.ErrRetryable, wantSent: seq(7, 7)},
		{name: "not written when a record inside the first chunk fails and is retried", first: 2, fail: map[int64]int{8: 502},
			wantErr: pipeline.ErrRetryable, wantSent: seq(7, 8)},
		{name: "a permanent failure inside the first chunk writes the failed record", first: 2, fail: map[int64]int{8: 400},
			wantErr: pipeline.ErrPermanent, wantSent: seq(7, 8), wantPut: `{"version":1,"next":2,"record":8}`},
		{name: "a new segment execution starts at the stored cursor", first: 2, stored: `{"version":1,"next":6}`,
			wantSent: seq(19, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "a later invocation resumes at stored progress ahead of its cursor (a redriven task of a file of one segment)", first: 5, stored: `{"version":1,"next":8}`,
			wantSent: seq(25, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "a later invocation at its stored progress follows its own cursor", first: 5, stored: `{"version":1,"next":5}`,
			wantSent: seq(16, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "stored progress behind a later invocation's cursor (a write that failed): its own cursor, no WARN", first: 5, stored: `{"version":1,"next":3,"record":11}`,
			wantSent: seq(16, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`, noWarn: true},
		{name: "stored cursor past the segment's last chunk: done, nothing sent", first: 2, stored: `{"version":1,"next":10}`,
			wantNext: 10, wantDone: true},
		{name: "stored cursor at the segment's first chunk", first: 2, stored: `{"version":1,"next":2}`,
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "absent (404)", first: 2,
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "absent (403 without s3:ListBucket)", first: 2, noList: true,
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "corrupt: ignored", first: 2, stored: `{"version":1,"next":6`, wantWarn: "segment progress ignored",
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "unknown version: ignored", first: 2, stored: `{"version":2,"next":6}`, wantWarn: "segment progress ignored",
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "over the size bound: ignored", first: 2, stored: `{"version":1,"next":6}` + strings.Repeat(" ", pipeline.MaxProgressBytes), wantWarn: "segment progress ignored",
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "before the segment: ignored", first: 2, stored: `{"version":1,"next":1}`, wantWarn: "outside the segment",
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "past the segment's end: ignored", first: 2, stored: `{"version":1,"next":11}`, wantWarn: "outside the segment",
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, wantPut: `{"version":1,"next":10}`},
		{name: "a read that fails otherwise is retried before anything is sent", first: 2,
			getErr: sourcetest.APIError("GetObject", 503, "SlowDown"), wantErr: pipeline.ErrRetryable},
		{name: "a failed write leaves the invocation's success", first: 2, putErr: sourcetest.APIError("PutObject", 500, "InternalError"),
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, wantWarn: "segment progress not written"},
		{name: "no segment (per-chunk design): neither read nor written", first: 2, segment: &pipeline.Segment{}, stored: `{"version":1,"next":6}`,
			wantSent: seq(7, 30), wantNext: 10, wantDone: true, noRead: true},
		{name: "a segment that does not hold the run", first: 2, segment: &pipeline.Segment{Index: 1, FirstChunk: 3, LastChunk: 9},
			wantErr: pipeline.ErrPermanent, noRead: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failed := map[int64]bool{}
			c := newCore(t, func(_ int, s seenRequest) int {
				if st, ok := tt.fail[s.Body.RecordNumber]; ok && !failed[s.Body.RecordNumber] {
					failed[s.Body.RecordNumber] = true
					return st
				}
				return 200
			})
			fake := sourcetest.NewFakeS3()
			reqs := fixture(t, fake, csvTenant(c.srv.URL), pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, rows(30))
			if tt.stored != "" {
				fake.Put(work, key, &sourcetest.Object{Data: []byte(tt.stored)})
			}
			if tt.getErr != nil {
				fake.GetErrFor = map[string]error{key: tt.getErr}
			}
			fake.NoListBucket, fake.PutErr = tt.noList, tt.putErr
			var logs bytes.Buffer
			h := newHandler(fake, &fakeSecrets{})
			h.Log = slog.New(slog.NewJSONHandler(&logs, nil))
			req := run(reqs, tt.first, 9)
			req.Segment = seg
			if tt.segment != nil {
				req.Segment = tt.segment
				if *tt.segment == (pipeline.Segment{}) {
					req.Segment = nil
				}
			}

			res, err := h.Handle(context.Background(), req)
			if got := source.ErrorType(err); err != nil && got != tt.wantErr || err == nil && tt.wantErr != "" {
				t.Fatalf("got error %v (%s), want %q", err, got, tt.wantErr)
			}
			var sent []int64
			for _, s := range c.seen {
				sent = append(sent, s.Body.RecordNumber)
			}
			if !reflect.DeepEqual(sent, tt.wantSent) {
				t.Errorf("got records sent %v, want %v", sent, tt.wantSent)
			}
			put, wrote := fake.Puts[work+"/"+key]
			if got := string(put); got != tt.wantPut || wrote != (tt.wantPut != "") {
				t.Errorf("got progress written %q (%v), want %q", got, wrote, tt.wantPut)
			}
			read := false
			for _, g := range fake.Gets {
				read = read || *g.Key == key
			}
			if read == tt.noRead {
				t.Errorf("got progress read %v, want %v", read, !tt.noRead)
			}
			if tt.noWarn && strings.Contains(logs.String(), `"level":"WARN"`) {
				t.Errorf("got log %s, want no WARN", logs.String())
			}
			if tt.wantWarn != "" && !strings.Contains(logs.String(), tt.wantWarn) {
				t.Errorf("got log %s, want a WARN containing %q", logs.String(), tt.wantWarn)
			}
			if err != nil {
				return
			}
			if res.Next != tt.wantNext || res.Done != tt.wantDone || res.NextRecord != tt.wantRecord {
				t.Errorf("got next %d, done %v, nextRecord %d; want next %d, done %v, nextRecord %d",
					res.Next, res.Done, res.NextRecord, tt.wantNext, tt.wantDone, tt.wantRecord)
			}
		})
	}
}
