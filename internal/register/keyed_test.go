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
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// keyedCall is one POST as the keyed core system saw it arrive.
type keyedCall struct {
	record   int64
	idemKey  string
	inFlight int // the core system's requests in flight at its arrival, itself included
	reply    chan keyedReply
}

type keyedReply struct {
	status     int
	retryAfter string
}

// keyedCore is a core system (a Doer) that checks key order as it goes: every request's record
// must be its key's next one in file order (the next after the last it answered for good), no two
// requests of one key may be in flight, and no more than window requests at all. answer decides
// each reply and may block (a barrier, or the test conducting the replies).
type keyedCore struct {
	t      *testing.T
	window int
	keyOf  map[int64]string // the record's key, by record number
	answer func(ctx context.Context, c *keyedCall) keyedReply

	mu       sync.Mutex
	next     map[string][]int64 // each key's records not yet acknowledged, in file order
	busy     map[string]bool
	inFlight int
	peak     int
	// firstWindow, when set, bounds by window only the requests sent before the first answer (a
	// window that starts small and grows with answers), and firstPeak is the peak among them.
	firstWindow bool
	answered    int
	firstPeak   int
	calls       []keyedCall // in arrival order
	acked       []int64
}

// newKeyedCore expects the records numbered from, in file order, each with its key.
func newKeyedCore(t *testing.T, window int, keys map[int64]string, from int64) *keyedCore {
	c := &keyedCore{t: t, window: window, keyOf: keys, next: map[string][]int64{}, busy: map[string]bool{}}
	nums := make([]int64, 0, len(keys))
	for n := range keys {
		if n >= from {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	for _, n := range nums {
		c.next[keys[n]] = append(c.next[keys[n]], n)
	}
	c.answer = func(context.Context, *keyedCall) keyedReply { return keyedReply{status: 200} }
	return c
}

func (c *keyedCore) Do(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	var rec wireRecord
	if err := json.Unmarshal(body, &rec); err != nil {
		c.t.Errorf("got an invalid body: %v", err)
	}
	n := rec.RecordNumber
	key := c.keyOf[n]
	c.mu.Lock()
	c.inFlight++
	c.peak = max(c.peak, c.inFlight)
	if c.answered == 0 {
		c.firstPeak = max(c.firstPeak, c.inFlight)
	}
	if c.inFlight > c.window && (!c.firstWindow || c.answered == 0) {
		c.t.Errorf("record %d: got %d requests in flight, want at most %d", n, c.inFlight, c.window)
	}
	if c.busy[key] {
		c.t.Errorf("record %d: got two requests of key %s in flight", n, key)
	}
	if q := c.next[key]; len(q) == 0 || q[0] != n {
		c.t.Errorf("record %d: got it sent while key %s waits for %v first (file order)", n, key, q[:min(1, len(q))])
	}
	c.busy[key] = true
	call := keyedCall{record: n, idemKey: req.Header.Get("Idempotency-Key"), inFlight: c.inFlight, reply: make(chan keyedReply, 1)}
	c.calls = append(c.calls, call)
	c.mu.Unlock()

	r := c.answer(req.Context(), &call)

	c.mu.Lock()
	c.inFlight--
	c.answered++
	delete(c.busy, key)
	switch {
	case r.status >= 200 && r.status < 300:
		c.acked = append(c.acked, n)
		fallthrough
	case r.status != 0 && !slowDown(r.status) && r.status != http.StatusUnauthorized:
		c.next[key] = c.next[key][1:] // answered for good: the key's next record may follow
	}
	c.mu.Unlock()
	if r.status == 0 {
		return nil, req.Context().Err()
	}
	h := http.Header{}
	if r.retryAfter != "" {
		h.Set("Retry-After", r.retryAfter)
	}
	return &http.Response{StatusCode: r.status, Header: h, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// sent is the records of the calls, in arrival order.
func (c *keyedCore) sent() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ns []int64
	for _, call := range c.calls {
		ns = append(ns, call.record)
	}
	return ns
}

// barrier holds the first n requests until n are in flight, then answers every request 200: so
// the peak is at least n, or (a schedule that never has n in flight) the held requests time out.
func barrier(n int) func(context.Context, *keyedCall) keyedReply {
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
	)
	return func(ctx context.Context, _ *keyedCall) keyedReply {
		mu.Lock()
		arrived++
		first := arrived <= n
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		if first {
			select {
			case <-all:
			case <-ctx.Done():
				return keyedReply{}
			}
		}
		return keyedReply{status: 200}
	}
}

// keyedFile is a CSV file "id,k,secret" of len(keys) records, record i+1 of key keys[i], with
// the keyed tenant that reads it.
func keyedFile(keys []string, window int) (pipeline.Tenant, []byte, map[int64]string) {
	var b strings.Builder
	b.WriteString("id,k,secret\n")
	byNum := map[int64]string{}
	for i, k := range keys {
		fmt.Fprintf(&b, "%d,%s,SECRET-%d\n", i+1, k, i+1)
		byNum[int64(i+1)] = k
	}
	t := csvTenant("http://core.test/records")
	t.RecordOrder, t.KeyColumns, t.MaxRecordsInFlight = pipeline.RecordOrderKey, []string{"k"}, window
	t.ChunkSize = 100
	return t, []byte(b.String()), byNum
}

func keyedHandler(s3 *sourcetest.FakeS3, core Doer, log io.Writer) *Handler {
	h := newHandler(s3, &fakeSecrets{})
	h.HTTP, h.HTTPTimeout = core, 30*time.Second
	h.Log = slog.New(slog.NewJSONHandler(log, nil))
	h.sleep = func(context.Context, time.Duration) error { return nil }
	return h
}

func keysOf(n int, key func(i int) string) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = key(i)
	}
	return ks
}

