package spec

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

// Tiers and the default pool.
const (
	// TierSilo gives a tenant its own queue, functions, state machines and alarms.
	TierSilo = "silo"
	// TierPool makes a tenant a row of configuration in a pool's shared resources.
	TierPool = "pool"
	// DefaultPool is the pool of a pooled tenant that names none.
	DefaultPool = "default"
)

// Chunk and field limits, shared by validation, Split and Register.
const (
	DefaultChunkSize = 100
	MinChunkSize     = 1
	MaxChunkSize     = 1000

	// DefaultMaxFieldBytes bounds one CSV field or one JSONL line, so a malformed file cannot make
	// Split or Register buffer without limit.
	DefaultMaxFieldBytes = 64 * 1024
	// MaxMaxFieldBytes bounds maxFieldBytes.
	MaxMaxFieldBytes = 1 << 20
)

// Record orders of the bundled HTTP adapter's record mode.
const (
	RecordOrderFile = "file"
	RecordOrderKey  = "key"

	// DefaultMaxRecordsInFlight is a keyed tenant's maxRecordsInFlight when it sets none.
	DefaultMaxRecordsInFlight = 8
	// MinMaxRecordsInFlight and MaxMaxRecordsInFlight bound maxRecordsInFlight.
	MinMaxRecordsInFlight = 1
	MaxMaxRecordsInFlight = 64
)

// What a tenant's file does with a record that fails validation.
const (
	OnInvalidFailFile   = "failFile"
	OnInvalidSkipRecord = "skipRecord"

	// DefaultMaxInvalidRecords is a skipRecord tenant's maxInvalidRecords when it sets none.
	DefaultMaxInvalidRecords = 1000
	// MaxMaxInvalidRecords bounds maxInvalidRecords: Split holds the rejected records of a file in
	// memory until it writes them, before the manifest.
	MaxMaxInvalidRecords = 100000
)

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

// Admission weights: a tenant's weight is a whole number in this range (admission queries one
// class of waiting tenants per weight, so the range stays small).
const (
	DefaultWeight = 1
	MinWeight     = 1
	MaxWeight     = 10
)

// Bounds of the small-file path, in bytes of the object as the S3 event gives its size.
const (
	// DefaultSmallFileBytes is the app's bound when it sets none: 1 MiB, about 10,000 records of
	// 100 bytes. A file within it is split, registered chunk after chunk and given its results in
	// one Register invocation when the core system's pace lets it (10,000 records at 10 ms each
	// take 100 s of its 120 s budget in file order, less in key order or batches); one that does
	// not fit is handed on to the full path with what it registered kept.
	DefaultSmallFileBytes = 1 << 20
	// MaxSmallFileBytes bounds the setting: the task reads the whole object into memory, beside one
	// chunk's records, in a function of Register's memory (128 MB by default): the measured 24 MiB
	// base, the object, and at most 6 bytes per byte of a batch chunk (no larger than the object)
	// come to at most 24 + 4 + 24 = 52 MiB.
	MaxSmallFileBytes = 4 << 20
	// NoSmallFiles, as a tenant's smallFileBytes, sends every file of the tenant through Split.
	NoSmallFiles = -1
)

// Reserved key prefixes in the ingest bucket. No tenant prefix may overlap them, so nothing the
// pipeline writes itself can ever match a tenant's EventBridge rule (internal/pipeline says what
// each holds).
const (
	WorkPrefix       = "work/"
	QuarantinePrefix = "quarantine/"
	ControlPrefix    = "control/"
	ResultsPrefix    = "results/"
)

// ReservedPrefixes lists every prefix the pipeline writes to or reads control data from.
var ReservedPrefixes = []string{WorkPrefix, QuarantinePrefix, ControlPrefix, ResultsPrefix}
