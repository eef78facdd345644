package controller

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/env"
	"github.com/example/tenantpipeline/internal/parking"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
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
	// InputWithoutURLs leaves the core system's URLs and the secret's ARN out of executions'
	// input (EnvInputWithoutURLs): Split and Register take them from their deployed settings.
	InputWithoutURLs bool

	// Pool is the pool a pool controller serves (EnvPool); empty for a silo controller.
	Pool string
	// KeysPool is the pool its tenants' keys carry (EnvKeysPool, pipeline.Owner): Pool, or empty
	// for a silo controller and the KeysPerTenant layout.
	KeysPool string
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

// ConfigFromEnv reads and validates a silo controller's environment (pipeline.Env* names): its one
// tenant comes from TENANT, TENANT_PREFIX, ON_FAILURE and IDEMPOTENCY_KEY. Every problem is
// reported, each naming its variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := newEnvReader(getenv)
	c := e.shared()
	c.TenantPrefix = e.Required(pipeline.EnvTenantPrefix)
	c.OnFailure = e.Optional(pipeline.EnvOnFailure, defaultOnFailure)
	c.IdempotencyKey = e.Optional(pipeline.EnvIdempotencyKey, defaultIdempotencyKey)
	if raw := e.Required(pipeline.EnvTenant); raw != "" {
		if err := json.Unmarshal([]byte(raw), &c.Tenant); err != nil {
			e.Bad(pipeline.EnvTenant, "is not the JSON of a tenant: %v", err)
		} else {
			checkTenantID(c.Tenant.ID, pipeline.EnvTenant, e.Bad)
		}
	}
	// Every execution carries the prefix, so Split can refuse an object that is not the tenant's.
	c.Tenant.Prefix = c.TenantPrefix
	checkTenantPolicy(c, siloNames, e.Bad)
	for _, name := range []string{pipeline.EnvPoolAdmissionTable, pipeline.EnvPoolMaxRunningFiles} {
		if strings.TrimSpace(getenv(name)) != "" {
			e.Bad(name, "is set, but a silo controller (no %s) has no pool gate: remove it", pipeline.EnvPool)
		}
	}
	tables := e.coreSystemTables()
	if c.Tenant.ID != "" {
		e.fillCoreSystem(&c.Tenant, tables, pipeline.EnvTenant)
	}
	if err := e.Err(); err != nil {
		return Config{}, fmt.Errorf("controller environment: %w", err)
	}
	return c, nil
}

// PoolConfig is a pool controller's environment: the variables its tenants share, and the pool's
// settings file, which holds what a silo controller reads from TENANT, TENANT_PREFIX, ON_FAILURE
// and IDEMPOTENCY_KEY for each tenant.
type PoolConfig struct {
	Shared   Config
	Settings *poolsettings.Index
	// coreTables is CORE_SYSTEM_TABLES, for each tenant's core system (tenantConfig).
	coreTables map[string]string
	// Backlog bounds each tenant's messages in the pool queue (internal/parking); zero: no bound.
	Backlog parking.Config
}

// PoolConfigFromEnv reads and validates a pool controller's environment (EnvPool set) and the
// settings file's header and index. A tenant's own row is read and checked when the tenant is
// first served (tenantConfig): a bad row holds that tenant's files only, not the pool.
func PoolConfigFromEnv(getenv func(string) string) (PoolConfig, error) {
	e := newEnvReader(getenv)
	c := e.shared()
	for _, name := range []string{pipeline.EnvTenant, pipeline.EnvTenantPrefix, pipeline.EnvOnFailure, pipeline.EnvIdempotencyKey} {
		if strings.TrimSpace(getenv(name)) != "" {
			e.Bad(name, "is set, but a pool controller (%s) reads each tenant's settings from %s: remove it", pipeline.EnvPool, pipeline.EnvPoolSettings)
		}
	}
	var settings *poolsettings.Index
	c.Pool, settings = e.Pool()
	c.KeysPool = e.KeysPool(c.Pool)
	c.PoolAdmissionTable = e.Required(pipeline.EnvPoolAdmissionTable)
	if c.PoolAdmissionTable != "" {
		env.CheckTableName(pipeline.EnvPoolAdmissionTable, c.PoolAdmissionTable, e.Bad)
	}
	c.PoolMaxRunningFiles = e.Number(pipeline.EnvPoolMaxRunningFiles, e.Required(pipeline.EnvPoolMaxRunningFiles), minRunningFiles, maxRunningFiles)
	var bl parking.Config
	if v := e.Optional(pipeline.EnvMaxQueuedFilesPerTenant, ""); v != "" {
		bl = parking.Config{Table: c.PoolAdmissionTable, Max: parking.MaxFromEnv(e.Reader, v)}
	}
	tables := e.coreSystemTables()
	if err := e.Err(); err != nil {
		if settings != nil {
			settings.Close()
		}
		return PoolConfig{}, fmt.Errorf("controller environment: %w", err)
	}
	return PoolConfig{Shared: c, Settings: settings, coreTables: tables, Backlog: bl}, nil
}

