package tenants

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
	// Field names a tenant's field, given by its JSON path: prefix, dynamodb.table.
	Field func(field string) string
}

// FileNaming names everything as the tenants file spells it.
var FileNaming = Naming{
	Pool:     func(pool string) string { return "pools." + pool },
	PoolKey:  func(_, field string) string { return field },
	PoolPath: func(pool, field string) string { return "pools." + pool + "." + field },
	Field:    func(field string) string { return field },
}
