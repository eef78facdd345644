package tenantpipeline

import (
	"fmt"
	"strings"
	"testing"
)

// The Deny's ids stay within their share of a role's inline policies: 171 silo tenants of the
// longest id (32 characters) fit, 172 do not; the default event bus's rules allow 150.
func TestSiloDenyBound(t *testing.T) {
	ids := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%03d", i)+strings.Repeat("x", 29))
		}
		return out
	}
	for _, tc := range []struct {
		n    int
		fits bool
	}{{150, true}, {171, true}, {172, false}} {
		if got := siloDenyChars(ids(tc.n)) <= maxSiloDenyChars; got != tc.fits {
			t.Errorf("%d ids of 32 characters: %d characters, fits %v, want %v", tc.n, siloDenyChars(ids(tc.n)), got, tc.fits)
		}
	}
}
