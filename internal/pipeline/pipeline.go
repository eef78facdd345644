// Package pipeline is the contract between the parts of the tenant pipeline: the JSON payloads that
// cross the controller → state machine → split/register boundaries, the environment each Lambda
// reads, the error types the state machine matches on, and the key prefixes the pipeline reserves in
// the ingest bucket.
//
// Everything that two parts must agree on lives here, so that the construct, the workflow, the
// Lambdas and the local harness cannot drift apart.
package pipeline

// Reserved key prefixes in the ingest bucket. No tenant prefix may overlap them, so nothing the
// pipeline writes itself can ever match a tenant's EventBridge rule.
const (
	// WorkPrefix holds per-execution manifests written by Split: work/<tenant>/<execution>/manifest,
	// with the chunks' first lines beside it (LinesKey) for a tenant whose records can be rejected.
	WorkPrefix = "work/"
	// QuarantinePrefix holds message bodies the controller could never process:
	// quarantine/<tenant>/<message id>.json.
	QuarantinePrefix = "quarantine/"
	// ControlPrefix holds operator markers. A file of a halted tenant is skipped by writing
	// control/<tenant>/skip/<execution name> (its body is the operator's reason).
	ControlPrefix = "control/"
	// ResultsPrefix holds what a tenant gets back from each file: results/<tenant>/<execution>/
	// (package internal/results).
	ResultsPrefix = "results/"
)

// WorkExpirationDays is how long the ingest bucket keeps what Split writes under WorkPrefix (the
// app's lifecycle rule, internal/stacks): past it, a redrive of the execution finds no manifest.
//
// A redrive may come as late as an execution can live. Step Functions redrives an execution within
// 14 days of its (latest) stop, and a redriven run that fails again stops again, opening a new 14
// days; what ends the chain is "the maximum open time of one year", counted from the start
// (https://docs.aws.amazon.com/step-functions/latest/dg/redrive-executions.html, "Redrive
// eligibility"; "Maximum execution time: 1 year", .../dg/service-quotas.html). Split writes the
// manifest after the start, so the last redriven run ends within one year of the manifest's
// creation: 366 days cover a leap year, and S3 rounds an expiration up to the next midnight UTC
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/intro-lifecycle-rules.html).
// The construct's workflow timeout (at most 7 days per run) does not shorten this, because each
// redrive restarts it. One redrive alone fits in 7 + 14 + 7 = 28 days, the reason for the former
// 30; a second one did not.
const WorkExpirationDays = 366

// ReservedPrefixes lists every prefix the pipeline writes to or reads control data from.
var ReservedPrefixes = []string{WorkPrefix, QuarantinePrefix, ControlPrefix, ResultsPrefix}

// DefaultResultsExpirationDays is how long the ingest bucket keeps a file's results by default
// (the app's lifecycle rule on ResultsPrefix). Results are for the tenant to collect; the pipeline
// reads back only a file's summary (for its File Processed event) and the rejection parts (when a
// redrive's results task assembles rejected.csv again), so they outlive Step Functions' 14-day
// redrive window (https://docs.aws.amazon.com/step-functions/latest/dg/redrive-executions.html)
// but not every chained redrive, as work/ does. 30 days leave a month-end batch a whole cycle to
// collect them, and S3 rounds an expiration up to the next midnight UTC
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/intro-lifecycle-rules.html).
const DefaultResultsExpirationDays = 30

// Formats and encodings a tenant's files may use.
const (
	FormatCSV   = "csv"
	FormatJSONL = "jsonl"

	EncodingUTF8  = "utf-8"
	EncodingCP932 = "cp932"
)

// Failure policies and idempotency keys (docs/controller.md).
const (
	OnFailureContinue = "continue"
	OnFailureHalt     = "halt"

	IdempotencyEventID       = "event-id"
	IdempotencyObjectVersion = "object-version"
)

