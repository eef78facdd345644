package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/tenants"
)

// Command flags of validate (its --out is flagOut, shared with results). flagTenants is "" when
// --tenants is not given: the settings are then looked for in defaultTenantsFile, then deployed.
var flagTenants string

// defaultTenantsFile is the app's tenants file, in the working directory.
const defaultTenantsFile = "tenants.json"

func validateFlags(fs *flag.FlagSet) func() error {
	fs.StringVar(&flagOut, "out", "", "write each file's rejected records under this directory")
	fs.StringVar(&flagTenants, "tenants", "", "read the settings from this tenants file only, without AWS")
	return func() error { return nil }
}

// maxShown is how many rejected records validate prints a file.
const maxShown = 10

// fileVerdict is validate's report of one file.
type fileVerdict struct {
	File     string              `json:"file"`
	Records  int64               `json:"records"`
	Valid    int64               `json:"valid"`
	Rejected int64               `json:"rejected"`
	Accepted bool                `json:"accepted"`
	Verdict  string              `json:"verdict"`
	First    []results.Rejection `json:"firstRejected"`
	Output   string              `json:"output,omitempty"`
	// Keys are a keyed tenant's (recordOrder "key") accepted file's keys; nil otherwise.
	Keys *keyStats `json:"keys,omitempty"`
}

// errNotAccepted is exit status 1 after the report is printed.
var errNotAccepted = errors.New("a file would not be accepted")

func runValidate(ctx context.Context, e *env, args []string) (any, error) {
	t, err := validateSettings(ctx, e, args[0])
	if err != nil {
		return nil, err
	}
	files := args[1:]
	var out []fileVerdict
	accepted := true
	for _, name := range files {
		v, err := validateFile(t, name, flagOut, len(files) == 1)
		if err != nil {
			return nil, err
		}
		accepted = accepted && v.Accepted
		out = append(out, v)
	}
	e.human = func(any) string { return validateText(out) }
	if !accepted {
		return out, errNotAccepted
	}
	return out, nil
}

// validateSettings finds the tenant's settings. With --tenants, in that file only, with no AWS
// access. Without it, in ./tenants.json when it names the tenant, else the deployed tenant's
// (ops.TenantSettings), found as the other commands find it; a note on stderr then says where
// they came from.
func validateSettings(ctx context.Context, e *env, id string) (pipeline.Tenant, error) {
	if flagTenants != "" {
		s, ok, err := settingsInFile(flagTenants, id)
		if err == nil && !ok {
			err = fmt.Errorf("tenant %q is not in %s", id, flagTenants)
		}
		return s, err
	}
	s, ok, err := settingsInFile(defaultTenantsFile, id)
	why := "./" + defaultTenantsFile + " does not name it"
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why = "no ./" + defaultTenantsFile
	case err != nil:
		return s, fmt.Errorf("%w (fix it, or name another tenants file with --tenants FILE)", err)
	case ok:
		fmt.Fprintf(e.errOut, "validate: settings of tenant %q from ./%s\n", id, defaultTenantsFile)
		return s, nil
	}
	fail := func(err error) (pipeline.Tenant, error) {
		return pipeline.Tenant{}, fmt.Errorf("read the deployed settings of tenant %q (%s; --tenants FILE reads a tenants file instead, without AWS): %w", id, why, err)
	}
	o, err := e.ops(ctx)
	if err != nil {
		return fail(err)
	}
	if s, err = o.TenantSettings(ctx, id); err != nil {
		return fail(err)
	}
	// Found, so cached: no more calls.
	d, err := o.Tenant(ctx, id)
	if err != nil {
		return fail(err)
	}
	where := "silo, the " + pipeline.EnvTenant + " variable of function " + d.ControllerFunction
	if d.Pool != "" {
		where = "pool " + d.Pool + ", its " + pipeline.PoolSettingsFile + " in the code of function " + d.ControllerFunction
	}
	fmt.Fprintf(e.errOut, "validate: settings of tenant %q as deployed (%s)\n", id, where)
	return s, nil
}

// settingsInFile reads the tenant's settings from a tenants file; ok is false when it names no
// such tenant.
func settingsInFile(path, id string) (s pipeline.Tenant, ok bool, err error) {
	f, err := tenants.Load(path, tenants.Options{RegisterURL: "https://pipectl-validate.invalid/"})
	if err != nil {
		return s, false, err
	}
	for _, ft := range f.Tenants {
		if ft.ID == id {
			return ft.Settings(), true, nil
		}
	}
	return s, false, nil
}

