package emulate

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/example/tenantpipeline/internal/records"
)

// Sink is the embedded core-system endpoint: it registers records (one per POST, or a batch POST's
// records, all or none) idempotently by their Idempotency-Key and remembers, per tenant, the order
// in which records were first registered, so that the run can check file order and record order
// afterwards.
type Sink struct {
	// Fault, if set, decides the answer to one request before it is registered: 0 lets it
	// through, an HTTP status fails it, and -1 holds the request until the client gives up.
	// A redirect status (301, 302, 303, 307, 308) answers with a Location on the sink's list page,
	// a GET endpoint that answers 200 (an http:// endpoint behind a redirect to a page).
	// Set it with SetFault while the run is going.
	Fault func(tenant string, source string, recordNumber int64, attempt int) int
	// Delay, if set, is how long the sink takes to answer one request (a slow core system).
	Delay func(tenant string, source string, recordNumber int64) time.Duration
	// MaxInFlight, if above 0, is how many POSTs the sink takes at once: one that arrives while
	// MaxInFlight are in progress is answered 429 with Retry-After: 1 (a core system shedding
	// load, RFC 9110 section 10.2.3 and RFC 6585 section 4) and registers nothing. Set it before
	// the run starts.
	MaxInFlight int
	// KeyTTL, if above 0, is how long the sink keeps an Idempotency-Key: a POST under a key
	// registered longer ago registers its records again (a core system that prunes its keys),
	// counted by Reregistered. Set it before the run starts.
	KeyTTL time.Duration
	// Lookup makes the sink answer GET <tenant>/lookup/<key> (SinkLookupURL): 200 when a record
	// of the key is registered (whether or not the key is still kept), 404 when not. Without it
	// such a GET answers 501, which Register holds on like a 503, never taking it for "absent".
	// Set it before the run starts.
	Lookup bool

	mu         sync.Mutex
	keys       map[string]time.Time    // idempotency key -> its last registration
	order      map[string][]SinkRecord // tenant -> first registrations in order
	attempts   map[string]int          // idempotency key -> requests seen
	requests   int64
	duplicates int64
	faults     int64
	gets       int64
	bad        []string
	log        map[string][]SinkRequest // tenant -> every POST, in arrival order
	inFlight   int                      // POSTs arrived and not yet answered
	peak       int                      // the most POSTs in flight at once
	shed       int64                    // POSTs answered 429 for MaxInFlight
	keep       bool                     // keep each record's JSON in its SinkRecord

	// The idempotency horizon (KeyTTL, Lookup): keys holds each key's last registration.
	reregistered int64            // records registered again after KeyTTL
	lookups      map[string]int64 // tenant -> lookups answered

	// Key order (SetKeyColumns): each keyed tenant's key columns, the record of each key in flight
	// (by file and key), and each tenant's POSTs in flight and their peak.
	keyColumns   map[string][]string
	keyInFlight  map[string]int64
	tenantFlight map[string]int
	tenantPeak   map[string]int

	// The core systems' POSTs in flight over time (sinkflight.go): each tenant's core system, and
	// each core system's gauge.
	coreSystem map[string]string
	flights    map[string]*flightGauge
}

// NewSinkWith is a sink that has already seen these registrations and requests, by tenant: the
// history a check of the invariants reads.
func NewSinkWith(registered map[string][]SinkRecord, requests map[string][]SinkRequest) *Sink {
	return &Sink{order: registered, log: requests}
}

// SinkRequest is one POST the sink received, whatever it answered.
type SinkRequest struct {
	// Path is the URL path the request was sent to: the registerUrl of the tenant whose records
	// Register sent.
	Path         string
	Source       string // source key
	VersionID    string
	Key          string    // the Idempotency-Key
	RecordNumber int64     // the record's, or a batch's first
	Records      int       // 1, or the records of a batch
	Start, End   time.Time // arrival and answer
	Status       int
	// Authorization is the request's Authorization header: the tenant's secret, when it has a
	// registerAuthSecretArn.
	Authorization string
}