// Limits and defaults shared by validation, Split and Register.
const (
	DefaultChunkSize = 100
	MinChunkSize     = 1
	MaxChunkSize     = 1000

	// DefaultMaxFieldBytes bounds one CSV field or one JSONL line, so a malformed file cannot make
	// Split or Register buffer without limit.
	DefaultMaxFieldBytes = 64 * 1024

	// SegmentChunks is the number of chunks one segment execution registers. It is the maximum
	// length of States.ArrayRange (1,000 items), and keeps a segment execution at about 7,000
	// history events, well inside the 25,000 limit.
	SegmentChunks = 1000

	// MaxHeaderBytes bounds a CSV header's size as a JSON array of strings. The header travels in
	// Split's result and in every segment and Register payload, which Step Functions limits to
	// 256 KiB (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html), so a wider
	// header fails the file with a ValidationError instead of States.DataLimitExceeded.
	MaxHeaderBytes = 16 * 1024

	// MaxSegments bounds the segments of one file. Each segment costs the file execution about 8
	// history events and about 40 bytes of Map input, so 2,500 segments stay below 25,000 events and
	// 256 KiB. With the default chunk size that is 250,000,000 records a file.
	MaxSegments = 2500
)

// Tenant is the part of a tenant's configuration that travels with every execution, so that Split
// and Register (or a user's own register function) need no configuration of their own.
type Tenant struct {
	ID string `json:"id"`
	// Prefix is the tenant's key prefix (a silo's TENANT_PREFIX, a pooled tenant's prefix in the
	// pool's settings). The controller sets it; Split refuses a source object whose key, as given
	// or form-decoded, is not under it (KeyOutsidePrefixError).
	Prefix   string `json:"prefix,omitempty"`
	Format   string `json:"format"`
	Encoding string `json:"encoding"`
	// Delimiter is the CSV field delimiter, one character. Empty means ",".
	Delimiter     string `json:"delimiter,omitempty"`
	ChunkSize     int    `json:"chunkSize"`
	MaxFieldBytes int    `json:"maxFieldBytes"`
	RegisterURL   string `json:"registerUrl,omitempty"`
	// RegisterAuthSecretARN names a Secrets Manager secret whose string value is sent as the
	// Authorization header. Empty means no header.
	RegisterAuthSecretARN string `json:"registerAuthSecretArn,omitempty"`
	// RegisterMode is RegisterModeRecord (one POST per record; empty means this) or
	// RegisterModeBatch (one POST per chunk).
	RegisterMode string `json:"registerMode,omitempty"`
	// MaxBatchBytes bounds the encoded "records" array of one batch POST; Split cuts a batch-mode
	// chunk before it would exceed it. Zero means DefaultMaxBatchBytes.
	MaxBatchBytes int `json:"maxBatchBytes,omitempty"`
	// DynamoDB, when set, makes Register write the records to a DynamoDB table instead of POSTing
	// them (docs/data-path.md, "DynamoDB sink").
	DynamoDB *DynamoDBSink `json:"dynamodb,omitempty"`
	// CoreSystem is the core system the tenant registers into, with its admission settings; nil
	// when the tenant names none (its files are then bounded only by its pool, if pooled).
	CoreSystem *CoreSystem `json:"coreSystem,omitempty"`
	// Weight is the tenant's share when tenants wait for admission. Zero means DefaultWeight.
	Weight int `json:"weight,omitempty"`
	// MaxRecordsPerSecond bounds the tenant's own records per second. Zero: only its core
	// system's limit, if any.
	MaxRecordsPerSecond float64 `json:"maxRecordsPerSecond,omitempty"`
	// OnInvalidRecord is OnInvalidFailFile (empty means this) or OnInvalidSkipRecord.
	OnInvalidRecord string `json:"onInvalidRecord,omitempty"`
	// MaxInvalidRecords is how many invalid records a skipRecord file may have; more fail it.
	// Zero means DefaultMaxInvalidRecords under skipRecord.
	MaxInvalidRecords int `json:"maxInvalidRecords,omitempty"`
	// RejectStatuses are the HTTP statuses with which the core system rejects one record under
	// OnInvalidSkipRecord (RejectsStatus): Register records the rejection and goes on with the
	// next record. Empty: none.
	RejectStatuses StatusSet `json:"rejectStatuses,omitzero"`
	// RecordOrder is RecordOrderFile (empty means this: one record at a time, in file order) or
	// RecordOrderKey (records of one key in file order, up to MaxRecordsInFlight keys at once).
	RecordOrder string `json:"recordOrder,omitempty"`
	// KeyColumns name a record's key under RecordOrderKey: CSV header names, or JSONL fields. A
	// record's key is their values, in this order.
	KeyColumns Columns `json:"keyColumns,omitzero"`
	// MaxRecordsInFlight bounds the requests one file keeps in flight under RecordOrderKey.
	// Zero means DefaultMaxRecordsInFlight.
	MaxRecordsInFlight int `json:"maxRecordsInFlight,omitempty"`
	// SmallFileBytes is the tenant's own small-file bound (TaskSmallFile), which the file state
	// machine's FileSize choice compares the event's size with: 1 to MaxSmallFileBytes, or -1 for
	// none (every file takes Split). Zero: the state machine's bound.
	SmallFileBytes int64 `json:"smallFileBytes,omitempty"`
}

