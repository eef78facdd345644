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
	"unicode/utf8"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
)

// File is the tenants configuration file.
type File struct {
	Tenants []Tenant `json:"tenants"`
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
	// ChunkSize is the number of records one Register task sends. Default: 100.
	ChunkSize int `json:"chunkSize,omitempty"`
	// MaxFieldBytes bounds one CSV field or JSON line. Default: 65,536.
	MaxFieldBytes int `json:"maxFieldBytes,omitempty"`
	// OnFailure is "continue" or "halt". Default: "continue".
	OnFailure string `json:"onFailure,omitempty"`
	// IdempotencyKey is "event-id" or "object-version". Default: "event-id".
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// RegisterURL is the core system's endpoint for the bundled HTTP register adapter.
	RegisterURL string `json:"registerUrl,omitempty"`
	// RegisterAuthSecretARN is a Secrets Manager secret sent as the Authorization header.
	// Default: no Authorization header.
	RegisterAuthSecretARN string `json:"registerAuthSecretArn,omitempty"`
}

// idPattern keeps ids safe everywhere they appear: CloudFormation logical ids and generated names
// (queue names are at most 80 characters including ".fifo", rule names 64), the FIFO message group
// id, S3 prefixes, metric dimensions.
var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// Load reads, defaults and validates a tenants file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenants file: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("tenants file %s: %w", path, err)
	}
	return f, nil
}

// Parse decodes a tenants file strictly (unknown fields are errors), fills in defaults and validates.
func Parse(b []byte) (*File, error) {
	var raw struct {
		Tenants []json.RawMessage `json:"tenants"`
	}
	if err := strictDecode(b, &raw); err != nil {
		return nil, err
	}
	if len(raw.Tenants) == 0 {
		return nil, errors.New(`"tenants" is empty: add at least one tenant, e.g. {"tenants": [{"id": "acme"}]}`)
	}
	f := &File{}
	var errs []error
	for i, r := range raw.Tenants {
		var t Tenant
		if err := strictDecode(r, &t); err != nil {
			errs = append(errs, fmt.Errorf("tenants[%d]%s: %w", i, idHint(r), err))
			continue
		}
		f.Tenants = append(f.Tenants, t.WithDefaults())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// strictDecode rejects unknown fields. encoding/json matches names case-insensitively, so a key
// is first checked for an exact match too: "chunksize" is a typo, not chunkSize.
func strictDecode(b []byte, v any) error {
	var keys map[string]json.RawMessage
	if json.Unmarshal(b, &keys) == nil {
		known := jsonNames(reflect.TypeOf(v).Elem())
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if !known[k] {
				return fmt.Errorf("json: unknown field %q", k)
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func jsonNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names[name] = true
	}
	return names
}

// idHint names the tenant of an entry that did not decode, when its id can be read at all.
func idHint(r json.RawMessage) string {
	var t struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(r, &t) == nil && t.ID != "" {
		return fmt.Sprintf(" (%q)", t.ID)
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
	t.IdempotencyKey = cmpOr(t.IdempotencyKey, pipeline.IdempotencyEventID)
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
func (f *File) Validate() error {
	var errs []error
	seen := map[string]int{}
	for i, t := range f.Tenants {
		if j, dup := seen[t.ID]; dup {
			errs = append(errs, fmt.Errorf("tenant %q: id: duplicate of tenants[%d]; ids must be unique", t.ID, j))
		}
		seen[t.ID] = i
		errs = append(errs, t.Validate())
	}
	errs = append(errs, overlappingPrefixes(f.Tenants)...)
	return errors.Join(errs...)
}

// Validate checks one tenant on its own, fields already defaulted.
func (t Tenant) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("tenant %q: %s: %s", t.ID, field, fmt.Sprintf(format, args...)))
	}
	if !idPattern.MatchString(t.ID) {
		bad("id", "%q is invalid: use 1-32 lower-case letters, digits and hyphens, starting with a letter or digit", t.ID)
	}
	switch {
	case t.Prefix == "" || strings.HasPrefix(t.Prefix, "/") || !strings.HasSuffix(t.Prefix, "/"):
		bad("prefix", "%q is invalid: a prefix is a non-empty key prefix ending in \"/\" without a leading \"/\", e.g. \"inbox/%s/\"", t.Prefix, t.ID)
	case !utf8.ValidString(t.Prefix) || len(t.Prefix) > 512:
		bad("prefix", "%q is invalid: must be valid UTF-8 of at most 512 bytes", t.Prefix)
	default:
		for _, r := range pipeline.ReservedPrefixes {
			if overlaps(t.Prefix, r) {
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
		bad("chunkSize", "%d is out of range: use %d to %d records", t.ChunkSize, pipeline.MinChunkSize, pipeline.MaxChunkSize)
	}
	if t.MaxFieldBytes < 1 || t.MaxFieldBytes > 1<<20 {
		bad("maxFieldBytes", "%d is out of range: use 1 to 1,048,576 bytes", t.MaxFieldBytes)
	}
	if !slices.Contains([]string{pipeline.OnFailureContinue, pipeline.OnFailureHalt}, t.OnFailure) {
		bad("onFailure", "%q is invalid: use %q or %q", t.OnFailure, pipeline.OnFailureContinue, pipeline.OnFailureHalt)
	}
	if !slices.Contains([]string{pipeline.IdempotencyEventID, pipeline.IdempotencyObjectVersion}, t.IdempotencyKey) {
		bad("idempotencyKey", "%q is invalid: use %q or %q", t.IdempotencyKey, pipeline.IdempotencyEventID, pipeline.IdempotencyObjectVersion)
	}
	if t.RegisterURL != "" {
		if u, err := url.Parse(t.RegisterURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("registerUrl", "%q is invalid: use an absolute http(s) URL", t.RegisterURL)
		}
	}
	if t.RegisterAuthSecretARN != "" && !strings.HasPrefix(t.RegisterAuthSecretARN, "arn:") {
		bad("registerAuthSecretArn", "%q is invalid: use the secret's full ARN", t.RegisterAuthSecretARN)
	}
	return errors.Join(errs...)
}

func overlaps(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }

func overlappingPrefixes(ts []Tenant) []error {
	var errs []error
	for i := range ts {
		for j := i + 1; j < len(ts); j++ {
			if ts[i].Prefix != "" && ts[j].Prefix != "" && overlaps(ts[i].Prefix, ts[j].Prefix) {
				errs = append(errs, fmt.Errorf("tenant %q: prefix: %q overlaps tenant %q's prefix %q, so one file would reach two tenants; make them disjoint",
					ts[j].ID, ts[j].Prefix, ts[i].ID, ts[i].Prefix))
			}
		}
	}
	return errs
}

// Settings is the part of the configuration that travels with every execution.
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
	}
}