// TestKeyedOrderPerKey: a keyed file's records each sent once, each key's in file order, never two
// of one key in flight and never more than the window, and as many in flight as the window and the
// keys allow (the barrier holds the first requests until that many are in flight).
func TestKeyedOrderPerKey(t *testing.T) {
	tests := []struct {
		name     string
		keys     []string
		window   int
		core     *pipeline.CoreSystem
		jsonl    bool
		wantPeak int
	}{
		{name: "50 keys interleaved, 8 in flight", keys: keysOf(200, func(i int) string { return fmt.Sprint("c", i%50) }), window: 8, wantPeak: 8},
		{name: "runs of one key: as many in flight as keys", keys: keysOf(60, func(i int) string { return fmt.Sprint("c", i/10) }), window: 8, wantPeak: 6},
		{name: "one key: one at a time", keys: keysOf(30, func(int) string { return "same" }), window: 8, wantPeak: 1},
		{name: "window 3", keys: keysOf(90, func(i int) string { return fmt.Sprint("c", i%7) }), window: 3, wantPeak: 3},
		{name: "the core system's share bounds the window", keys: keysOf(40, func(i int) string { return fmt.Sprint("c", i) }), window: 8,
			core: &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 2, MaxRequestsInFlight: 4}, wantPeak: 2},
		{name: "JSON Lines, keyed by two fields", keys: keysOf(120, func(i int) string { return fmt.Sprintf("%d/%d", i%3, i%5) }), window: 8, jsonl: true, wantPeak: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant, data, keys := keyedFile(tt.keys, tt.window)
			tenant.CoreSystem = tt.core
			if tt.jsonl {
				var b strings.Builder
				for i, k := range tt.keys {
					a, c, _ := strings.Cut(k, "/")
					fmt.Fprintf(&b, `{"id":%d,"a":%q,"b":%s,"secret":"SECRET"}`+"\n", i+1, a, c)
				}
				data = []byte(b.String())
				tenant.Format, tenant.KeyColumns = pipeline.FormatJSONL, []string{"a", "b"}
			}
			fake := sourcetest.NewFakeS3()
			reqs := fixture(t, fake, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, data)
			core := newKeyedCore(t, tenant.RecordsInFlight(), keys, 1)
			core.answer = barrier(tt.wantPeak)
			var logs bytes.Buffer
			h := keyedHandler(fake, core, &logs)

			res, err := h.Handle(context.Background(), run(reqs, 0, len(reqs)-1))
			if err != nil {
				t.Fatalf("got %v, want the file registered", err)
			}
			if !res.Done || res.Registered != int64(len(tt.keys)) {
				t.Errorf("got done %v, registered %d; want done, %d", res.Done, res.Registered, len(tt.keys))
			}
			sent := core.sent()
			if got := slices.Sorted(slices.Values(sent)); !reflect.DeepEqual(got, seq(1, int64(len(tt.keys)))) {
				t.Errorf("got records sent %v, want each of 1..%d once", got, len(tt.keys))
			}
			for _, c := range core.calls {
				if want := IdempotencyKey(execName, c.record); c.idemKey != want {
					t.Errorf("record %d: got key %q, want %q", c.record, c.idemKey, want)
				}
			}
			if core.peak != tt.wantPeak {
				t.Errorf("got a peak of %d in flight, want %d", core.peak, tt.wantPeak)
			}
			if want := fmt.Sprintf(`"peakInFlight":%d`, tt.wantPeak); !strings.Contains(logs.String(), want) {
				t.Errorf("got log %s, want %s on chunks registered", logs.String(), want)
			}
		})
	}
}

