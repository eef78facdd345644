package register

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
)

// keyedSink is record mode under key order (Tenant.KeyedOrder): one POST per record with its own
// idempotency key, as recordSink sends it, but several records of different keys in flight at
// once. A record's key is its keyColumns' values (records.Keyer). The schedule keeps four rules:
//   - at most the window's requests in flight (window.go: a 429 or 503 halves it once per round
//     trip, a window's worth of answers adds one);
//   - never two records of one key in flight, and a key's records strictly in file order: a key's
//     next record is sent only once the previous one is acknowledged (or rejected under skipRecord);
//   - no record more than pipeline.MaxKeyedLead records past the low-water mark, the first record
//     not yet acknowledged, so that one slow key cannot leave an unbounded tail of acknowledged
//     records behind it;
//   - after a failure nothing new is sent; the requests in flight finish first.
//
// The schedule crosses the chunk's end: Write may also send the next chunk's records (ahead,
// which register reads ahead), under the same rules, lowest first, so that the window does not
// drain at every chunk's end. Write returns as soon as its own records are all answered, and the next chunk's
// requests still in flight, and the answers it took for them, carry into the next Write (for
// that chunk); finish waits for those still in flight when no Write follows. The rules above hold
// across the two chunks, since the records are one file-ordered run.
//
// Write returns the low-water mark: every record before it is acknowledged (or rejected). On a
// failure the *WriteError's Record is the mark, its Err the error of the lowest failed record, and
// its Registered the records past the mark that were acknowledged all the same (other keys, the
// next chunk's included).
type keyedSink struct {
	record recordSink // one record's POST (recordSink.send)
	window *window

	answered func(record int64) // Handler.keyedAnswered

	mu   sync.Mutex
	auth string // the Authorization value, refreshed by whichever POST got a 401

	// ahead are the next chunk's records (of aheadReq, under aheadBudget) that Write may send
	// beside its own; register sets them before each Write.
	ahead       []records.Record
	aheadReq    pipeline.ChunkRequest
	aheadBudget budget
	// answers outlive one Write, for the next chunk's requests still in flight when it returns.
	answers chan keyedOutcome
	flying  map[int64]bool         // the next chunk's records in flight when the last Write returned
	early   map[int64]keyedOutcome // the answers the last Write took for the next chunk's records
}

func newKeyedSink(core coreClient, rej *chunkRejects, w *window, answered func(int64)) *keyedSink {
	return &keyedSink{record: recordSink{core, rej}, window: w, answered: answered, answers: make(chan keyedOutcome, w.most)}
}

// keyedOutcome is one record's answer, from the goroutine that sent it to the scheduler.
type keyedOutcome struct {
	n    int64 // the record's number
	resp response
	kind Rejection
	err  error
}

func (s *keyedSink) Write(ctx context.Context, b budget, req pipeline.ChunkRequest, recs []records.Record) (int64, error) {
	ahead, aheadReq, aheadBudget := s.ahead, s.aheadReq, s.aheadBudget
	s.ahead = nil
	r, err := keyedRunOf(b, req, recs, ahead, aheadReq)
	if err != nil {
		return 0, &WriteError{Record: recs[0].Number, Kind: RejectedSink, Err: err}
	}
	auth, err := s.record.core.auth(ctx, b, req, false)
	if err != nil {
		return 0, &WriteError{Record: recs[0].Number, Kind: rejection(err, 0), Err: err}
	}
	s.mu.Lock()
	s.auth = auth
	s.mu.Unlock()
	// What the last Write left of this chunk: answers it took, requests still in flight.
	early, flying := s.early, s.flying
	s.early, s.flying = nil, nil
	for i := range r.own {
		n := r.recs[i].Number
		if o, ok := early[n]; ok {
			r.sending(i) // it was, and its answer is taken now
			s.settle(req, r, i, o)
		} else if flying[n] {
			r.sending(i)
		}
	}
	r.advance()
	for {
		r.dispatch(s.window.size(), func(i int) {
			if i < r.own {
				go s.send(ctx, b, req, r.recs[i], s.answers)
			} else {
				go s.send(ctx, aheadBudget, aheadReq, r.recs[i], s.answers)
			}
		})
		if r.mark >= r.own || r.inFlight == 0 {
			break
		}
		s.take(req, r, <-s.answers)
	}
	if r.mark < r.own {
		// Failed or stopped: nothing is in flight, and no Write follows in this invocation.
		s.early = nil
		return r.result(b, req)
	}
	for i := r.own; i < len(r.recs); i++ {
		if r.state[i] == keyedSending {
			if s.flying == nil {
				s.flying = map[int64]bool{}
			}
			s.flying[r.recs[i].Number] = true
		}
	}
	return int64(r.own), nil
}

