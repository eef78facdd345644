package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Pausing one pooled tenant. A silo tenant is paused by disabling its controller's event source
// mapping; a pooled tenant shares its pool's mapping, so an operator pauses it by writing
// control/<tenant>/paused.json instead. A pool controller that receives a message of a tenant with
// that marker starts nothing and holds the message in flight (its receipt handle in the tenant's
// wake state, WakeState.Paused), which keeps the tenant's message group locked and lets every other
// group of the pool flow. Resume deletes the marker and makes the held message visible at once.
// The body is the audit record: who paused the tenant, when and why.

// PauseRecordVersion is the only PauseRecord.Version this code reads and writes.
const PauseRecordVersion = 1

// PauseMarkerKey is a pooled tenant's pause marker: control/<tenant>/paused.json.
func PauseMarkerKey(o Owner) string { return ControlDir(o) + "paused.json" }

// PauseRecord is the pause marker's body.
type PauseRecord struct {
	Version     int       `json:"version"`
	Tenant      string    `json:"tenant"`
	RequestedBy string    `json:"requestedBy"`
	RequestedAt time.Time `json:"requestedAt"`
	Reason      string    `json:"reason,omitempty"`
}

// EncodePauseRecord renders r after checking it is complete.
func EncodePauseRecord(r PauseRecord) ([]byte, error) {
	if r.Version != PauseRecordVersion || r.Tenant == "" || r.RequestedBy == "" || r.RequestedAt.IsZero() {
		return nil, errors.New("pause record: version, tenant, requestedBy and requestedAt are required")
	}
	return json.Marshal(r)
}

// DecodePauseRecord reads a pause marker's body. Any object at the key pauses the tenant, whatever
// it holds; the record only says who and why, so a body that is not a record is reported, not
// ignored.
func DecodePauseRecord(b []byte) (PauseRecord, error) {
	var r PauseRecord
	if len(b) > MaxWakeObjectBytes {
		return r, fmt.Errorf("pause record: %d bytes, more than %d", len(b), MaxWakeObjectBytes)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("pause record: %w", err)
	}
	return r, nil
}
