package tenants

import (
	"fmt"
)

// Key order: a core system's "maxRequestsInFlight" (a tenant's own key order fields are the
// spec's).

// MaxRequestsInFlight bounds a core system's maxRequestsInFlight. It is a guard against a typo,
// not a limit of AWS: 10,000 requests in flight at 10 ms each is a million records a second,
// beyond what an ERP's record API is built to take. A core system with more running files than
// that is refused by maxRunningFiles' own bound (1,000) first.
const MaxRequestsInFlight = 10_000

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