// SinkRecord is one first registration; the records of a batch share its Idempotency-Key.
type SinkRecord struct {
	Source       string // source key
	VersionID    string
	RecordNumber int64
	Key          string
	// RecordKey is the record's key under key order (SetKeyColumns), its key columns' values
	// quoted and joined by commas; "" for a tenant in file order.
	RecordKey string
	At        time.Time
	// Record is the record as the core system got it (its JSON), kept only after
	// SetKeepRecords(true).
	Record json.RawMessage
}

type sinkRequest struct {
	Tenant string `json:"tenant"`
	Source struct {
		Bucket    string `json:"bucket"`
		Key       string `json:"key"`
		VersionID string `json:"versionId"`
	} `json:"source"`
	RecordNumber int64           `json:"recordNumber"`
	Record       json.RawMessage `json:"record"`
	// A batch POST (registerMode "batch", docs/data-path.md) carries the chunk's records in file
	// order from firstRecordNumber, under one Idempotency-Key.
	FirstRecordNumber int64             `json:"firstRecordNumber"`
	Records           []json.RawMessage `json:"records"`
}

// batch reports whether the request is a batch POST.
func (r sinkRequest) batch() bool { return r.Records != nil || r.FirstRecordNumber != 0 }

// first is the request's first record number: the record's, or the batch's first.
func (r sinkRequest) first() int64 {
	if r.batch() {
		return r.FirstRecordNumber
	}
	return r.RecordNumber
}

