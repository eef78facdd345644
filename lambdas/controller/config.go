package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// maxVisibility is the longest visibility timeout SQS accepts: 12 hours.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html
const maxVisibility = 12 * time.Hour

// maxRegisterTimeout is the longest timeout a Lambda function can have: 900 seconds. It is the
// default Register timeout, the safe bound when the variable is not set.
// https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html
const maxRegisterTimeout = 900 * time.Second

// Defaults of the optional variables.
const (
	defaultOnFailure      = pipeline.OnFailureContinue
	defaultIdempotencyKey = pipeline.IdempotencyEventID
	defaultFirstWait      = time.Second
	defaultHaltWait       = 5 * time.Minute
	defaultPollBudget     = 10 * time.Second
	// defaultSafetyNet is the longest wait for a running execution when wake-up events are on:
	// 5 minutes, one DescribeExecution per running file every 5 minutes (docs/controller.md).
	defaultSafetyNet = 5 * time.Minute
)

// Config is the controller's environment, parsed and checked once at start-up.
type Config struct {
	StateMachineARN  string
	QueueURL         string
	Tenant           pipeline.Tenant
	TenantPrefix     string
	Bucket           string
	OnFailure        string
	IdempotencyKey   string
	FirstWait        time.Duration
	MaxWait          time.Duration
	HaltWait         time.Duration
	PollBudget       time.Duration
	MetricsNamespace string
	// SegmentStateMachineARN is the tenant's segment state machine, whose executions the file
	// state machine starts (startExecution.sync:2).
	SegmentStateMachineARN string
	// RegisterTimeout is the Register function's timeout: how long a Register invocation can go
	// on after the execution that started it stopped.
	RegisterTimeout time.Duration
	// WakeEvents says the file state machine's status change events reach the controller's wake-up
	// handler (wake.go). The controller then keeps a wake-up state and waits SafetyNet for a
	// running execution; without them it polls with the growing backoff.
	WakeEvents bool
	// SafetyNet is the longest wait for a running execution when WakeEvents is on.
	SafetyNet time.Duration
	// ControlPrefixProtected says the bucket's policy lets only the pipeline and the operators write
	// under control/: a recorded SUCCEEDED then releases its file without a DescribeExecution
	// (wake.go, wokenSucceeded).
	ControlPrefixProtected bool
	// EventBus is the bus the File Processed events go to (EnvEventBusName); empty: none
	// (fileevent.go).
	EventBus string
	// ResultsFunction is the function whose results task writes a failed file's results
	// (EnvResultsFunction); empty: a failed file gets none (results.go).
	ResultsFunction string

	// Pool is the pool a pool controller serves (EnvPool); empty for a silo controller.
	Pool string
	// PoolAdmissionTable is a pool controller's admission table (EnvPoolAdmissionTable): the
	// leases of the pool's running files in its pool gate and its waiting tenants. Empty for a
	// silo controller.
	PoolAdmissionTable string
	// PoolMaxRunningFiles bounds the pool's files running at once (EnvPoolMaxRunningFiles), 1 to
	// 1,000; zero for a silo controller.
	PoolMaxRunningFiles int

	// executionPrefix is the execution ARN of this state machine without the execution name.
	executionPrefix string
	// segmentExecutionPrefix is the same for the segment state machine.
	segmentExecutionPrefix string
}

// ExecutionARN is the ARN of this state machine's execution called name.
func (c Config) ExecutionARN(name string) string { return c.executionPrefix + name }