// conduct answers the keyed core's requests as the test says: each arriving call is handed to the
// test on arrivals, and waits for its reply. answered hears of each answer the schedule of h took
// in.
func conduct(core *keyedCore, h *Handler) (arrivals chan *keyedCall, answered chan int64) {
	arrivals, answered = make(chan *keyedCall, 1024), make(chan int64, 1024)
	h.keyedAnswered = func(n int64) { answered <- n }
	core.answer = func(ctx context.Context, c *keyedCall) keyedReply {
		arrivals <- c
		select {
		case r := <-c.reply:
			return r
		case <-ctx.Done():
			return keyedReply{}
		}
	}
	return arrivals, answered
}

// step is one reply of a conducted test: the status to answer the call of record to, then the
// records expected to arrive because of it (in any order), each with at most inFlight requests in
// flight at its arrival (0: not checked).
type step struct {
	to         int64
	status     int
	retryAfter string
	arrive     []int64
	inFlight   int
}

// play runs the steps against arrivals, which first brings the records first. After a reply that
// the schedule takes in (not one whose record is resent), it waits for answered to name that
// record before the next, so that the schedule sees the replies in the steps' order.
func play(t *testing.T, arrivals chan *keyedCall, answered chan int64, first []int64, steps []step) {
	t.Helper()
	waiting := map[int64]*keyedCall{}
	expect := func(recs []int64, inFlight int) {
		t.Helper()
		var got []int64
		for range recs {
			var c *keyedCall
			select {
			case c = <-arrivals:
			case <-time.After(20 * time.Second): // a safety net for a schedule that never sends them
				t.Fatalf("got records %v arriving, want %v", got, recs)
			}
			got = append(got, c.record)
			waiting[c.record] = c
			if inFlight > 0 && c.inFlight > inFlight {
				t.Errorf("record %d: got %d in flight at its arrival, want at most %d (the window)", c.record, c.inFlight, inFlight)
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(recs))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got records %v arriving, want %v", got, want)
		}
	}
	expect(first, 0)
	for _, s := range steps {
		c, ok := waiting[s.to]
		if !ok {
			t.Fatalf("record %d is not in flight", s.to)
		}
		delete(waiting, s.to)
		c.reply <- keyedReply{status: s.status, retryAfter: s.retryAfter}
		if !slices.Contains(s.arrive, s.to) {
			select {
			case n := <-answered:
				if n != s.to {
					t.Fatalf("got the answer to record %d taken in, want record %d's", n, s.to)
				}
			case <-time.After(20 * time.Second): // a safety net
				t.Fatalf("the answer to record %d was never taken in", s.to)
			}
		}
		expect(s.arrive, s.inFlight)
	}
}