// validateFile reads one file as Split would: records.Scan under the tenant's format, encoding
// and policy gives the verdict. The rejected records listed are every invalid record of the file
// (a second pass in skip mode when the policy stopped early: failFile stops at the first, and
// skipRecord keeps only maxInvalidRecords+1).
func validateFile(t pipeline.Tenant, name, outDir string, single bool) (fileVerdict, error) {
	v := fileVerdict{File: name}
	f, err := records.FormatOf(t)
	if err != nil {
		return v, fmt.Errorf("tenant %q: %w", t.ID, err)
	}
	cut := records.Cut{Records: t.ChunkSize}
	if t.BatchMode() {
		cut.Bytes = int64(t.BatchBytes())
	}
	var bounds []pipeline.Boundary
	scan := func(p records.Policy) (records.Summary, []records.Invalid, error) {
		r, err := os.Open(name)
		if err != nil {
			return records.Summary{}, nil, err
		}
		defer r.Close()
		bounds = bounds[:0]
		return records.Scan(r, f, cut, p, func(b pipeline.Boundary) error {
			bounds = append(bounds, b)
			return nil
		})
	}
	sum, invalid, err := scan(records.PolicyOf(t))
	var fe *records.Error
	var tooMany *records.TooManyInvalidError
	switch {
	case err == nil:
		v.Accepted = true
		v.Verdict = "accepted"
		if t.SkipsInvalid() && sum.Invalid > 0 {
			v.Verdict = fmt.Sprintf("accepted: %d rejected (skipRecord, at most %d)", sum.Invalid, t.InvalidLimit())
		}
		if t.KeyedOrder() {
			if v.Keys, err = fileKeys(t, f, name, sum.Header, bounds[:sum.Chunks+1]); err != nil {
				return v, err
			}
		}
	case errors.As(err, &fe) || errors.As(err, &tooMany):
		v.Verdict = "rejected: " + err.Error()
		// List every invalid record: scan again in skip mode, without a limit. When that fails
		// too, the file fails as a whole (a bad header, a record past its bound): no record was
		// counted, and the verdict alone names the line.
		sum, invalid = records.Summary{}, nil
		if s, all, err2 := scan(records.Policy{Skip: true, Max: pipeline.MaxMaxInvalidRecords * 100}); err2 == nil {
			sum, invalid = s, all
		}
	default:
		return v, fmt.Errorf("%s: %w", name, err)
	}
	v.Records, v.Rejected = sum.Records, int64(len(invalid))
	v.Valid = v.Records - v.Rejected
	for i, iv := range invalid {
		if i == maxShown {
			break
		}
		v.First = append(v.First, results.Rejection{Line: iv.Line, Record: iv.Record, Error: iv.Reason, Raw: iv.Raw})
	}
	if outDir != "" {
		out, err := writeRejected(t, f, sum, invalid, name, outDir, single)
		if err != nil {
			return v, err
		}
		v.Output = out
	}
	return v, nil
}

// writeRejected writes the rejected files as results/ would hold them (results.RejectedFiles),
// each as DIR/<file base name>.<name> (rejected.csv, and rejected.jsonl for the rows that are not
// valid CSV; rejected.jsonl for JSON Lines); with a single FILE also as DIR/<name>. A file with
// no rejection writes none. It returns the paths written, joined by ", ".
func writeRejected(t pipeline.Tenant, f records.Format, sum records.Summary, invalid []records.Invalid, name, dir string, single bool) (string, error) {
	rs := make([]results.Rejection, len(invalid))
	for i, iv := range invalid {
		rs[i] = results.Rejection{Line: iv.Line, Record: iv.Record, Error: iv.Reason, Raw: iv.Raw}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var written []string
	for _, file := range results.RejectedFiles(t.Format, rs, sum.RawHeader, f.Delimiter, t.Encoding) {
		out := filepath.Join(dir, filepath.Base(name)+"."+file.Name)
		if err := os.WriteFile(out, file.Body, 0o644); err != nil {
			return "", err
		}
		if single {
			if err := os.WriteFile(filepath.Join(dir, file.Name), file.Body, 0o644); err != nil {
				return "", err
			}
		}
		written = append(written, out)
	}
	return strings.Join(written, ", "), nil
}

func validateText(vs []fileVerdict) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%s: %d records, %d valid, %d rejected: %s\n", v.File, v.Records, v.Valid, v.Rejected, v.Verdict)
		for _, r := range v.First {
			if r.Record > 0 {
				fmt.Fprintf(&b, "  line %d, record %d: %s\n", r.Line, r.Record, r.Error)
			} else {
				fmt.Fprintf(&b, "  line %d: %s\n", r.Line, r.Error)
			}
		}
		if more := v.Rejected - int64(len(v.First)); more > 0 {
			fmt.Fprintf(&b, "  … and %d more\n", more)
		}
		if v.Output != "" {
			fmt.Fprintf(&b, "  rejected records: %s\n", v.Output)
		}
		if v.Keys != nil {
			fmt.Fprintf(&b, "  %s\n", v.Keys)
		}
	}
	return b.String()
}