// tenantConfig is the Config of the pool's tenant id, its row read from the settings file and
// checked as a silo controller checks its variables. The error is poolsettings.ErrUnknownTenant
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
	checkTenantID(id, field+" settings", e.Bad)
	checkTenantPolicy(tc, tenantNames{field + " settings", field + " prefix", field + " onFailure", field + " idempotencyKey"}, e.Bad)
	if err := e.Err(); err != nil {
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

// maxRequestsInFlight bounds a core system's maxRequestsInFlight (internal/tenants:
// MaxRequestsInFlight).
const maxRequestsInFlight = 10_000

// checkKeyOrder checks a tenant's recordOrder, keyColumns and maxRecordsInFlight by the tenants
// file's rules, so that a settings row those rules would refuse holds the tenant's files instead
// of registering them out of order (fail closed). field names the tenant's settings.
func checkKeyOrder(t pipeline.Tenant, field string, bad func(name, format string, args ...any)) {
	switch t.RecordOrder {
	case "", pipeline.RecordOrderFile:
		if len(t.KeyColumns) > 0 {
			bad(field, "keyColumns %q, want none without recordOrder %q", t.KeyColumns, pipeline.RecordOrderKey)
		}
		if t.MaxRecordsInFlight != 0 {
			bad(field, "maxRecordsInFlight %d, want none without recordOrder %q", t.MaxRecordsInFlight, pipeline.RecordOrderKey)
		}
		return
	case pipeline.RecordOrderKey:
	default:
		bad(field, "recordOrder %q, want %q or %q", t.RecordOrder, pipeline.RecordOrderFile, pipeline.RecordOrderKey)
		return
	}
	if t.BatchMode() {
		bad(field, "recordOrder %q with registerMode %q, which has its own ordering: want registerMode %q", t.RecordOrder, t.RegisterMode, pipeline.RegisterModeRecord)
	}
	if t.DynamoDB != nil {
		bad(field, "recordOrder %q with the dynamodb sink, which has its own ordering: want no recordOrder", t.RecordOrder)
	}
	cols := t.KeyColumns
	if len(cols) == 0 {
		bad(field, "recordOrder %q without keyColumns, want at least one column", t.RecordOrder)
	}
	for i, c := range cols {
		switch {
		case strings.TrimSpace(c) == "":
			bad(field, "keyColumns column %d is empty, want a column name", i+1)
		case slices.Index(cols, c) < i:
			bad(field, "keyColumns %q is listed twice, want each column once", c)
		}
	}
	if n := t.MaxRecordsInFlight; n != 0 && (n < pipeline.MinMaxRecordsInFlight || n > pipeline.MaxMaxRecordsInFlight) {
		bad(field, "maxRecordsInFlight %d, want %d to %d, or 0 for %d", n, pipeline.MinMaxRecordsInFlight, pipeline.MaxMaxRecordsInFlight, pipeline.DefaultMaxRecordsInFlight)
	}
}

// coreSystemTables reads CORE_SYSTEM_TABLES, a JSON object of core system name to admission
// table name. Unset, it is empty: then no tenant may name a core system.
func (e *envReader) coreSystemTables() map[string]string {
	raw := strings.TrimSpace(e.Getenv(pipeline.EnvCoreSystemTables))
	if raw == "" {
		return nil
	}
	var tables map[string]string
	if err := json.Unmarshal([]byte(raw), &tables); err != nil || tables == nil {
		e.Bad(pipeline.EnvCoreSystemTables, "is not a JSON object of core system name to table name, e.g. {\"ledger\": \"ledger-admission\"}: %v", cmp.Or(err, errors.New("null")))
		return nil
	}
	for name, table := range tables {
		if name == "" {
			e.Bad(pipeline.EnvCoreSystemTables, "a table %q has an empty core system name", table)
			continue
		}
		env.CheckTableName(fmt.Sprintf("%s: core system %q", pipeline.EnvCoreSystemTables, name), table, e.Bad)
	}
	return tables
}

// fillCoreSystem checks the tenant's core system and sets its table from tables, so that every
// execution (and so Register) gets it. A tenant naming a core system without a table fails the
// configuration: admission could not hold that core system's limit, so the tenant's files must
// not start (fail closed). field names the tenant's settings in messages.
func (e *envReader) fillCoreSystem(t *pipeline.Tenant, tables map[string]string, field string) {
	if t.Weight < 0 || t.Weight > pipeline.MaxWeight {
		e.Bad(field, "weight %d, want %d to %d, or 0 for %d", t.Weight, pipeline.MinWeight, pipeline.MaxWeight, pipeline.DefaultWeight)
	}
	if t.MaxRecordsPerSecond < 0 {
		e.Bad(field, "maxRecordsPerSecond %v, want above 0, or 0 for none", t.MaxRecordsPerSecond)
	}
	checkKeyOrder(*t, field, e.Bad)
	if n := t.SmallFileBytes; n != 0 && n != -1 && (n < 1 || n > pipeline.MaxSmallFileBytes) {
		e.Bad(field, "smallFileBytes %d, want 1 to %d, -1 for none, or 0 for the state machine's bound", n, pipeline.MaxSmallFileBytes)
	}
	cs := t.CoreSystem
	if cs == nil {
		return
	}
	switch {
	case cs.Name == "":
		e.Bad(field, "coreSystem has no name")
		return
	case cs.MaxRunningFiles < minRunningFiles || cs.MaxRunningFiles > maxRunningFiles:
		e.Bad(field, "coreSystem %q: maxRunningFiles %d, want %d to %d", cs.Name, cs.MaxRunningFiles, minRunningFiles, maxRunningFiles)
	case cs.MaxRecordsPerSecond < 0:
		e.Bad(field, "coreSystem %q: maxRecordsPerSecond %v, want above 0, or 0 for none", cs.Name, cs.MaxRecordsPerSecond)
	case cs.MaxRequestsInFlight != 0 && (cs.MaxRequestsInFlight < cs.MaxRunningFiles || cs.MaxRequestsInFlight > maxRequestsInFlight):
		// Below maxRunningFiles the limit could not hold: each running file sends at least one
		// request.
		e.Bad(field, "coreSystem %q: maxRequestsInFlight %d, want its maxRunningFiles %d to %d, or 0 for maxRunningFiles",
			cs.Name, cs.MaxRequestsInFlight, cs.MaxRunningFiles, maxRequestsInFlight)
	}
	table, ok := tables[cs.Name]
	if !ok {
		e.Bad(pipeline.EnvCoreSystemTables, "has no table for core system %q, which tenant %q names: the construct sets it for every core system its tenants name", cs.Name, t.ID)
		return
	}
	cs.Table = table
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
	if q := c.Tenant.Sequence; q != nil {
		// A sequence the rules refuse holds the tenant's files (fail closed) rather than run them
		// in an order nobody declared.
		for _, p := range q.Check() {
			bad(n.tenant, "%s: %s", p.Path, p.Message(func(path string) string { return path }))
		}
	}
	if c.TenantPrefix != "" {
		env.CheckPrefix(n.prefix, c.TenantPrefix, bad)
	}
	if c.OnFailure != pipeline.OnFailureContinue && c.OnFailure != pipeline.OnFailureHalt {
		bad(n.onFailure, "%q, want %q or %q", c.OnFailure, pipeline.OnFailureContinue, pipeline.OnFailureHalt)
	}
	if c.IdempotencyKey != pipeline.IdempotencyEventID && c.IdempotencyKey != pipeline.IdempotencyObjectVersion {
		bad(n.idempotencyKey, "%q, want %q or %q", c.IdempotencyKey, pipeline.IdempotencyEventID, pipeline.IdempotencyObjectVersion)
	}
}

// envReader is env.Reader with the controller's own groups of variables.
type envReader struct{ *env.Reader }

func newEnvReader(getenv func(string) string) *envReader { return &envReader{env.NewReader(getenv)} }

// shared reads the variables every controller has, silo or pool: all but the tenant's own.
func (e *envReader) shared() Config {
	c := Config{
		StateMachineARN:  e.Required(pipeline.EnvStateMachineARN),
		QueueURL:         e.Required(pipeline.EnvQueueURL),
		Bucket:           e.Required(pipeline.EnvBucket),
		MetricsNamespace: e.Optional(pipeline.EnvMetricsNamespace, pipeline.DefaultMetricsNamespace),

		SegmentStateMachineARN: e.Required(pipeline.EnvSegmentStateMachineARN),
	}

	if c.StateMachineARN != "" {
		p, err := executionPrefix(c.StateMachineARN)
		if err != nil {
			e.Bad(pipeline.EnvStateMachineARN, "%v", err)
		}
		c.executionPrefix = p
	}
	if c.SegmentStateMachineARN != "" {
		p, err := executionPrefix(c.SegmentStateMachineARN)
		if err != nil {
			e.Bad(pipeline.EnvSegmentStateMachineARN, "%v", err)
		} else if p == c.executionPrefix {
			e.Bad(pipeline.EnvSegmentStateMachineARN, "is the file state machine %s, want the segment state machine", pipeline.EnvStateMachineARN)
		}
		c.segmentExecutionPrefix = p
	}
	if c.QueueURL != "" {
		env.CheckURL(pipeline.EnvQueueURL, c.QueueURL, e.Bad)
	}

	c.MaxWait = e.Duration(pipeline.EnvMaxWaitSeconds, e.Required(pipeline.EnvMaxWaitSeconds), time.Second, time.Second, maxVisibility)
	c.HaltWait = e.Duration(pipeline.EnvHaltWaitSeconds, e.Optional(pipeline.EnvHaltWaitSeconds, strconv.Itoa(int(defaultHaltWait/time.Second))), time.Second, time.Second, maxVisibility)
	c.FirstWait = e.Duration(pipeline.EnvFirstWaitMillis, e.Optional(pipeline.EnvFirstWaitMillis, strconv.Itoa(int(defaultFirstWait/time.Millisecond))), time.Millisecond, time.Millisecond, maxVisibility)
	c.PollBudget = e.Duration(pipeline.EnvPollBudgetSeconds, e.Optional(pipeline.EnvPollBudgetSeconds, strconv.Itoa(int(defaultPollBudget/time.Second))), time.Second, 0, 15*time.Minute)
	c.RegisterTimeout = e.Duration(pipeline.EnvRegisterTimeoutSeconds, e.Optional(pipeline.EnvRegisterTimeoutSeconds, strconv.Itoa(int(maxRegisterTimeout/time.Second))), time.Second, time.Second, maxRegisterTimeout)
	c.SafetyNet = e.Duration(pipeline.EnvSafetyNetSeconds, e.Optional(pipeline.EnvSafetyNetSeconds, strconv.Itoa(int(defaultSafetyNet/time.Second))), time.Second, time.Second, maxVisibility)
	c.WakeEvents = e.Boolean(pipeline.EnvWakeEvents)
	c.ControlPrefixProtected = e.Boolean(pipeline.EnvControlPrefixProtected)
	c.EventBus = e.Optional(pipeline.EnvEventBusName, "")
	c.ResultsFunction = e.Optional(pipeline.EnvResultsFunction, "")
	c.InputWithoutURLs = e.Boolean(pipeline.EnvInputWithoutURLs)
	// The queue's visibility timeout is the longest wait (MAX_WAIT_SECONDS); it grows with the
	// safety net, so that a message whose visibility change failed still comes back within it.
	if c.WakeEvents && c.SafetyNet > 0 && c.MaxWait > 0 && c.SafetyNet > c.MaxWait {
		e.Bad(pipeline.EnvSafetyNetSeconds, "%s is longer than %s=%s: raise the queue visibility timeout to at least the safety net", c.SafetyNet, pipeline.EnvMaxWaitSeconds, c.MaxWait)
	}
	if c.FirstWait > 0 && c.MaxWait > 0 && c.FirstWait > c.MaxWait {
		e.Bad(pipeline.EnvFirstWaitMillis, "%s is longer than %s=%s", c.FirstWait, pipeline.EnvMaxWaitSeconds, c.MaxWait)
	}
	return c
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
