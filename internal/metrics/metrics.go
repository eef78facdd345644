// Package metrics writes CloudWatch Embedded Metric Format (EMF) lines. On Lambda everything written
// to stdout reaches CloudWatch Logs, which extracts the metrics from EMF lines, so the pipeline needs
// no cloudwatch:PutMetricData permission and adds no API call to a request path.
//
// Format: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
// Lambda: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Lambda.html
//
// The metric names below are a contract with the construct, which alarms on some of them.
package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// DimensionTenant is the one dimension of every silo controller and Register metric; in a pool it
// is a property of the line instead (Emitter.InPool).
const DimensionTenant = "Tenant"

// DimensionPool is the one dimension of the pooled tier's pool-wide metrics, those about an event
// or message that has no tenant of the pool.
const DimensionPool = "Pool"

// Controller metric names. Counts use unit Count, the *Seconds metrics use Seconds.
const (
	// Waits counts deliveries the controller handed back to the queue to look again later.
	Waits = "Waits"
	// Starts counts StartExecution calls that created (or idempotently confirmed) an execution.
	Starts = "Starts"
	// Completions counts files whose execution SUCCEEDED and whose message was released.
	Completions = "Completions"
	// FailedFiles counts files whose execution FAILED, TIMED_OUT or was ABORTED under the continue
	// policy; the tenant moved on.
	FailedFiles = "FailedFiles"
	// Blocked is 1 on each delivery of a halted tenant's head file (execution failed, policy halt, no
	// skip marker) and 0 on every other delivery, so that "not blocked" is data, not silence. Any
	// value above zero means the tenant is stuck until an operator acts.
	Blocked = "Blocked"
	// Skipped counts failed files an operator skipped with a control marker.
	Skipped = "Skipped"
	// Quarantined counts message bodies copied to quarantine/ because they can never be processed.
	Quarantined = "Quarantined"
	// ServiceErrors counts deliveries kept because a Step Functions or S3 call still failed after
	// the SDK's retries (throttling, outages, missing permissions).
	ServiceErrors = "ServiceErrors"
	// StoppedFileHolds counts deliveries of a TIMED_OUT or ABORTED file held because one of its
	// Register invocations, or its segment execution, may still be running (docs/controller.md,
	// "Stopped files"). The file is released once none can.
	StoppedFileHolds = "StoppedFileHolds"
	// HeadQueuedSeconds is how long the file at the head of the tenant's queue was queued before its
	// execution started: the execution's StartDate − the message's SQS SentTimestamp, or now −
	// SentTimestamp while no execution has started. It includes the time spent behind earlier files.
	// Alarm on its Maximum.
	HeadQueuedSeconds = "HeadQueuedSeconds"
	// HeadRunningSeconds is how long the head file's execution has been running: now − its
	// StartDate (or its RedriveDate, if later), emitted only while the execution is RUNNING. Alarm
	// on its Maximum.
	HeadRunningSeconds = "HeadRunningSeconds"
)

// Wake-up and throttling metrics of the controller (docs/controller.md, "Wake-up on the execution's
// completion event" and "Throttling").
const (
	// Throttles counts Step Functions calls (DescribeExecution, StartExecution) still throttled
	// after the SDK's retries. The message is held with a jittered backoff; it is never an error.
	Throttles = "Throttles"
	// WakeUps counts status change events that made the tenant's head message visible at once.
	WakeUps = "WakeUps"
	// WakeStale counts wake-ups whose stored receipt handle was no longer current (the message was
	// received again or deleted): harmless, the current delivery or the safety net decides.
	WakeStale = "WakeStale"
	// WakeIgnored counts status change events that woke nothing: no wake state, another execution,
	// or a status that is not an end.
	WakeIgnored = "WakeIgnored"
	// WakeReleases counts head messages released because the wake-up handler had recorded that the
	// file's execution SUCCEEDED, without a DescribeExecution call.
	WakeReleases = "WakeReleases"
	// WakeStateErrors counts wake-up state that could not be written or read. The controller then
	// waits with its backoff, and a missed wake-up is caught by the safety net.
	WakeStateErrors = "WakeStateErrors"
)

