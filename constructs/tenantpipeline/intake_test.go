package tenantpipeline

import (
	"strings"
	"testing"
)

// IntakeGroupOf is total on printable ASCII (every byte has one group, every group has bytes), stable (the
// same byte always gives the same group) and spreads consecutive characters; known answers pin it,
// since a change would move tenants to other groups.
func TestIntakeGroupOf(t *testing.T) {
	for _, tc := range []struct {
		b      byte
		groups int
		want   int
	}{{'0', 16, 0}, {'9', 16, 9}, {'a', 16, 1}, {'o', 16, 15}, {'p', 16, 0}, {'z', 16, 10}, {'A', 16, 1}, {'-', 16, 13}, {'a', 1, 0}, {'a', 64, 33}} {
		if got, ok := IntakeGroupOf(tc.b, tc.groups); !ok || got != tc.want {
			t.Errorf("IntakeGroupOf(%q, %d): got %d, %v, want %d", tc.b, tc.groups, got, ok, tc.want)
		}
	}
	for groups := 1; groups <= 64; groups++ {
		seen := map[int]int{}
		for b := 0x20; b <= 0x7E; b++ {
			g, ok := IntakeGroupOf(byte(b), groups)
			if again, _ := IntakeGroupOf(byte(b), groups); !ok || g < 0 || g >= groups || again != g {
				t.Fatalf("IntakeGroupOf(%#x, %d): got %d, %v then %d, want one group in [0, %d)", b, groups, g, ok, again, groups)
			}
			seen[g]++
		}
		if len(seen) != groups {
			t.Errorf("%d groups: only %d have characters", groups, len(seen))
		}
		for _, b := range []int{0x00, 0x09, 0x1F, 0x7F, 0x80, 0xC3, 0xE6, 0xFF} {
			if _, ok := IntakeGroupOf(byte(b), groups); ok != (groups == 1) {
				t.Errorf("IntakeGroupOf(%#x, %d): got ok %v, want %v", b, groups, ok, groups == 1)
			}
		}
	}
}

// The key filters list every printable ASCII character after the prefix exactly once, in its group's rule,
// and the prefix itself in group 0; one group is one filter on the whole prefix.
func TestIntakeKeyFilters(t *testing.T) {
	const prefix = "pools/p/"
	if got := intakeKeyFilters(prefix, 1); len(got) != 1 || len(got[0]) != 1 || got[0][0].(map[string]any)["prefix"] != prefix {
		t.Errorf("one group: got %v, want one prefix matcher on %q", got, prefix)
	}
	filters := intakeKeyFilters(prefix, 16)
	listed := map[string]int{}
	for g, f := range filters {
		for _, m := range f {
			switch m := m.(type) {
			case string:
				if m != prefix || g != 0 {
					t.Errorf("group %d lists the exact key %q, want only the prefix in group 0", g, m)
				}
				listed[""]++
			case map[string]any:
				p := m["prefix"].(string)
				rest, _ := strings.CutPrefix(p, prefix)
				if len(rest) != 1 {
					t.Fatalf("group %d: matcher %q is not the prefix and one character", g, p)
				}
				if want, _ := IntakeGroupOf(rest[0], 16); want != g {
					t.Errorf("%q is in group %d, want %d", p, g, want)
				}
				listed[rest]++
			}
		}
	}
	if len(listed) != 95+1 {
		t.Errorf("got %d characters listed, want the 95 printable ASCII characters and the prefix itself", len(listed))
	}
	for c, n := range listed {
		if n != 1 {
			t.Errorf("%q listed %d times, want once", c, n)
		}
	}
}

// The pattern size check counts what EventBridge would get: with a 14-character prefix, 16 groups
// fit easily and so do 2; with a 46-character prefix 2 groups do not.
func TestIntakePatternChars(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		groups int
		fits   bool
	}{{"pools/default/", 16, true}, {"pools/default/", 2, true}, {"pools/" + strings.Repeat("x", 40) + "/", 2, false}} {
		if n, _ := intakePatternChars(tc.prefix, tc.groups, ""); (n <= MaxEventPatternChars) != tc.fits {
			t.Errorf("prefix %q, %d groups: largest pattern %d characters, want fits %v (%d)", tc.prefix, tc.groups, n, tc.fits, MaxEventPatternChars)
		}
	}
}
