package termtable

import (
	"strings"
	"testing"
)

func TestWidth(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
	}{
		{"acme", 4},
		{"注文.csv", 8},  // two wide ideographs
		{"ｶﾅ", 2},      // halfwidth katakana take one cell each
		{"Ａ", 2},       // fullwidth Latin
		{"e\u0301", 1}, // e + combining acute accent
		{"inbox/東京 1.csv", 16},
	} {
		t.Run(tc.s, func(t *testing.T) {
			if got := Width(tc.s); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// Every column starts at the same terminal cell on every row, Japanese keys or not.
func TestRenderAlignsByDisplayWidth(t *testing.T) {
	out := Render([][]string{{"KEY", "STATUS"}, {"inbox/acme/注文.csv", "FAILED"}, {"inbox/acme/a.csv", "SUCCEEDED"}})
	var starts []int
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		i := strings.LastIndex(line, "  ")
		starts = append(starts, Width(line[:i+2]))
	}
	for i, s := range starts {
		if s != starts[0] {
			t.Errorf("line %d: second column at cell %d, want %d\n%s", i, s, starts[0], out)
		}
	}
	if starts[0] != len("inbox/acme/注文.csv")-6+4+2 { // 2 ideographs: 6 bytes, 4 cells
		t.Errorf("got the second column at cell %d, want %d", starts[0], len("inbox/acme/注文.csv")-6+4+2)
	}
}

// Columns line up by terminal cells: a Japanese character is two cells wide (UAX #11).
func TestRenderPadsWithSpaces(t *testing.T) {
	out := Render([][]string{{"FILE", "STATUS"}, {"注文.csv", "SUCCEEDED"}, {"ab.csv", "FAILED"}})
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	// "注文.csv" is 8 cells wide (2+2+4), the widest cell: STATUS starts at cell 10 in every row.
	for _, tc := range []struct {
		line   string
		prefix string
	}{
		{lines[0], "FILE      STATUS"},
		{lines[1], "注文.csv  SUCCEEDED"},
		{lines[2], "ab.csv    FAILED"},
	} {
		if tc.line != tc.prefix {
			t.Errorf("got %q, want %q", tc.line, tc.prefix)
		}
	}
}