// File Processed event metrics of the controller (README, "The File Processed event").
const (
	// FileEvents counts File Processed events put on the event bus.
	FileEvents = "FileEvents"
	// FileEventErrors counts File Processed events that could not be put (or their marker not
	// read). The file's delivery then retries before it releases the file.
	FileEventErrors = "FileEventErrors"
	// ResultsErrors counts failed files whose results the controller could not have written (the
	// results task's invocation failed or outlasted the controller's wait). The file's end is
	// announced anyway, its counts from the execution or unknown.
	ResultsErrors = "ResultsErrors"
)

// Pooled tier metrics (docs/controller.md, "Pooled tier").
const (
	// FilesRouted counts "Object Created" events the pool's router put on the pool queue, under
	// their tenant's message group. Dimension Tenant.
	FilesRouted = "FilesRouted"
	// UnroutedObjects counts events the pool's router could give to no tenant (a key under no
	// tenant's prefix, another bucket, not an "Object Created" event): each was kept on the
	// router's dead-letter queue. Dimension Pool.
	UnroutedObjects = "UnroutedObjects"
	// FilesParked counts files the pool's router kept outside the pool queue, because their
	// tenant had maxQueuedFilesPerTenant messages queued or earlier files parked
	// (internal/backlog). Dimension Tenant.
	FilesParked = "FilesParked"
	// FilesHeld counts files of a sequenced tenant held because they arrived ahead of their turn.
	FilesHeld = "FilesHeld"
	// FilesRefused counts files of a sequenced tenant refused (unmatched, duplicate or late).
	FilesRefused = "FilesRefused"
	// SequenceGapSeconds is how long a sequenced tenant has waited for a missing number while
	// holding later ones: written on each tick of the tenant while the gap lasts, 0 when it closes.
	SequenceGapSeconds = "SequenceGapSeconds"
	// SequenceGapsOverdue is 1 on each tick while the gap is at least the tenant's gapTimeout.
	SequenceGapsOverdue = "SequenceGapsOverdue"
	// FilesParkedForUnknownTenant counts files under the pool's prefix whose first path segment
	// is a tenant id the router does not know yet (onboarding): each was parked for that id, and
	// goes to the tenant's queue once the pool's settings name it. Dimension Pool.
	FilesParkedForUnknownTenant = "FilesParkedForUnknownTenant"
	// UnknownTenantMessages counts deliveries of pool queue messages whose message group is no
	// tenant of the pool (a tenant removed while its files were queued). The message is kept.
	// Dimension Pool.
	UnknownTenantMessages = "UnknownTenantMessages"
	// UnknownTenantEvents counts status change events of the pool's file state machine whose
	// execution belongs to no tenant of the pool, or whose tenant could not be read. Dimension Pool.
	UnknownTenantEvents = "UnknownTenantEvents"
)

// Admission metric names (docs/controller.md, "Admission"), with the Tenant dimension.
const (
	// Admissions counts files admitted to start after asking admission.
	Admissions = "Admissions"
	// AdmissionWaits counts deliveries held because the file may not start yet.
	AdmissionWaits = "AdmissionWaits"
	// AdmissionWaitSeconds is how long the tenant's head file has waited for admission so far (on
	// each wait) or in all (when admitted). Maximum per period is the oldest admission wait.
	AdmissionWaitSeconds = "AdmissionWaitSeconds"
	// AdmissionHandovers counts slots a release handed to a waiting file, whose message it made
	// visible at once (or found being delivered already).
	AdmissionHandovers = "AdmissionHandovers"
	// AdmissionWakeFailures counts slots handed to a waiting file whose message could not be made
	// visible: the file waits for its safety net, the slot for the reconciler. Repeats are alarmed.
	AdmissionWakeFailures = "AdmissionWakeFailures"
	// LostLeases counts deliveries of a running file that found its running-file lease gone (not
	// renewed in time and taken, or released) and took it again, perhaps beyond the gate's limit.
	// Its alarm says a lease's time to live is too short for how the file's deliveries come back.
	LostLeases = "LostLeases"
)

