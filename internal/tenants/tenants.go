// Package tenants reads and validates the tenants configuration file (tenants.json), the one place
// where a tenant is added. Validation is pure Go, so it is tested without synthesizing anything,
// and a bad file fails synth with every problem named at once.
package tenants

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
)

// File is the tenants configuration file.
type File struct {
	// Pools configures the pools of the pooled tier by name; a pool that pooled tenants name but
	// that is not listed here takes every default (PoolConfig).
	Pools map[string]*PoolConfig `json:"pools,omitempty"`
	// CoreSystems configures by name the core systems tenants register into, each protected by
	// admission (CoreSystemConfig). A tenant names its own with "coreSystem".
	CoreSystems map[string]*CoreSystemConfig `json:"coreSystems,omitempty"`
	Tenants     []Tenant                     `json:"tenants"`
	// Encryption names the customer-managed KMS key of everything the app stores (encryption.go).
	// Default: AWS-owned and AWS-managed keys.
	Encryption *Encryption `json:"encryption,omitempty"`

	// coreUnread holds the core systems ("<name>") and their fields ("<name>.<field>") that Parse
	// could not read: their checks are skipped, their problem already reported.
	coreUnread map[string]bool
}

// Tenant is one entry of the file. Zero values mean the documented default; Defaults fills them in.
type Tenant struct {
	// ID names the tenant in resource ids, the FIFO message group, metrics and logs.
	ID string `json:"id"`
	// Prefix is the key prefix the tenant's files arrive under. Default: "inbox/<id>/".
	Prefix string `json:"prefix,omitempty"`
	// Format is "csv" or "jsonl". Default: "csv".
	Format string `json:"format,omitempty"`
	// Encoding is "utf-8" (with or without BOM) or "cp932". Default: "utf-8".
	Encoding string `json:"encoding,omitempty"`
	// Delimiter is the CSV field delimiter, one character. Default: ",".
	Delimiter string `json:"delimiter,omitempty"`
	// ChunkSize is the number of records one Register task sends: 1 to 1000. Default: 100, when
	// the field is absent; an explicit 0 is refused (explicitZeros).
	ChunkSize int `json:"chunkSize,omitempty"`
	// MaxFieldBytes bounds one CSV field or JSON line. Default: 65,536.
	MaxFieldBytes int `json:"maxFieldBytes,omitempty"`
	// OnFailure is "continue" or "halt". Default: "continue".
	OnFailure string `json:"onFailure,omitempty"`
	// IdempotencyKey is "event-id" or "object-version". Default: "object-version": S3 delivers events
	// to EventBridge at least once, and a duplicate can carry a new event id.
	// https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// RegisterURL is the core system's endpoint for the bundled HTTP register adapter.
	RegisterURL string `json:"registerUrl,omitempty"`
	// RegisterAuthSecretARN is a Secrets Manager secret sent as the Authorization header.
	// Default: no Authorization header.
	RegisterAuthSecretARN string `json:"registerAuthSecretArn,omitempty"`

	// Sinks. RegisterMode is "record" (one POST per record) or "batch" (one POST per
	// chunk). Default: "record" (left empty).
	RegisterMode string `json:"registerMode,omitempty"`
	// MaxBatchBytes bounds one batch POST's encoded records; batch mode only. Default: 5 MiB.
	MaxBatchBytes int `json:"maxBatchBytes,omitempty"`
	// DynamoDB makes Register write each record to a DynamoDB table instead of POSTing it; such a
	// tenant has no registerUrl.
	DynamoDB *DynamoDB `json:"dynamodb,omitempty"`
	// Stack places the tenant in the app's stack "<stackPrefix>-Tenants-<stack>". It is read by the
	// app (internal/stacks), not by the construct. Default: the stack the app assigned to the tenant
	// when it first appeared, kept in the assignment file beside the tenants file.
	Stack string `json:"stack,omitempty"`
	// Tier is "silo" (the tenant's own stack of resources) or "pool" (a row of configuration in a
	// pool's shared resources). Default: the app's defaultTier context, itself "silo" by default.
	Tier string `json:"tier,omitempty"`
	// Pool names the pool of a pooled tenant: its stack is "<stackPrefix>-Pool-<pool>".
	// Default: "default". Only with tier "pool".
	Pool string `json:"pool,omitempty"`

	// Admission (coresystems.go). CoreSystem names the tenant's core system in the file's
	// "coreSystems", in either tier. Default: none; the tenant's files are then bounded only by
	// its pool, if pooled.
	CoreSystem string `json:"coreSystem,omitempty"`
	// Weight is the tenant's share when tenants wait for admission: 1 to 10. Default: 1
	// (pipeline.DefaultWeight); left at zero here, so that a tenant without one keeps its settings.
	Weight int `json:"weight,omitempty"`
	// MaxRecordsPerSecond bounds the tenant's own records per second, above 0. Default: no limit
	// of its own (its core system's, if any).
	MaxRecordsPerSecond float64 `json:"maxRecordsPerSecond,omitempty"`
	// OnInvalidRecord is "failFile" (a record that fails validation fails the whole file before
	// anything is written) or "skipRecord" (it is rejected, and the others are registered in order).
	// Default: "failFile".
	OnInvalidRecord string `json:"onInvalidRecord,omitempty"`
	// MaxInvalidRecords is how many invalid records a skipRecord file may have, 1 to 100,000; a
	// file with more fails before anything is written. skipRecord only. Default: 1,000 under
	// skipRecord.
	MaxInvalidRecords int `json:"maxInvalidRecords,omitempty"`
	// RejectStatuses are the HTTP statuses (400-499 except 408 and 429) with which the core system
	// rejects one record, under onInvalidRecord "skipRecord" only. Default: none.
	RejectStatuses []int `json:"rejectStatuses,omitempty"`
	// Uploaders are the IAM role (or user) ARNs that may assume a silo tenant's uploader role, to
	// upload its files under its prefix and nowhere else: the platform's service that
	// authenticates the tenant's customers. Silo tenants only; a pooled tenant's uploaders are its
	// pool's (pools.<pool>.uploaders). Default: none, and no uploader role.
	Uploaders []string `json:"uploaders,omitempty"`

	// Key order (keyorder.go). RecordOrder is "file" (one record at a time, in file order) or
	// "key" (a key's records in file order, several keys at once). Default: "file" (left empty).
	RecordOrder string `json:"recordOrder,omitempty"`
	// KeyColumns name a record's key under recordOrder "key": CSV header names, or JSON Lines
	// fields. Required with "key", and only with it.
	KeyColumns []string `json:"keyColumns,omitempty"`
	// MaxRecordsInFlight bounds the requests one file keeps in flight under recordOrder "key":
	// 1 to 64. Default: 8 under "key".
	MaxRecordsInFlight int `json:"maxRecordsInFlight,omitempty"`
	// SmallFileBytes is the tenant's small-file bound: a file whose S3 event gives it at most this
	// many bytes runs as one SmallFile task (split, register and results in one invocation). 1 to
	// 4 MiB, or -1 for none. Default: the app's bound (-c smallFileBytes, 32 KiB).
	SmallFileBytes int64 `json:"smallFileBytes,omitempty"`
}

