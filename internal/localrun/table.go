package localrun

import (
	"strings"
	"unicode"

	"golang.org/x/text/width"
)

// table renders rows as columns separated by two spaces, padded by display width: a wide or
// fullwidth character (a Japanese key) takes two terminal cells, a combining mark none (Unicode
// Standard Annex #11, https://www.unicode.org/reports/tr11/). text/tabwriter counts runes, so it
// misaligned every row after a Japanese key.
func table(rows [][]string) string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], displayWidth(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-displayWidth(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// displayWidth is the number of terminal cells s takes.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		switch k := width.LookupRune(r).Kind(); {
		case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r):
		case k == width.EastAsianWide || k == width.EastAsianFullwidth:
			n += 2
		default:
			n++
		}
	}
	return n
}
