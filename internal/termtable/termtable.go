// Package termtable renders the plain-text tables that pipectl and the local run print, padded by
// terminal cells rather than runes or bytes, so columns line up after Japanese file names.
package termtable

import (
	"strings"
	"unicode"

	"golang.org/x/text/width"
)

// Render renders rows as columns separated by two spaces, padded by display width: a wide or
// fullwidth character (a Japanese key) takes two terminal cells, a combining mark none (Unicode
// Standard Annex #11, https://www.unicode.org/reports/tr11/). text/tabwriter counts runes, so it
// misaligns every row after a Japanese key.
func Render(rows [][]string) string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], Width(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-Width(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Width is the number of terminal cells s takes.
func Width(s string) int {
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
