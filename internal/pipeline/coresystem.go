package pipeline

import "github.com/example/tenantpipeline/spec"

// CoreSystem is a named destination that tenants register into, protected by admission: at most
// MaxRunningFiles of its files run at once (in both tiers together), its records arrive at most
// MaxRecordsPerSecond across all of them, and with Adaptive its effective running-file limit follows
// the core system's own "slow down" answers (429, 503, Retry-After). It travels inside Tenant, so
// the controller and Register of every tenant that names it see the same settings.
type CoreSystem struct {
	// Name is the core system's name in tenants.json's "coreSystems" (or CoreSystemProps.Name).
	Name string `json:"name"`
	// MaxRunningFiles bounds the files of every tenant naming the core system that run at once.
	MaxRunningFiles int `json:"maxRunningFiles"`
	// MaxRecordsPerSecond bounds the records sent to the core system per second, across all of its
	// running files. Zero: no rate limit.
	MaxRecordsPerSecond float64 `json:"maxRecordsPerSecond,omitempty"`
	// Adaptive lets the effective running-file limit fall on 429 and 503 and grow back on success,
	// never above MaxRunningFiles.
	Adaptive bool `json:"adaptive,omitempty"`
	// MaxRequestsInFlight bounds the requests in flight to the core system across all of its
	// running files. Zero means MaxRunningFiles: one request per running file.
	MaxRequestsInFlight int `json:"maxRequestsInFlight,omitempty"`
	// The fields of a core system's bad day (spec.CoreSystem).
	Breaker              *spec.Breaker            `json:"breaker,omitempty"`
	Maintenance          []spec.MaintenanceWindow `json:"maintenance,omitempty"`
	IdempotencyRetention string                   `json:"idempotencyRetention,omitempty"`
	LookupURL            string                   `json:"lookupUrl,omitempty"`
	CompleteURL          string                   `json:"completeUrl,omitempty"`
	// Table is the DynamoDB table of the core system's admission state: running-file leases,
	// waiting tenants and the adaptive limit (internal/admission).
	Table string `json:"table"`
}

// CoreSystemOf is the core system name as its settings travel in each execution, without its
// table (the controller adds it).
func CoreSystemOf(name string, c spec.CoreSystem) *CoreSystem {
	return &CoreSystem{Name: name, MaxRunningFiles: c.MaxRunningFiles, MaxRecordsPerSecond: c.MaxRecordsPerSecond, Adaptive: c.Adaptive,
		MaxRequestsInFlight: c.MaxRequestsInFlight, Breaker: c.Breaker, Maintenance: c.Maintenance,
		IdempotencyRetention: c.IdempotencyRetention, LookupURL: c.LookupURL, CompleteURL: c.CompleteURL}
}

// Spec is the core system's configuration, for its rules (BreakerSettings, Retention, LookupFor).
func (c CoreSystem) Spec() spec.CoreSystem {
	return spec.CoreSystem{MaxRunningFiles: c.MaxRunningFiles, MaxRecordsPerSecond: c.MaxRecordsPerSecond, Adaptive: c.Adaptive,
		MaxRequestsInFlight: c.MaxRequestsInFlight, Breaker: c.Breaker, Maintenance: c.Maintenance,
		IdempotencyRetention: c.IdempotencyRetention, LookupURL: c.LookupURL, CompleteURL: c.CompleteURL}
}

// RequestsInFlight is MaxRequestsInFlight, defaulted to MaxRunningFiles.
func (c CoreSystem) RequestsInFlight() int {
	if c.MaxRequestsInFlight == 0 {
		return c.MaxRunningFiles
	}
	return c.MaxRequestsInFlight
}

// FileShare is the static share of one running file of the core system (RequestSharesStatic),
// and Register's fallback when it cannot read or write the shares: admission runs at most
// MaxRunningFiles of its files at once, so shares of RequestsInFlight/MaxRunningFiles never add
// up to more than RequestsInFlight. At least 1, since a running file sends.
func (c CoreSystem) FileShare() int {
	if c.MaxRunningFiles <= 0 {
		return max(1, c.RequestsInFlight())
	}
	return max(1, c.RequestsInFlight()/c.MaxRunningFiles)
}

// Admission environment of the controller (and Register, for the adaptive limit).
const (
	// EnvPoolAdmissionTable is a pool controller's DynamoDB table of the pool's running-file
	// leases and waiting tenants; empty or unset in a silo controller.
	EnvPoolAdmissionTable = "POOL_ADMISSION_TABLE"
	// EnvPoolMaxRunningFiles bounds the pool's files running at once (admission's pool gate).
	EnvPoolMaxRunningFiles = "POOL_MAX_RUNNING_FILES"
	// EnvCoreSystemTables is the controller's JSON object of core system name to admission table
	// name, in both tiers: a silo controller's holds its tenant's core system, a pool controller's
	// every core system its tenants name. The table names are CloudFormation tokens, so they
	// cannot travel in the tenants' settings; the controller fills CoreSystem.Table from it.
	EnvCoreSystemTables = "CORE_SYSTEM_TABLES"
	// EnvMaxQueuedFilesPerTenant bounds one pooled tenant's messages in the pool's queue: the
	// router and the pool controller keep the rest parked (internal/backlog), in the pool's
	// admission table (EnvPoolAdmissionTable) and under control/<tenant>/parked/. Unset: no bound
	// (a silo tenant has its own queue).
	EnvMaxQueuedFilesPerTenant = "MAX_QUEUED_FILES_PER_TENANT"
)
