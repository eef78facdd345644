package records

import (
	"fmt"
	"io"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Policy is a tenant's rule for invalid records.
type Policy struct {
	// Skip rejects invalid records one by one (skipRecord); false fails the file at the first
	// (failFile).
	Skip bool
	// Max is how many invalid records a file may have under Skip; more fail it.
	Max int
}

// PolicyOf is the tenant's onInvalidRecord and maxInvalidRecords, defaulted.
func PolicyOf(t pipeline.Tenant) Policy {
	return Policy{Skip: t.SkipsInvalid(), Max: t.InvalidLimit()}
}

// TooManyInvalidError is a skipRecord file with more invalid records than its maxInvalidRecords.
type TooManyInvalidError struct {
	Invalid int64 // the invalid records of the whole file
	Max     int
	First   Invalid
}

func (e *TooManyInvalidError) Error() string {
	return fmt.Sprintf("%d invalid records, more than maxInvalidRecords %d; first at line %d: %s", e.Invalid, e.Max, e.First.Line, e.First.Reason)
}

// Scan is Split's validation pass under a policy: SplitCut, and under Skip SplitCutSkip, which
// returns the invalid records in record order. The whole file is read before Scan returns, so a
// caller writes nothing before it knows the verdict. A Skip file with more than p.Max invalid
// records fails with *TooManyInvalidError once the whole file is read (it counts them all); only
// the first p.Max+1 are held in memory.
func Scan(r io.Reader, f Format, cut Cut, p Policy, boundary func(pipeline.Boundary) error) (Summary, []Invalid, error) {
	if !p.Skip {
		sum, err := SplitCut(r, f, cut, boundary)
		return sum, nil, err
	}
	var invalid []Invalid
	sum, err := SplitCutSkip(r, f, cut, boundary, func(v Invalid) error {
		if len(invalid) <= p.Max {
			invalid = append(invalid, v)
		}
		return nil
	})
	if err != nil {
		return Summary{}, nil, err
	}
	if sum.Invalid > int64(p.Max) {
		return sum, invalid, &TooManyInvalidError{Invalid: sum.Invalid, Max: p.Max, First: invalid[0]}
	}
	return sum, invalid, nil
}
