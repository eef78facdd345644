package spec

import (
	"strings"
	"testing"
)

// Each rule of a tenant, rendered by both front ends: the tenants file names the field by its
// JSON path under its entry, a Go app by the Go path of the Tenant value it wrote. The words after
// the field are the same in both, but for the fields a message mentions, each named its own way.
func TestCheckRendersEachRule(t *testing.T) {
	base := func() Tenant { return Tenant{ID: "acme", RegisterURL: "https://core.example.com/r"} }
	for _, tc := range []struct {
		name   string
		change func(*Tenant)
		file   string // rendered for tenants[3]
		goApp  string // rendered for Tenant
		pool   string // rendered for PoolProps.Tenants[3]
	}{
		{"id", func(t *Tenant) { t.ID = "Acme" },
			`tenants[3].id (tenant "Acme"): "Acme" is invalid: use 1-32 lower-case letters, digits and hyphens, starting with a letter or digit`,
			`Tenant.ID (tenant "Acme"): "Acme" is invalid`, `PoolProps.Tenants[3].ID (tenant "Acme"): "Acme" is invalid`},
		{"prefix form", func(t *Tenant) { t.Prefix = "/in/" },
			`tenants[3].prefix (tenant "acme"): "/in/" is invalid: a prefix is a non-empty key prefix`, `Tenant.Prefix (tenant "acme"): "/in/" is invalid`, ""},
		{"prefix reserved", func(t *Tenant) { t.Prefix = "work/acme/" },
			`tenants[3].prefix (tenant "acme"): "work/acme/" overlaps "work/", which the pipeline writes to itself`, `Tenant.Prefix (tenant "acme"): "work/acme/" overlaps "work/"`, ""},
		{"format", func(t *Tenant) { t.Format = "xml" }, `tenants[3].format (tenant "acme"): "xml" is invalid: use "csv" or "jsonl"`, `Tenant.Format (tenant "acme"): "xml" is invalid`, ""},
		{"encoding", func(t *Tenant) { t.Encoding = "sjis" }, `tenants[3].encoding (tenant "acme"): "sjis" is invalid: use "utf-8" or "cp932"`, `Tenant.Encoding (tenant "acme")`, ""},
		{"delimiter on jsonl", func(t *Tenant) { t.Format, t.Delimiter = FormatJSONL, ";" },
			`tenants[3].delimiter (tenant "acme"): ";" is set, but only CSV files have a delimiter`, `Tenant.Delimiter (tenant "acme")`, ""},
		{"delimiter two characters", func(t *Tenant) { t.Delimiter = ";;" }, `tenants[3].delimiter (tenant "acme"): ";;" is invalid: use exactly one character`, `Tenant.Delimiter`, ""},
		{"chunkSize", func(t *Tenant) { t.ChunkSize = 5000 },
			`tenants[3].chunkSize (tenant "acme"): 5000 is out of range: use 1 to 1000 records, or leave it out for 100`, `Tenant.ChunkSize (tenant "acme"): 5000 is out of range`, ""},
		{"maxFieldBytes", func(t *Tenant) { t.MaxFieldBytes = 1 << 21 }, `tenants[3].maxFieldBytes (tenant "acme"): 2097152 is out of range: use 1 to 1,048,576 bytes`, `Tenant.MaxFieldBytes`, ""},
		{"smallFileBytes", func(t *Tenant) { t.SmallFileBytes = 5000000 },
			`tenants[3].smallFileBytes (tenant "acme"): 5000000 is out of range: use 1 to 4194304 bytes (4 MiB), -1 for no small-file path, or leave it out for the app's bound`,
			`Tenant.SmallFileBytes (tenant "acme"): 5000000 is out of range: use 1 to 4194304 bytes`, `PoolProps.Tenants[3].SmallFileBytes (tenant "acme"): 5000000 is out of range`},
		{"onFailure", func(t *Tenant) { t.OnFailure = "stop" }, `tenants[3].onFailure (tenant "acme"): "stop" is invalid: use "continue" or "halt"`, `Tenant.OnFailure`, ""},
		{"idempotencyKey", func(t *Tenant) { t.IdempotencyKey = "etag" }, `tenants[3].idempotencyKey (tenant "acme"): "etag" is invalid`, `Tenant.IdempotencyKey`, ""},
		{"onInvalidRecord", func(t *Tenant) { t.OnInvalidRecord = "skip" }, `tenants[3].onInvalidRecord (tenant "acme"): "skip" is invalid: use "failFile" or "skipRecord"`, `Tenant.OnInvalidRecord`, ""},
		{"maxInvalidRecords under failFile", func(t *Tenant) { t.MaxInvalidRecords = 5 },
			`tenants[3].maxInvalidRecords (tenant "acme"): 5 is set, but onInvalidRecord is "failFile"`, `Tenant.MaxInvalidRecords (tenant "acme"): 5 is set`, ""},
		{"maxInvalidRecords range", func(t *Tenant) { t.OnInvalidRecord, t.MaxInvalidRecords = OnInvalidSkipRecord, 100001 },
			`tenants[3].maxInvalidRecords (tenant "acme"): 100001 is out of range: use 1 to 100000 records, or leave it out for 1000`, `Tenant.MaxInvalidRecords`, ""},
		{"registerUrl", func(t *Tenant) { t.RegisterURL = "core.example.com" }, `tenants[3].registerUrl (tenant "acme"): "core.example.com" is invalid: use an absolute http(s) URL`, `Tenant.RegisterURL`, ""},
		{"stack", func(t *Tenant) { t.Stack = "a_b" }, `tenants[3].stack (tenant "acme"): "a_b" is invalid`, `Tenant.Stack`, ""},
		{"registerAuthSecretArn", func(t *Tenant) { t.RegisterAuthSecretARN = "secret" }, `tenants[3].registerAuthSecretArn (tenant "acme"): "secret" is invalid: use the secret's full ARN`, `Tenant.RegisterAuthSecretARN`, ""},
		{"registerAuthSecretArn without Secrets Manager's suffix", func(t *Tenant) {
			t.RegisterAuthSecretARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:core-auth"
		}, `tenants[3].registerAuthSecretArn (tenant "acme"): "arn:aws:secretsmanager:eu-west-1:123456789012:secret:core-auth" is invalid: use the secret's full ARN, arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 characters>`,
			`Tenant.RegisterAuthSecretARN (tenant "acme"): "arn:aws:secretsmanager:eu-west-1:123456789012:secret:core-auth" is invalid`, ""},
		{"registerAuthSecretArn of another service", func(t *Tenant) {
			t.RegisterAuthSecretARN = "arn:aws:ssm:eu-west-1:123456789012:parameter/core-auth-AbCdEf"
		}, `tenants[3].registerAuthSecretArn (tenant "acme"): "arn:aws:ssm:eu-west-1:123456789012:parameter/core-auth-AbCdEf" is invalid`, `Tenant.RegisterAuthSecretARN`, ""},
		{"registerUrl with credentials", func(t *Tenant) { t.RegisterURL = "https://erp:hunter2@core.example.com/records" },
			`tenants[3].registerUrl (tenant "acme"): "https://erp:xxxxx@core.example.com/records" carries credentials in the URL`, `Tenant.RegisterURL (tenant "acme"): "https://erp:xxxxx@core.example.com/records" carries credentials`, ""},
		{"http registerUrl with a secret", func(t *Tenant) {
			t.RegisterURL, t.RegisterAuthSecretARN = "http://core.example.com/records", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:core-auth-AbCdEf"
		}, `tenants[3].registerUrl (tenant "acme"): "http://core.example.com/records" is http, but registerAuthSecretArn is set: the secret goes in every request's Authorization header, so it would cross the network in clear text; use https`,
			`Tenant.RegisterURL (tenant "acme"): "http://core.example.com/records" is http, but Tenant.RegisterAuthSecretARN is set`, ""},
		{"rejectStatuses", func(t *Tenant) { t.OnInvalidRecord, t.RejectStatuses = OnInvalidSkipRecord, []int{429} },
			`tenants[3].rejectStatuses (tenant "acme"): 429 is retried by Register`, `Tenant.RejectStatuses (tenant "acme"): 429 is retried`, ""},
		{"registerMode", func(t *Tenant) { t.RegisterMode = "bulk" }, `tenants[3].registerMode (tenant "acme"): "bulk" is invalid: use "record" or "batch"`, `Tenant.RegisterMode`, ""},
		{"maxBatchBytes in record mode", func(t *Tenant) { t.MaxBatchBytes = 4096 }, `tenants[3].maxBatchBytes (tenant "acme"): 4096 is set, but only registerMode "batch" sends batches`, `Tenant.MaxBatchBytes`, ""},
		{"dynamodb with registerUrl", func(t *Tenant) { t.DynamoDB = &DynamoDB{Key: []string{"id"}} },
			`tenants[3].registerUrl (tenant "acme"): is set with dynamodb: a tenant has one sink`, `Tenant.RegisterURL (tenant "acme"): is set with dynamodb`, ""},
		{"dynamodb.key", func(t *Tenant) { t.RegisterURL, t.DynamoDB = "", &DynamoDB{Key: []string{"_seq"}} },
			`tenants[3].dynamodb.key (tenant "acme"): "_seq" is reserved: the sink writes "_seq" and "_meta" itself`,
			`Tenant.DynamoDB.Key (tenant "acme"): "_seq" is reserved`, `PoolProps.Tenants[3].DynamoDB.Key (tenant "acme"): "_seq" is reserved`},
		{"dynamodb.table", func(t *Tenant) { t.RegisterURL, t.DynamoDB = "", &DynamoDB{Key: []string{"id"}, Table: "t"} },
			`tenants[3].dynamodb.table (tenant "acme"): "t" is invalid`, `Tenant.DynamoDB.Table (tenant "acme"): "t" is invalid`, ""},
		{"dynamodb.concurrency", func(t *Tenant) { t.RegisterURL, t.DynamoDB = "", &DynamoDB{Key: []string{"id"}, Concurrency: 300} },
			`tenants[3].dynamodb.concurrency (tenant "acme"): 300 is out of range: use 1 to 256`, `Tenant.DynamoDB.Concurrency`, ""},
		{"weight", func(t *Tenant) { t.Weight = 11 }, `tenants[3].weight (tenant "acme"): 11 is out of range: use 1 to 10 (default 1)`, `Tenant.Weight`, ""},
		{"maxRecordsPerSecond", func(t *Tenant) { t.MaxRecordsPerSecond = -1 }, `tenants[3].maxRecordsPerSecond (tenant "acme"): -1 must be above 0`, `Tenant.MaxRecordsPerSecond`, ""},
		{"recordOrder, another field named", func(t *Tenant) { t.RecordOrder = "customer" },
			`tenants[3].recordOrder (tenant "acme"): "customer" is invalid: use "file" (one record at a time, in file order: the default) or "key" (a key's records in file order, several keys at once, with keyColumns)`,
			`Tenant.RecordOrder (tenant "acme"): "customer" is invalid: use "file" (one record at a time, in file order: the default) or "key" (a key's records in file order, several keys at once, with Tenant.KeyColumns)`,
			`PoolProps.Tenants[3].RecordOrder (tenant "acme"): "customer" is invalid: use "file" (one record at a time, in file order: the default) or "key" (a key's records in file order, several keys at once, with PoolProps.Tenants[3].KeyColumns)`},
		{"keyColumns", func(t *Tenant) { t.KeyColumns = []string{"c"} },
			`tenants[3].keyColumns (tenant "acme"): ["c"] is set, but recordOrder is "file": only recordOrder "key" reads a record's key; set recordOrder to "key", or leave keyColumns out`,
			`Tenant.KeyColumns (tenant "acme"): ["c"] is set, but Tenant.RecordOrder is "file": only Tenant.RecordOrder "key" reads a record's key; set Tenant.RecordOrder to "key", or leave Tenant.KeyColumns out`, ""},
		{"sequence.pattern without seq", func(t *Tenant) { t.Sequence = &Sequence{Pattern: `^orders-([0-9]+)\.csv$`} },
			`tenants[3].sequence.pattern (tenant "acme"): "^orders-([0-9]+)\\.csv$" must have exactly one named group, (?P<seq>...), and no other named group`,
			`Tenant.Sequence.Pattern (tenant "acme"): "^orders-([0-9]+)\\.csv$" must have exactly one named group`, `PoolProps.Tenants[3].Sequence.Pattern (tenant "acme")`},
		{"sequence.pattern not RE2", func(t *Tenant) { t.Sequence = &Sequence{Pattern: `^(?P<seq>[0-9]+)(?=x)`} },
			`tenants[3].sequence.pattern (tenant "acme"): "^(?P<seq>[0-9]+)(?=x)" is not an RE2 regular expression`, `Tenant.Sequence.Pattern`, ""},
		{"sequence.pattern missing", func(t *Tenant) { t.Sequence = &Sequence{} },
			`tenants[3].sequence.pattern (tenant "acme"): is required: an RE2 regular expression`, `Tenant.Sequence.Pattern (tenant "acme"): is required`, ""},
		{"sequence.kind", func(t *Tenant) { t.Sequence = &Sequence{Pattern: `(?P<seq>\d+)`, Kind: "date"} },
			`tenants[3].sequence.kind (tenant "acme"): "date" is invalid: use "number" or "name"`, `Tenant.Sequence.Kind`, ""},
		{"sequence.start", func(t *Tenant) { n := int64(-1); t.Sequence = &Sequence{Pattern: `(?P<seq>\d+)`, Start: &n} },
			`tenants[3].sequence.start (tenant "acme"): -1 is out of range: use 0 or more, or leave it out for 1`, `Tenant.Sequence.Start`, ""},
		{"sequence.gapTimeout", func(t *Tenant) { t.Sequence = &Sequence{Pattern: `(?P<seq>\d+)`, GapTimeout: "15d"} },
			`tenants[3].sequence.gapTimeout (tenant "acme"): "15d" is invalid: use a duration from 1s to 336h (14 days)`, `Tenant.Sequence.GapTimeout`, ""},
		{"sequence.onGap", func(t *Tenant) { t.Sequence = &Sequence{Pattern: `(?P<seq>\d+)`, OnGap: "wait"} },
			`tenants[3].sequence.onGap (tenant "acme"): "wait" is invalid: use "hold" or "skip"`, `Tenant.Sequence.OnGap`, ""},
		{"sequence.settle on a number", func(t *Tenant) { t.Sequence = &Sequence{Pattern: `(?P<seq>\d+)`, Settle: "10s"} },
			`tenants[3].sequence.settle (tenant "acme"): is set, but only kind "name" waits to settle`, `Tenant.Sequence.Settle`, ""},
		{"sequence.settle range", func(t *Tenant) { t.Sequence = &Sequence{Pattern: `(?P<seq>\d+)`, Kind: SequenceName, Settle: "25h"} },
			`tenants[3].sequence.settle (tenant "acme"): "25h" is invalid: use a duration from 0s to 24h`, `Tenant.Sequence.Settle`, ""},
		{"sequence.onGap on a name", func(t *Tenant) { t.Sequence = &Sequence{Pattern: `(?P<seq>\d+)`, Kind: SequenceName, OnGap: OnGapSkip} },
			`tenants[3].sequence.onGap (tenant "acme"): is set, but kind "name" has no numbers and so no gaps`, `Tenant.Sequence.OnGap`, ""},
		{"maxRecordsInFlight", func(t *Tenant) { t.RecordOrder, t.KeyColumns, t.MaxRecordsInFlight = RecordOrderKey, []string{"c"}, 65 },
			`tenants[3].maxRecordsInFlight (tenant "acme"): 65 is out of range: use 1 to 64 requests in flight per file, or leave it out for 8`, `Tenant.MaxRecordsInFlight (tenant "acme"): 65`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := base()
			tc.change(&tn)
			ps := tn.WithDefaults().Check()
			if len(ps) != 1 {
				t.Fatalf("got %d problems %v, want 1", len(ps), ps)
			}
			for _, r := range []struct {
				front string
				names Names
				want  string
			}{{"file", FileNames("tenants[3]"), tc.file}, {"go", GoNames("Tenant"), tc.goApp}, {"pool", GoNames("PoolProps.Tenants[3]"), tc.pool}} {
				if got := ps[0].Render(r.names, tn.ID); r.want != "" && !strings.HasPrefix(got, r.want) {
					t.Errorf("%s: got %q, want it to start with %q", r.front, got, r.want)
				}
			}
		})
	}
	if ps := base().WithDefaults().Check(); len(ps) != 0 {
		t.Errorf("a valid tenant: got %v, want no problem", ps)
	}
}