// configFromEnv reads and validates a silo controller's environment (pipeline.Env* names): its one
// tenant comes from TENANT, TENANT_PREFIX, ON_FAILURE and IDEMPOTENCY_KEY. Every problem is
// reported, each naming its variable.
func configFromEnv(getenv func(string) string) (Config, error) {
	e := newEnvReader(getenv)
	c := e.shared()
	c.TenantPrefix = e.required(pipeline.EnvTenantPrefix)
	c.OnFailure = e.optional(pipeline.EnvOnFailure, defaultOnFailure)
	c.IdempotencyKey = e.optional(pipeline.EnvIdempotencyKey, defaultIdempotencyKey)
	if raw := e.required(pipeline.EnvTenant); raw != "" {
		if err := json.Unmarshal([]byte(raw), &c.Tenant); err != nil {
			e.bad(pipeline.EnvTenant, "is not the JSON of a tenant: %v", err)
		} else {
			checkTenantID(c.Tenant.ID, pipeline.EnvTenant, e.bad)
		}
	}
	// Every execution carries the prefix, so Split can refuse an object that is not the tenant's.
	c.Tenant.Prefix = c.TenantPrefix
	checkTenantPolicy(c, siloNames, e.bad)
	for _, name := range []string{pipeline.EnvPoolAdmissionTable, pipeline.EnvPoolMaxRunningFiles} {
		if strings.TrimSpace(getenv(name)) != "" {
			e.bad(name, "is set, but a silo controller (no %s) has no pool gate: remove it", pipeline.EnvPool)
		}
	}
	tables := e.coreSystemTables()
	if c.Tenant.ID != "" {
		e.fillCoreSystem(&c.Tenant, tables, pipeline.EnvTenant)
	}
	if err := errors.Join(e.errs...); err != nil {
		return Config{}, fmt.Errorf("controller environment: %w", err)
	}
	return c, nil
}

// PoolConfig is a pool controller's environment: the variables its tenants share, and the pool's
// settings file, which holds what a silo controller reads from TENANT, TENANT_PREFIX, ON_FAILURE
// and IDEMPOTENCY_KEY for each tenant.
type PoolConfig struct {
	Shared   Config
	Settings *pipeline.PoolIndex
	// coreTables is CORE_SYSTEM_TABLES, for each tenant's core system (tenantConfig).
	coreTables map[string]string
	// Backlog bounds each tenant's messages in the pool queue (parking.go); zero: no bound.
	Backlog backlogConfig
}

// poolConfigFromEnv reads and validates a pool controller's environment (EnvPool set) and the
// settings file's header and index. A tenant's own row is read and checked when the tenant is
// first served (tenantConfig): a bad row holds that tenant's files only, not the pool.
func poolConfigFromEnv(getenv func(string) string) (PoolConfig, error) {
	e := newEnvReader(getenv)
	c := e.shared()
	for _, name := range []string{pipeline.EnvTenant, pipeline.EnvTenantPrefix, pipeline.EnvOnFailure, pipeline.EnvIdempotencyKey} {
		if strings.TrimSpace(getenv(name)) != "" {
			e.bad(name, "is set, but a pool controller (%s) reads each tenant's settings from %s: remove it", pipeline.EnvPool, pipeline.EnvPoolSettings)
		}
	}
	var settings *pipeline.PoolIndex
	c.Pool, settings = e.pool()
	c.PoolAdmissionTable = e.required(pipeline.EnvPoolAdmissionTable)
	if c.PoolAdmissionTable != "" {
		checkTableName(pipeline.EnvPoolAdmissionTable, c.PoolAdmissionTable, e.bad)
	}
	c.PoolMaxRunningFiles = e.number(pipeline.EnvPoolMaxRunningFiles, e.required(pipeline.EnvPoolMaxRunningFiles), minRunningFiles, maxRunningFiles)
	var bl backlogConfig
	if v := e.optional(pipeline.EnvMaxQueuedFilesPerTenant, ""); v != "" {
		bl = backlogConfig{Table: c.PoolAdmissionTable, Max: e.number(pipeline.EnvMaxQueuedFilesPerTenant, v, backlog.MinMaxQueued, backlog.MaxMaxQueued)}
	}
	tables := e.coreSystemTables()
	if err := errors.Join(e.errs...); err != nil {
		if settings != nil {
			settings.Close()
		}
		return PoolConfig{}, fmt.Errorf("controller environment: %w", err)
	}
	return PoolConfig{Shared: c, Settings: settings, coreTables: tables, Backlog: bl}, nil
}

