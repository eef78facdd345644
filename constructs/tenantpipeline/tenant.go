package tenantpipeline

import (
	"regexp"
	"slices"
	"strings"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/tenants"
)

// Tenant is one tenant's configuration, the fields of one entry of tenants.json: ID is required,
// every other field has a documented default. It is this package's own type, so that an app
// outside this module can build a TenantPipeline; this module's app converts its tenants-file
// entries to it (internal/stacks).
type Tenant struct {
	// ID names the tenant in resource ids, the FIFO message group, metrics and logs: 1-32
	// lower-case letters, digits and hyphens.
	ID string
	// Prefix is the key prefix the tenant's files arrive under. Default: "inbox/<id>/".
	Prefix string
	// Format is "csv" or "jsonl". Default: "csv".
	Format string
	// Encoding is "utf-8" (with or without BOM) or "cp932". Default: "utf-8".
	Encoding string
	// Delimiter is the CSV field delimiter, one character. Default: ",".
	Delimiter string
	// ChunkSize is the number of records one Register task sends: 1 to 1000. Default: 100, which
	// zero (the Go zero value) means here; a negative value is refused. A tenants file, which can
	// tell an absent field from one written as 0, refuses an explicit 0 instead.
	ChunkSize int
	// MaxFieldBytes bounds one CSV field or JSON line. Default: 65,536.
	MaxFieldBytes int
	// OnFailure is "continue" or "halt". Default: "continue".
	OnFailure string
	// IdempotencyKey is "object-version" or "event-id". Default: "object-version".
	IdempotencyKey string
	// RegisterURL is the core system's endpoint for the bundled HTTP register adapter. Required
	// unless Props.RegisterFunction is set.
	RegisterURL string
	// RegisterAuthSecretARN is a Secrets Manager secret sent as the Authorization header.
	// Default: no Authorization header.
	RegisterAuthSecretARN string
	// RegisterMode is "record" (one POST per record) or "batch" (one POST per chunk).
	// Default: "record".
	RegisterMode string
	// MaxBatchBytes bounds the encoded records of one batch POST; Split cuts chunks by records and
	// by these bytes. Batch mode only. Default: 5 MiB.
	MaxBatchBytes int
	// DynamoDB makes the tenant's sink a DynamoDB table of conditional upserts instead of HTTP.
	// Default: none (the HTTP adapter).
	DynamoDB *DynamoDB

	// CoreSystem is the core system the tenant registers into (NewCoreSystem), in either tier: a
	// file of the tenant starts only while the core system has a free running-file slot, and its
	// records go at most at the core system's rate. The controller may manage leases in its table,
	// and the bundled Register may read and update its adaptive limit. Default: none; the tenant's
	// files are then bounded only by its pool, if pooled.
	CoreSystem *CoreSystem
	// Weight is the tenant's share when tenants wait for admission: 1 to 10; a tenant of weight 2
	// is admitted about twice as often as one of weight 1 while both wait. Default: 0, which is
	// weight 1 (pipeline.DefaultWeight).
	Weight int
	// MaxRecordsPerSecond bounds the tenant's own records per second, above 0. With a core
	// system, the tenant goes at most at the lower of the two rates. Default: 0, no limit of the
	// tenant's own.
	MaxRecordsPerSecond float64
	// OnInvalidRecord is "failFile" (a record that fails validation fails the whole file before
	// anything is written) or "skipRecord" (it is rejected, and the others are registered in order).
	// Default: "failFile".
	OnInvalidRecord string
	// MaxInvalidRecords is how many invalid records a skipRecord file may have, 1 to 100,000; a
	// file with more fails before anything is written. skipRecord only. Default: 1,000 under
	// skipRecord (0 means the default).
	MaxInvalidRecords int
	// RejectStatuses are the HTTP statuses (400-499 except 408 and 429) with which the core system
	// rejects one record, which Register then skips; OnInvalidRecord "skipRecord" only.
	// Default: none.
	RejectStatuses []int

	// RecordOrder is "file" (one record at a time, in file order) or "key" (a key's records in
	// file order, several keys at once, up to MaxRecordsInFlight; record mode only, not batch mode
	// or the DynamoDB sink, which have their own ordering). Default: "", which is "file".
	RecordOrder string
	// KeyColumns name a record's key under RecordOrder "key": CSV header names, or JSON Lines
	// fields; a record's key is their values, in this order. Required with "key", and only with it:
	// non-empty names, each once.
	KeyColumns []string
	// MaxRecordsInFlight bounds the requests one file keeps in flight under RecordOrder "key": 1
	// to 64, and never more than its core system's share (CoreSystemProps.MaxRequestsInFlight).
	// Default: 0, which is 8 under "key"; only with "key".
	MaxRecordsInFlight int
	// SmallFileBytes is the tenant's own small-file bound (SharedProps.SmallFileBytes, which it
	// overrides): a file whose S3 event gives it at most this many bytes runs as one SmallFile
	// task. 1 to 4 MiB, or -1 for none. Default: SharedProps.SmallFileBytes.
	SmallFileBytes int64
}

// DynamoDB configures the DynamoDB sink (docs/data-path.md, "DynamoDB sink").
type DynamoDB struct {
	// Key names the record fields of the partition key and, if two, the sort key. Required.
	Key []string
	// Table is an existing table's name. Default: the construct creates the table.
	Table string
	// Concurrency bounds the records of one chunk written at once; records of one key are always
	// written in file order. Default: 16.
	Concurrency int
}