// DimensionCoreSystem is the dimension of the metrics of one core system's gate.
const DimensionCoreSystem = "CoreSystem"

// Metric names with the dimension CoreSystem, emitted by the controllers that ask its gate.
const (
	// CoreRunningFiles is the core system's running files as one admission read them.
	CoreRunningFiles = "RunningFiles"
	// CoreRunningFileLimit is the core system's effective running-file limit (the adaptive one
	// when adaptive, else maxRunningFiles).
	CoreRunningFileLimit = "RunningFileLimit"
	// CoreAdmissionWaitSeconds is AdmissionWaitSeconds by core system: its maximum per period is
	// the core system's oldest admission wait (the admission-wait alarm's metric).
	CoreAdmissionWaitSeconds = "AdmissionWaitSeconds"
	// CoreAdmissions and CoreAdmissionWaits are Admissions and AdmissionWaits by core system: the
	// files its gate admitted, and the deliveries held because a gate had no slot for them.
	CoreAdmissions     = "Admissions"
	CoreAdmissionWaits = "AdmissionWaits"
)

// In a pool, a tenant's figures are properties of its EMF lines, not dimensions (Emitter.InPool):
// every metric of a pooled tenant's line has the dimension set [Pool] alone, and the line carries
// the tenant as the top-level member Tenant. A member that no dimension set names is a property:
// CloudWatch Logs keeps it in the log event and makes no metric of it
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html,
// "Target members"). CloudWatch bills each unique namespace, name and dimension set as one custom
// metric (https://aws.amazon.com/cloudwatch/pricing/), so a pool costs the same metrics whether it
// has ten tenants or 100,000; the per-tenant view is a Contributor Insights rule over the lines,
// keyed by Tenant (constructs/tenantpipeline, poolinsights.go).

// PoolTenantMetrics are the fields of a pooled tenant's controller lines that the pool's
// per-tenant alarms read: one Contributor Insights rule each, keyed by the line's Tenant. The
// controller writes them as metrics under [Pool] (Emitter.InPool), so the field is in the line
// whatever its value.
var PoolTenantMetrics = []string{Blocked, FailedFiles, HeadQueuedSeconds, HeadRunningSeconds}

// PoolSequenceMetrics are the fields a pooled tenant's per-tenant alarms read that only a
// sequenced tenant's lines hold: the controller writes them on the tenant's ticks, under [Pool]
// with the property Tenant as PoolTenantMetrics.
var PoolSequenceMetrics = []string{SequenceGapsOverdue}

// Register metric names, with the same Tenant dimension.
const (
	// RecordsRegistered counts the records of a chunk Register completed: one datapoint per chunk
	// that succeeded (record, batch and DynamoDB sinks alike). Sum per minute is the tenant's
	// registration rate; a chunk that fails and is retried counts once, when it succeeds.
	RecordsRegistered = "RecordsRegistered"
	// CoreSystemThrottles counts the core system's "slow down" answers (HTTP 429 and 503) that an
	// invocation waited on before resending: one datapoint per invocation that saw any. They never
	// fail a file; a steady rate means the core system's limits are set above what it takes.
	CoreSystemThrottles = "CoreSystemThrottles"
	// RateLimitWaitSeconds is how long an invocation waited on its core system's and its own
	// maxRecordsPerSecond: one datapoint per invocation that waited.
	RateLimitWaitSeconds = "RateLimitWaitSeconds"
	// CoreSystemRequests counts the POSTs an invocation sent to its tenant's core system, resends
	// after a 429 or 503 included: one datapoint per invocation that sent any, with the dimension
	// CoreSystem only (Emitter.InCoreSystem). CoreSystemThrottles / CoreSystemRequests by core
	// system is the share of its answers that asked to slow down. The DynamoDB sink sends none:
	// the SDK retries its throttled calls.
	CoreSystemRequests = "CoreSystemRequests"
	// CoreSystemBreakerOpen is 1 from each Register invocation that saw its core system's breaker
	// open or half-open (held, or opened it), and 0 from the invocation whose answer closed it: its
	// maximum per period says whether the breaker was open (the CoreSystemBreakerOpen alarm).
	CoreSystemBreakerOpen = "CoreSystemBreakerOpen"
	// CoreSystemBreakerOpens counts the times the breaker opened: from the invocation whose
	// recorded failure opened it.
	CoreSystemBreakerOpens = "CoreSystemBreakerOpens"
	// CoreSystemBreakerHolds counts the Register invocations that held at their cursor because the
	// breaker was open: one datapoint per such invocation.
	CoreSystemBreakerHolds = "CoreSystemBreakerHolds"
	// CoreSystemRequestGrant is the largest share of its core system's requests in flight that a
	// Register invocation held (internal/shares): one datapoint per invocation that held one.
	CoreSystemRequestGrant = "CoreSystemRequestGrant"
	// CoreSystemShareHolds counts the Register invocations that held at their cursor, at least
	// once, because their share was 0 (more files ran than the capacity holds).
	CoreSystemShareHolds = "CoreSystemShareHolds"
)

