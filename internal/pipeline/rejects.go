package pipeline

import "slices"

// SkipsRecords reports whether a record that cannot be registered is rejected and the file goes on
// (SkipsInvalid: the same policy, skipRecord).
func (t Tenant) SkipsRecords() bool { return t.SkipsInvalid() }

// CanReject reports whether a record of t's files can be rejected by the core system while the
// file goes on (a status of RejectStatuses, or the DynamoDB sink's refusals, under skipRecord): only
// then does Register keep each record's original bytes and read the core system's answers, and
// Split record each chunk's first line for the rejections' lines (LinesKey).
func (t Tenant) CanReject() bool {
	return t.SkipsRecords() && (len(t.RejectStatuses) > 0 || t.DynamoDB != nil)
}

// RejectsStatus reports whether the core system's status rejects one record and lets the file go
// on: under OnInvalidSkipRecord, for a status listed in RejectStatuses.
func (t Tenant) RejectsStatus(status int) bool {
	return t.SkipsRecords() && slices.Contains(t.RejectStatuses, status)
}
