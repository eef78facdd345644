package pipeline

import (
	"encoding/hex"
	"path/filepath"
)

// The pooled tier. Many tenants share one pool's queue, functions and state machines; each tenant
// is a row of PoolSettings. The settings travel inside the controller's code asset, beside the
// bootstrap executable, because a Lambda environment holds 4 KB in all
// (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html, "Environment
// variables"), while a deployment package holds 250 MB unzipped: a tenant is about 55 bytes of
// index and, unless its row is shared, about 400 bytes of row (internal/poolsettings). Adding a tenant
// changes the asset's hash and so updates the function's code; it creates no AWS resource.
const (
	// EnvPool names the pool the controller serves. Set, it replaces TENANT, TENANT_PREFIX,
	// ON_FAILURE and IDEMPOTENCY_KEY: each message's tenant is its message group id.
	EnvPool = "POOL"
	// EnvMetricsPool is set on a pool's Register to the pool's name: its metrics then have the
	// dimension Pool instead of Tenant, the tenant a property of each line (internal/metrics,
	// Emitter.InPool). It is not EnvPool, which makes a function a pool's controller.
	EnvMetricsPool = "METRICS_POOL"
	// EnvPoolSettings is the path of the pool's PoolSettings file, relative to LAMBDA_TASK_ROOT
	// (where Lambda unpacks the code asset) unless absolute.
	EnvPoolSettings = "POOL_SETTINGS"
	// EnvPoolPrefix is the key prefix every tenant of the pool lies under: the router logs, counts
	// and alarms on an object under it that belongs to no tenant.
	EnvPoolPrefix = "POOL_PREFIX"
	// EnvFunctionRole selects what the controller binary runs as in a pool: unset, the pool's
	// controller; FunctionRoleRouter, the router that puts each "Object Created" event on the
	// pool's queue under its tenant's message group.
	EnvFunctionRole = "FUNCTION_ROLE"
	// EnvDeadLetterQueueURL is the router's standard queue for events that belong to no tenant of
	// the pool, kept there to be replayed once the tenant exists.
	EnvDeadLetterQueueURL = "DEAD_LETTER_QUEUE_URL"
	// EnvRouterSendBatchSize caps the entries of the router's SendMessageBatch calls, 1 to 10
	// (default 10). The construct never sets it: 1 sends one message a call, as the router did
	// before it sent batches, for the local figures (docs/local-run.md, "Pool intake").
	EnvRouterSendBatchSize = "ROUTER_SEND_BATCH_SIZE"
	// EnvRouterParkEach "true" makes the router count and feed back each file it parks, as it did
	// before it parked a batch's later files of a tenant straight away. The construct never sets
	// it: it is a reference for measuring the router locally.
	EnvRouterParkEach = "ROUTER_PARK_EACH"

	// EnvTenantRoleARN is the pool's tenant-scoped role: a pool's controller, Split and Register
	// read and write one tenant's data only with the credentials of a session of this role tagged
	// TenantTag=<tenant id> (internal/tenantcreds). Unset in a silo, whose function roles are the
	// tenant's own.
	EnvTenantRoleARN = "TENANT_ROLE_ARN"
	// TenantTag is the session tag key that names the tenant a session acts for; the tenant-scoped
	// role's policies name its value as ${aws:PrincipalTag/tenant}.
	TenantTag = "tenant"
	// EnvTenantRolePool is the pool whose tenant-scoped role EnvTenantRoleARN is: its sessions
	// carry PoolTag=<pool name> beside TenantTag, which the role's trust policy requires.
	EnvTenantRolePool = "TENANT_ROLE_POOL"
	// PoolTag is the session tag key that names the pool a session of a pool's tenant-scoped role
	// is made for; the role's trust policy requires it to be the role's own pool.
	PoolTag = "pool"

	// FunctionRoleRouter is the EnvFunctionRole value of the pool's router.
	FunctionRoleRouter = "router"

	// PoolSettingsFile is the settings file's name in the controller's asset.
	PoolSettingsFile = "pool-tenants.json"
	// PoolSettingsVersion is the version of the file's format (internal/poolsettings). Version 1 was one
	// JSON document, read whole at start.
	PoolSettingsVersion = 2
)

// PoolSettings is the pool's tenants, whole: what the construct writes (poolsettings.Encode) and tools read
// (poolsettings.ParseSettings). A function serving the pool reads the file through a poolsettings.Index.
type PoolSettings struct {
	Version int    `json:"version"`
	Pool    string `json:"pool"`
	// Prefix is the key prefix shared by every tenant of the pool (EnvPoolPrefix).
	Prefix  string       `json:"prefix"`
	Tenants []PoolTenant `json:"tenants"`
}

// PoolTenant is one pooled tenant: what a silo controller reads from its environment.
type PoolTenant struct {
	// Settings travel with every execution, as a silo controller's TENANT variable.
	Settings       Tenant `json:"settings"`
	Prefix         string `json:"prefix"`
	OnFailure      string `json:"onFailure"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// ID is the tenant's id, its message group id in the pool's queue.
func (t PoolTenant) ID() string { return t.Settings.ID }

// PoolSettingsPath resolves EnvPoolSettings against LAMBDA_TASK_ROOT.
func PoolSettingsPath(getenv func(string) string) string {
	p := getenv(EnvPoolSettings)
	if p == "" {
		p = PoolSettingsFile
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(getenv("LAMBDA_TASK_ROOT"), p)
}

// The pool's stack output, for pipectl: one per pool, logical id PoolOutputKey(name), value the
// JSON of PoolOutput. Tenants are not listed: 10,000 of them would not fit an output; the
// pool's settings file names them.
const (
	PoolOutputKeyPrefix = "PipelinePool"
	PoolOutputVersion   = 1
)

// PoolOutputKey is the logical id of a pool's output: the prefix and the name in hex.
func PoolOutputKey(pool string) string { return PoolOutputKeyPrefix + hex.EncodeToString([]byte(pool)) }

// PoolOutput is what pipectl needs to operate a pool.
type PoolOutput struct {
	Version                int    `json:"version"`
	Pool                   string `json:"pool"`
	Bucket                 string `json:"bucket"`
	Prefix                 string `json:"prefix"`
	Tenants                int    `json:"tenants"`
	QueueURL               string `json:"queueUrl"`
	QueueARN               string `json:"queueArn"`
	StateMachineARN        string `json:"stateMachineArn"`
	SegmentStateMachineARN string `json:"segmentStateMachineArn"`
	ControllerFunction     string `json:"controllerFunction"`
	RouterFunction         string `json:"routerFunction"`
	EventSourceMappingUUID string `json:"eventSourceMappingUuid,omitempty"`
	DLQURL                 string `json:"dlqUrl,omitempty"`
	// UploaderRoleARN is the pool's uploader role, which a session tagged tenant=<id> assumes to
	// upload that tenant's files; empty when the pool names no uploaders.
	UploaderRoleARN string `json:"uploaderRoleArn,omitempty"`
	// Keys is the layout of the pool's keys, KeysPerPool or KeysPerTenant; empty in the output of
	// a pool deployed before it was written: KeysPerTenant.
	Keys string `json:"keys,omitempty"`
}

// KeysPool is the pool its tenants' keys carry (Owner): its name under KeysPerPool, else "".
func (p PoolOutput) KeysPool() string {
	if p.Keys == KeysPerPool {
		return p.Pool
	}
	return ""
}