// DynamoDB is a tenant's "dynamodb" sink.
type DynamoDB struct {
	// Key names the record fields of the partition key and, if two, the sort key.
	Key []string `json:"key"`
	// Table is an existing table's name. Default: the construct creates the table.
	Table string `json:"table,omitempty"`
	// Concurrency bounds the records of a chunk written at once. Default: 16.
	Concurrency int `json:"concurrency,omitempty"`
}

// idPattern keeps ids safe everywhere they appear: CloudFormation logical ids and generated names
// (queue names are at most 80 characters including ".fifo", rule names 64), the FIFO message group
// id, S3 prefixes, metric dimensions.
var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// StackPattern is what a stack field may hold: it ends a CloudFormation stack name, which allows
// letters, digits and hyphens (128 characters in all).
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cfn-using-console-create-stack-parameters.html
var StackPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,31}$`)

// EnvRegisterURL supplies the app's registerUrl context when no -c registerUrl is given. The local
// run (cmd/local) sets it: it synthesizes through the CDK CLI and points every tenant at its own
// endpoint at run time, so tenants need no registerUrl there.
const EnvRegisterURL = "TENANTPIPELINE_REGISTER_URL"

// Options change how a tenants file is checked.
type Options struct {
	// RegisterURL is the core system's endpoint for tenants that set no registerUrl of their own
	// (the app's registerUrl context, or the endpoint of a local run). When empty, every tenant must
	// set registerUrl: the app deploys the bundled HTTP register adapter for each.
	RegisterURL string
	// DefaultTier is the tier of tenants that set none: TierSilo or TierPool. Default: TierSilo.
	DefaultTier string
}

// Load reads, defaults and validates a tenants file.
func Load(path string, o Options) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenants file: %w", err)
	}
	f, err := Parse(b, o)
	if err != nil {
		return nil, fmt.Errorf("tenants file %s: %w", path, err)
	}
	return f, nil
}

// Parse decodes a tenants file (UTF-8, with or without a byte order mark), fills in defaults and
// validates it. Unknown fields are errors, but
// they do not stop the check: every problem of every tenant is reported at once. A JSON syntax
// error is the one exception, reported alone with its line and column.
func Parse(b []byte, o Options) (*File, error) {
	// Editors on Windows (Notepad among them) may save UTF-8 with a byte order mark, which
	// encoding/json refuses as "invalid character 'ï'". RFC 8259, section 8.1, lets a parser
	// ignore it: https://www.rfc-editor.org/rfc/rfc8259#section-8.1
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, jsonError(b, err)
	}
	var errs []error
	unknown, _ := unknownFields("", top, reflect.TypeFor[File]())
	errs = append(errs, unknown...)
	var raw []json.RawMessage
	if r, ok := top["tenants"]; ok {
		if err := json.Unmarshal(r, &raw); err != nil {
			errs = append(errs, fmt.Errorf(`"tenants": %s`, typeProblem(err)))
		}
	}
	if len(raw) == 0 {
		errs = append(errs, errors.New(`"tenants" is empty: add at least one tenant, e.g. {"tenants": [{"id": "acme", "registerUrl": "https://core.example.com/records"}]}`))
		return nil, errors.Join(errs...)
	}
	if o.RegisterURL != "" && !validURL(o.RegisterURL) {
		errs = append(errs, fmt.Errorf("default registerUrl %q is invalid: use an absolute http(s) URL", o.RegisterURL))
		o.RegisterURL = ""
	}
	f := &File{}
	if r, ok := top["pools"]; ok {
		errs = append(errs, f.parsePools(r)...)
	}
	if r, ok := top["coreSystems"]; ok {
		errs = append(errs, f.parseCoreSystems(r)...)
	}
	if r, ok := top["encryption"]; ok {
		errs = append(errs, f.parseEncryption(r)...)
	}
	var unread []unreadable
	var ownPrefix []bool
	for i, r := range raw {
		where := fmt.Sprintf("tenants[%d]%s", i, idHint(r))
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(r, &fields); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s", where, typeProblem(err)))
			continue
		}
		var t Tenant
		u := unreadable{fields: map[string]bool{}}
		errs = append(errs, decodeFields(where, "", fields, reflect.ValueOf(&t).Elem(), u.fields)...)
		if u.fields["id"] {
			// Messages name the entry instead, and the default prefix, made from the id, is unknown.
			u.label = fmt.Sprintf("tenants[%d]", i)
			if _, ok := fields["prefix"]; !ok {
				u.fields["prefix"] = true
			}
		}
		errs = append(errs, t.explicitZeros(fields, u)...)
		if t.RegisterURL == "" && t.NeedsRegisterURL() {
			t.RegisterURL = o.RegisterURL
		}
		f.Tenants = append(f.Tenants, t.WithDefaults())
		unread = append(unread, u)
		_, own := fields["prefix"]
		ownPrefix = append(ownPrefix, own)
	}
	f.tierDefaults(o.DefaultTier, ownPrefix)
	errs = append(errs, f.validate(unread, FileNaming))
	for i, t := range f.Tenants {
		if t.RegisterURL == "" && t.NeedsRegisterURL() && !unread[i].skips("registerUrl") {
			errs = append(errs, fmt.Errorf(`%s: registerUrl: missing: set the core system's endpoint, e.g. "registerUrl": "https://core.example.com/records" (or give every tenant one with -c registerUrl=URL)`, unread[i].name(t)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return f, nil
}