func (d *DynamoDB) internal() *tenants.DynamoDB {
	if d == nil {
		return nil
	}
	return &tenants.DynamoDB{Key: append([]string(nil), d.Key...), Table: d.Table, Concurrency: d.Concurrency}
}

func dynamoDBFrom(d *tenants.DynamoDB) *DynamoDB {
	if d == nil {
		return nil
	}
	return &DynamoDB{Key: append([]string(nil), d.Key...), Table: d.Table, Concurrency: d.Concurrency}
}

// WithDefaults returns t with every unset field at its documented default.
func (t Tenant) WithDefaults() Tenant {
	d := tenantFrom(t.internal().WithDefaults())
	d.CoreSystem = t.CoreSystem
	return d
}

// Validate reports every problem of t at once; t must already have its defaults.
func (t Tenant) Validate() error { return t.checkable().ValidateNamed(tenantField) }

// tenantField names a tenant's field, given by its JSON path, in the tenants file's rules: the
// key order fields, and those their messages mention, by their Tenant prop; the others keep the
// names they always had.
func tenantField(field string) string {
	if prop, ok := keyOrderProps[field]; ok {
		return prop
	}
	return field
}

// keyOrderProps are the Tenant props, by JSON path, of the key order rules' messages and of the
// small-file bound's.
var keyOrderProps = map[string]string{
	"recordOrder":        "Tenant.RecordOrder",
	"keyColumns":         "Tenant.KeyColumns",
	"maxRecordsInFlight": "Tenant.MaxRecordsInFlight",
	"smallFileBytes":     "Tenant.SmallFileBytes",
	"registerMode":       "Tenant.RegisterMode",
	"dynamodb":           "Tenant.DynamoDB",
}

// tokenPattern matches one CDK token as it appears inside a string ("${Token[TOKEN.12]}").
var tokenPattern = regexp.MustCompile(`\$\{Token\[[^\]]*\]\}`)

// checkable is t as tenants.json's rules check it. A prefix that holds unresolved tokens (a
// CloudFormation parameter, say) is known only at deploy time: each token stands in as one safe
// character, so the prefix's own characters and form are still checked.
func (t Tenant) checkable() tenants.Tenant {
	it := t.internal()
	it.Prefix = checkablePrefix(it.Prefix)
	return it
}

// checkablePrefix is prefix with each unresolved token replaced by one safe character.
func checkablePrefix(prefix string) string {
	if strings.Contains(prefix, "${Token[") && unresolved(prefix) {
		return tokenPattern.ReplaceAllString(prefix, "t")
	}
	return prefix
}

func tenantFrom(t tenants.Tenant) Tenant {
	return Tenant{
		ID: t.ID, Prefix: t.Prefix, Format: t.Format, Encoding: t.Encoding, Delimiter: t.Delimiter,
		ChunkSize: t.ChunkSize, MaxFieldBytes: t.MaxFieldBytes, OnFailure: t.OnFailure,
		IdempotencyKey: t.IdempotencyKey, RegisterURL: t.RegisterURL, RegisterAuthSecretARN: t.RegisterAuthSecretARN,
		RegisterMode: t.RegisterMode, MaxBatchBytes: t.MaxBatchBytes, DynamoDB: dynamoDBFrom(t.DynamoDB),
		Weight: t.Weight, MaxRecordsPerSecond: t.MaxRecordsPerSecond,
		OnInvalidRecord: t.OnInvalidRecord, MaxInvalidRecords: t.MaxInvalidRecords, RejectStatuses: slices.Clone(t.RejectStatuses),
		RecordOrder: t.RecordOrder, KeyColumns: slices.Clone(t.KeyColumns), MaxRecordsInFlight: t.MaxRecordsInFlight,
		SmallFileBytes: t.SmallFileBytes,
	}
}

func (t Tenant) internal() tenants.Tenant {
	return tenants.Tenant{
		ID: t.ID, Prefix: t.Prefix, Format: t.Format, Encoding: t.Encoding, Delimiter: t.Delimiter,
		ChunkSize: t.ChunkSize, MaxFieldBytes: t.MaxFieldBytes, OnFailure: t.OnFailure,
		IdempotencyKey: t.IdempotencyKey, RegisterURL: t.RegisterURL, RegisterAuthSecretARN: t.RegisterAuthSecretARN,
		RegisterMode: t.RegisterMode, MaxBatchBytes: t.MaxBatchBytes, DynamoDB: t.DynamoDB.internal(),
		CoreSystem: t.coreSystemName(), Weight: t.Weight, MaxRecordsPerSecond: t.MaxRecordsPerSecond,
		OnInvalidRecord: t.OnInvalidRecord, MaxInvalidRecords: t.MaxInvalidRecords, RejectStatuses: slices.Clone(t.RejectStatuses),
		RecordOrder: t.RecordOrder, KeyColumns: slices.Clone(t.KeyColumns), MaxRecordsInFlight: t.MaxRecordsInFlight,
		SmallFileBytes: t.SmallFileBytes,
	}
}

func (t Tenant) coreSystemName() string {
	if t.CoreSystem == nil {
		return ""
	}
	return t.CoreSystem.Props.Name
}

// settings is the part of the configuration that travels with every execution.
// With a core system, they carry its settings without its table (CoreSystem.settings).
func (t Tenant) settings() pipeline.Tenant {
	s := t.internal().Settings()
	if t.CoreSystem != nil {
		s.CoreSystem = t.CoreSystem.settings()
	}
	return s
}