// Record orders of the bundled HTTP adapter's record mode.
const (
	RecordOrderFile = "file"
	RecordOrderKey  = "key"

	// DefaultMaxRecordsInFlight is a keyed tenant's maxRecordsInFlight when it sets none.
	DefaultMaxRecordsInFlight = 8
	// MinMaxRecordsInFlight and MaxMaxRecordsInFlight bound maxRecordsInFlight.
	MinMaxRecordsInFlight = 1
	MaxMaxRecordsInFlight = 64
	// MaxKeyedLead bounds how far past its low-water mark (the first record not yet acknowledged)
	// a keyed file sends: no record more than MaxKeyedLead records after it. So the records
	// registered past the mark, which a segment's progress lists (Progress.Registered), are at most
	// MaxKeyedLead.
	MaxKeyedLead = 1024
)

// KeyedOrder reports whether Register sends the tenant's records in order per key, several keys at
// once (record mode only: batch mode and the DynamoDB sink have their own ordering).
func (t Tenant) KeyedOrder() bool {
	return t.RecordOrder == RecordOrderKey && t.DynamoDB == nil && t.RegisterMode != RegisterModeBatch
}

// RecordsInFlight is the most requests one file of the tenant keeps in flight: 1 in file order,
// maxRecordsInFlight (defaulted) in key order, and never more than its core system's share per
// running file (CoreSystem.FileShare).
func (t Tenant) RecordsInFlight() int {
	if !t.KeyedOrder() {
		return 1
	}
	n := t.MaxRecordsInFlight
	if n == 0 {
		n = DefaultMaxRecordsInFlight
	}
	if t.CoreSystem != nil {
		n = min(n, t.CoreSystem.FileShare())
	}
	return max(1, n)
}

// What a tenant's file does with a record that fails validation: fail the whole file before
// anything is written (failFile), or reject the record and register the others (skipRecord).
const (
	OnInvalidFailFile   = "failFile"
	OnInvalidSkipRecord = "skipRecord"

	// DefaultMaxInvalidRecords is a skipRecord tenant's maxInvalidRecords when it sets none.
	DefaultMaxInvalidRecords = 1000
	// MaxMaxInvalidRecords bounds maxInvalidRecords: Split holds the rejected records of a file in
	// memory until it writes them, before the manifest.
	MaxMaxInvalidRecords = 100000
)

// SkipsInvalid reports whether the tenant's invalid records are rejected one by one (skipRecord).
func (t Tenant) SkipsInvalid() bool { return t.OnInvalidRecord == OnInvalidSkipRecord }