// TestKeyedWindow: a 429 or 503 halves the file's window (at least 1) once per round trip, and
// a window's worth of answers grows it by 1 back to maxRecordsInFlight. Window 4, 12 records of
// 12 keys; the test answers one request at a time and counts what arrives. A resend after a 429
// is the same request, still in flight.
func TestKeyedWindow(t *testing.T) {
	tenant, data, keys := keyedFile(keysOf(12, func(i int) string { return fmt.Sprint("c", i) }), 4)
	fake := sourcetest.NewFakeS3()
	reqs := fixture(t, fake, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, data)
	core := newKeyedCore(t, 4, keys, 1)
	h := keyedHandler(fake, core, io.Discard)
	arrivals, answered := conduct(core, h)
	done := make(chan error, 1)
	go func() { _, err := h.Handle(context.Background(), reqs[0]); done <- err }()

	play(t, arrivals, answered, []int64{1, 2, 3, 4}, []step{
		{to: 1, status: 429, retryAfter: "0", arrive: []int64{1}}, // window 2
		{to: 2, status: 503, retryAfter: "0", arrive: []int64{2}}, // sent before the decrease: still 2
		{to: 1, status: 200}, // 1 answer of 2
		{to: 2, status: 200, arrive: []int64{5}, inFlight: 3},    // window 3
		{to: 3, status: 200, arrive: []int64{6}, inFlight: 3},    // 1 of 3
		{to: 4, status: 200, arrive: []int64{7}, inFlight: 3},    // 2 of 3
		{to: 5, status: 200, arrive: []int64{8, 9}, inFlight: 4}, // window 4: recovered
		{to: 6, status: 200, arrive: []int64{10}, inFlight: 4},
		{to: 7, status: 200, arrive: []int64{11}, inFlight: 4},
		{to: 8, status: 200, arrive: []int64{12}, inFlight: 4},
		{to: 9, status: 200}, {to: 10, status: 200}, {to: 11, status: 200}, {to: 12, status: 200},
	})
	if err := <-done; err != nil {
		t.Fatalf("got %v, want the chunk registered", err)
	}
}

