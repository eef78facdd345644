package emulate

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSinkKeyTTLAndLookup: a sink with a KeyTTL registers again a record whose key it has kept
// longer than the TTL, and counts it (Reregistered, and a second entry in Registered, the ground
// truth); within the TTL a resend is a duplicate. With Lookup it answers a lookup of a registered
// key 200 (after the TTL too: the record is registered) and of another 404; without it 501.
func TestSinkKeyTTLAndLookup(t *testing.T) {
	const ttl = 50 * time.Millisecond
	for _, c := range []struct {
		name          string
		ttl           time.Duration
		lookup        bool
		waitPastTTL   bool
		wantRegs      int
		wantDups      int64
		wantRereg     int64
		wantKnown     int // status of a lookup of exec-1
		wantUnknown   int // status of a lookup of exec-2
		wantLookupsBy int64
	}{
		{name: "keys kept for ever", waitPastTTL: true, lookup: true, wantRegs: 1, wantDups: 1, wantKnown: 200, wantUnknown: 404, wantLookupsBy: 2},
		{name: "a resend within the TTL", ttl: time.Hour, lookup: true, wantRegs: 1, wantDups: 1, wantKnown: 200, wantUnknown: 404, wantLookupsBy: 2},
		{name: "a resend after the TTL registers twice", ttl: ttl, waitPastTTL: true, lookup: true, wantRegs: 2, wantRereg: 1, wantKnown: 200, wantUnknown: 404, wantLookupsBy: 2},
		{name: "no lookups without Lookup", ttl: ttl, wantRegs: 1, wantDups: 1, wantKnown: 501, wantUnknown: 501},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Sink{KeyTTL: c.ttl, Lookup: c.lookup}
			srv := httptest.NewServer(s)
			defer srv.Close()
			post := func() {
				body := `{"tenant":"t1","source":{"bucket":"b","key":"in.csv","versionId":"v1"},"recordNumber":1,"record":{"n":"1"}}`
				req, _ := http.NewRequest(http.MethodPost, SinkURL(srv.URL, "t1"), bytes.NewReader([]byte(body)))
				req.Header.Set("Idempotency-Key", "exec-1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			post()
			if c.waitPastTTL {
				time.Sleep(ttl + 10*time.Millisecond) // at least past the TTL
			}
			post()
			if got := len(s.Registered("t1")); got != c.wantRegs {
				t.Errorf("got %d registrations, want %d", got, c.wantRegs)
			}
			if _, dups, _, _ := s.Stats(); dups != c.wantDups || s.Reregistered() != c.wantRereg {
				t.Errorf("got %d duplicates and %d registered again, want %d and %d", dups, s.Reregistered(), c.wantDups, c.wantRereg)
			}
			for key, want := range map[string]int{"exec-1": c.wantKnown, "exec-2": c.wantUnknown} {
				u := strings.ReplaceAll(SinkLookupURL(srv.URL, "t1"), "{key}", key)
				resp, err := http.Get(u)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("got lookup of %s %d, want %d", key, resp.StatusCode, want)
				}
			}
			if got := s.Lookups("t1"); got != c.wantLookupsBy {
				t.Errorf("got %d lookups counted, want %d", got, c.wantLookupsBy)
			}
			if s.Gets() != 0 {
				t.Errorf("got %d list-page GETs, want none: a lookup is not a redirected POST", s.Gets())
			}
		})
	}
}