// unreadable holds the fields of one tenant whose value is not known: of the wrong JSON type, or
// misspelt (the field a suggestion names). Checks of those fields are skipped, so that one mistake
// is one message, not a cascade about the zero value left in its place.
type unreadable struct {
	// fields are JSON paths: "id", "dynamodb", "dynamodb.key".
	fields map[string]bool
	// label names the tenant in messages when its id could not be read.
	label string
}

// skips reports whether the checks of field are skipped: it, or the object holding it, is unknown.
func (u unreadable) skips(field string) bool {
	outer, _, _ := strings.Cut(field, ".")
	return u.fields[field] || u.fields[outer]
}

// name names t in messages.
func (u unreadable) name(t Tenant) string {
	if u.label != "" {
		return u.label
	}
	return fmt.Sprintf("tenant %q", t.ID)
}

// decodeFields decodes each field of fields into the struct v on its own, so that every problem is
// reported and one bad value leaves the others read. Unknown fields are errors with a suggestion;
// path is the JSON path of v ("" for a tenant, "dynamodb." inside its sink).
func decodeFields(where, path string, fields map[string]json.RawMessage, v reflect.Value, u map[string]bool) []error {
	inside := where
	if path != "" {
		inside = where + ": " + strings.TrimSuffix(path, ".")
	}
	errs, suggested := unknownFields(inside, fields, v.Type())
	for _, name := range suggested {
		u[path+name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		i := fieldIndex(v.Type(), name)
		if i < 0 {
			continue
		}
		field, raw := v.Field(i), fields[name]
		if field.Kind() == reflect.Pointer && field.Type().Elem().Kind() == reflect.Struct {
			var sub map[string]json.RawMessage
			if err := json.Unmarshal(raw, &sub); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %s", where, path+name, typeProblem(err)))
				u[path+name] = true
				field.Set(reflect.New(field.Type().Elem())) // present, so the sink's rules still apply
				continue
			}
			if sub == nil {
				continue // null: absent
			}
			field.Set(reflect.New(field.Type().Elem()))
			errs = append(errs, decodeFields(where, path+name+".", sub, field.Elem(), u)...)
			continue
		}
		if err := json.Unmarshal(raw, field.Addr().Interface()); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %s", where, path+name, typeProblem(err)))
			u[path+name] = true
			field.SetZero()
		}
	}
	return errs
}