// TestKeyedFailure: a failed record stops new sends, the requests in flight finish, and the
// invocation fails at the low-water mark, with the segment's progress at the mark and the records
// past it that other keys registered (Progress.Registered); a slow-down that does not fit hands
// the mark on instead. A new segment execution (a redrive) resends from the mark with the same
// idempotency keys.
func TestKeyedFailure(t *testing.T) {
	distinct := keysOf(12, func(i int) string { return fmt.Sprint("c", i) })
	tests := []struct {
		name     string
		keys     []string
		first    []int64 // the window's first requests
		steps    []step
		deadline bool // the invocation has an hour left
		wantErr  string
		wantMsg  string // in the error
		wantSent []int64
		wantNext int64  // the result's nextRecord, without an error
		wantPut  string // the progress written
		mark     int64  // where the redrive resumes
	}{
		{name: "failure at record 3: in-flight ones finish, nothing new is sent, the mark is 3",
			keys: distinct, first: []int64{1, 2, 3, 4},
			steps: []step{
				{to: 1, status: 200, arrive: []int64{5}},
				{to: 2, status: 200, arrive: []int64{6}},
				{to: 3, status: 400},
				{to: 4, status: 200}, {to: 6, status: 200}, {to: 5, status: 200},
			},
			wantErr: pipeline.ErrPermanent, wantMsg: "record 3: the core system rejected it with 400", wantSent: seq(1, 6),
			wantPut: `{"version":1,"next":0,"record":3,"registered":[{"first":4,"last":6}]}`, mark: 3},
		{name: "the invocation's first record fails: the records other keys registered past it are saved all the same",
			keys: distinct, first: []int64{1, 2, 3, 4},
			steps: []step{
				{to: 2, status: 200, arrive: []int64{5}},
				{to: 1, status: 400},
				{to: 3, status: 200}, {to: 4, status: 200}, {to: 5, status: 200},
			},
			wantErr: pipeline.ErrPermanent, wantMsg: "record 1: the core system rejected it with 400", wantSent: seq(1, 5),
			wantPut: `{"version":1,"next":0,"registered":[{"first":2,"last":5}]}`, mark: 1},
		{name: "a record of a busy key before the failed one: the mark stays at it",
			keys: []string{"a", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}, first: []int64{1, 3, 4, 5},
			steps: []step{
				{to: 3, status: 400},
				{to: 1, status: 200}, {to: 4, status: 200}, {to: 5, status: 200},
			},
			wantErr: pipeline.ErrPermanent, wantMsg: "record 3:", wantSent: []int64{1, 3, 4, 5},
			wantPut: `{"version":1,"next":0,"record":2,"registered":[{"first":4,"last":5}]}`, mark: 2},
		{name: "a lower failure after a higher one: the lowest is the file's",
			keys: distinct, first: []int64{1, 2, 3, 4},
			steps: []step{
				{to: 4, status: 422},
				{to: 2, status: 400},
				{to: 1, status: 200}, {to: 3, status: 200},
			},
			wantErr: pipeline.ErrPermanent, wantMsg: "record 2: the core system rejected it with 400", wantSent: seq(1, 4),
			wantPut: `{"version":1,"next":0,"record":2,"registered":[{"first":3,"last":3}]}`, mark: 2},
		{name: "a higher failure after a lower one: the lowest stays the file's",
			keys: distinct, first: []int64{1, 2, 3, 4},
			steps: []step{
				{to: 2, status: 400},
				{to: 4, status: 422},
				{to: 1, status: 200}, {to: 3, status: 200},
			},
			wantErr: pipeline.ErrPermanent, wantMsg: "record 2: the core system rejected it with 400", wantSent: seq(1, 4),
			wantPut: `{"version":1,"next":0,"record":2,"registered":[{"first":3,"last":3}]}`, mark: 2},
		{name: "a slow-down past the invocation's time hands the mark on",
			keys: distinct, first: []int64{1, 2, 3, 4}, deadline: true,
			steps: []step{
				{to: 2, status: 503, retryAfter: "7200"},
				{to: 1, status: 200}, {to: 3, status: 200}, {to: 4, status: 200},
			},
			// The 503 halved the window to 2, the three answers after it brought it to 3: the next
			// invocation starts there.
			wantSent: seq(1, 4), wantNext: 2, wantPut: `{"version":1,"next":0,"record":2,"window":3}`, mark: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant, data, keys := keyedFile(tt.keys, 4)
			fake := sourcetest.NewFakeS3()
			reqs := fixture(t, fake, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, data)
			req := reqs[0]
			req.Segment = &pipeline.Segment{Index: 0, FirstChunk: 0, LastChunk: 0}
			core := newKeyedCore(t, 4, keys, 1)
			h := keyedHandler(fake, core, io.Discard)
			arrivals, answered := conduct(core, h)
			ctx := context.Background()
			if tt.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			type result struct {
				res pipeline.ChunkResult
				err error
			}
			done := make(chan result, 1)
			go func() { res, err := h.Handle(ctx, req); done <- result{res, err} }()
			play(t, arrivals, answered, tt.first, tt.steps)
			// Anything sent after the last step is answered, and counted below.
			go func() {
				for c := range arrivals {
					c.reply <- keyedReply{status: 200}
				}
			}()
			got := <-done
			close(arrivals)

			if typ := source.ErrorType(got.err); typ != tt.wantErr && (got.err != nil || tt.wantErr != "") {
				t.Fatalf("got error %v (%s), want %q", got.err, typ, tt.wantErr)
			}
			if got.err != nil && !strings.Contains(got.err.Error(), tt.wantMsg) {
				t.Errorf("got error %q, want it to contain %q", got.err, tt.wantMsg)
			}
			if got.err == nil && (got.res.Next != 0 || got.res.NextRecord != tt.wantNext) {
				t.Errorf("got cursor %d/%d, want 0/%d", got.res.Next, got.res.NextRecord, tt.wantNext)
			}
			if sent := slices.Sorted(slices.Values(core.sent())); !reflect.DeepEqual(sent, tt.wantSent) {
				t.Errorf("got records sent %v, want %v (nothing new after the failure)", sent, tt.wantSent)
			}
			key := pipeline.ProgressKey(pipeline.SiloOwner(tenant.ID), execName, 0)
			if put := string(fake.Puts[work+"/"+key]); put != tt.wantPut {
				t.Errorf("got progress %s, want %s", put, tt.wantPut)
			}

			// The redrive: a new segment execution reads the progress and resends from the mark.
			again := newKeyedCore(t, 4, keys, tt.mark)
			h = keyedHandler(fake, again, io.Discard)
			res, err := h.Handle(context.Background(), req)
			if err != nil || !res.Done {
				t.Fatalf("got %v, done %v; want the redrive to finish the file", err, res.Done)
			}
			if sent := slices.Sorted(slices.Values(again.sent())); !reflect.DeepEqual(sent, seq(tt.mark, 12)) {
				t.Errorf("got records resent %v, want %v", sent, seq(tt.mark, 12))
			}
			for _, c := range again.calls {
				if want := IdempotencyKey(execName, c.record); c.idemKey != want {
					t.Errorf("record %d: got key %q, want %q, the first attempt's", c.record, c.idemKey, want)
				}
			}
		})
	}
}