// tenantConfig is the Config of the pool's tenant id, its row read from the settings file and
// checked as a silo controller checks its variables. The error is pipeline.ErrUnknownPoolTenant
// for an id of no tenant, or names every problem of the tenant's row.
func (pc PoolConfig) tenantConfig(id string) (Config, error) {
	t, err := pc.Settings.Tenant(id)
	if err != nil {
		return Config{}, err
	}
	e := newEnvReader(func(string) string { return "" })
	e.fillCoreSystem(&t.Settings, pc.coreTables, fmt.Sprintf("%s: tenant %q settings", pipeline.EnvPoolSettings, id))
	tc := pc.Shared.forTenant(t)
	field := fmt.Sprintf("%s: tenant %q", pipeline.EnvPoolSettings, id)
	checkTenantID(id, field+" settings", e.bad)
	checkTenantPolicy(tc, tenantNames{field + " settings", field + " prefix", field + " onFailure", field + " idempotencyKey"}, e.bad)
	if err := errors.Join(e.errs...); err != nil {
		return Config{}, err
	}
	return tc, nil
}

// Running-file limits of a core system and a pool (internal/tenants: MinRunningFiles,
// MaxRunningFiles).
const (
	minRunningFiles = 1
	maxRunningFiles = 1000
)

// coreSystemTables reads CORE_SYSTEM_TABLES, a JSON object of core system name to admission
// table name. Unset, it is empty: then no tenant may name a core system.
func (e *envReader) coreSystemTables() map[string]string {
	raw := strings.TrimSpace(e.getenv(pipeline.EnvCoreSystemTables))
	if raw == "" {
		return nil
	}
	var tables map[string]string
	if err := json.Unmarshal([]byte(raw), &tables); err != nil || tables == nil {
		e.bad(pipeline.EnvCoreSystemTables, "is not a JSON object of core system name to table name, e.g. {\"ledger\": \"ledger-admission\"}: %v", cmp.Or(err, errors.New("null")))
		return nil
	}
	for name, table := range tables {
		if name == "" {
			e.bad(pipeline.EnvCoreSystemTables, "a table %q has an empty core system name", table)
			continue
		}
		checkTableName(fmt.Sprintf("%s: core system %q", pipeline.EnvCoreSystemTables, name), table, e.bad)
	}
	return tables
}

// fillCoreSystem checks the tenant's core system and sets its table from tables, so that every
// execution (and so Register) gets it. A tenant naming a core system without a table fails the
// configuration: admission could not hold that core system's limit, so the tenant's files must
// not start (fail closed). field names the tenant's settings in messages.
func (e *envReader) fillCoreSystem(t *pipeline.Tenant, tables map[string]string, field string) {
	if t.Weight < 0 || t.Weight > pipeline.MaxWeight {
		e.bad(field, "weight %d, want %d to %d, or 0 for %d", t.Weight, pipeline.MinWeight, pipeline.MaxWeight, pipeline.DefaultWeight)
	}
	if t.MaxRecordsPerSecond < 0 {
		e.bad(field, "maxRecordsPerSecond %v, want above 0, or 0 for none", t.MaxRecordsPerSecond)
	}
	cs := t.CoreSystem
	if cs == nil {
		return
	}
	switch {
	case cs.Name == "":
		e.bad(field, "coreSystem has no name")
		return
	case cs.MaxRunningFiles < minRunningFiles || cs.MaxRunningFiles > maxRunningFiles:
		e.bad(field, "coreSystem %q: maxRunningFiles %d, want %d to %d", cs.Name, cs.MaxRunningFiles, minRunningFiles, maxRunningFiles)
	case cs.MaxRecordsPerSecond < 0:
		e.bad(field, "coreSystem %q: maxRecordsPerSecond %v, want above 0, or 0 for none", cs.Name, cs.MaxRecordsPerSecond)
	}
	table, ok := tables[cs.Name]
	if !ok {
		e.bad(pipeline.EnvCoreSystemTables, "has no table for core system %q, which tenant %q names: the construct sets it for every core system its tenants name", cs.Name, t.ID)
		return
	}
	cs.Table = table
}

