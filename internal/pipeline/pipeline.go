// Package pipeline is the contract between the parts of the tenant pipeline: the JSON payloads that
// cross the controller → state machine → split/register boundaries, the environment each Lambda
// reads, the error types the state machine matches on, and the key prefixes the pipeline reserves in
// the ingest bucket.
//
// Everything that two parts must agree on lives here, so that the construct, the workflow, the
// Lambdas and the local harness cannot drift apart.
package pipeline

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/example/tenantpipeline/spec"
)

// Reserved key prefixes in the ingest bucket. No tenant prefix may overlap them, so nothing the
// pipeline writes itself can ever match a tenant's EventBridge rule.
const (
	// WorkPrefix holds per-execution manifests written by Split: work/<tenant>/<execution>/manifest,
	// with the chunks' first lines beside it (LinesKey) for a tenant whose records can be rejected.
	WorkPrefix = spec.WorkPrefix
	// QuarantinePrefix holds message bodies the controller could never process:
	// quarantine/<tenant>/<message id>.json.
	QuarantinePrefix = spec.QuarantinePrefix
	// ControlPrefix holds operator markers. A file of a halted tenant is skipped by writing
	// control/<tenant>/skip/<execution name> (its body is the operator's reason).
	ControlPrefix = spec.ControlPrefix
	// ResultsPrefix holds what a tenant gets back from each file: results/<tenant>/<execution>/
	// (package internal/results).
	ResultsPrefix = spec.ResultsPrefix
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
var ReservedPrefixes = spec.ReservedPrefixes

// DefaultResultsExpirationDays is how long the ingest bucket keeps a file's results by default
// (the app's lifecycle rule on ResultsPrefix). Results are for the tenant to collect; the pipeline
// reads back only a file's summary (for its File Processed event) and the rejection parts (when a
// redrive's results task assembles rejected.csv again), so they outlive Step Functions' 14-day
// redrive window (https://docs.aws.amazon.com/step-functions/latest/dg/redrive-executions.html)
// but not every chained redrive, as work/ does. 30 days leave a month-end batch a whole cycle to
// collect them, and S3 rounds an expiration up to the next midnight UTC
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/intro-lifecycle-rules.html).
const DefaultResultsExpirationDays = 30

// The tenant's values and bounds, declared in package spec, by the names the pipeline's parts use.
const (
	FormatCSV     = spec.FormatCSV
	FormatJSONL   = spec.FormatJSONL
	EncodingUTF8  = spec.EncodingUTF8
	EncodingCP932 = spec.EncodingCP932

	OnFailureContinue        = spec.OnFailureContinue
	OnFailureHalt            = spec.OnFailureHalt
	IdempotencyEventID       = spec.IdempotencyEventID
	IdempotencyObjectVersion = spec.IdempotencyObjectVersion

	DefaultChunkSize     = spec.DefaultChunkSize
	MinChunkSize         = spec.MinChunkSize
	MaxChunkSize         = spec.MaxChunkSize
	DefaultMaxFieldBytes = spec.DefaultMaxFieldBytes

	RecordOrderFile           = spec.RecordOrderFile
	RecordOrderKey            = spec.RecordOrderKey
	DefaultMaxRecordsInFlight = spec.DefaultMaxRecordsInFlight
	MinMaxRecordsInFlight     = spec.MinMaxRecordsInFlight
	MaxMaxRecordsInFlight     = spec.MaxMaxRecordsInFlight

	OnInvalidFailFile        = spec.OnInvalidFailFile
	OnInvalidSkipRecord      = spec.OnInvalidSkipRecord
	DefaultMaxInvalidRecords = spec.DefaultMaxInvalidRecords
	MaxMaxInvalidRecords     = spec.MaxMaxInvalidRecords

	RegisterModeRecord   = spec.RegisterModeRecord
	RegisterModeBatch    = spec.RegisterModeBatch
	DefaultMaxBatchBytes = spec.DefaultMaxBatchBytes
	MinMaxBatchBytes     = spec.MinMaxBatchBytes
	MaxMaxBatchBytes     = spec.MaxMaxBatchBytes

	DefaultDynamoDBConcurrency = spec.DefaultDynamoDBConcurrency
	MaxDynamoDBConcurrency     = spec.MaxDynamoDBConcurrency
	SeqAttribute               = spec.SeqAttribute
	MetaAttribute              = spec.MetaAttribute

	DefaultWeight = spec.DefaultWeight
	MinWeight     = spec.MinWeight
	MaxWeight     = spec.MaxWeight

	DefaultSmallFileBytes = spec.DefaultSmallFileBytes
	MaxSmallFileBytes     = spec.MaxSmallFileBytes
)