// TestKeyedLead: while one slow key holds the low-water mark at record 1, no record more than
// MaxKeyedLead past it is sent, however many other keys are idle; once it is acknowledged, the
// rest goes. The schedule is run by hand: every record but the first is answered as soon as it
// starts.
func TestKeyedLead(t *testing.T) {
	const n = pipeline.MaxKeyedLead + 200
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i].Number = int64(i + 1)
	}
	r := newKeyedRun(recs, nil)
	for i := range recs {
		r.keys[i] = fmt.Sprint("c", i)
	}
	r.keys[0] = "slow"
	var started, queue []int
	start := func(i int) { started, queue = append(started, i), append(queue, i) }
	r.dispatch(8, start)
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		if i == 0 {
			continue // the slow key's record stays in flight
		}
		r.finish(i, keyedAcknowledged)
		r.dispatch(8, start)
	}
	if got, want := recs[slices.Max(started)].Number, int64(1+pipeline.MaxKeyedLead); got != want {
		t.Errorf("got record %d sent while record 1 is in flight, want none past %d", got, want)
	}
	if got, want := len(started), 1+pipeline.MaxKeyedLead; got != want {
		t.Errorf("got %d records sent while record 1 is in flight, want %d", got, want)
	}
	if r.mark != 0 || !reflect.DeepEqual(r.acknowledgedPast(), seq(2, 1+pipeline.MaxKeyedLead)) {
		t.Errorf("got mark %d and %d acknowledged past it, want 0 and records 2..%d", r.mark, len(r.acknowledgedPast()), 1+pipeline.MaxKeyedLead)
	}
	r.finish(0, keyedAcknowledged)
	r.dispatch(8, start)
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		r.finish(i, keyedAcknowledged)
		r.dispatch(8, start)
	}
	if len(started) != n || r.mark != n {
		t.Errorf("got %d records sent and mark %d, want all %d", len(started), r.mark, n)
	}
}

// TestKeyedRefusedKey: Register's parse refuses a record with an empty key as Split does, so
// the sink meets one only if the two disagree; it then fails closed at that record, naming it and
// never its values, after the records before it. A key column missing from the header fails
// before anything is sent. The sink is driven directly, with records the parse would refuse.
func TestKeyedRefusedKey(t *testing.T) {
	csv := func(n int64, k string) records.Record {
		return records.Record{Number: n, Fields: []string{fmt.Sprint(n), k, "SECRET"}}
	}
	tests := []struct {
		name     string
		recs     []records.Record
		jsonl    bool
		cols     []string
		wantDone int64
		wantMsg  string
		wantSent []int64
	}{
		{name: "an empty key fails at its record",
			recs: []records.Record{csv(1, "a"), csv(2, "b"), csv(3, ""), csv(4, "c")}, cols: []string{"k"},
			wantDone: 2, wantMsg: `record 3 has an empty key (keyColumns "k")`, wantSent: []int64{1, 2}},
		{name: "a JSON field that is an object",
			recs:  []records.Record{{Number: 1, JSON: json.RawMessage(`{"k":"a"}`)}, {Number: 2, JSON: json.RawMessage(`{"k":{"x":"SECRET"}}`)}},
			jsonl: true, cols: []string{"k"},
			wantDone: 1, wantMsg: `record 2: keyColumns field "k" is an object or array`, wantSent: []int64{1}},
		{name: "a key column not in the header",
			recs: []records.Record{csv(1, "a")}, cols: []string{"nope"},
			wantMsg: `keyColumns: column "nope" is not in the file's header`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant, _, _ := keyedFile(nil, 4)
			tenant.KeyColumns = tt.cols
			req := pipeline.ChunkRequest{Tenant: tenant, ExecutionName: execName, Header: []string{"id", "k", "secret"}}
			if tt.jsonl {
				req.Tenant.Format, req.Header = pipeline.FormatJSONL, []string{}
			}
			var (
				mu   sync.Mutex
				sent []int64
			)
			core := doerFunc(func(r *http.Request) (*http.Response, error) {
				var rec wireRecord
				b, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(b, &rec)
				mu.Lock()
				sent = append(sent, rec.RecordNumber)
				mu.Unlock()
				return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
			})
			h := keyedHandler(sourcetest.NewFakeS3(), core, io.Discard)
			sink := h.sinkFor(req.Tenant, tenant.RegisterURL, h.newPace(req), &TenantClients{Secrets: h.Secrets}, &chunkRejects{})
			if _, ok := sink.(*keyedSink); !ok {
				t.Fatalf("got sink %T, want *keyedSink", sink)
			}
			done, err := sink.Write(context.Background(), h.budget(context.Background(), req), req, tt.recs)
			var we *WriteError
			if !errors.As(err, &we) || source.ErrorType(we.Err) != pipeline.ErrPermanent {
				t.Fatalf("got %v, want a WriteError of a PermanentError", err)
			}
			if done != tt.wantDone || we.Record != tt.recs[tt.wantDone].Number {
				t.Errorf("got %d done, stopped at record %d; want %d, record %d", done, we.Record, tt.wantDone, tt.recs[tt.wantDone].Number)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("got error %q, want it to contain %q and no value", err, tt.wantMsg)
			}
			slices.Sort(sent)
			if !reflect.DeepEqual(sent, tt.wantSent) {
				t.Errorf("got records sent %v, want %v", sent, tt.wantSent)
			}
		})
	}
}

