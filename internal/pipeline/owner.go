package pipeline

import "fmt"

// Owner is the tenant whose objects a key of the pipeline's areas names (WorkPrefix, ResultsPrefix,
// ControlPrefix, QuarantinePrefix), and the pool its keys carry. Every such key is made from an
// Owner, so where a tenant's objects lie is decided in one place, Root. The tenant comes from what
// names it in the pipeline (a message group, an execution's input, a controller's settings) and
// the pool from the function's own settings (EnvKeysPool), never from a key.
//
// A pool's keys carry its name (KeysPerPool) so that its tenant roles, which name the tenant by
// the session's tag, can name the pool literally: a session of one pool's role tagged with
// another pool's tenant's id reaches none of that tenant's objects. A pool deployed with the
// earlier layout (KeysPerTenant) keeps its tenants' keys where they are: Pool "".
type Owner struct {
	// Pool is the pool whose name the keys carry: "" for a silo tenant and for a pool of the
	// KeysPerTenant layout.
	Pool   string
	Tenant string
}

// Layouts of a pool's keys (PoolOutput.Keys, the construct's PoolProps.Keys, the tenants file's pool
// field "keys").
const (
	// KeysPerPool: a pooled tenant's keys are <area>/pool.<pool>/<tenant>/.
	KeysPerPool = "pool"
	// KeysPerTenant: a pooled tenant's keys are <area>/<tenant>/, as a silo tenant's; the layout
	// of pools deployed before KeysPerPool.
	KeysPerTenant = "tenant"
)

// PoolRootPrefix starts the root of a pool's tenant in the KeysPerPool layout. "." is in no
// tenant id, so no silo tenant's root, and no tenant's of another pool, starts with it.
const PoolRootPrefix = "pool."

// EnvKeysPool is set on a pool's functions (controller, router, Split, Register) to the pool's
// name when its keys carry it (KeysPerPool); unset for a silo tenant and the KeysPerTenant layout.
const EnvKeysPool = "KEYS_POOL"

// SiloOwner is the owner of a silo tenant's keys.
func SiloOwner(tenant string) Owner { return Owner{Tenant: tenant} }

// PoolOwner is the owner of a pooled tenant's keys, pool the pool they carry: "" for a silo
// tenant's or the KeysPerTenant layout's.
func PoolOwner(pool, tenant string) Owner { return Owner{Pool: pool, Tenant: tenant} }

// Root is the owner's segment of its keys, after the area's prefix: "pool.<pool>/<tenant>", or the
// tenant's id when the keys carry no pool. Tenant ids hold no "/" and no ".", and pool names no
// "/", so one owner's keys are never under another's.
func (o Owner) Root() string {
	if o.Pool == "" {
		return o.Tenant
	}
	return PoolRootPrefix + o.Pool + "/" + o.Tenant
}

// ControlDir is where the owner's control objects lie: control/<root>/.
func ControlDir(o Owner) string { return ControlPrefix + o.Root() + "/" }

// WorkDir is where the owner's executions keep their manifests and progress: work/<root>/.
func WorkDir(o Owner) string { return WorkPrefix + o.Root() + "/" }

// ResultsDir is where the owner's results lie: results/<root>/.
func ResultsDir(o Owner) string { return ResultsPrefix + o.Root() + "/" }

// QuarantineDir is where the owner's quarantined messages lie: quarantine/<root>/.
func QuarantineDir(o Owner) string { return QuarantinePrefix + o.Root() + "/" }

// Owner is whose keys the tenant's are: in its pool's keys, if they carry the pool.
func (t TenantOutput) Owner() Owner { return PoolOwner(t.KeysPool, t.ID) }

// SplitRegisterKeysPool reads EnvKeysPool for Split or Register, whose pool is EnvMetricsPool: the
// pool itself, or unset. Any other value is an error: the function must never read or write
// another pool's keys. (A pool's controller and router read it with internal/env.)
func SplitRegisterKeysPool(getenv func(string) string) (string, error) {
	v, pool := getenv(EnvKeysPool), getenv(EnvMetricsPool)
	if v != "" && v != pool {
		return "", fmt.Errorf("%s %q is not the function's pool %q (%s)", EnvKeysPool, v, pool, EnvMetricsPool)
	}
	return v, nil
}