// CoreSystemTenantMetrics are the Register metrics a tenant naming a core system also emits with
// the dimension CoreSystem (Emitter.InCoreSystem), besides Tenant, so that the core system's
// dashboard shows its slow-down answers whatever tenant caused them.
var CoreSystemTenantMetrics = []string{CoreSystemThrottles}

// CoreSystemOnlyMetrics are the Register metrics emitted with the dimension CoreSystem alone: by
// tenant they would cost one more custom metric per tenant and answer no operator's question.
var CoreSystemOnlyMetrics = []string{CoreSystemRequests, CoreSystemBreakerOpen, CoreSystemBreakerOpens, CoreSystemBreakerHolds,
	CoreSystemRequestGrant, CoreSystemShareHolds}

// Unit is a CloudWatch metric unit.
type Unit string

// Units the pipeline uses.
const (
	UnitCount   Unit = "Count"
	UnitSeconds Unit = "Seconds"
)

// Metric is one value to record.
type Metric struct {
	Name  string
	Unit  Unit
	Value float64
}

// Count is a Metric of unit Count.
func Count(name string, n float64) Metric { return Metric{Name: name, Unit: UnitCount, Value: n} }

// Seconds is a Metric of unit Seconds.
func Seconds(name string, d time.Duration) Metric {
	return Metric{Name: name, Unit: UnitSeconds, Value: d.Seconds()}
}

// Emitter writes EMF lines with a fixed namespace and one dimension (Tenant unless built with
// NewDimension). It is safe for concurrent use; each line is written with a single Write call.
type Emitter struct {
	mu        sync.Mutex
	w         io.Writer
	namespace string
	dimension string
	value     string
	now       func() time.Time
	// pool, when set (InPool), gives every metric the dimension set [Pool] instead of the
	// Emitter's own, which stays in the line as a property.
	pool string
	// core, when set (InCoreSystem), adds the dimension set [CoreSystem] to the metrics in
	// coreAlso and coreOnly, and takes the coreOnly ones out of the Emitter's own dimension.
	core               string
	coreAlso, coreOnly map[string]bool
}

// New returns an Emitter that writes to w (stdout on Lambda), with the Tenant dimension.
func New(w io.Writer, namespace, tenant string) *Emitter {
	return NewDimension(w, namespace, DimensionTenant, tenant)
}

// NewDimension returns an Emitter whose one dimension is name=value, such as DimensionPool.
func NewDimension(w io.Writer, namespace, name, value string) *Emitter {
	return &Emitter{w: w, namespace: namespace, dimension: name, value: value, now: time.Now}
}

// WithClock makes the Emitter stamp lines with now instead of the wall clock.
func (e *Emitter) WithClock(now func() time.Time) *Emitter {
	e.now = now
	return e
}