type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// TestKeyedThroughDeliver: what record mode's POST does holds under key order, with several
// requests at once: a status of rejectStatuses under skipRecord rejects the record and its key's
// next record goes on; a rotated secret is fetched again after a 401 and every record is
// registered with it.
func TestKeyedThroughDeliver(t *testing.T) {
	keys := []string{"a", "b", "a", "b", "c", "a", "c", "b", "d", "e"}
	tests := []struct {
		name        string
		reject      int64 // the record answered 422
		rotate      bool
		wantAcked   int
		wantRejects string
	}{
		{name: "a rejected record: its key goes on", reject: 3, wantAcked: 9, wantRejects: `"record":3,`},
		{name: "a rotated secret", rotate: true, wantAcked: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant, data, byNum := keyedFile(keys, 4)
			tenant = skipping(tenant, 422)
			sm := &fakeSecrets{values: map[string]string{secretARN: "old"}}
			if tt.rotate {
				tenant.RegisterAuthSecretARN = secretARN
			}
			fake := sourcetest.NewFakeS3()
			reqs := fixture(t, fake, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, data)
			core := newKeyedCore(t, 4, byNum, 1)
			core.answer = barrier(4)
			answer := core.answer
			core.answer = func(ctx context.Context, c *keyedCall) keyedReply {
				r := answer(ctx, c)
				if c.record == tt.reject {
					r.status = 422
				}
				return r
			}
			auth := core.Do
			h := keyedHandler(fake, doerFunc(func(r *http.Request) (*http.Response, error) {
				if tt.rotate && r.Header.Get("Authorization") != "new" {
					return &http.Response{StatusCode: 401, Body: io.NopCloser(strings.NewReader("{}"))}, nil
				}
				return auth(r)
			}), io.Discard)
			h.Secrets = NewSecretCache(sm)
			if _, err := h.Secrets.Get(context.Background(), secretARN); err != nil { // cache "old"
				t.Fatal(err)
			}
			sm.mu.Lock()
			sm.values[secretARN] = "new"
			sm.mu.Unlock()

			res, err := h.Handle(context.Background(), reqs[0])
			if err != nil || !res.Done {
				t.Fatalf("got %v, done %v; want the chunk done", err, res.Done)
			}
			if len(core.acked) != tt.wantAcked || res.Registered+res.Rejected != int64(len(keys)) {
				t.Errorf("got %d acknowledged, %d registered and %d rejected; want %d acknowledged, all %d done",
					len(core.acked), res.Registered, res.Rejected, tt.wantAcked, len(keys))
			}
			var parts string
			for k, v := range fake.Puts {
				if strings.HasPrefix(k, ingest+"/") {
					parts += string(v)
				}
			}
			if tt.wantRejects != "" && !strings.Contains(parts, tt.wantRejects) {
				t.Errorf("got rejections %q, want %s", parts, tt.wantRejects)
			}
			// The first fetch cached "old"; at most the first window's POSTs fetch it again, and
			// every later one starts with the refreshed value.
			sm.mu.Lock()
			defer sm.mu.Unlock()
			if tt.rotate && sm.calls > 1+4 {
				t.Errorf("got %d secret fetches, want at most %d: a refreshed secret is kept for the next POSTs", sm.calls, 1+4)
			}
		})
	}
}

