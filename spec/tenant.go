// Package spec declares a tenant's configuration once: its fields, their defaults and their rules.
// The tenants file (internal/tenants) decodes straight into Tenant, the constructs take it as
// their Tenant prop, and the settings that travel with each execution (internal/pipeline) are a
// projection of it (Tenant.Runtime). A rule returns Problems addressed by the field's JSON path,
// which each front end renders in its own words (RenderFile, RenderGo).
//
// The package is light on purpose: it imports neither aws-cdk-go nor an AWS SDK client, so that
// the Lambdas' runtime contract can embed it.
package spec

// Tenant is one tenant: an entry of the tenants file's "tenants", the Tenant prop of the
// constructs, and (Runtime) the settings every execution of the tenant carries. ID is required;
// every other field has the default its comment says, which WithDefaults fills in.
type Tenant struct {
	// ID names the tenant in resource ids, the FIFO message group, metrics and logs: 1-32
	// lower-case letters, digits and hyphens, starting with a letter or digit. Required.
	ID string `json:"id"`
	// Prefix is the key prefix the tenant's files arrive under: S3's safe characters and "/",
	// ending in "/". Default: "inbox/<id>/" (a pooled tenant's is always "<pool prefix><id>/").
	Prefix string `json:"prefix,omitempty"`
	// Format is "csv" or "jsonl". Default: "csv".
	Format string `json:"format,omitempty"`
	// Encoding is "utf-8" (with or without BOM) or "cp932". Default: "utf-8".
	Encoding string `json:"encoding,omitempty"`
	// Delimiter is the CSV field delimiter, one character. Default: "," (CSV only).
	Delimiter string `json:"delimiter,omitempty"`
	// ChunkSize is the number of records one Register task sends: 1 to 1,000. Default: 100 when
	// left out (0 in Go); a tenants file refuses an explicit 0.
	ChunkSize int `json:"chunkSize,omitempty"`
	// MaxFieldBytes bounds one CSV field or JSON line: 1 to 1,048,576. Default: 65,536.
	MaxFieldBytes int `json:"maxFieldBytes,omitempty"`
	// OnFailure is "continue" (the next file goes on) or "halt" (the tenant stops until an operator
	// resumes it). Default: "continue"; "halt" for a tenant with a Sequence or with RecordOrder
	// "key", whose order a failed file passed by later ones would break.
	OnFailure string `json:"onFailure,omitempty"`
	// IdempotencyKey is "event-id" or "object-version". Default: "object-version": S3 delivers
	// events to EventBridge at least once, and a duplicate can carry a new event id.
	// https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// RegisterURL is the core system's endpoint for the bundled HTTP register adapter, an absolute
	// http(s) URL. Default: none; required unless the tenant has a DynamoDB sink or a register
	// function of its own (the app's -c registerUrl fills it in for every tenant).
	RegisterURL string `json:"registerUrl,omitempty"`
	// RegisterAuthSecretARN is a Secrets Manager secret, by its full ARN, whose value is sent as
	// the Authorization header. Default: no Authorization header.
	RegisterAuthSecretARN string `json:"registerAuthSecretArn,omitempty"`
	// RegisterMode is "record" (one POST per record) or "batch" (one POST per chunk).
	// Default: "record" (left empty).
	RegisterMode string `json:"registerMode,omitempty"`
	// MaxBatchBytes bounds the encoded records of one batch POST, 1,024 to 67,108,864; Split cuts
	// chunks by records and by these bytes. Batch mode only. Default: 5 MiB in batch mode.
	MaxBatchBytes int `json:"maxBatchBytes,omitempty"`
	// DynamoDB makes the tenant's sink a DynamoDB table of conditional upserts instead of HTTP; such
	// a tenant has no registerUrl. Default: none, the HTTP adapter.
	DynamoDB *DynamoDB `json:"dynamodb,omitempty"`
	// Stack places a silo tenant in the app's stack "<stackPrefix>-Tenants-<stack>": 1-32 letters,
	// digits and hyphens. Tenants file only. Default: the stack the app assigned to the tenant when
	// it first appeared, kept in the assignment file beside the tenants file.
	Stack string `json:"stack,omitempty"`
	// Tier is "silo" (the tenant's own resources) or "pool" (a row of configuration in a pool's
	// shared resources). Tenants file only. Default: the app's defaultTier context ("silo").
	Tier string `json:"tier,omitempty"`
	// Pool names the pool of a pooled tenant, whose stack is "<stackPrefix>-Pool-<pool>". Tenants
	// file only, with tier "pool". Default: "default".
	Pool string `json:"pool,omitempty"`
	// CoreSystem names the core system the tenant registers into, in either tier: the tenants
	// file's "coreSystems" entry, or in a Go app the Name given to NewCoreSystem. A file of the
	// tenant starts only while the core system has a free running-file slot, and its records go at
	// most at the core system's rate. Default: none; the tenant's files are then bounded only by
	// its pool, if pooled.
	CoreSystem string `json:"coreSystem,omitempty"`
	// Weight is the tenant's share when tenants wait for admission: 1 to 10; a tenant of weight 2
	// is admitted about twice as often as one of weight 1 while both wait. Default: 1 (left at 0).
	Weight int `json:"weight,omitempty"`
	// MaxRecordsPerSecond bounds the tenant's own records per second, above 0. With a core system,
	// the tenant goes at most at the lower of the two rates. Default: no limit of its own.
	MaxRecordsPerSecond float64 `json:"maxRecordsPerSecond,omitempty"`
	// OnInvalidRecord is "failFile" (a record that fails validation fails the whole file before
	// anything is written) or "skipRecord" (it is rejected, and the others are registered in
	// order). Default: "failFile".
	OnInvalidRecord string `json:"onInvalidRecord,omitempty"`
	// MaxInvalidRecords is how many invalid records a skipRecord file may have, 1 to 100,000; a
	// file with more fails before anything is written. skipRecord only. Default: 1,000 under
	// skipRecord.
	MaxInvalidRecords int `json:"maxInvalidRecords,omitempty"`
	// RejectStatuses are the HTTP statuses (400-499 except 408 and 429) with which the core system
	// rejects one record, which Register then skips; onInvalidRecord "skipRecord" only.
	// Default: none.
	RejectStatuses []int `json:"rejectStatuses,omitempty"`
	// Uploaders are the IAM role (or user) ARNs that may assume a silo tenant's uploader role, to
	// upload its files under its prefix and nowhere else. Tenants file only, silo tenants only (a
	// construct takes Props.Uploaders; a pooled tenant's are its pool's). Default: none, and no
	// uploader role.
	Uploaders []string `json:"uploaders,omitempty"`
	// RecordOrder is "file" (one record at a time, in file order) or "key" (a key's records in file
	// order, several keys at once; record mode only, not batch mode or the DynamoDB sink, which
	// have their own ordering). Default: "file" (left empty).
	RecordOrder string `json:"recordOrder,omitempty"`
	// KeyColumns name a record's key under recordOrder "key": CSV header names, or JSON Lines
	// fields; a record's key is their values, in this order. Required with "key", and only with
	// it: non-empty names, each once. Default: none.
	KeyColumns []string `json:"keyColumns,omitempty"`
	// MaxRecordsInFlight bounds the requests one file keeps in flight under recordOrder "key": 1
	// to 64. With a core system, the file keeps at most its share of the core system's
	// maxRequestsInFlight at a time, which is all of this while the others leave it free.
	// Default: 8 under "key".
	MaxRecordsInFlight int `json:"maxRecordsInFlight,omitempty"`
	// SmallFileBytes is the tenant's own small-file bound: a file whose S3 event gives it at most
	// this many bytes runs as one SmallFile task (split, register and results in one invocation).
	// 1 to 4 MiB, or -1 for none. Default: the app's bound (-c smallFileBytes, 1 MiB).
	SmallFileBytes int64 `json:"smallFileBytes,omitempty"`
	// Sequence makes the tenant's files run in the sequence their names carry, instead of the
	// order their events reached the queue. Default: none, arrival order.
	Sequence *Sequence `json:"sequence,omitempty"`
}

