package localrun

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