// InvalidLimit is how many invalid records a file of the tenant may have: 0 under failFile,
// maxInvalidRecords (defaulted) under skipRecord.
func (t Tenant) InvalidLimit() int {
	switch {
	case !t.SkipsInvalid():
		return 0
	case t.MaxInvalidRecords == 0:
		return DefaultMaxInvalidRecords
	}
	return t.MaxInvalidRecords
}

// AdmissionWeight is the tenant's weight, defaulted.
func (t Tenant) AdmissionWeight() int {
	if t.Weight == 0 {
		return DefaultWeight
	}
	return t.Weight
}

// Register modes of the bundled HTTP adapter.
const (
	RegisterModeRecord = "record"
	RegisterModeBatch  = "batch"
)

// Batch limits. A batch POST carries at most MaxBatchBytes of encoded records.
const (
	DefaultMaxBatchBytes = 5 * 1024 * 1024
	MinMaxBatchBytes     = 1024
	MaxMaxBatchBytes     = 64 * 1024 * 1024
)

// BatchMode reports whether Register sends one POST per chunk.
func (t Tenant) BatchMode() bool { return t.DynamoDB == nil && t.RegisterMode == RegisterModeBatch }

// BatchBytes is the tenant's maxBatchBytes, defaulted.
func (t Tenant) BatchBytes() int {
	if t.MaxBatchBytes == 0 {
		return DefaultMaxBatchBytes
	}
	return t.MaxBatchBytes
}

// DynamoDBSink is a tenant's DynamoDB sink: each record becomes one item of Table, keyed by the
// record's Key fields (partition key, then optional sort key), both stored as strings.
type DynamoDBSink struct {
	Key []string `json:"key"`
	// Table is the table's name. tenants.json may leave it empty; the construct then creates the
	// table and fills its name in before the tenant is passed to an execution.
	Table string `json:"table,omitempty"`
	// Concurrency bounds the records of one chunk written at once (records of one key are always
	// written one after another, in file order). Zero means DefaultDynamoDBConcurrency.
	Concurrency int `json:"concurrency,omitempty"`
}

// DynamoDB sink limits and reserved attribute names.
const (
	DefaultDynamoDBConcurrency = 16
	MaxDynamoDBConcurrency     = 256
	// SeqAttribute holds an item's order (docs/data-path.md): a newer-or-equal one is never
	// overwritten.
	SeqAttribute = "_seq"
	// MetaAttribute holds {executionName, recordNumber}, for audit.
	MetaAttribute = "_meta"
)

// Source is the exact object version that triggered a workflow.
type Source struct {
	Bucket string `json:"bucket"`
	// Key is the key as the event gave it (WorkflowInput, SplitRequest) or, from Split's result on,
	// the key exactly as S3 stores it. EventBridge does not document whether it form-encodes keys,
	// so Split resolves the form (source.Open); nothing else ever decodes a key.
	Key string `json:"key"`
	// VersionID is set when the bucket is versioned; otherwise ETag pins the content.
	VersionID string `json:"versionId,omitempty"`
	ETag      string `json:"etag,omitempty"`
	Size      int64  `json:"size"`
	Sequencer string `json:"sequencer,omitempty"`
	// EventTime is the event's "time" (RFC 3339). It orders the DynamoDB sink's writes only for an
	// execution started without Order (SeqOf, the format before Order).
	EventTime string `json:"eventTime,omitempty"`
	// Order is the file's place in its tenant's queue: the controller takes it from the tenant's
	// order counter when it starts the file's execution (internal/controller/order.go), and it only
	// grows per tenant. A replay carries its original file's Order. It orders the DynamoDB sink's
	// writes (SeqOf); nothing in a message body sets it.
	Order int64 `json:"order,omitempty"`
	// Unordered marks a replay whose original file's Order could not be found: its records rank
	// below every stored item, so they only fill keys no item holds (SeqOf).
	Unordered bool `json:"unordered,omitempty"`
}