// checkTableName checks a DynamoDB table name: 3 to 255 of letters, digits, '_', '-' and '.'.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html
func checkTableName(name, table string, bad func(name, format string, args ...any)) {
	ok := len(table) >= 3 && len(table) <= 255
	for _, r := range table {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	}
	if !ok {
		bad(name, "table %q is not a DynamoDB table name (3 to 255 letters, digits, '_', '-' or '.')", table)
	}
}

// pool reads POOL, POOL_PREFIX and the POOL_SETTINGS file's header and index, and checks that they
// agree. settings is nil if the file could not be opened.
func (e *envReader) pool() (string, *pipeline.PoolIndex) {
	pool := e.required(pipeline.EnvPool)
	prefix := e.required(pipeline.EnvPoolPrefix)
	if prefix != "" {
		checkPrefix(pipeline.EnvPoolPrefix, prefix, e.bad)
	}
	path := pipeline.PoolSettingsPath(e.getenv)
	settings, err := pipeline.OpenPoolIndex(path)
	if err != nil {
		e.bad(pipeline.EnvPoolSettings, "%s: %v", path, err)
		return pool, nil
	}
	if pool != "" && settings.Pool != pool {
		e.bad(pipeline.EnvPool, "%q, but %s %s is the settings of pool %q", pool, pipeline.EnvPoolSettings, path, settings.Pool)
	}
	if prefix != "" && settings.Prefix != prefix {
		e.bad(pipeline.EnvPoolPrefix, "%q, but %s %s gives the prefix %q", prefix, pipeline.EnvPoolSettings, path, settings.Prefix)
	}
	return pool, settings
}

// forTenant is the Config of one pool tenant: the shared variables with the tenant's settings in
// place of a silo's TENANT, TENANT_PREFIX, ON_FAILURE and IDEMPOTENCY_KEY (same defaults).
func (c Config) forTenant(t pipeline.PoolTenant) Config {
	c.Tenant = t.Settings
	c.TenantPrefix = t.Prefix
	c.Tenant.Prefix = t.Prefix
	c.OnFailure = cmp.Or(t.OnFailure, defaultOnFailure)
	c.IdempotencyKey = cmp.Or(t.IdempotencyKey, defaultIdempotencyKey)
	return c
}

// tenantNames are the names a tenant's settings are reported under: a silo's variables, or a pool
// tenant's fields in the settings file.
type tenantNames struct{ tenant, prefix, onFailure, idempotencyKey string }

var siloNames = tenantNames{pipeline.EnvTenant, pipeline.EnvTenantPrefix, pipeline.EnvOnFailure, pipeline.EnvIdempotencyKey}

func checkTenantID(id, name string, bad func(name, format string, args ...any)) {
	if id == "" || strings.ContainsAny(id, "/ ") {
		bad(name, "id %q must be non-empty, without '/' or spaces", id)
	}
}

// checkTenantPolicy checks a tenant's prefix, failure policy and idempotency key.
func checkTenantPolicy(c Config, n tenantNames, bad func(name, format string, args ...any)) {
	if c.TenantPrefix != "" {
		checkPrefix(n.prefix, c.TenantPrefix, bad)
	}
	if c.OnFailure != pipeline.OnFailureContinue && c.OnFailure != pipeline.OnFailureHalt {
		bad(n.onFailure, "%q, want %q or %q", c.OnFailure, pipeline.OnFailureContinue, pipeline.OnFailureHalt)
	}
	if c.IdempotencyKey != pipeline.IdempotencyEventID && c.IdempotencyKey != pipeline.IdempotencyObjectVersion {
		bad(n.idempotencyKey, "%q, want %q or %q", c.IdempotencyKey, pipeline.IdempotencyEventID, pipeline.IdempotencyObjectVersion)
	}
}