func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/lookup/") {
		s.lookup(w, r)
		return
	}
	if r.Method == http.MethodGet {
		// The list page a redirect points to: a client that follows a 301/302/303 resends the
		// POST as a GET without a body, and this 2xx must not count as a registration.
		s.count(&s.gets)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>records</body></html>")
		return
	}
	start := time.Now()
	s.mu.Lock()
	s.inFlight++
	s.peak = max(s.peak, s.inFlight)
	shed := s.MaxInFlight > 0 && s.inFlight > s.MaxInFlight
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	rw := &StatusRecorder{ResponseWriter: w, Status: http.StatusOK}
	w = rw
	body, err := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	var req sinkRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	s.mu.Lock()
	s.requests++
	if err == nil && req.batch() && (req.RecordNumber != 0 || len(req.Records) == 0) {
		err = fmt.Errorf("a batch with %d records and a recordNumber", len(req.Records))
	}
	if err != nil || key == "" || req.Tenant == "" || req.first() < 1 {
		s.bad = append(s.bad, fmt.Sprintf("malformed request to %s (key %q): %v", r.URL.Path, key, err))
		s.mu.Unlock()
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if s.attempts == nil {
		s.attempts, s.keys, s.order = map[string]int{}, map[string]time.Time{}, map[string][]SinkRecord{}
	}
	if s.tenantFlight == nil {
		s.keyInFlight, s.tenantFlight, s.tenantPeak = map[string]int64{}, map[string]int{}, map[string]int{}
	}
	s.attempts[key]++
	attempt := s.attempts[key]
	fault, delay := s.Fault, s.Delay
	recordKey, keyed := s.recordKey(req)
	flight := req.Source.Key + "\x00" + req.Source.VersionID + "\x00" + recordKey
	if keyed {
		if other, busy := s.keyInFlight[flight]; busy && other != req.RecordNumber {
			s.bad = append(s.bad, fmt.Sprintf("%s: records %d and %d of key %s of %s were in flight at once", req.Tenant, other, req.RecordNumber, recordKey, req.Source.Key))
		}
		s.keyInFlight[flight] = req.RecordNumber
	}
	s.tenantFlight[req.Tenant]++
	s.tenantPeak[req.Tenant] = max(s.tenantPeak[req.Tenant], s.tenantFlight[req.Tenant])
	s.fly(req.Tenant, +1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.tenantFlight[req.Tenant]--
		s.fly(req.Tenant, -1)
		if keyed && s.keyInFlight[flight] == req.RecordNumber {
			delete(s.keyInFlight, flight)
		}
		s.mu.Unlock()
	}()
	defer func() {
		s.mu.Lock()
		if s.log == nil {
			s.log = map[string][]SinkRequest{}
		}
		s.log[req.Tenant] = append(s.log[req.Tenant], SinkRequest{Path: r.URL.Path, Source: req.Source.Key, VersionID: req.Source.VersionID, Key: key, RecordNumber: req.first(), Records: max(1, len(req.Records)), Start: start, End: time.Now(), Status: rw.Status,
			Authorization: r.Header.Get("Authorization")})
		s.mu.Unlock()
	}()
	if shed {
		s.count(&s.shed)
		w.Header().Set("Retry-After", "1")
		http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
		return
	}
	if delay != nil {
		if d := delay(req.Tenant, req.Source.Key, req.first()); d > 0 {
			select {
			case <-r.Context().Done():
			case <-time.After(d):
			}
		}
	}

	if fault != nil {
		switch code := fault(req.Tenant, req.Source.Key, req.first(), attempt); {
		case code == -1:
			s.count(&s.faults)
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Minute):
			}
			return
		case code >= 300 && code < 400:
			s.count(&s.faults)
			w.Header().Set("Location", "/"+req.Tenant+"/list")
			w.WriteHeader(code)
			return
		case code != 0:
			s.count(&s.faults)
			if code == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "0")
			}
			http.Error(w, http.StatusText(code), code)
			return
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if at, ok := s.keys[key]; ok && (s.KeyTTL <= 0 || now.Sub(at) < s.KeyTTL) {
		s.duplicates++
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `{"status":"duplicate"}`)
		return
	} else if ok {
		// Forgotten: registered a second time, as a core system that pruned the key would.
		s.reregistered += int64(max(1, len(req.Records)))
	}
	s.keys[key] = now
	keep := func(rec json.RawMessage) json.RawMessage {
		if s.keep {
			return rec
		}
		return nil
	}
	if !req.batch() {
		s.order[req.Tenant] = append(s.order[req.Tenant], SinkRecord{Source: req.Source.Key, VersionID: req.Source.VersionID, RecordNumber: req.RecordNumber, Key: key, RecordKey: recordKey, At: now, Record: keep(req.Record)})
	}
	for i, rec := range req.Records { // a batch registers all its records, in order, or none
		s.order[req.Tenant] = append(s.order[req.Tenant], SinkRecord{Source: req.Source.Key, VersionID: req.Source.VersionID, RecordNumber: req.FirstRecordNumber + int64(i), Key: key, At: now, Record: keep(rec)})
	}
	w.WriteHeader(http.StatusCreated)
	fmt.Fprint(w, `{"status":"registered"}`)
}

// SetKeyColumns makes the sink check a tenant's key order: it reads each record's key from its
// JSON object's cols (a CSV record arrives as {header: value}), keeps it in SinkRecord.RecordKey,
// and reports (Stats' bad) two records of one key of one file in flight at once. Set it before
// the run starts; nil or empty cols: file order.
func (s *Sink) SetKeyColumns(tenant string, cols []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keyColumns == nil {
		s.keyColumns = map[string][]string{}
	}
	if len(cols) == 0 {
		delete(s.keyColumns, tenant)
		return
	}
	s.keyColumns[tenant] = append([]string(nil), cols...)
}

// recordKey is the key of a keyed tenant's one-record POST, as records.Keyer renders it (a CSV
// record arrives as its {header: value} object, so its columns are the object's fields), and
// whether the tenant is keyed; a record the Keyer refuses has the key "". Called with mu held.
func (s *Sink) recordKey(req sinkRequest) (string, bool) {
	cols := s.keyColumns[req.Tenant]
	if len(cols) == 0 || req.batch() {
		return "", false
	}
	k, err := records.NewKeyer(cols, nil)
	if err != nil {
		return "", true
	}
	key, _ := k.Key(records.Record{Number: req.RecordNumber, JSON: req.Record})
	return key, true
}

