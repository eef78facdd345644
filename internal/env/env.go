// Package env reads a Lambda's environment once, at start-up: every bad variable is collected and
// reported together, each naming its variable, so one deployment shows every mistake at once. It
// also holds the checks the roles share (URLs, DynamoDB table names, key prefixes) and the pool's
// settings variables, which a pool's controller and its router both read.
package env

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
)

// Reader collects every problem of an environment, each naming its variable.
type Reader struct {
	getenv func(string) string
	errs   []error
}

// NewReader reads variables with getenv (os.Getenv, or a map in tests).
func NewReader(getenv func(string) string) *Reader { return &Reader{getenv: getenv} }

// Getenv is the raw value of the variable name.
func (e *Reader) Getenv(name string) string { return e.getenv(name) }

// Bad records a problem of the variable name.
func (e *Reader) Bad(name, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

// Err joins every problem recorded so far; nil when there is none.
func (e *Reader) Err() error { return errors.Join(e.errs...) }

// Required is the trimmed value of name; empty, it is a problem.
func (e *Reader) Required(name string) string {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		e.Bad(name, "is required")
	}
	return v
}

// Optional is the trimmed value of name, or def when it is empty.
func (e *Reader) Optional(name, def string) string {
	if v := strings.TrimSpace(e.getenv(name)); v != "" {
		return v
	}
	return def
}

// Number reads a whole number from lo to hi; 0 when v is empty or invalid (reported).
func (e *Reader) Number(name, v string, lo, hi int) int {
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.Bad(name, "%q is not a whole number", v)
		return 0
	}
	if n < lo || n > hi {
		e.Bad(name, "%d is out of range, want %d to %d", n, lo, hi)
		return 0
	}
	return n
}

// Duration reads a whole number of units from lo to hi; 0 when v is empty or invalid (reported).
func (e *Reader) Duration(name string, v string, unit time.Duration, lo, hi time.Duration) time.Duration {
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		e.Bad(name, "%q is not a whole number", v)
		return 0
	}
	if n < int64(lo/unit) || n > int64(hi/unit) {
		e.Bad(name, "%s is out of range, want %d to %d", v, lo/unit, hi/unit)
		return 0
	}
	return time.Duration(n) * unit
}

// Boolean reads an optional "true" or "false", default false.
func (e *Reader) Boolean(name string) bool {
	switch v := e.Optional(name, "false"); v {
	case "true":
		return true
	case "false":
	default:
		e.Bad(name, "%q, want \"true\" or \"false\"", v)
	}
	return false
}

// Pool reads POOL, POOL_PREFIX and the POOL_SETTINGS file's header and index, and checks that they
// agree. settings is nil if the file could not be opened.
func (e *Reader) Pool() (string, *poolsettings.Index) {
	pool := e.Required(pipeline.EnvPool)
	prefix := e.Required(pipeline.EnvPoolPrefix)
	if prefix != "" {
		CheckPrefix(pipeline.EnvPoolPrefix, prefix, e.Bad)
	}
	path := pipeline.PoolSettingsPath(e.getenv)
	settings, err := poolsettings.Open(path)
	if err != nil {
		e.Bad(pipeline.EnvPoolSettings, "%s: %v", path, err)
		return pool, nil
	}
	if pool != "" && settings.Pool != pool {
		e.Bad(pipeline.EnvPool, "%q, but %s %s is the settings of pool %q", pool, pipeline.EnvPoolSettings, path, settings.Pool)
	}
	if prefix != "" && settings.Prefix != prefix {
		e.Bad(pipeline.EnvPoolPrefix, "%q, but %s %s gives the prefix %q", prefix, pipeline.EnvPoolSettings, path, settings.Prefix)
	}
	return pool, settings
}

// KeysPool reads EnvKeysPool, the pool the keys of pool's tenants carry (pipeline.Owner): pool
// itself, or unset for the KeysPerTenant layout. Any other value is refused: a function must never
// read or write another pool's keys.
func (e *Reader) KeysPool(pool string) string {
	v := e.Optional(pipeline.EnvKeysPool, "")
	if v != "" && v != pool {
		e.Bad(pipeline.EnvKeysPool, "%q, but the function serves pool %q: set it to the pool's name, or leave it unset for the %q layout", v, pool, pipeline.KeysPerTenant)
	}
	return v
}

// CheckURL checks an absolute URL (a queue URL).
func CheckURL(name, v string, bad func(name, format string, args ...any)) {
	if u, err := url.Parse(v); err != nil || u.Scheme == "" || u.Host == "" {
		bad(name, "%q is not an absolute URL", v)
	}
}

// CheckTableName checks a DynamoDB table name: 3 to 255 of letters, digits, '_', '-' and '.'.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html
func CheckTableName(name, table string, bad func(name, format string, args ...any)) {
	ok := len(table) >= 3 && len(table) <= 255
	for _, r := range table {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	}
	if !ok {
		bad(name, "table %q is not a DynamoDB table name (3 to 255 letters, digits, '_', '-' or '.')", table)
	}
}

// CheckPrefix checks a key prefix: a folder outside the pipeline's reserved prefixes.
func CheckPrefix(name, prefix string, bad func(name, format string, args ...any)) {
	if !strings.HasSuffix(prefix, "/") {
		bad(name, "%q must end with '/'", prefix)
	}
	for _, r := range pipeline.ReservedPrefixes {
		if strings.HasPrefix(prefix, r) || strings.HasPrefix(r, prefix) {
			bad(name, "%q overlaps the reserved prefix %q", prefix, r)
		}
	}
}