// WorkflowInput is the input the controller gives StartExecution for one file.
type WorkflowInput struct {
	Tenant  Tenant `json:"tenant"`
	Source  Source `json:"source"`
	EventID string `json:"eventId"`
	// Admitted is when the controller admitted the file and started its execution, RFC 3339 in
	// UTC: the file's results report it (summary.json's timings.admitted).
	Admitted string `json:"admitted,omitempty"`
}

// SplitRequest is the payload of the Split task. ExecutionName is the file execution's own name
// ($$.Execution.Name); Split derives the manifest key from it.
type SplitRequest struct {
	Tenant        Tenant `json:"tenant"`
	Source        Source `json:"source"`
	ExecutionName string `json:"executionName"`
}

// Location is an S3 object.
type Location struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	// Version is the manifest format, for a manifest (manifest.go): 0 (absent) or ManifestV1, and
	// ManifestV2 for chunks cut by bytes.
	Version int `json:"version,omitempty"`
	// VersionID and ETag are what S3 answered to the PutObject that wrote the object (Split's
	// manifest), so readers read exactly that write: by version id in a versioned bucket, and with
	// If-Match on the ETag always. An object written later under the same key is never read in its
	// place. Both empty only for a manifest written before they were recorded (read unpinned).
	VersionID string `json:"versionId,omitempty"`
	ETag      string `json:"etag,omitempty"`
	// Lines is, on a manifest's location, the lines object Split wrote before it (LinesKey), pinned
	// as the manifest is. It rides inside the manifest's location so that every payload that
	// carries the manifest carries it, with no path of its own in the state machines. Nil: none (a
	// tenant whose records cannot be rejected, or an execution Split ran before it wrote one).
	Lines *Location `json:"lines,omitempty"`
}

// Segment is a run of at most SegmentChunks consecutive chunks, registered by one segment execution.
type Segment struct {
	Index      int `json:"index"`
	FirstChunk int `json:"firstChunk"`
	LastChunk  int `json:"lastChunk"` // inclusive, as States.ArrayRange takes it
	// FileStarted is when the file's execution started ($$.Execution.StartTime, ISO 8601), which
	// the controller starts right after admitting the file: Register dates the file's 429s against
	// the adaptive limit's last decrease with it (internal/admission, aimd.go). The file state
	// machine adds it to each segment; a segment of an execution started before it did has none.
	FileStarted string `json:"fileStarted,omitempty"`
}

// SplitResult is what Split returns. With a version 1 manifest chunk i holds records
// i*ChunkSize+1 … of the file (1-based, data rows only) and every chunk but the last is full; with a
// version 2 manifest (batch mode) a chunk may also end early to stay within MaxBatchBytes, and the
// manifest holds each chunk's first record.
type SplitResult struct {
	// Source is the object Split read: the input source with Key set to the key that matched the
	// event's version and ETag, the key as given or its form-decoded form (source.Open). The
	// workflow passes it, not the input's source, to the segments and chunks, so Register reads the
	// same object and never resolves the key again.
	Source   Source   `json:"source"`
	Manifest Location `json:"manifest"`
	Records  int64    `json:"records"`
	Chunks   int      `json:"chunks"`
	// Header holds the CSV field names; empty (never absent) for JSON Lines, because the workflow
	// passes $.header on by path.
	Header   []string  `json:"header"`
	Segments []Segment `json:"segments"`
	// Rejected is the records that failed validation and were rejected (skipRecord; always 0 under
	// failFile, whose invalid record fails the file). They count in Records and keep their
	// numbers; Register skips them.
	Rejected int64 `json:"rejected"`
}

// SegmentInput is the input of one segment execution.
type SegmentInput struct {
	Tenant        Tenant   `json:"tenant"`
	Source        Source   `json:"source"`
	ExecutionName string   `json:"executionName"` // the file execution's name, never the segment's
	Manifest      Location `json:"manifest"`
	Records       int64    `json:"records"`
	Header        []string `json:"header"`
	Segment       Segment  `json:"segment"`
}