// PeakInFlight is the most POSTs of one tenant the sink had in progress at once.
func (s *Sink) PeakInFlight(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tenantPeak[tenant]
}

// SetDelay replaces Delay; nil answers at once.
func (s *Sink) SetDelay(d func(tenant string, source string, recordNumber int64) time.Duration) {
	s.mu.Lock()
	s.Delay = d
	s.mu.Unlock()
}

// Requests returns every POST of one tenant, in arrival order.
func (s *Sink) Requests(tenant string) []SinkRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SinkRequest(nil), s.log[tenant]...)
}

// Gets is how many GET requests the sink answered (a client that followed a redirect).
func (s *Sink) Gets() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

// SetKeepRecords makes the sink keep, from now on, each registered record's JSON in its
// SinkRecord (Registered), for a test that checks what the core system got. Off by default: a long
// run would hold every record in memory.
func (s *Sink) SetKeepRecords(on bool) {
	s.mu.Lock()
	s.keep = on
	s.mu.Unlock()
}

// SetFault replaces Fault; nil lets every request through.
func (s *Sink) SetFault(f func(tenant string, source string, recordNumber int64, attempt int) int) {
	s.mu.Lock()
	s.Fault = f
	s.mu.Unlock()
}

func (s *Sink) count(n *int64) {
	s.mu.Lock()
	*n++
	s.mu.Unlock()
}

// Registered returns the first registrations of one tenant, in order.
func (s *Sink) Registered(tenant string) []SinkRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SinkRecord(nil), s.order[tenant]...)
}

// Stats returns the request, duplicate and injected-fault counts.
func (s *Sink) Stats() (requests, duplicates, faults int64, bad []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.duplicates, s.faults, append([]string(nil), s.bad...)
}

// InFlight is the most POSTs the sink had in progress at once (those it answered 429 included),
// and how many it answered 429 for MaxInFlight.
func (s *Sink) InFlight() (peak int, shed int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.shed
}

// Total is the number of records registered across tenants.
func (s *Sink) Total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, o := range s.order {
		n += int64(len(o))
	}
	return n
}

// lookup answers a lookupUrl GET: the key is the path's last element (SinkLookupURL).
func (s *Sink) lookup(w http.ResponseWriter, r *http.Request) {
	tenant, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/lookup/")
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.Lookup {
		http.Error(w, "the sink answers lookups with --sink-lookup", http.StatusNotImplemented)
		return
	}
	if s.lookups == nil {
		s.lookups = map[string]int64{}
	}
	s.lookups[tenant]++
	if _, ok := s.keys[key]; ok {
		fmt.Fprint(w, `{"status":"registered"}`)
		return
	}
	http.Error(w, `{"status":"unknown"}`, http.StatusNotFound)
}

// SetLookup turns the answers to lookupUrl GETs on or off (Lookup).
func (s *Sink) SetLookup(on bool) {
	s.mu.Lock()
	s.Lookup = on
	s.mu.Unlock()
}

// Reregistered is the records the sink registered a second time because their key was older than
// KeyTTL: the duplicates a core system that prunes keys would hold.
func (s *Sink) Reregistered() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reregistered
}

// Lookups is how many lookups of the tenant's keys the sink answered.
func (s *Sink) Lookups(tenant string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups[tenant]
}

// SinkLookupURL is the lookupUrl template the harness gives a tenant's core system with
// --sink-lookup.
func SinkLookupURL(base, tenant string) string {
	return strings.TrimSuffix(base, "/") + "/" + tenant + "/lookup/{key}"
}

// SinkURL is the per-tenant registerUrl the harness gives tenants when no --register-url is set.
func SinkURL(base, tenant string) string {
	return strings.TrimSuffix(base, "/") + "/" + tenant + "/records"
}
