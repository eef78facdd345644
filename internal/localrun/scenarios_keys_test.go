//go:build e2e || figures

package localrun

import (
	"context"
	"strings"
	"testing"
	"time"
)

// keyTenants are two tenants whose ids read alike once form-encoded, with the default prefixes
// (inbox/<id>/).
const keyTenants = `{"tenants": [
  {"id": "spacey", "registerUrl": "https://core.example.com/records"},
  {"id": "plussy", "registerUrl": "https://core.example.com/records"}
]}`

// TestScenarioEncodedKeys: file names with a space, a literal "+", a literal "%20" and a non-ASCII
// character, in both tiers, with the events carrying keys raw and form-encoded (AWS documents
// neither form for EventBridge, https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html;
// classic notifications form-encode,
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html). The
// form-encoded key of "a b.csv" is the raw key of "a+b.csv", and that of "a%20b.csv" decodes to
// "a b.csv": every file must still be registered once, in order, under its own tenant, to that
// tenant's registerUrl, and none lost.
func TestScenarioEncodedKeys(t *testing.T) {
	t.Parallel()
	names := []string{"a b.csv", "a+b.csv", "a%20b.csv", "é.csv"}
	var files []upload
	for i, name := range names {
		for _, tenant := range []string{"spacey", "plussy"} {
			files = append(files, upload{tenant, name, csvOf(3 + i)})
		}
	}
	forEachTier(t, keyTenants, func(t *testing.T, tenants string) {
		for _, form := range []string{EventKeyRaw, EventKeyForm} {
			t.Run(form, func(t *testing.T) {
				r := startScenario(t, tenants, Config{S3: S3Options{EventKeyForm: form}})
				ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
				defer cancel()
				uploadAll(t, ctx, r, files)
				rep := drain(t, ctx, r)
				assertInvariants(t, r, rep, []string{"spacey", "plussy"}, false)
				for _, u := range files {
					f := fileOf(t, rep, u.tenant, u.rel)
					want := int64(strings.Count(string(u.body), "\n") - 1)
					if f.Status != "SUCCEEDED" || f.Records != want || f.Executions != 1 {
						t.Errorf("%s/%s: got %s (%s %s), %d records, %d executions; want SUCCEEDED, %d, 1", u.tenant, u.rel, f.Status, f.Error, f.Cause, f.Records, f.Executions, want)
					}
				}
				for _, tenant := range []string{"spacey", "plussy"} {
					prefix := r.Tenant(tenant).Prefix
					// Each of the tenant's stored keys registered exactly its records, and nothing else.
					got := map[string]int64{}
					for _, rec := range r.Sink.Registered(tenant) {
						got[rec.Source]++
					}
					for _, u := range files {
						if u.tenant != tenant {
							continue
						}
						key := prefix + u.rel
						if want := int64(strings.Count(string(u.body), "\n") - 1); got[key] != want {
							t.Errorf("%s: got %d records of %q registered, want %d", tenant, got[key], key, want)
						}
						delete(got, key)
					}
					if len(got) > 0 {
						t.Errorf("%s: got records of %v registered as its own, want only its files", tenant, got)
					}
					// With its own registerUrl (the harness's /<tenant>/records).
					for _, req := range r.Sink.Requests(tenant) {
						if !strings.HasSuffix(req.Path, "/"+tenant+"/records") || !strings.HasPrefix(req.Source, prefix) {
							t.Errorf("%s: got a request to %s for %s, want %s's registerUrl and a key under %s", tenant, req.Path, req.Source, tenant, prefix)
						}
					}
				}
				if errs := lambdaLogs(t, r, func(l map[string]any) bool { return l["level"] == "ERROR" }); len(errs) > 0 {
					t.Errorf("got %d ERROR lines, want none: %v", len(errs), errs)
				}
			})
		}
	})
}
