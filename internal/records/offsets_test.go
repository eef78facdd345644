package records

import (
	"fmt"
	"testing"
)

// TestTextCheckBlockBoundaries splits text at every byte, as reads of any size would, and checks
// that a character straddling two blocks is neither missed nor flagged.
func TestTextCheckBlockBoundaries(t *testing.T) {
	tests := []struct {
		name    string
		cp932   bool
		text    string
		wantBad bool
	}{
		{"valid utf-8", false, "aé①😀z", false},
		{"invalid byte", false, "aé\xff①", true},
		{"truncated rune mid-text", false, "a\xe2\x91z", true},
		{"truncated rune at the end", false, "a①\xe2\x91", true},
		{"surrogate", false, "a\xed\xa0\x80", true},
		{"cp932 clean", true, "ab①～㎡", false},
		{"cp932 replacement", true, "ab\uFFFDc", true},
	}
	for _, tt := range tests {
		for cut := 0; cut <= len(tt.text); cut++ {
			t.Run(fmt.Sprintf("%s/%d", tt.name, cut), func(t *testing.T) {
				c := &textCheck{cp932: tt.cp932}
				c.scan([]byte(tt.text[:cut]))
				c.scan([]byte(tt.text[cut:]))
				c.end()
				if c.bad != tt.wantBad {
					t.Errorf("got bad=%v, want %v", c.bad, tt.wantBad)
				}
			})
		}
	}
}