// finish waits for the next chunk's requests still in flight when no Write follows (the
// invocation ends): their records lie past the cursor, and the next invocation sends them again
// with the same idempotency keys. A nil sink (not a keyed file) has none.
func (s *keyedSink) finish() {
	if s == nil {
		return
	}
	for range len(s.flying) {
		<-s.answers
	}
	s.flying, s.early = nil, nil
}

// keyedRunOf is the schedule of recs, and of ahead (the next chunk's, of aheadReq) after them,
// with each record's key. Register's parse refuses a header without a key column and a record
// whose key is empty, as Split does (records.Format.Keys), so the Keyer refuses nothing here unless
// the two disagree: then the chunk fails closed, at that record, after the records before it; a
// record of the next chunk that it refuses is not sent, and fails that chunk's Write.
func keyedRunOf(b budget, req pipeline.ChunkRequest, recs, ahead []records.Record, aheadReq pipeline.ChunkRequest) (*keyedRun, error) {
	keyer, err := records.NewKeyer(req.Tenant.KeyColumns, keyHeader(req))
	if err != nil {
		return nil, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d: %v", b.file, req.Chunk, err), Err: err}
	}
	r := newKeyedRun(recs, ahead)
	for i, rec := range r.recs {
		key, err := keyer.Key(rec)
		if err != nil {
			// It and every record after it stay unsent.
			r.limit = i
			if i < r.own {
				r.fail(i, RejectedRecord, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d: %v", b.file, req.Chunk, err), Err: err})
			}
			break
		}
		r.keys[i] = key
	}
	return r, nil
}

// take is the schedule's part of one answer: a record registered, rejected under skipRecord (as
// recordSink rejects it), or failed; an answer grows the window. The answer to a record of the
// next chunk is kept for that chunk's Write, which rejects it into that chunk's rejections.
func (s *keyedSink) take(req pipeline.ChunkRequest, r *keyedRun, o keyedOutcome) {
	i := r.index[o.n]
	if o.err == nil || s.rejected(req, o) {
		s.window.grow()
	}
	if i >= r.own {
		if s.early == nil {
			s.early = map[int64]keyedOutcome{}
		}
		s.early[o.n] = o
	}
	s.settle(req, r, i, o)
	if s.answered != nil {
		s.answered(o.n)
	}
}

// rejected reports whether o rejects its record under skipRecord rather than failing it.
func (s *keyedSink) rejected(req pipeline.ChunkRequest, o keyedOutcome) bool {
	return o.kind == RejectedRecord && s.record.core.rejects && req.Tenant.RejectsStatus(o.resp.status)
}

// settle records the answer o to record i, no longer in flight: a record of this chunk rejected
// under skipRecord goes to its rejections, a failure stops new sends.
func (s *keyedSink) settle(req pipeline.ChunkRequest, r *keyedRun, i int, o keyedOutcome) {
	switch {
	case s.rejected(req, o):
		if i < r.own {
			s.record.rejects.add(r.recs[i], o.resp.status, coreRejection(o.resp.status, o.resp.body))
		}
		r.finish(i, keyedRejected)
	case o.err != nil:
		r.finish(i, keyedFailed)
		r.fail(i, o.kind, o.err)
	default:
		r.finish(i, keyedAcknowledged)
	}
}

// send POSTs one record and hands its answer to the scheduler. Each POST starts from the latest
// Authorization value, and a refresh after a 401 is kept for the POSTs after it.
func (s *keyedSink) send(ctx context.Context, b budget, req pipeline.ChunkRequest, rec records.Record, answers chan<- keyedOutcome) {
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
	answers <- keyedOutcome{n: rec.Number, resp: resp, kind: kind, err: err}
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

// keyedRun is the schedule of one keyed chunk and the next chunk's records after it, kept by the
// one goroutine that runs Write.
type keyedRun struct {
	recs     []records.Record // the chunk's, then the next chunk's
	own      int              // the chunk's records: recs[:own]
	index    map[int64]int    // a record's index in recs, by its number
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

func newKeyedRun(own, ahead []records.Record) *keyedRun {
	recs := append(slices.Clip(own), ahead...)
	r := &keyedRun{recs: recs, own: len(own), index: make(map[int64]int, len(recs)), keys: make([]string, len(recs)),
		state: make([]keyedState, len(recs)), busy: map[string]bool{}, limit: len(recs)}
	for i, rec := range recs {
		r.index[rec.Number] = i
	}
	return r
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
		r.sending(i)
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

// sending marks record i in flight.
func (r *keyedRun) sending(i int) {
	r.state[i], r.busy[r.keys[i]] = keyedSending, true
	r.inFlight++
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

// result is what Write returns once nothing is in flight and the mark lies in the chunk: the
// lowest failure with the records acknowledged past the mark.
func (r *keyedRun) result(b budget, req pipeline.ChunkRequest) (int64, error) {
	switch {
	case r.mark >= r.own:
		return int64(r.own), nil
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