// A tenant whose id is unknown is named by its place alone.
func TestRenderWithoutID(t *testing.T) {
	p := Problemf("chunkSize", "0 is out of range: use %d to %d", 1, 1000)
	if got, want := p.Render(FileNames("tenants[0]"), ""), "tenants[0].chunkSize: 0 is out of range: use 1 to 1000"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// The Go names come from the struct, by reflection: every JSON path names its Go field.
func TestGoPath(t *testing.T) {
	for _, tc := range []struct{ json, goPath string }{
		{"smallFileBytes", "SmallFileBytes"}, {"registerAuthSecretArn", "RegisterAuthSecretARN"}, {"registerUrl", "RegisterURL"},
		{"dynamodb", "DynamoDB"}, {"dynamodb.key", "DynamoDB.Key"}, {"id", "ID"}, {"nosuchfield", "nosuchfield"},
	} {
		if got := GoPath(tc.json); got != tc.goPath {
			t.Errorf("%s: got %q, want %q", tc.json, got, tc.goPath)
		}
	}
}

// Explicit zeros are refused only where the field is present.
func TestExplicitZeros(t *testing.T) {
	present := map[string]bool{"chunkSize": true, "weight": true}
	ps := Tenant{ID: "a"}.ExplicitZeros(func(p string) bool { return present[p] })
	if len(ps) != 2 || ps[0].Path != "chunkSize" || ps[1].Path != "weight" {
		t.Errorf("got %v, want chunkSize and weight", ps)
	}
}

// WithDefaults fills in every documented default, and leaves what the app decides alone.
func TestWithDefaults(t *testing.T) {
	got := Tenant{ID: "acme", OnInvalidRecord: OnInvalidSkipRecord, RegisterMode: RegisterModeBatch, RecordOrder: RecordOrderKey,
		DynamoDB: &DynamoDB{Key: []string{"id"}}}.WithDefaults()
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"prefix", got.Prefix, "inbox/acme/"}, {"format", got.Format, FormatCSV}, {"encoding", got.Encoding, EncodingUTF8},
		{"delimiter", got.Delimiter, ","}, {"chunkSize", got.ChunkSize, DefaultChunkSize}, {"maxFieldBytes", got.MaxFieldBytes, DefaultMaxFieldBytes},
		{"onFailure (recordOrder key)", got.OnFailure, OnFailureHalt}, {"idempotencyKey", got.IdempotencyKey, IdempotencyObjectVersion},
		{"maxInvalidRecords", got.MaxInvalidRecords, DefaultMaxInvalidRecords}, {"maxBatchBytes", got.MaxBatchBytes, DefaultMaxBatchBytes},
		{"dynamodb.concurrency", got.DynamoDB.Concurrency, DefaultDynamoDBConcurrency}, {"maxRecordsInFlight", got.MaxRecordsInFlight, DefaultMaxRecordsInFlight},
		{"tier left to the app", got.Tier, ""}, {"weight left at 0", got.Weight, 0}, {"smallFileBytes left to the app", got.SmallFileBytes, int64(0)},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
}
