package tenants

import (
	"fmt"

	"github.com/example/tenantpipeline/spec"
)

// Naming is how validation messages name a pool and the fields of pools and pooled tenants: the
// tenants file's own names (FileNaming), or the Go props of a construct that checks its props by
// the same rules (constructs/tenantpipeline names PoolProps and Tenant fields). Each message is
// built with the caller's names; none is rewritten afterwards.
type Naming struct {
	// Pool names a pool at the head of a message: pools.<name>.
	Pool func(pool string) string
	// PoolKey names a pool's field, given by its JSON name, inside a message about that pool or
	// its tenants: secretPrefix.
	PoolKey func(pool, field string) string
	// PoolPath names a pool's field where the reader must find it from a tenant's message:
	// pools.<name>.secretPrefix.
	PoolPath func(pool, field string) string
	// Tenant names the fields of tenant i (spec.Names): tenants[3].prefix in a file,
	// PoolProps.Tenants[3].Prefix in a pool's props.
	Tenant func(i int) spec.Names
}

// FileNaming names everything as the tenants file spells it.
var FileNaming = Naming{
	Pool:     func(pool string) string { return "pools." + pool },
	PoolKey:  func(_, field string) string { return field },
	PoolPath: func(pool, field string) string { return "pools." + pool + "." + field },
	Tenant:   func(i int) spec.Names { return spec.FileNames(fmt.Sprintf("tenants[%d]", i)) },
}