// fieldIndex returns the index of the field of t with the JSON name, or -1.
func fieldIndex(t reflect.Type, name string) int {
	if i, ok := fieldsOf(t)[name]; ok {
		return i
	}
	return -1
}

// fieldIndexes maps each struct type to its fields' indexes by JSON name, read once per type:
// a file of 100,000 tenants would otherwise read the same tags for every tenant.
var fieldIndexes sync.Map

func fieldsOf(t reflect.Type) map[string]int {
	if m, ok := fieldIndexes.Load(t); ok {
		return m.(map[string]int)
	}
	m := map[string]int{}
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			m[name] = i
		}
	}
	fieldIndexes.Store(t, m)
	return m
}

// jsonError names the line and column of a syntax error, counted in characters from 1.
func jsonError(b []byte, err error) error {
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		return fmt.Errorf("%s", typeProblem(err))
	}
	off := min(int(syn.Offset), len(b))
	before := b[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	if strings.Contains(syn.Error(), "end of JSON input") {
		col++ // past the last character: the input ended too early
	}
	return fmt.Errorf("line %d, column %d: JSON syntax error: %v", line, col, syn)
}

// typeProblem says which field holds a value of the wrong JSON type.
func typeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err.Error()
	}
	want := te.Type.Kind().String()
	switch te.Type.Kind() {
	case reflect.Int, reflect.Int64:
		want = "a whole number"
	case reflect.Float64:
		want = "a number"
	case reflect.Bool:
		want = "true or false"
	case reflect.String:
		want = "a string"
	case reflect.Slice:
		want = "an array"
	case reflect.Map, reflect.Struct:
		want = "an object"
	}
	if te.Field == "" {
		return fmt.Sprintf("got JSON %s, want %s", te.Value, want)
	}
	return fmt.Sprintf("%s: got JSON %s, want %s", te.Field, te.Value, want)
}

// unknownFields reports keys that are not fields of t, and the fields its suggestions name.
// encoding/json would match names case-insensitively, so "chunksize" is a typo here, not
// chunkSize; the message suggests the field.
func unknownFields(where string, fields map[string]json.RawMessage, t reflect.Type) (errs []error, suggested []string) {
	var known map[string]bool
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if fieldIndex(t, k) >= 0 {
			continue
		}
		if known == nil {
			known = jsonNames(t)
		}
		hint := ""
		for _, name := range slices.Sorted(maps.Keys(known)) {
			if strings.EqualFold(name, k) || len(k) > 3 && editDistance(strings.ToLower(name), strings.ToLower(k)) <= 2 {
				hint = fmt.Sprintf(" (did you mean %q?)", name)
				suggested = append(suggested, name)
				break
			}
		}
		msg := fmt.Sprintf("unknown field %q%s", k, hint)
		if where != "" {
			msg = where + ": " + msg
		}
		errs = append(errs, errors.New(msg))
	}
	return errs, suggested
}

