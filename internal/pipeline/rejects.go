package pipeline

import (
	"encoding/json"
	"fmt"
)

// StatusSet is a set of 4xx HTTP statuses, as a JSON array of numbers in ascending order. It is
// a value (a bit per status), so that Tenant stays comparable: pool settings share one row among
// tenants whose settings are equal (PoolSettings.Encode).
type StatusSet [2]uint64

// NewStatusSet is the set of statuses; one outside 400-499 is an error (CheckRejectStatuses says
// why).
func NewStatusSet(statuses ...int) (StatusSet, error) {
	var s StatusSet
	for _, st := range statuses {
		if st < 400 || st > 499 {
			return StatusSet{}, fmt.Errorf("status %d is not 400-499", st)
		}
		i := st - 400
		s[i/64] |= 1 << (i % 64)
	}
	return s, nil
}

// Has reports whether status is in the set.
func (s StatusSet) Has(status int) bool {
	if status < 400 || status > 499 {
		return false
	}
	i := status - 400
	return s[i/64]&(1<<(i%64)) != 0
}

// Statuses are the set's statuses in ascending order.
func (s StatusSet) Statuses() []int {
	var out []int
	for st := 400; st <= 499; st++ {
		if s.Has(st) {
			out = append(out, st)
		}
	}
	return out
}

func (s StatusSet) MarshalJSON() ([]byte, error) {
	out := s.Statuses()
	if out == nil {
		out = []int{}
	}
	return json.Marshal(out)
}

func (s *StatusSet) UnmarshalJSON(b []byte) error {
	var statuses []int
	if err := json.Unmarshal(b, &statuses); err != nil {
		return err
	}
	set, err := NewStatusSet(statuses...)
	if err != nil {
		return err
	}
	*s = set
	return nil
}

// SkipsRecords reports whether a record that cannot be registered is rejected and the file goes on
// (SkipsInvalid: the same policy, skipRecord).
func (t Tenant) SkipsRecords() bool { return t.SkipsInvalid() }

// CanReject reports whether a record of t's files can be rejected by the core system while the
// file goes on (a status of RejectStatuses, or the DynamoDB sink's refusals, under skipRecord): only
// then does Register keep each record's original bytes and read the core system's answers, and
// Split record each chunk's first line for the rejections' lines (LinesKey).
func (t Tenant) CanReject() bool {
	return t.SkipsRecords() && (t.RejectStatuses != StatusSet{} || t.DynamoDB != nil)
}

// RejectsStatus reports whether the core system's status rejects one record and lets the file go
// on: under OnInvalidSkipRecord, for a status listed in RejectStatuses.
func (t Tenant) RejectsStatus(status int) bool {
	return t.SkipsRecords() && t.RejectStatuses.Has(status)
}

// CheckRejectStatuses checks a tenant's rejectStatuses: each a 4xx that Register does not retry
// (408 and 429 are retried, and a 429 is waited on), no duplicates, and only with onInvalidRecord
// skipRecord. Each problem is one sentence naming the field.
func CheckRejectStatuses(statuses []int, onInvalidRecord string) []string {
	if len(statuses) == 0 {
		return nil
	}
	var bad []string
	if onInvalidRecord != OnInvalidSkipRecord {
		bad = append(bad, fmt.Sprintf("%v is set, but it only has effect with \"onInvalidRecord\": %q; set that, or leave rejectStatuses out", statuses, OnInvalidSkipRecord))
	}
	seen := map[int]bool{}
	for _, s := range statuses {
		switch {
		case s == 408 || s == 429:
			bad = append(bad, fmt.Sprintf("%d is retried by Register (a 408 is transient, a 429 asks it to wait), so it cannot reject a record; leave it out", s))
		case s < 400 || s > 499:
			bad = append(bad, fmt.Sprintf("%d is not a 4xx status: use 400-499 except 408 and 429", s))
		case seen[s]:
			bad = append(bad, fmt.Sprintf("%d is listed twice; list each status once", s))
		}
		seen[s] = true
	}
	return bad
}