// InPool makes a tenant's Emitter one of a pooled tenant: each metric of its lines has the
// dimension set [Pool], with Pool=pool, instead of [Tenant], and Tenant stays in the line as a
// property, for the pool's Contributor Insights rules and log queries. The [CoreSystem] directive
// of InCoreSystem is kept: a core system is not a tenant. An empty pool leaves the Emitter as it
// was (a silo tenant's).
func (e *Emitter) InPool(pool string) *Emitter {
	e.pool = pool
	return e
}

// InCoreSystem makes a tenant's Emitter also record the metrics named in CoreSystemTenantMetrics,
// and only under it those named in CoreSystemOnlyMetrics, under the dimension set [CoreSystem],
// with CoreSystem=name, in the same line.
//
// CloudWatch counts a custom metric per unique namespace, name and dimensions
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch_concepts.html#Dimension),
// so the new metrics are one per core system and name, whether they come in a second directive
// or in a second line of an Emitter built with NewDimension. The second directive is the cheaper
// for it lists only those metrics (one directive with the dimension sets [Tenant] and
// [CoreSystem] would give every metric of the line both), and one line is fewer log bytes than
// two. An empty name leaves the Emitter as it was.
func (e *Emitter) InCoreSystem(name string) *Emitter {
	if name == "" {
		return e
	}
	e.core = name
	e.coreAlso, e.coreOnly = map[string]bool{}, map[string]bool{}
	for _, n := range CoreSystemTenantMetrics {
		e.coreAlso[n] = true
	}
	for _, n := range CoreSystemOnlyMetrics {
		e.coreOnly[n] = true
	}
	return e
}

type metricDef struct {
	Name string `json:"Name"`
	Unit Unit   `json:"Unit"`
}

type directive struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []metricDef `json:"Metrics"`
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// Emit writes one EMF line holding all of ms. Metric names must be unique within one call and
// must not be a dimension's name or "_aws".
func (e *Emitter) Emit(ms ...Metric) error {
	if len(ms) == 0 {
		return nil
	}
	doc := make(map[string]any, len(ms)+2)
	defs := make([]metricDef, 0, len(ms))
	var core []metricDef // of the [CoreSystem] directive (InCoreSystem)
	for _, m := range ms {
		if m.Name == "" || m.Name == e.dimension || m.Name == "_aws" || (e.pool != "" && m.Name == DimensionPool) ||
			(e.core != "" && m.Name == DimensionCoreSystem) {
			return fmt.Errorf("metric name %q is reserved or empty", m.Name)
		}
		if _, dup := doc[m.Name]; dup {
			return fmt.Errorf("metric %q given twice in one line", m.Name)
		}
		doc[m.Name] = m.Value
		d := metricDef{Name: m.Name, Unit: m.Unit}
		switch {
		case e.coreOnly[m.Name]:
			core = append(core, d)
			continue
		case e.coreAlso[m.Name]:
			core = append(core, d)
		}
		defs = append(defs, d)
	}
	doc[e.dimension] = e.value
	own := []string{e.dimension}
	if e.pool != "" {
		// The Emitter's own member (Tenant) is a property; the pool is the dimension.
		doc[DimensionPool] = e.pool
		own = []string{DimensionPool}
	}
	var directives []directive
	if len(defs) > 0 { // none when every metric is a CoreSystemOnlyMetrics one
		directives = append(directives, directive{Namespace: e.namespace, Dimensions: [][]string{own}, Metrics: defs})
	}
	if len(core) > 0 {
		doc[DimensionCoreSystem] = e.core
		directives = append(directives, directive{Namespace: e.namespace, Dimensions: [][]string{{DimensionCoreSystem}}, Metrics: core})
	}
	doc["_aws"] = metadata{Timestamp: e.now().UnixMilli(), CloudWatchMetrics: directives}
	line, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode EMF line: %w", err)
	}
	line = append(line, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.w.Write(line); err != nil {
		return fmt.Errorf("write EMF line: %w", err)
	}
	return nil
}