// checkPrefix checks a key prefix: a folder outside the pipeline's reserved prefixes.
func checkPrefix(name, prefix string, bad func(name, format string, args ...any)) {
	if !strings.HasSuffix(prefix, "/") {
		bad(name, "%q must end with '/'", prefix)
	}
	for _, r := range pipeline.ReservedPrefixes {
		if strings.HasPrefix(prefix, r) || strings.HasPrefix(r, prefix) {
			bad(name, "%q overlaps the reserved prefix %q", prefix, r)
		}
	}
}

// envReader collects every problem of an environment, each naming its variable.
type envReader struct {
	getenv func(string) string
	errs   []error
}

func newEnvReader(getenv func(string) string) *envReader { return &envReader{getenv: getenv} }

func (e *envReader) bad(name, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

func (e *envReader) required(name string) string {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		e.bad(name, "is required")
	}
	return v
}

func (e *envReader) optional(name, def string) string {
	if v := strings.TrimSpace(e.getenv(name)); v != "" {
		return v
	}
	return def
}

// number reads a whole number from lo to hi; 0 when v is empty or invalid (reported).
func (e *envReader) number(name, v string, lo, hi int) int {
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.bad(name, "%q is not a whole number", v)
		return 0
	}
	if n < lo || n > hi {
		e.bad(name, "%d is out of range, want %d to %d", n, lo, hi)
		return 0
	}
	return n
}

func (e *envReader) duration(name string, v string, unit time.Duration, lo, hi time.Duration) time.Duration {
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		e.bad(name, "%q is not a whole number", v)
		return 0
	}
	if n < int64(lo/unit) || n > int64(hi/unit) {
		e.bad(name, "%s is out of range, want %d to %d", v, lo/unit, hi/unit)
		return 0
	}
	return time.Duration(n) * unit
}