// TestKeyedAcrossChunks: the keyed schedule sends the next chunk's records before the chunk's
// end, under the same rules, so the window does not drain there; a failure in the chunk still
// waits for every request in flight, and the segment's progress lists the next chunk's records
// that were registered past the mark. 12 records of 12 keys in chunks of 6, window 4, one
// invocation over both chunks.
func TestKeyedAcrossChunks(t *testing.T) {
	tests := []struct {
		name    string
		steps   []step
		wantErr string
		wantPut string // the progress written
	}{
		{name: "the next chunk's records go before the chunk's end",
			steps: []step{
				{to: 1, status: 200, arrive: []int64{5}, inFlight: 4},
				{to: 2, status: 200, arrive: []int64{6}, inFlight: 4},
				{to: 3, status: 200, arrive: []int64{7}, inFlight: 4}, // chunk 1's first, with 4..6 in flight
				{to: 4, status: 200, arrive: []int64{8}, inFlight: 4},
				{to: 5, status: 200, arrive: []int64{9}, inFlight: 4},
				{to: 6, status: 200, arrive: []int64{10}, inFlight: 4},
				{to: 7, status: 200, arrive: []int64{11}, inFlight: 4},
				{to: 8, status: 200, arrive: []int64{12}, inFlight: 4},
				{to: 9, status: 200}, {to: 10, status: 200}, {to: 11, status: 200}, {to: 12, status: 200},
			}},
		{name: "a failure in the chunk keeps the next chunk's registered records",
			steps: []step{
				{to: 1, status: 200, arrive: []int64{5}},
				{to: 3, status: 200, arrive: []int64{6}},
				{to: 4, status: 200, arrive: []int64{7}},
				{to: 5, status: 200, arrive: []int64{8}},
				{to: 2, status: 400},
				{to: 6, status: 200}, {to: 7, status: 200}, {to: 8, status: 200},
			},
			wantErr: pipeline.ErrPermanent, wantPut: `{"version":1,"next":0,"record":2,"registered":[{"first":3,"last":8}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant, data, keys := keyedFile(keysOf(12, func(i int) string { return fmt.Sprint("c", i) }), 4)
			tenant.ChunkSize = 6
			fake := sourcetest.NewFakeS3()
			reqs := fixture(t, fake, tenant, pipeline.Source{Bucket: ingest, Key: "k", ETag: "etag-1"}, data)
			req := run(reqs, 0, 1)
			req.Segment = &pipeline.Segment{Index: 0, FirstChunk: 0, LastChunk: 1}
			core := newKeyedCore(t, 4, keys, 1)
			h := keyedHandler(fake, core, io.Discard)
			arrivals, answered := conduct(core, h)
			type result struct {
				res pipeline.ChunkResult
				err error
			}
			done := make(chan result, 1)
			go func() { res, err := h.Handle(context.Background(), req); done <- result{res, err} }()
			play(t, arrivals, answered, []int64{1, 2, 3, 4}, tt.steps)
			got := <-done
			if typ := source.ErrorType(got.err); typ != tt.wantErr && (got.err != nil || tt.wantErr != "") {
				t.Fatalf("got error %v (%s), want %q", got.err, typ, tt.wantErr)
			}
			if got.err == nil && (!got.res.Done || got.res.Registered != 12) {
				t.Errorf("got done %v, %d registered; want done, 12", got.res.Done, got.res.Registered)
			}
			if tt.wantPut != "" {
				if put := string(fake.Puts[work+"/"+pipeline.ProgressKey(pipeline.SiloOwner(tenant.ID), execName, 0)]); put != tt.wantPut {
					t.Errorf("got progress %s, want %s", put, tt.wantPut)
				}
			}
			select {
			case c := <-arrivals:
				t.Errorf("got record %d sent after the steps, want none", c.record)
			default:
			}
		})
	}
}