// editDistance is the Levenshtein distance of two short strings, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func jsonNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	for name := range fieldsOf(t) {
		names[name] = true
	}
	return names
}

// idHint names the tenant of an entry, when its id can be read at all.
func idHint(r json.RawMessage) string {
	var t struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(r, &t) == nil {
		if id, ok := t.ID.(string); ok && id != "" {
			return fmt.Sprintf(" (%q)", id)
		}
	}
	return ""
}

// WithDefaults returns t with every unset field at its documented default.
func (t Tenant) WithDefaults() Tenant {
	if t.Prefix == "" && t.ID != "" {
		t.Prefix = "inbox/" + t.ID + "/"
	}
	t.Format = cmpOr(t.Format, pipeline.FormatCSV)
	t.Encoding = cmpOr(t.Encoding, pipeline.EncodingUTF8)
	if t.Format == pipeline.FormatCSV {
		t.Delimiter = cmpOr(t.Delimiter, ",")
	}
	if t.ChunkSize == 0 {
		t.ChunkSize = pipeline.DefaultChunkSize
	}
	if t.MaxFieldBytes == 0 {
		t.MaxFieldBytes = pipeline.DefaultMaxFieldBytes
	}
	t.OnFailure = cmpOr(t.OnFailure, pipeline.OnFailureContinue)
	t.IdempotencyKey = cmpOr(t.IdempotencyKey, pipeline.IdempotencyObjectVersion)
	t.OnInvalidRecord = cmpOr(t.OnInvalidRecord, pipeline.OnInvalidFailFile)
	if t.OnInvalidRecord == pipeline.OnInvalidSkipRecord && t.MaxInvalidRecords == 0 {
		t.MaxInvalidRecords = pipeline.DefaultMaxInvalidRecords
	}
	t = t.sinkDefaults()
	if t.RecordOrder == pipeline.RecordOrderKey && t.MaxRecordsInFlight == 0 {
		t.MaxRecordsInFlight = pipeline.DefaultMaxRecordsInFlight
	}
	return t
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Validate reports every problem of every tenant at once. Each message names the tenant, the
// field, the bad value and what would be accepted.
func (f *File) Validate() error { return f.validate(nil, FileNaming) }

// ValidateNamed is Validate with messages that name the pools and fields by n.
func (f *File) ValidateNamed(n Naming) error { return f.validate(nil, n) }

// validate is Validate with the unreadable fields of each tenant, as Parse found them, naming
// fields by n.
func (f *File) validate(unread []unreadable, n Naming) error {
	badPool := map[string]bool{}
	for _, name := range f.PoolNames() {
		badPool[name] = CheckPrefix(f.Pool(name).Prefix, "") != nil
	}
	u := func(i int) unreadable {
		r := unreadable{}
		if i < len(unread) {
			r = unread[i]
		}
		// A prefix made from an invalid pool prefix has the pool's problem, told once for the pool.
		if t := f.Tenants[i]; t.Pooled() && badPool[t.Pool] && t.Prefix == f.Pool(t.Pool).Prefix+t.ID+"/" {
			r.fields = maps.Clone(r.fields)
			if r.fields == nil {
				r.fields = map[string]bool{}
			}
			r.fields["prefix"] = true
		}
		return r
	}
	var errs []error
	seen := map[string]int{}
	for i, t := range f.Tenants {
		// An empty or unreadable id has its own message; it is no one's duplicate.
		if j, dup := seen[t.ID]; dup && t.ID != "" && !u(i).skips("id") {
			errs = append(errs, fmt.Errorf("tenant %q: id: duplicate of tenants[%d]; ids must be unique", t.ID, j))
		} else if !dup {
			seen[t.ID] = i
		}
		errs = append(errs, t.check(u(i), n.Field))
	}
	errs = append(errs, overlappingPrefixes(f.Tenants, n.Field)...)
	errs = append(errs, f.validateTiers(u, n)...)
	errs = append(errs, f.validateCoreSystems(u)...)
	return errors.Join(errs...)
}

// Validate checks one tenant on its own, fields already defaulted.
func (t Tenant) Validate() error { return t.check(unreadable{}, FileNaming.Field) }

// ValidateNamed is Validate with messages that name the tenant's fields by field (given the JSON
// path): a construct names its own props.
func (t Tenant) ValidateNamed(field func(jsonPath string) string) error {
	return t.check(unreadable{}, field)
}

// check is Validate without the checks of the fields u could not read.
func (t Tenant) check(u unreadable, name func(field string) string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		if !u.skips(field) {
			errs = append(errs, fmt.Errorf("%s: %s: %s", u.name(t), name(field), fmt.Sprintf(format, args...)))
		}
	}
	if !idPattern.MatchString(t.ID) {
		bad("id", "%q is invalid: use 1-32 lower-case letters, digits and hyphens, starting with a letter or digit", t.ID)
	}
	switch {
	case t.Prefix == "" && t.ID == "":
		// The default prefix is made from the id, whose problem is already reported.
	default:
		if err := CheckPrefix(t.Prefix, "inbox/"+t.ID+"/"); err != nil {
			bad("prefix", "%v", err)
			break
		}
		for _, r := range pipeline.ReservedPrefixes {
			if PrefixesOverlap(t.Prefix, r) {
				bad("prefix", "%q overlaps %q, which the pipeline writes to itself; choose a prefix outside it", t.Prefix, r)
			}
		}
	}
	if !slices.Contains([]string{pipeline.FormatCSV, pipeline.FormatJSONL}, t.Format) {
		bad("format", "%q is invalid: use %q or %q", t.Format, pipeline.FormatCSV, pipeline.FormatJSONL)
	}
	if !slices.Contains([]string{pipeline.EncodingUTF8, pipeline.EncodingCP932}, t.Encoding) {
		bad("encoding", "%q is invalid: use %q or %q", t.Encoding, pipeline.EncodingUTF8, pipeline.EncodingCP932)
	}
	if t.Format == pipeline.FormatJSONL && t.Delimiter != "" {
		bad("delimiter", "%q is set, but only CSV files have a delimiter", t.Delimiter)
	}
	if t.Format == pipeline.FormatCSV {
		// One rule with Split and Register: records.CheckDelimiter.
		if err := records.CheckDelimiter(t.Delimiter, t.Encoding); err != nil {
			bad("delimiter", "%v", err)
		}
	}
	if t.ChunkSize < pipeline.MinChunkSize || t.ChunkSize > pipeline.MaxChunkSize {
		bad("chunkSize", "%d is out of range: use %d to %d records, or leave it out for %d", t.ChunkSize, pipeline.MinChunkSize, pipeline.MaxChunkSize, pipeline.DefaultChunkSize)
	}
	if t.MaxFieldBytes < 1 || t.MaxFieldBytes > 1<<20 {
		bad("maxFieldBytes", "%d is out of range: use 1 to 1,048,576 bytes", t.MaxFieldBytes)
	}
	if n := t.SmallFileBytes; n != 0 && n != -1 && (n < 1 || n > pipeline.MaxSmallFileBytes) {
		bad("smallFileBytes", "%d is out of range: use 1 to %d bytes (4 MiB), -1 for no small-file path, or leave it out for the app's bound", n, pipeline.MaxSmallFileBytes)
	}
	if !slices.Contains([]string{pipeline.OnFailureContinue, pipeline.OnFailureHalt}, t.OnFailure) {
		bad("onFailure", "%q is invalid: use %q or %q", t.OnFailure, pipeline.OnFailureContinue, pipeline.OnFailureHalt)
	}
	if !slices.Contains([]string{pipeline.IdempotencyEventID, pipeline.IdempotencyObjectVersion}, t.IdempotencyKey) {
		bad("idempotencyKey", "%q is invalid: use %q or %q", t.IdempotencyKey, pipeline.IdempotencyEventID, pipeline.IdempotencyObjectVersion)
	}
	switch t.OnInvalidRecord {
	case pipeline.OnInvalidFailFile:
		if t.MaxInvalidRecords != 0 {
			bad("maxInvalidRecords", "%d is set, but onInvalidRecord is %q, which fails the file at its first invalid record; set onInvalidRecord to %q or leave maxInvalidRecords out",
				t.MaxInvalidRecords, pipeline.OnInvalidFailFile, pipeline.OnInvalidSkipRecord)
		}
	case pipeline.OnInvalidSkipRecord:
		if t.MaxInvalidRecords < 1 || t.MaxInvalidRecords > pipeline.MaxMaxInvalidRecords {
			bad("maxInvalidRecords", "%d is out of range: use 1 to %d records, or leave it out for %d", t.MaxInvalidRecords, pipeline.MaxMaxInvalidRecords, pipeline.DefaultMaxInvalidRecords)
		}
	default:
		bad("onInvalidRecord", "%q is invalid: use %q or %q", t.OnInvalidRecord, pipeline.OnInvalidFailFile, pipeline.OnInvalidSkipRecord)
	}
	if t.RegisterURL != "" && !validURL(t.RegisterURL) {
		bad("registerUrl", "%q is invalid: use an absolute http(s) URL", t.RegisterURL)
	}
	if t.Stack != "" && !StackPattern.MatchString(t.Stack) {
		bad("stack", "%q is invalid: use 1-32 letters, digits and hyphens, starting with a letter or digit", t.Stack)
	}
	if t.RegisterAuthSecretARN != "" && !strings.HasPrefix(t.RegisterAuthSecretARN, "arn:") {
		bad("registerAuthSecretArn", "%q is invalid: use the secret's full ARN", t.RegisterAuthSecretARN)
	}
	for _, problem := range pipeline.CheckRejectStatuses(t.RejectStatuses, t.OnInvalidRecord) {
		bad("rejectStatuses", "%s", problem)
	}
	t.validateSink(bad)
	t.checkAdmission(bad)
	t.checkKeyOrder(bad, name)
	return errors.Join(errs...)
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// overlappingPrefixes reports every two tenants whose prefixes overlap, the later one told.
func overlappingPrefixes(ts []Tenant, name func(field string) string) []error {
	prefixes := make([]string, len(ts))
	for i, t := range ts {
		prefixes[i] = t.Prefix
	}
	var errs []error
	for _, p := range overlaps(prefixes) {
		a, b := ts[p.i], ts[p.j]
		// Two entries of one id are reported as a duplicate, not as overlapping themselves.
		if a.ID != b.ID {
			errs = append(errs, fmt.Errorf("tenant %q: %s: %q overlaps tenant %q's prefix %q, so one file would reach two tenants; make them disjoint",
				b.ID, name("prefix"), b.Prefix, a.ID, a.Prefix))
		}
	}
	return errs
}

// Settings is the part of the configuration that travels with every execution. Its CoreSystem is
// left nil: the core system's settings and table are the construct's (File.CoreSystemSettings).
func (t Tenant) Settings() pipeline.Tenant {
	return pipeline.Tenant{
		ID:                    t.ID,
		Format:                t.Format,
		Encoding:              t.Encoding,
		Delimiter:             t.Delimiter,
		ChunkSize:             t.ChunkSize,
		MaxFieldBytes:         t.MaxFieldBytes,
		RegisterURL:           t.RegisterURL,
		RegisterAuthSecretARN: t.RegisterAuthSecretARN,
		RegisterMode:          t.RegisterMode,
		MaxBatchBytes:         t.MaxBatchBytes,
		DynamoDB:              t.DynamoDB.settings(),
		Weight:                t.Weight,
		MaxRecordsPerSecond:   t.MaxRecordsPerSecond,
		OnInvalidRecord:       t.OnInvalidRecord,
		MaxInvalidRecords:     t.MaxInvalidRecords,
		RejectStatuses:        rejectStatuses(t.RejectStatuses),
		RecordOrder:           t.RecordOrder,
		KeyColumns:            keyColumns(t.KeyColumns),
		MaxRecordsInFlight:    t.MaxRecordsInFlight,
		SmallFileBytes:        t.SmallFileBytes,
	}
}

// rejectStatuses is the set of a validated tenant's rejectStatuses; a status outside the set's
// range, which validation refuses, is left out.
func rejectStatuses(statuses []int) pipeline.StatusSet {
	var set pipeline.StatusSet
	for _, s := range statuses {
		if one, err := pipeline.NewStatusSet(s); err == nil {
			set[0] |= one[0]
			set[1] |= one[1]
		}
	}
	return set
}
