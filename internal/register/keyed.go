package register

import (
	"context"
	"fmt"
	"sync"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
)

// keyedSink is record mode under key order (Tenant.KeyedOrder): one POST per record with its own
// idempotency key, as recordSink sends it, but several records of different keys in flight at
// once. A record's key is its keyColumns' values (records.Keyer). The schedule keeps four rules:
//   - at most the window's requests in flight (window, which a 429 or 503 halves);
//   - never two records of one key in flight, and a key's records strictly in file order: a key's
//     next record is sent only once the previous one is acknowledged (or rejected under skipRecord);
//   - no record more than pipeline.MaxKeyedLead records past the low-water mark, the first record
//     not yet acknowledged, so that one slow key cannot leave an unbounded tail of acknowledged
//     records behind it;
//   - after a failure nothing new is sent; the requests in flight finish first.
//
// Write returns the low-water mark: every record before it is acknowledged (or rejected). On a
// failure the *WriteError's Record is the mark, its Err the error of the lowest failed record, and
// its Registered the records past the mark that were acknowledged all the same (other keys).
type keyedSink struct {
	record recordSink // one record's POST (recordSink.send)
	window *window

	answered func(record int64) // Handler.keyedAnswered

	mu   sync.Mutex
	auth string // the Authorization value, refreshed by whichever POST got a 401
}

func newKeyedSink(core coreClient, rej *chunkRejects, w *window, answered func(int64)) *keyedSink {
	return &keyedSink{record: recordSink{core, rej}, window: w, answered: answered}
}

// keyedOutcome is one record's answer, from the goroutine that sent it to the scheduler.
type keyedOutcome struct {
	i    int // the record's index in the chunk
	resp response
	kind Rejection
	err  error
}

func (s *keyedSink) Write(ctx context.Context, b budget, req pipeline.ChunkRequest, recs []records.Record) (int64, error) {
	r, err := keyedRunOf(b, req, recs)
	if err != nil {
		return 0, &WriteError{Record: recs[0].Number, Kind: RejectedSink, Err: err}
	}
	if s.auth, err = s.record.core.auth(ctx, b, req, false); err != nil {
		return 0, &WriteError{Record: recs[0].Number, Kind: rejection(err, 0), Err: err}
	}
	answers := make(chan keyedOutcome, s.window.most) // never more in flight
	for {
		r.dispatch(s.window.size(), func(i int) { go s.send(ctx, b, req, recs[i], i, answers) })
		if r.inFlight == 0 {
			break
		}
		s.take(req, r, <-answers)
	}
	return r.result(b, req)
}

