package pipeline

// Owner is the tenant whose objects a key of the pipeline's areas names (WorkPrefix, ResultsPrefix,
// ControlPrefix, QuarantinePrefix), and the pool that tenant is in: "" for a silo tenant. Every
// such key is made from an Owner, so where a tenant's objects lie is decided in one place, Root.
// The tenant comes from what names it in the pipeline (a message group, an execution's input, a
// controller's settings) and the pool from the function's own settings, never from a key.
type Owner struct {
	Pool   string
	Tenant string
}

// SiloOwner is the owner of a silo tenant's keys.
func SiloOwner(tenant string) Owner { return Owner{Tenant: tenant} }

// PoolOwner is the owner of a pooled tenant's keys; pool "" is a silo tenant's.
func PoolOwner(pool, tenant string) Owner { return Owner{Pool: pool, Tenant: tenant} }

// Root is the owner's segment of its keys, after the area's prefix: the tenant's id. Tenant ids
// hold no "/", so one tenant's keys are never under another's.
func (o Owner) Root() string { return o.Tenant }

// ControlDir is where the owner's control objects lie: control/<root>/.
func ControlDir(o Owner) string { return ControlPrefix + o.Root() + "/" }

// WorkDir is where the owner's executions keep their manifests and progress: work/<root>/.
func WorkDir(o Owner) string { return WorkPrefix + o.Root() + "/" }

// ResultsDir is where the owner's results lie: results/<root>/.
func ResultsDir(o Owner) string { return ResultsPrefix + o.Root() + "/" }

// QuarantineDir is where the owner's quarantined messages lie: quarantine/<root>/.
func QuarantineDir(o Owner) string { return QuarantinePrefix + o.Root() + "/" }

// Owner is whose keys the tenant's are.
func (t TenantOutput) Owner() Owner { return PoolOwner(t.Pool, t.ID) }