// ChunkRequest is the payload of one Register task, and the documented payload a user's own
// register function receives.
type ChunkRequest struct {
	Tenant        Tenant   `json:"tenant"`
	Source        Source   `json:"source"`
	ExecutionName string   `json:"executionName"` // the file execution's name: stable across retries and redrives
	Manifest      Location `json:"manifest"`
	Records       int64    `json:"records"` // records in the whole file
	Header        []string `json:"header"`
	Chunk         int      `json:"chunk"` // 0-based chunk index: the first (or only) chunk to register
	// LastChunk is the last chunk (inclusive) this invocation may register, the segment's last: the
	// bundled Register works through Chunk, Chunk+1, … while its time budget lasts and returns
	// where the next invocation starts (ChunkResult.Next). Absent (0) or below Chunk: Chunk only,
	// as the per-chunk workflow and a user's own register function expect.
	LastChunk int `json:"lastChunk,omitempty"`
	// Segment is the segment the run belongs to, as the per-invocation segment sends it. The
	// bundled Register keeps the segment's progress under its index (ProgressKey) and, when Chunk
	// is the segment's FirstChunk (a new segment execution), starts where that progress says.
	// Absent (the per-chunk design): no progress is read or written.
	Segment *Segment `json:"segment,omitempty"`
	// Record is where the cursor stopped inside Chunk: the 1-based number in the file of Chunk's
	// first record not yet registered (an earlier invocation registered the ones before it). Absent
	// (0): Chunk from its first record. Only the bundled Register under the per-invocation design
	// gets it (ChunkResult.NextRecord).
	Record int64 `json:"record,omitempty"`
}

// FirstRecord is the 1-based number of the chunk's first record. It holds only for a version 1
// manifest, whose chunks are all ChunkSize records; a version 2 manifest (chunks cut by bytes)
// stores each chunk's first record and Register reads it from there.
func (r ChunkRequest) FirstRecord() int64 { return int64(r.Chunk)*int64(r.Tenant.ChunkSize) + 1 }

// RecordCount is the number of records in the chunk, for a version 1 manifest (see FirstRecord).
func (r ChunkRequest) RecordCount() int64 {
	n := r.Records - int64(r.Chunk)*int64(r.Tenant.ChunkSize)
	return max(0, min(n, int64(r.Tenant.ChunkSize)))
}

// ChunkResult is what Register returns. The per-invocation segment keeps Next and Done as its
// cursor (the next Register task's input); the per-chunk design discards the result.
type ChunkResult struct {
	Chunk      int   `json:"chunk"`      // the request's first chunk
	Registered int64 `json:"registered"` // records registered by this invocation
	// Rejected is how many records the core system rejected in this invocation (a status the
	// tenant lists in RejectStatuses, under OnInvalidSkipRecord): they are past the cursor, and their
	// rejections are in the invocation's part (results.RegisterPartKey).
	Rejected int64 `json:"rejected"`
	// Next is the first chunk not yet registered: where the next invocation starts.
	Next int `json:"next"`
	// Done reports that every chunk through the request's LastChunk is registered.
	Done bool `json:"done"`
	// NextRecord is the first record of chunk Next not yet registered, when the invocation stopped
	// inside that chunk (its time budget ran out, or the core system asked it to wait, after some of
	// the chunk's records were registered): the next invocation's ChunkRequest.Record. 0: chunk Next
	// starts at its first record. Always present, because the segment's ResultSelector reads it.
	NextRecord int64 `json:"nextRecord"`
}

// OrderKey is a tenant's order counter, which the controller keeps in the ingest bucket:
// control/<tenant>/order.json (internal/controller/order.go). It lives per tenant, not per queue,
// so a tenant that moves to another queue, stack or tier keeps counting up.
func OrderKey(tenantID string) string { return ControlPrefix + tenantID + "/order.json" }

// Until is the last chunk the request covers: LastChunk, or Chunk alone when LastChunk is absent or
// lower.
func (r ChunkRequest) Until() int { return max(r.Chunk, r.LastChunk) }
