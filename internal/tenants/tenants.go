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
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/example/tenantpipeline/spec"
)

// File is the tenants configuration file.
type File struct {
	// Pools configures the pools of the pooled tier by name; a pool that pooled tenants name but
	// that is not listed here takes every default (PoolConfig).
	Pools map[string]*PoolConfig `json:"pools,omitempty"`
	// CoreSystems configures by name the core systems tenants register into, each protected by
	// admission (CoreSystemConfig). A tenant names its own with "coreSystem".
	CoreSystems map[string]*CoreSystemConfig `json:"coreSystems,omitempty"`
	Tenants     []spec.Tenant                `json:"tenants"`
	// Encryption names the customer-managed KMS key of everything the app stores (encryption.go).
	// Default: AWS-owned and AWS-managed keys.
	Encryption *Encryption `json:"encryption,omitempty"`

	// coreUnread holds the core systems ("<name>") and their fields ("<name>.<field>") that Parse
	// could not read: their checks are skipped, their problem already reported.
	coreUnread map[string]bool
}

// idPattern is the rule of ids and of pool and core system names (spec.IDPattern).
var idPattern = spec.IDPattern

// StackPattern is what a stack field may hold (spec.StackPattern).
var StackPattern = spec.StackPattern

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
	if o.RegisterURL != "" && !spec.ValidURL(o.RegisterURL) {
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
		var t spec.Tenant
		u := unreadable{fields: map[string]bool{}, entry: i}
		errs = append(errs, decodeFields(where, "", fields, reflect.ValueOf(&t).Elem(), u.fields)...)
		if u.fields["id"] {
			// Messages name the entry instead, and the default prefix, made from the id, is unknown.
			u.label = fmt.Sprintf("tenants[%d]", i)
			if _, ok := fields["prefix"]; !ok {
				u.fields["prefix"] = true
			}
		}
		// Reading alone cannot tell an explicit 0 from an absent field, the default.
		for _, p := range t.ExplicitZeros(func(path string) bool { _, set := fields[path]; return set && !u.skips(path) }) {
			errs = append(errs, fileProblem(i, u.id(t), p))
			u.fields[p.Path] = true
		}
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
			errs = append(errs, fileProblem(unread[i].entry, unread[i].id(t), spec.Problemf("registerUrl",
				`missing: set the core system's endpoint, e.g. "registerUrl": "https://core.example.com/records" (or give every tenant one with -c registerUrl=URL)`)))
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
	// entry is the tenant's index in the file's "tenants", which an entry that is not an object
	// makes differ from its index in File.Tenants.
	entry int
}

// skips reports whether the checks of field are skipped: it, or the object holding it, is unknown.
func (u unreadable) skips(field string) bool {
	outer, _, _ := strings.Cut(field, ".")
	return u.fields[field] || u.fields[outer]
}

// id is t's id as messages name the tenant: none when it could not be read.
func (u unreadable) id(t spec.Tenant) string {
	if u.label != "" {
		return ""
	}
	return t.ID
}

// fileProblem renders p, a problem of the file's tenant i whose id is id ("" when unknown).
func fileProblem(i int, id string, p spec.Problem) error {
	return errors.New(p.Render(FileNaming.Tenant(i), id))
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
		if field.Kind() == reflect.Slice && field.Type().Elem().Kind() == reflect.Struct {
			// A list of objects: each element field by field, so a misspelt field is named too.
			var elems []map[string]json.RawMessage
			if err := json.Unmarshal(raw, &elems); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %s", where, path+name, typeProblem(err)))
				u[path+name] = true
				continue
			}
			list := reflect.MakeSlice(field.Type(), len(elems), len(elems))
			for i, sub := range elems {
				errs = append(errs, decodeFields(where, fmt.Sprintf("%s%s[%d].", path, name, i), sub, list.Index(i), u)...)
			}
			field.Set(list)
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
		r := unreadable{entry: i}
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
	// report renders p, a problem of tenant i, unless its field could not be read.
	report := func(i int, p spec.Problem) {
		if !u(i).skips(p.Path) {
			errs = append(errs, errors.New(p.Render(n.Tenant(u(i).entry), u(i).id(f.Tenants[i]))))
		}
	}
	seen := map[string]int{}
	for i, t := range f.Tenants {
		// An empty or unreadable id has its own message; it is no one's duplicate.
		if j, dup := seen[t.ID]; dup && t.ID != "" {
			report(i, spec.Problemf("id", "duplicate of tenants[%d]; ids must be unique", j))
		} else if !dup {
			seen[t.ID] = i
		}
		for _, p := range t.Check() {
			report(i, p)
		}
	}
	f.overlappingPrefixes(report)
	errs = append(errs, f.validateTiers(report, n)...)
	errs = append(errs, f.validateCoreSystems(report)...)
	return errors.Join(errs...)
}

// overlappingPrefixes reports every two tenants whose prefixes overlap, the later one told.
func (f *File) overlappingPrefixes(report func(i int, p spec.Problem)) {
	ts := f.Tenants
	prefixes := make([]string, len(ts))
	for i, t := range ts {
		prefixes[i] = t.Prefix
	}
	for _, p := range overlaps(prefixes) {
		a, b := ts[p.i], ts[p.j]
		// Two entries of one id are reported as a duplicate, not as overlapping themselves.
		if a.ID != b.ID {
			report(p.j, spec.Problemf("prefix", "%q overlaps tenant %q's prefix %q, so one file would reach two tenants; make them disjoint",
				b.Prefix, a.ID, a.Prefix))
		}
	}
}
