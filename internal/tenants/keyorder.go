package tenants

import (
	"fmt"
	"slices"
	"strings"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Key order: a tenant's "recordOrder", "keyColumns" and "maxRecordsInFlight", and a core system's
// "maxRequestsInFlight". Their validation and the settings they put into each tenant's executions
// live here.

// MaxRequestsInFlight bounds a core system's maxRequestsInFlight. It is a guard against a typo,
// not a limit of AWS: 10,000 requests in flight at 10 ms each is a million records a second,
// beyond what an ERP's record API is built to take. A core system with more running files than
// that is refused by maxRunningFiles' own bound (1,000) first.
const MaxRequestsInFlight = 10_000

// checkKeyOrder checks a tenant's key order fields. name names a field in messages, as the
// caller spells it (the tenants file's JSON names, or a construct's props), and every other field
// a message mentions is named by it too.
func (t Tenant) checkKeyOrder(bad func(field, format string, args ...any), name func(string) string) {
	switch t.RecordOrder {
	case "", pipeline.RecordOrderFile:
		if len(t.KeyColumns) > 0 {
			bad("keyColumns", "%q is set, but %s is %q: only %s %q reads a record's key; set %s to %q, or leave %s out",
				t.KeyColumns, name("recordOrder"), cmpOr(t.RecordOrder, pipeline.RecordOrderFile), name("recordOrder"), pipeline.RecordOrderKey,
				name("recordOrder"), pipeline.RecordOrderKey, name("keyColumns"))
		}
		if t.MaxRecordsInFlight != 0 {
			bad("maxRecordsInFlight", "%d is set, but %s is %q, which sends one record at a time; set %s to %q, or leave %s out",
				t.MaxRecordsInFlight, name("recordOrder"), cmpOr(t.RecordOrder, pipeline.RecordOrderFile), name("recordOrder"), pipeline.RecordOrderKey,
				name("maxRecordsInFlight"))
		}
		return
	case pipeline.RecordOrderKey:
	default:
		bad("recordOrder", "%q is invalid: use %q (one record at a time, in file order: the default) or %q (a key's records in file order, several keys at once, with %s)",
			t.RecordOrder, pipeline.RecordOrderFile, pipeline.RecordOrderKey, name("keyColumns"))
		return
	}
	if t.RegisterMode == pipeline.RegisterModeBatch {
		bad("recordOrder", "%q is set with %s %q: batch mode sends a chunk's records in one request, in file order, so it has no key order; use %s %q, or leave %s out",
			t.RecordOrder, name("registerMode"), t.RegisterMode, name("registerMode"), pipeline.RegisterModeRecord, name("recordOrder"))
	}
	if t.DynamoDB != nil {
		bad("recordOrder", "%q is set with %s: the DynamoDB sink orders its writes by its own key; remove %s or %s",
			t.RecordOrder, name("dynamodb"), name("recordOrder"), name("dynamodb"))
	}
	if len(t.KeyColumns) == 0 {
		bad("keyColumns", "is missing: %s %q needs the columns whose values make a record's key (CSV header names, or JSON Lines fields), e.g. [\"customerId\"]",
			name("recordOrder"), pipeline.RecordOrderKey)
	}
	for i, c := range t.KeyColumns {
		switch {
		case strings.TrimSpace(c) == "":
			bad("keyColumns", "column %d is empty: name a CSV header column or a JSON Lines field", i+1)
		case strings.ContainsRune(c, 0):
			bad("keyColumns", "column %d holds a NUL character, which no header name has", i+1)
		case slices.Index(t.KeyColumns, c) < i:
			bad("keyColumns", "%q appears twice: list each column once", c)
		}
	}
	if n := t.MaxRecordsInFlight; n < pipeline.MinMaxRecordsInFlight || n > pipeline.MaxMaxRecordsInFlight {
		bad("maxRecordsInFlight", "%d is out of range: use %d to %d requests in flight per file, or leave it out for %d",
			n, pipeline.MinMaxRecordsInFlight, pipeline.MaxMaxRecordsInFlight, pipeline.DefaultMaxRecordsInFlight)
	}
}

// checkRequestsInFlight is the rule of a core system's maxRequestsInFlight (0: unset, its
// maxRunningFiles). runningFiles is its maxRunningFiles, 0 when that is unknown or invalid (its
// own problem, told apart).
func checkRequestsInFlight(field func(string) string, n, runningFiles int) error {
	switch {
	case n == 0:
		return nil
	case n > MaxRequestsInFlight:
		return fmt.Errorf("%s %d is over %d, a bound against typos (10,000 requests in flight at 10 ms each is a million records a second): use %d to %d, or leave it out for %s",
			field("maxRequestsInFlight"), n, MaxRequestsInFlight, max(runningFiles, 1), MaxRequestsInFlight, field("maxRunningFiles"))
	case runningFiles > 0 && n < runningFiles:
		return fmt.Errorf("%s %d is below %s %d: each running file sends at least one request, so %d running files could not keep within %d; raise it to at least %d, or leave it out for %d (one request per running file)",
			field("maxRequestsInFlight"), n, field("maxRunningFiles"), runningFiles, runningFiles, n, runningFiles, runningFiles)
	case n < 1:
		return fmt.Errorf("%s %d must be at least %s, or left out for %s", field("maxRequestsInFlight"), n, field("maxRunningFiles"), field("maxRunningFiles"))
	}
	return nil
}

// keyColumns is a validated tenant's keyColumns as they travel; names holding a NUL, which
// validation refuses, give none.
func keyColumns(names []string) pipeline.Columns {
	c, err := pipeline.NewColumns(names...)
	if err != nil {
		return pipeline.Columns{}
	}
	return c
}
