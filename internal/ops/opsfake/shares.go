package opsfake

import (
	"github.com/example/tenantpipeline/internal/shares"
)

// SetShares writes core system name's request shares item (internal/shares' layout) in table.
func (w *World) SetShares(table, name string, entries ...shares.Entry) {
	w.put(table, shares.Item(name, shares.State{Entries: entries, Version: 1}))
}