// shared reads the variables every controller has, silo or pool: all but the tenant's own.
func (e *envReader) shared() Config {
	c := Config{
		StateMachineARN:  e.required(pipeline.EnvStateMachineARN),
		QueueURL:         e.required(pipeline.EnvQueueURL),
		Bucket:           e.required(pipeline.EnvBucket),
		MetricsNamespace: e.optional(pipeline.EnvMetricsNamespace, pipeline.DefaultMetricsNamespace),

		SegmentStateMachineARN: e.required(pipeline.EnvSegmentStateMachineARN),
	}

	if c.StateMachineARN != "" {
		p, err := executionPrefix(c.StateMachineARN)
		if err != nil {
			e.bad(pipeline.EnvStateMachineARN, "%v", err)
		}
		c.executionPrefix = p
	}
	if c.SegmentStateMachineARN != "" {
		p, err := executionPrefix(c.SegmentStateMachineARN)
		if err != nil {
			e.bad(pipeline.EnvSegmentStateMachineARN, "%v", err)
		} else if p == c.executionPrefix {
			e.bad(pipeline.EnvSegmentStateMachineARN, "is the file state machine %s, want the segment state machine", pipeline.EnvStateMachineARN)
		}
		c.segmentExecutionPrefix = p
	}
	if c.QueueURL != "" {
		checkURL(pipeline.EnvQueueURL, c.QueueURL, e.bad)
	}

	c.MaxWait = e.duration(pipeline.EnvMaxWaitSeconds, e.required(pipeline.EnvMaxWaitSeconds), time.Second, time.Second, maxVisibility)
	c.HaltWait = e.duration(pipeline.EnvHaltWaitSeconds, e.optional(pipeline.EnvHaltWaitSeconds, strconv.Itoa(int(defaultHaltWait/time.Second))), time.Second, time.Second, maxVisibility)
	c.FirstWait = e.duration(pipeline.EnvFirstWaitMillis, e.optional(pipeline.EnvFirstWaitMillis, strconv.Itoa(int(defaultFirstWait/time.Millisecond))), time.Millisecond, time.Millisecond, maxVisibility)
	c.PollBudget = e.duration(pipeline.EnvPollBudgetSeconds, e.optional(pipeline.EnvPollBudgetSeconds, strconv.Itoa(int(defaultPollBudget/time.Second))), time.Second, 0, 15*time.Minute)
	c.RegisterTimeout = e.duration(pipeline.EnvRegisterTimeoutSeconds, e.optional(pipeline.EnvRegisterTimeoutSeconds, strconv.Itoa(int(maxRegisterTimeout/time.Second))), time.Second, time.Second, maxRegisterTimeout)
	c.SafetyNet = e.duration(pipeline.EnvSafetyNetSeconds, e.optional(pipeline.EnvSafetyNetSeconds, strconv.Itoa(int(defaultSafetyNet/time.Second))), time.Second, time.Second, maxVisibility)
	c.WakeEvents = e.boolean(pipeline.EnvWakeEvents)
	c.ControlPrefixProtected = e.boolean(pipeline.EnvControlPrefixProtected)
	c.EventBus = e.optional(pipeline.EnvEventBusName, "")
	c.ResultsFunction = e.optional(pipeline.EnvResultsFunction, "")
	// The queue's visibility timeout is the longest wait (MAX_WAIT_SECONDS); it grows with the
	// safety net, so that a message whose visibility change failed still comes back within it.
	if c.WakeEvents && c.SafetyNet > 0 && c.MaxWait > 0 && c.SafetyNet > c.MaxWait {
		e.bad(pipeline.EnvSafetyNetSeconds, "%s is longer than %s=%s: raise the queue visibility timeout to at least the safety net", c.SafetyNet, pipeline.EnvMaxWaitSeconds, c.MaxWait)
	}
	if c.FirstWait > 0 && c.MaxWait > 0 && c.FirstWait > c.MaxWait {
		e.bad(pipeline.EnvFirstWaitMillis, "%s is longer than %s=%s", c.FirstWait, pipeline.EnvMaxWaitSeconds, c.MaxWait)
	}
	return c
}

// boolean reads an optional "true" or "false", default false.
func (e *envReader) boolean(name string) bool {
	switch v := e.optional(name, "false"); v {
	case "true":
		return true
	case "false":
	default:
		e.bad(name, "%q, want \"true\" or \"false\"", v)
	}
	return false
}

func checkURL(name, v string, bad func(name, format string, args ...any)) {
	if u, err := url.Parse(v); err != nil || u.Scheme == "" || u.Host == "" {
		bad(name, "%q is not an absolute URL", v)
	}
}

// executionPrefix turns a state machine ARN, arn:PARTITION:states:REGION:ACCOUNT:stateMachine:NAME,
// into the prefix of its execution ARNs, arn:PARTITION:states:REGION:ACCOUNT:execution:NAME:.
// https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html#awsstepfunctions-resources-for-iam-policies
func executionPrefix(stateMachineARN string) (string, error) {
	p := strings.Split(stateMachineARN, ":")
	if len(p) != 7 || p[0] != "arn" || p[1] == "" || p[2] != "states" || p[3] == "" || p[4] == "" || p[5] != "stateMachine" || p[6] == "" {
		return "", fmt.Errorf("%q is not an unqualified state machine ARN (arn:PARTITION:states:REGION:ACCOUNT:stateMachine:NAME)", stateMachineARN)
	}
	p[5] = "execution"
	return strings.Join(p, ":") + ":", nil
}
