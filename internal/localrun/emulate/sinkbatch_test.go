package emulate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSinkBatch: the embedded sink's answers to batch POSTs (docs/data-path.md, "Batch mode"):
// a batch registers all its records in order under its Idempotency-Key, a repeated key registers
// nothing, and a malformed batch is refused.
func TestSinkBatch(t *testing.T) {
	s := &Sink{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(key, body string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/t/records", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	batch := func(first int, n int) string {
		recs := make([]json.RawMessage, n)
		for i := range recs {
			recs[i] = json.RawMessage(fmt.Sprintf(`{"id":"%d"}`, first+i))
		}
		b, _ := json.Marshal(map[string]any{"tenant": "t", "source": map[string]string{"bucket": "b", "key": "k.csv"}, "firstRecordNumber": first, "records": recs})
		return string(b)
	}
	for _, tc := range []struct {
		name, key, body string
		wantStatus      int
		wantRegistered  int
	}{
		{"first chunk", "ex-c0", batch(1, 3), http.StatusCreated, 3},
		{"second chunk", "ex-c1", batch(4, 2), http.StatusCreated, 5},
		{"retried chunk", "ex-c1", batch(4, 2), http.StatusOK, 5},
		{"no records", "ex-c2", `{"tenant":"t","source":{"key":"k.csv"},"firstRecordNumber":6,"records":[]}`, http.StatusBadRequest, 5},
		{"record and batch", "ex-c3", `{"tenant":"t","source":{"key":"k.csv"},"recordNumber":6,"firstRecordNumber":6,"records":[{}]}`, http.StatusBadRequest, 5},
		{"first record 0", "ex-c4", batch(0, 1), http.StatusBadRequest, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := post(tc.key, tc.body); got != tc.wantStatus {
				t.Errorf("status: got %d, want %d", got, tc.wantStatus)
			}
			if got := len(s.Registered("t")); got != tc.wantRegistered {
				t.Errorf("registered: got %d, want %d", got, tc.wantRegistered)
			}
		})
	}
	var got []string
	for _, r := range s.Registered("t") {
		got = append(got, fmt.Sprintf("%d@%s", r.RecordNumber, r.Key))
	}
	if g, want := strings.Join(got, " "), "1@ex-c0 2@ex-c0 3@ex-c0 4@ex-c1 5@ex-c1"; g != want {
		t.Errorf("registrations: got %s, want %s", g, want)
	}
	if reqs := s.Requests("t"); len(reqs) != 3 || reqs[0].Records != 3 || reqs[1].RecordNumber != 4 || reqs[1].Records != 2 {
		t.Errorf("requests: got %+v, want 3 logged: 3 records from 1, then 2 from 4 twice", reqs)
	}
}

// TestSinkKeepRecords: after SetKeepRecords(true) each registration keeps the record's JSON, a
// batch's each its own; before it, none is kept.
func TestSinkKeepRecords(t *testing.T) {
	s := &Sink{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/t/records", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: got status %d, want 201", key, resp.StatusCode)
		}
	}
	post("k1", `{"tenant":"t","source":{"key":"k.csv"},"recordNumber":1,"record":{"名前":"一"}}`)
	s.SetKeepRecords(true)
	post("k2", `{"tenant":"t","source":{"key":"k.csv"},"recordNumber":2,"record":{"名前":"二"}}`)
	post("k3", `{"tenant":"t","source":{"key":"k.csv"},"firstRecordNumber":3,"records":[{"名前":"三"},{"名前":"四"}]}`)
	var got []string
	for _, r := range s.Registered("t") {
		got = append(got, fmt.Sprintf("%d=%s", r.RecordNumber, r.Record))
	}
	if g, want := strings.Join(got, " "), `1= 2={"名前":"二"} 3={"名前":"三"} 4={"名前":"四"}`; g != want {
		t.Errorf("got %s, want %s", g, want)
	}
}

// TestSinkMaxInFlight: with MaxInFlight N the sink takes N POSTs at once and answers the next one
// 429 with Retry-After: 1, registering nothing; it reports the most POSTs it saw in flight (the
// refused one included) and how many it refused. Without a cap it refuses none.
func TestSinkMaxInFlight(t *testing.T) {
	for _, tc := range []struct {
		name           string
		cap, held      int
		wantLast       int
		wantPeak       int
		wantShed       int64
		wantRetryAfter string
	}{
		{name: "capped", cap: 2, held: 2, wantLast: http.StatusTooManyRequests, wantPeak: 3, wantShed: 1, wantRetryAfter: "1"},
		{name: "no cap", cap: 0, held: 2, wantLast: http.StatusCreated, wantPeak: 3, wantShed: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			s := &Sink{MaxInFlight: tc.cap}
			s.SetDelay(func(_, source string, _ int64) time.Duration {
				if source == "held.csv" {
					<-release
				}
				return 0
			})
			srv := httptest.NewServer(s)
			defer srv.Close()
			post := func(source string, n int) *http.Response {
				body := fmt.Sprintf(`{"tenant":"t","source":{"bucket":"b","key":%q},"recordNumber":%d,"record":{}}`, source, n)
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/t/records", strings.NewReader(body))
				req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", source, n))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return nil
				}
				resp.Body.Close()
				return resp
			}
			var wg sync.WaitGroup
			for n := range tc.held {
				wg.Go(func() {
					if resp := post("held.csv", n+1); resp != nil && resp.StatusCode != http.StatusCreated {
						t.Errorf("held POST %d: got %d, want 201", n+1, resp.StatusCode)
					}
				})
			}
			for {
				if peak, _ := s.InFlight(); peak == tc.held {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			resp := post("next.csv", 1)
			close(release)
			wg.Wait()
			if resp == nil {
				return
			}
			if resp.StatusCode != tc.wantLast || resp.Header.Get("Retry-After") != tc.wantRetryAfter {
				t.Errorf("POST beyond %d in flight: got %d Retry-After %q, want %d %q", tc.held, resp.StatusCode, resp.Header.Get("Retry-After"), tc.wantLast, tc.wantRetryAfter)
			}
			if peak, shed := s.InFlight(); peak != tc.wantPeak || shed != tc.wantShed {
				t.Errorf("in flight: got peak %d and %d answered 429, want %d and %d", peak, shed, tc.wantPeak, tc.wantShed)
			}
			wantRegistered := tc.held
			if tc.wantShed == 0 {
				wantRegistered++
			}
			if got := len(s.Registered("t")); got != wantRegistered {
				t.Errorf("registered: got %d, want %d", got, wantRegistered)
			}
		})
	}
}
