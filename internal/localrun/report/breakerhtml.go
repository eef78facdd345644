package report

import (
	"slices"
	"time"
)

// htmlBreakerRow is one core system's breaker in the HTML report, its times from the first upload.
type htmlBreakerRow struct {
	Name, State                          string
	Opens, Probes, ProbeFailures, Closes int
	OpenedAt, ClosedAt, Reason           string
}

// breakerRows are rep's core system breakers, by name; none when no breaker changed.
func breakerRows(rep *Report, origin time.Time) []htmlBreakerRow {
	at := func(t *time.Time) string {
		if t == nil {
			return "–"
		}
		return "+" + t.Sub(origin).Round(100*time.Millisecond).String()
	}
	var rows []htmlBreakerRow
	for name, b := range rep.CoreSystemBreakers {
		rows = append(rows, htmlBreakerRow{Name: name, State: b.State, Opens: b.Opens, Probes: b.Probes, ProbeFailures: b.ProbeFailures,
			Closes: b.Closes, OpenedAt: at(b.FirstOpenedAt), ClosedAt: at(b.LastClosedAt), Reason: b.Reason})
	}
	slices.SortFunc(rows, func(a, b htmlBreakerRow) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return rows
}