// keyedRunOf is the schedule of recs with each record's key. Register's parse refuses a header
// without a key column and a record whose key is empty, as Split does (records.Format.Keys), so
// the Keyer refuses nothing here unless the two disagree: then the chunk fails closed, at that
// record, after the records before it.
func keyedRunOf(b budget, req pipeline.ChunkRequest, recs []records.Record) (*keyedRun, error) {
	keyer, err := records.NewKeyer(req.Tenant.KeyColumns, keyHeader(req))
	if err != nil {
		return nil, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d: %v", b.file, req.Chunk, err), Err: err}
	}
	r := newKeyedRun(recs)
	for i, rec := range recs {
		key, err := keyer.Key(rec)
		if err != nil {
			// It and every record after it stay unsent.
			r.limit = i
			r.fail(i, RejectedRecord, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d: %v", b.file, req.Chunk, err), Err: err})
			break
		}
		r.keys[i] = key
	}
	return r, nil
}

// take is the schedule's part of one answer: a record registered, rejected under skipRecord (as
// recordSink rejects it), or failed; an answer grows the window.
func (s *keyedSink) take(req pipeline.ChunkRequest, r *keyedRun, o keyedOutcome) {
	switch {
	case o.kind == RejectedRecord && s.record.core.rejects && req.Tenant.RejectsStatus(o.resp.status):
		s.record.rejects.add(r.recs[o.i], o.resp.status, coreRejection(o.resp.status, o.resp.body))
		r.finish(o.i, keyedRejected)
		s.window.grow()
	case o.err != nil:
		r.finish(o.i, keyedFailed)
		r.fail(o.i, o.kind, o.err)
	default:
		r.finish(o.i, keyedAcknowledged)
		s.window.grow()
	}
	if s.answered != nil {
		s.answered(r.recs[o.i].Number)
	}
}

// send POSTs one record and hands its answer to the scheduler. Each POST starts from the latest
// Authorization value, and a refresh after a 401 is kept for the POSTs after it.
func (s *keyedSink) send(ctx context.Context, b budget, req pipeline.ChunkRequest, rec records.Record, i int, answers chan<- keyedOutcome) {
	s.mu.Lock()
	auth := s.auth
	s.mu.Unlock()
	before := auth
	resp, kind, err := s.record.send(ctx, b, req, &auth, rec)
	if auth != before {
		s.mu.Lock()
		s.auth = auth
		s.mu.Unlock()
	}
	answers <- keyedOutcome{i: i, resp: resp, kind: kind, err: err}
}

// keyHeader is the header the Keyer finds CSV columns in; nil for JSON Lines, whose key columns
// are fields of each record's object (the request's header is empty, never absent, for them).
func keyHeader(req pipeline.ChunkRequest) []string {
	if req.Tenant.Format == pipeline.FormatJSONL {
		return nil
	}
	return req.Header
}

// keyedState is where one record of a keyed chunk stands.
type keyedState uint8

const (
	keyedPending      keyedState = iota // not sent
	keyedSending                        // in flight
	keyedAcknowledged                   // the core system registered it (2xx, 409)
	keyedRejected                       // rejected under skipRecord: done, not registered
	keyedFailed                         // its send failed
)

// keyedRun is the schedule of one keyed chunk, kept by the one goroutine that runs Write.
type keyedRun struct {
	recs     []records.Record
	keys     []string
	state    []keyedState
	busy     map[string]bool // keys with a record in flight
	inFlight int
	mark     int  // the low-water mark: the lowest index not acknowledged or rejected
	next     int  // the lowest index still pending
	limit    int  // no index from limit on is sent (a record whose key the Keyer refused)
	stopped  bool // a send failed: nothing new is sent
	failure  struct {
		i    int
		kind Rejection
		err  error
	}
	failed bool // failure holds the lowest failed record
}

func newKeyedRun(recs []records.Record) *keyedRun {
	return &keyedRun{recs: recs, keys: make([]string, len(recs)), state: make([]keyedState, len(recs)),
		busy: map[string]bool{}, limit: len(recs)}
}

// dispatch starts, lowest index first, every pending record the rules allow while fewer than
// window are in flight: its key idle (the first pending record of an idle key is that key's next
// in file order, since the records before it are done), and its number at most MaxKeyedLead past
// the mark's.
func (r *keyedRun) dispatch(window int, start func(i int)) {
	if r.stopped || r.mark >= len(r.recs) {
		return
	}
	lead := r.recs[r.mark].Number + pipeline.MaxKeyedLead
	for i := r.next; i < r.limit && r.inFlight < window && r.recs[i].Number <= lead; i++ {
		if r.state[i] != keyedPending || r.busy[r.keys[i]] {
			continue
		}
		r.state[i], r.busy[r.keys[i]] = keyedSending, true
		r.inFlight++
		start(i)
	}
	r.advance()
}

// finish records the answer to record i; a failed one stops new sends.
func (r *keyedRun) finish(i int, st keyedState) {
	r.state[i] = st
	r.inFlight--
	delete(r.busy, r.keys[i])
	r.stopped = r.stopped || st == keyedFailed
	r.advance()
}

// fail keeps the failure of record i if it is the lowest so far.
func (r *keyedRun) fail(i int, kind Rejection, err error) {
	if !r.failed || i < r.failure.i {
		r.failure.i, r.failure.kind, r.failure.err, r.failed = i, kind, err, true
	}
}

// advance moves the mark past the records done and next past those no longer pending.
func (r *keyedRun) advance() {
	for r.mark < len(r.recs) && (r.state[r.mark] == keyedAcknowledged || r.state[r.mark] == keyedRejected) {
		r.mark++
	}
	for r.next < len(r.recs) && r.state[r.next] != keyedPending {
		r.next++
	}
}

// result is what Write returns once nothing is in flight: the mark, and unless it is the end the
// lowest failure with the records acknowledged past the mark.
func (r *keyedRun) result(b budget, req pipeline.ChunkRequest) (int64, error) {
	switch {
	case r.mark == len(r.recs):
		return int64(r.mark), nil
	case !r.failed:
		// Unreachable: with nothing in flight and no failure, dispatch always starts the mark's record.
		return int64(r.mark), &WriteError{Record: r.recs[r.mark].Number, Kind: RejectedSink, Err: &pipeline.PermanentError{
			Message: fmt.Sprintf("%s: chunk %d: record %d was never sent", b.file, req.Chunk, r.recs[r.mark].Number)}}
	}
	return int64(r.mark), &WriteError{Record: r.recs[r.mark].Number, Kind: r.failure.kind, Err: r.failure.err, Registered: r.acknowledgedPast()}
}

// acknowledgedPast are the numbers of the records past the mark that the core system registered.
func (r *keyedRun) acknowledgedPast() []int64 {
	var ns []int64
	for i := r.mark + 1; i < len(r.recs); i++ {
		if r.state[i] == keyedAcknowledged {
			ns = append(ns, r.recs[i].Number)
		}
	}
	return ns
}

// window is a keyed file's AIMD window: how many requests it may keep in flight. A 429 or 503
// answer halves it (at least 1), and each answered record grows it by 1 up to most, the tenant's
// RecordsInFlight, so the file backs off at once and probes back slowly, as TCP's congestion
// window does. It lives for one invocation (the pace's); the core system's adaptive limit, which
// the same answers lower, carries the longer memory.
type window struct {
	mu   sync.Mutex
	most int
	n    int
	cap  int // the file's share of its core system's requests in flight (setCap); 0: none
}

func newWindow(most int) *window { return &window{most: max(1, most), n: max(1, most)} }

// size is what may be in flight now: the window, within the share.
func (w *window) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cap > 0 {
		return min(w.n, w.cap)
	}
	return w.n
}

// setCap bounds what may be in flight by the file's share of its core system's requests
// (shares.go), at least 1: a file whose share is 0 holds before each send instead.
func (w *window) setCap(n int) {
	w.mu.Lock()
	w.cap = max(1, n)
	w.mu.Unlock()
}

func (w *window) halve() {
	w.mu.Lock()
	w.n = max(1, w.n/2)
	w.mu.Unlock()
}

func (w *window) grow() {
	w.mu.Lock()
	w.n = min(w.most, w.n+1)
	w.mu.Unlock()
}
