package pipeline

// Environment variables each Lambda reads. The construct sets them; README documents them.
const (
	// Controller.
	EnvStateMachineARN   = "STATE_MACHINE_ARN"   // the tenant's file state machine
	EnvQueueURL          = "QUEUE_URL"           // the tenant's FIFO queue (ChangeMessageVisibility)
	EnvTenant            = "TENANT"              // JSON of Tenant, passed into every execution
	EnvTenantPrefix      = "TENANT_PREFIX"       // key prefix this tenant's files arrive under
	EnvBucket            = "INGEST_BUCKET"       // the ingest bucket (events of any other are quarantined)
	EnvOnFailure         = "ON_FAILURE"          // continue | halt
	EnvIdempotencyKey    = "IDEMPOTENCY_KEY"     // event-id | object-version
	EnvMaxWaitSeconds    = "MAX_WAIT_SECONDS"    // longest wait between checks: the queue visibility timeout
	EnvHaltWaitSeconds   = "HALT_WAIT_SECONDS"   // wait between checks while the tenant is halted
	EnvMetricsNamespace  = "METRICS_NAMESPACE"   // CloudWatch namespace of the EMF metrics (controller and Register)
	EnvFirstWaitMillis   = "FIRST_WAIT_MILLIS"   // first wait of the backoff (default 1000)
	EnvPollBudgetSeconds = "POLL_BUDGET_SECONDS" // how long to poll in-process before handing back
	// EnvRegisterTimeoutSeconds is the Register function's timeout. A stopped (TIMED_OUT, ABORTED)
	// execution's file is released only after its stopDate plus this, because Step Functions cannot
	// stop a Lambda invocation that is already running.
	EnvRegisterTimeoutSeconds = "REGISTER_TIMEOUT_SECONDS"
	// EnvSegmentStateMachineARN is the tenant's segment state machine, whose executions of a stopped
	// file the controller checks before releasing the file.
	EnvSegmentStateMachineARN = "SEGMENT_STATE_MACHINE_ARN"
	// EnvWakeEvents, "true", says a rule delivers the file state machine's "Step Functions Execution
	// Status Change" events to the controller: it then keeps a wake-up state (WakeStateKey) and waits
	// SAFETY_NET_SECONDS for a running execution instead of a growing backoff.
	EnvWakeEvents = "WAKE_EVENTS"
	// EnvSafetyNetSeconds is the longest wait for a running execution when wake-up events are on:
	// a lost event delays the next file by at most this.
	EnvSafetyNetSeconds = "SAFETY_NET_SECONDS"
	// EnvControlPrefixProtected, "true", says the ingest bucket's policy denies writes under
	// control/ to everyone but the pipeline's roles and the operators (the construct sets it when
	// the bucket carries that Deny). The controller then releases a file on the SUCCEEDED that its
	// wake-up handler recorded, without a DescribeExecution; otherwise it confirms the record with
	// one. Default "false": confirm.
	EnvControlPrefixProtected = "CONTROL_PREFIX_PROTECTED"
	// EnvEventBusName is the event bus (name or ARN) the controller puts each file's "File
	// Processed" event on (internal/results.Event). Unset: no such events.
	EnvEventBusName = "EVENT_BUS_NAME"
	// EnvResultsFunction is the function (name or ARN) that writes a file's results (the Split
	// function's results task), which the controller invokes when a file fails, times out or is
	// aborted. Unset: such a file gets no results.
	EnvResultsFunction = "RESULTS_FUNCTION"
	// EnvInputWithoutURLs "true" says that Split and Register take the core system's URLs and the
	// secret from their deployed settings (internal/deployed), so the controller leaves them out of
	// every execution's input: Step Functions puts the input in its status events and history.
	// Unset or "false": a register function of your own, which reads them from its payload.
	EnvInputWithoutURLs = "INPUT_WITHOUT_URLS"

	// Split.
	EnvWorkBucket = "WORK_BUCKET" // where manifests are written (the ingest bucket)

	// Register.
	EnvHTTPTimeoutSeconds = "HTTP_TIMEOUT_SECONDS" // per-request timeout towards the core system
	// EnvDeployedTenant is a silo Split's and Register's JSON of Tenant, the settings they were
	// deployed with: a request's tenant, core system URLs, secret and sink must be these
	// (internal/deployed). A pool's read their pool's settings file instead (EnvPoolSettings).
	EnvDeployedTenant = "DEPLOYED_TENANT"
	// EnvRequestShares is how Register divides a core system's requests in flight among its
	// running files: RequestSharesShared (unset: the default) or RequestSharesStatic.
	EnvRequestShares = "REQUEST_SHARES"
)

// How a core system's maxRequestsInFlight is divided among its running files (EnvRequestShares,
// the CDK context key requestShares).
const (
	// RequestSharesShared: by what each file can use, recomputed as files start and end
	// (internal/shares).
	RequestSharesShared = "shared"
	// RequestSharesStatic: an even split, maxRequestsInFlight / maxRunningFiles per running file
	// (CoreSystem.FileShare), whatever the others use; kept for comparison.
	RequestSharesStatic = "static"
)

// RequestShares are the values of EnvRequestShares, the default first.
var RequestShares = []string{RequestSharesShared, RequestSharesStatic}

// DefaultMetricsNamespace is the CloudWatch namespace of the pipeline's own metrics.
const DefaultMetricsNamespace = "TenantPipeline"
