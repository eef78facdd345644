// Package pollref is the admission design that waited by polling, kept unchanged as the reference
// that the admission benchmark (cmd/admissionbench) runs side by side with internal/admission: every
// waiting file asks again on a timer, and a freed slot may be taken only by a waiter ranked ahead of
// the free count. It shares the table layout (package schema) with internal/admission. Nothing deployed uses
// it.
package pollref

import (
	"github.com/example/tenantpipeline/internal/schema"
)

// The names of the table layout, as package schema draws them.
const (
	AttrPK        = schema.AttrPK
	AttrSK        = schema.AttrSK
	AttrExpiresAt = schema.AttrExpiresAt
	LimitSK       = schema.LimitSK
	AttrLimit     = schema.AttrLimit
)
