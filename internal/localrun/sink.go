package localrun

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Sink is the embedded core-system endpoint: it registers records idempotently by their
// Idempotency-Key and remembers, per tenant, the order in which records were first registered,
// so that the run can check file order and record order afterwards.
type Sink struct {
	// Fault, if set, decides the answer to one request before it is registered: 0 lets it
	// through, an HTTP status fails it, and -1 holds the request until the client gives up.
	// Set it with SetFault while the run is going.
	Fault func(tenant string, source string, recordNumber int64, attempt int) int

	mu         sync.Mutex
	keys       map[string]bool
	order      map[string][]SinkRecord // tenant -> first registrations in order
	attempts   map[string]int          // idempotency key -> requests seen
	requests   int64
	duplicates int64
	faults     int64
	bad        []string
}

// SinkRecord is one first registration.
type SinkRecord struct {
	Source       string // source key
	VersionID    string
	RecordNumber int64
	Key          string
	At           time.Time
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
}

func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	var req sinkRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	s.mu.Lock()
	s.requests++
	if err != nil || key == "" || req.Tenant == "" || req.RecordNumber < 1 {
		s.bad = append(s.bad, fmt.Sprintf("malformed request to %s (key %q): %v", r.URL.Path, key, err))
		s.mu.Unlock()
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if s.attempts == nil {
		s.attempts, s.keys, s.order = map[string]int{}, map[string]bool{}, map[string][]SinkRecord{}
	}
	s.attempts[key]++
	attempt := s.attempts[key]
	fault := s.Fault
	s.mu.Unlock()

	if fault != nil {
		switch code := fault(req.Tenant, req.Source.Key, req.RecordNumber, attempt); {
		case code == -1:
			s.count(&s.faults)
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Minute):
			}
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
	if s.keys[key] {
		s.duplicates++
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `{"status":"duplicate"}`)
		return
	}
	s.keys[key] = true
	s.order[req.Tenant] = append(s.order[req.Tenant], SinkRecord{Source: req.Source.Key, VersionID: req.Source.VersionID, RecordNumber: req.RecordNumber, Key: key, At: time.Now()})
	w.WriteHeader(http.StatusCreated)
	fmt.Fprint(w, `{"status":"registered"}`)
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

// sinkURL is the per-tenant registerUrl the harness gives tenants when no --register-url is set.
func sinkURL(base, tenant string) string {
	return strings.TrimSuffix(base, "/") + "/" + tenant + "/records"
}