// Limits of the pipeline's own.
const (
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
// and Register (or a user's own register function) need no configuration of their own: the spec's
// fields as SettingsOf projects them, and the core system's settings. Its JSON is the execution
// input's $.tenant, a silo controller's TENANT variable and a pool's settings row.
type Tenant struct {
	spec.Tenant
	// CoreSystem is the core system the tenant registers into, with its admission settings (its
	// Name is the spec's CoreSystem, which it replaces); nil when the tenant names none (its files
	// are then bounded only by its pool, if pooled).
	CoreSystem *CoreSystem `json:"coreSystem,omitempty"`
}

// SettingsOf is the one projection of a tenant's spec onto the settings that travel: without what
// places it in the app (stack, tier, pool, uploaders), what travels beside the settings (prefix,
// onFailure and idempotencyKey: a silo controller's variables, a pool row's fields) and the core
// system's name (CoreSystem, whose settings the construct fills in), its rejectStatuses in
// ascending order. Prefix is the controller's to set, for Split's check.
func SettingsOf(t spec.Tenant) Tenant {
	t = t.Placement()
	t.Prefix, t.OnFailure, t.IdempotencyKey, t.CoreSystem = "", "", "", ""
	t.RejectStatuses = slices.Compact(slices.Sorted(slices.Values(t.RejectStatuses)))
	t.KeyColumns = slices.Clone(t.KeyColumns)
	if t.DynamoDB != nil {
		d := *t.DynamoDB
		d.Key = slices.Clone(d.Key)
		t.DynamoDB = &d
	}
	if t.Sequence != nil {
		q := *t.Sequence
		if q.Start != nil {
			start := *q.Start
			q.Start = &start
		}
		t.Sequence = &q
	}
	return Tenant{Tenant: t}
}

// coreSystemMark stands in for the core system's settings while the spec's fields are marshalled,
// so that they take the place of its name: a JSON string holding a NUL is escaped as \u0000, so no
// value but this one writes `"coreSystem":"\u0000"`.
const coreSystemMark = "\x00"

// MarshalJSON writes the spec's fields in their order, the core system's settings where the spec
// has its name, so that the JSON reads as the tenants file does.
func (t Tenant) MarshalJSON() ([]byte, error) {
	st := t.Tenant
	st.CoreSystem = ""
	if t.CoreSystem != nil {
		st.CoreSystem = coreSystemMark
	}
	b, err := json.Marshal(st)
	if err != nil || t.CoreSystem == nil {
		return b, err
	}
	cs, err := json.Marshal(t.CoreSystem)
	if err != nil {
		return nil, err
	}
	return bytes.Replace(b, []byte(`"coreSystem":"\u0000"`), append([]byte(`"coreSystem":`), cs...), 1), nil
}

// WithoutURLs is t without its core system's URLs (registerUrl, lookupUrl, completeUrl) and its
// secret's ARN, as an execution's input carries it when Split and Register take them from their
// deployed settings (EnvInputWithoutURLs, internal/deployed).
func (t Tenant) WithoutURLs() Tenant {
	t.RegisterURL, t.RegisterAuthSecretARN = "", ""
	if t.CoreSystem != nil {
		cs := *t.CoreSystem
		cs.LookupURL, cs.CompleteURL = "", ""
		t.CoreSystem = &cs
	}
	return t
}

// MaxKeyedLead bounds how far past its low-water mark (the first record not yet acknowledged) a
// keyed file sends: no record more than MaxKeyedLead records after it. So the records registered
// past the mark, which a segment's progress lists (Progress.Registered), are at most MaxKeyedLead.
const MaxKeyedLead = 1024

// KeyedOrder reports whether Register sends the tenant's records in order per key, several keys at
// once (record mode only: batch mode and the DynamoDB sink have their own ordering).
func (t Tenant) KeyedOrder() bool {
	return t.RecordOrder == RecordOrderKey && t.DynamoDB == nil && t.RegisterMode != RegisterModeBatch
}

// RecordsInFlight is the most requests one file of the tenant can use in flight: 1 in file order,
// maxRecordsInFlight (defaulted) in key order. Its core system's share bounds what it may keep in
// flight at a time: the share of the running files (internal/shares), or, with static shares,
// CoreSystem.FileShare.
func (t Tenant) RecordsInFlight() int {
	if !t.KeyedOrder() {
		return 1
	}
	n := t.MaxRecordsInFlight
	if n == 0 {
		n = DefaultMaxRecordsInFlight
	}
	return max(1, n)
}

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

// BatchMode reports whether Register sends one POST per chunk.
func (t Tenant) BatchMode() bool { return t.DynamoDB == nil && t.RegisterMode == RegisterModeBatch }

// BatchBytes is the tenant's maxBatchBytes, defaulted.
func (t Tenant) BatchBytes() int {
	if t.MaxBatchBytes == 0 {
		return DefaultMaxBatchBytes
	}
	return t.MaxBatchBytes
}

// DynamoDBSink is a tenant's DynamoDB sink (spec.DynamoDB). Its Table may be empty in the spec;
// the construct then creates the table and fills its name in before the tenant is passed to an
// execution.
type DynamoDBSink = spec.DynamoDB

// MaxBytesMetadata is the user metadata (the header x-amz-meta-max-bytes) in which a presigned
// upload URL without an exact size (pipectl upload-url --max-bytes) signs the most bytes it
// allows. A presigned PUT can sign an exact Content-Length but no range, so S3 stores a larger
// body; the signature binds the header, so the uploader can neither drop nor change it, and Split
// fails a file larger than it says before anything is registered.
const MaxBytesMetadata = "max-bytes"

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
	// Sequence is the file's value in its tenant's sequence (spec.Sequence), as its name captured
	// it; absent for a tenant without one. The results carry it.
	Sequence string `json:"sequence,omitempty"`
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
	// SHA256 is the hex SHA-256 of the object's bytes as Split read them, for the core system's
	// completeUrl; absent from a result written before Split hashed.
	SHA256 string `json:"sha256,omitempty"`
	// Cursor is, for a file of exactly one segment, where the segment's Register loop starts (its
	// first chunk, from its first record): the file execution runs that loop itself
	// (workflows.StateOneSegment) and keeps the cursor here, each Register task replacing it with
	// the one it hands on. Absent for a file of no or several segments, which take segment
	// executions, as a file does whose Split predates it.
	Cursor *Cursor `json:"cursor,omitempty"`
}

// Cursor is where a segment's Register loop goes on: the chunk, the record within it (0: its
// first) and whether the segment is done, as the Register task's ResultSelector keeps it from a
// ChunkResult (Next, NextRecord, Done).
type Cursor struct {
	Chunk  int   `json:"chunk"`
	Record int64 `json:"record"`
	Done   bool  `json:"done"`
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
	// Segment is the segment the run belongs to, as the per-invocation segment sends it (and the
	// file execution of a file of one segment, which runs that loop itself). The bundled Register
	// keeps the segment's progress under its index (ProgressKey) and, when Chunk is the segment's
	// FirstChunk (a new segment execution, or the loop's first task), starts where that progress
	// says.
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
func OrderKey(o Owner) string { return ControlDir(o) + "order.json" }

// Until is the last chunk the request covers: LastChunk, or Chunk alone when LastChunk is absent or
// lower.
func (r ChunkRequest) Until() int { return max(r.Chunk, r.LastChunk) }
