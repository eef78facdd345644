package emulate

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSinkChecksKeyOrder holds two POSTs of one keyed tenant in the sink at once (its Delay blocks
// until both have arrived) and checks what the sink makes of them: two keys at once are fine and
// count as two in flight; two records of one key at once are a violation; a file-order tenant's
// records carry no key.
func TestSinkChecksKeyOrder(t *testing.T) {
	for _, c := range []struct {
		name     string
		cols     []string
		a, b     string // the two records' JSON
		wantBad  string
		wantKeys []string
	}{
		{"two keys", []string{"customer"}, `{"customer":"acme","n":"1"}`, `{"customer":"globex","n":"2"}`, "", []string{`"acme"`, `"globex"`}},
		{"one key", []string{"customer"}, `{"customer":"acme","n":"1"}`, `{"customer":"acme","n":"2"}`, `of key "acme" of in.csv were in flight at once`, nil},
		{"two columns, one differs", []string{"customer", "n"}, `{"customer":"acme","n":"1"}`, `{"customer":"acme","n":2}`, "", []string{`"acme","1"`, `"acme","2"`}},
		{"file order", nil, `{"customer":"acme","n":"1"}`, `{"customer":"acme","n":"2"}`, "", []string{"", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Sink{}
			s.SetKeyColumns("t1", c.cols)
			arrived, release := make(chan struct{}, 2), make(chan struct{})
			s.SetDelay(func(string, string, int64) time.Duration {
				arrived <- struct{}{}
				<-release
				return 0
			})
			srv := httptest.NewServer(s)
			defer srv.Close()
			var wg sync.WaitGroup
			for i, rec := range []string{c.a, c.b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body := fmt.Sprintf(`{"tenant":"t1","source":{"bucket":"b","key":"in.csv","versionId":"v1"},"recordNumber":%d,"record":%s}`, i+1, rec)
					req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader([]byte(body)))
					req.Header.Set("Idempotency-Key", fmt.Sprintf("exec-%d", i+1))
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
				}()
			}
			<-arrived
			<-arrived
			close(release)
			wg.Wait()
			_, _, _, bad := s.Stats()
			switch {
			case c.wantBad == "" && len(bad) > 0:
				t.Errorf("got violations %q, want none", bad)
			case c.wantBad != "" && (len(bad) != 1 || !strings.Contains(bad[0], c.wantBad)):
				t.Errorf("got violations %q, want one containing %q", bad, c.wantBad)
			}
			if got := s.PeakInFlight("t1"); got != 2 {
				t.Errorf("peak in flight: got %d, want 2", got)
			}
			if c.wantKeys != nil {
				var got []string
				for _, r := range s.Registered("t1") {
					got = append(got, r.RecordKey)
				}
				if strings.Join(slices.Sorted(slices.Values(got)), "|") != strings.Join(c.wantKeys, "|") {
					t.Errorf("record keys: got %q, want %q", got, c.wantKeys)
				}
			}
		})
	}
}