// DynamoDB is a tenant's DynamoDB sink (docs/data-path.md, "DynamoDB sink"): each record becomes
// one item of the table, keyed by the record's Key fields, both stored as strings.
type DynamoDB struct {
	// Key names the record fields of the partition key and, if two, the sort key. Required.
	Key []string `json:"key"`
	// Table is an existing table's name: 3-255 letters, digits, '_', '-' or '.'. Default: the
	// construct creates the table (a silo tenant's only).
	Table string `json:"table,omitempty"`
	// Concurrency bounds the records of one chunk written at once, 1 to 256; records of one key
	// are always written in file order. Default: 16.
	Concurrency int `json:"concurrency,omitempty"`
}

// Pooled reports whether the tenant is in the pooled tier.
func (t Tenant) Pooled() bool { return t.Tier == TierPool }

// NeedsRegisterURL reports whether the tenant's sink is the HTTP register adapter, which needs a
// registerUrl; a tenant with a DynamoDB sink has none.
func (t Tenant) NeedsRegisterURL() bool { return t.DynamoDB == nil }

// Placement clears what places the tenant in the app (Stack, Tier, Pool, Uploaders), which the
// tenants file's app reads and neither a construct nor an execution does.
func (t Tenant) Placement() Tenant {
	t.Stack, t.Tier, t.Pool, t.Uploaders = "", "", "", nil
	return t
}
