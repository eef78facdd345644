package tenantpipeline

import (
	"strings"
	"testing"
	"time"
)

// TestOverlapProblems: a pipeline's prefix overlaps an earlier pipeline's on the same bucket when
// one is a prefix of the other; unknown buckets and prefixes (tokens, invalid tenants) are skipped.
func TestOverlapProblems(t *testing.T) {
	a := claim{path: "S/Tenant-a", tenant: "a", bucket: "construct S/Bucket", prefix: "inbox/ok/"}
	for _, tc := range []struct {
		name    string
		c       claim
		earlier []claim
		want    []string
	}{
		{"nested prefix", claim{tenant: "b", bucket: a.bucket, prefix: "inbox/ok/sub/"}, []claim{a},
			[]string{`tenant "b": prefix "inbox/ok/sub/" overlaps the prefix "inbox/ok/" of tenant "a" (S/Tenant-a) on the same bucket, ` +
				`so one file would reach two tenants: make the prefixes disjoint`}},
		{"enclosing prefix", claim{tenant: "b", bucket: a.bucket, prefix: "inbox/"}, []claim{a}, []string{`prefix "inbox/" overlaps the prefix "inbox/ok/"`}},
		{"same prefix", claim{tenant: "b", bucket: a.bucket, prefix: "inbox/ok/"}, []claim{a}, []string{`prefix "inbox/ok/" overlaps`}},
		{"sibling prefix", claim{tenant: "b", bucket: a.bucket, prefix: "inbox/okay/"}, []claim{a}, nil},
		{"another bucket", claim{tenant: "b", bucket: "name other", prefix: "inbox/ok/sub/"}, []claim{a}, nil},
		{"unknown bucket", claim{tenant: "b", prefix: "inbox/ok/sub/"}, []claim{a}, nil},
		{"unknown prefix", claim{tenant: "b", bucket: a.bucket}, []claim{a}, nil},
		{"earlier prefix unknown", claim{tenant: "b", bucket: a.bucket, prefix: "inbox/ok/"}, []claim{{tenant: "a", bucket: a.bucket}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := overlapProblems(tc.c, tc.earlier)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %d problems", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("got %q, want it to contain %q", got[i], w)
				}
			}
		})
	}
}

// TestValidationListsEachProblemApart: CDK prints one line per message under the construct's
// path, so every problem is its own message, the tenant's own problems included.
func TestValidationListsEachProblemApart(t *testing.T) {
	p := valid()
	p.Bucket = nil
	p.Tenant.Format = "xml"
	p.Tenant.ChunkSize = 5000
	p.DisableWakeEvents = true
	p.ControllerTimeout = time.Minute
	got := messages(p.withDefaults().validate())
	want := []string{`tenant "acme": format:`, `tenant "acme": chunkSize:`, `tenant "acme": Bucket is required`, `tenant "acme": controller timeout 1m0s`}
	if len(got) != len(want) {
		t.Fatalf("got %d messages %q, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) || strings.Contains(got[i], "\n") {
			t.Errorf("message %d: got %q, want one line starting with %q", i, got[i], w)
		}
	}
	if got := messages(valid().withDefaults().validate()); got != nil {
		t.Errorf("valid props: got %q, want no messages", got)
	}
}
