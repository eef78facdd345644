package opsfake

import (
	"time"

	"github.com/example/tenantpipeline/internal/breaker"
	"github.com/example/tenantpipeline/internal/schema"
)

// SetBreaker writes a core system's breaker item (internal/breaker's layout) in its gate: its
// state, when it opened and why, its next probe time and how often it opened.
func (w *World) SetBreaker(table, gate string, status breaker.Status, openedAt, nextProbe time.Time, reason string, opens int) {
	w.put(table, item{schema.AttrPK: s(gate), schema.AttrSK: s(breaker.SK), breaker.AttrStatus: s(string(status)),
		breaker.AttrOpenedAt: n(openedAt.UnixMilli()), breaker.AttrNextProbe: n(nextProbe.UnixMilli()), breaker.AttrReason: s(reason),
		breaker.AttrOpens: n(int64(opens)), breaker.AttrVersion: n(7)})
}
