package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Control records back the operator actions a control message asks for. Whoever may send to a
// tenant's queue, or invoke its controller directly with a made-up SQS event, could otherwise
// redrive, replay or move a sequence on their own say. So before it sends a redrive, a replay, a
// sequence-skip or a sequence-set, pipectl writes the message's exact body to
// control/<tenant>/requests/<request id>.json, under the bucket's Deny on writes to control/ that
// spares only the pipeline's roles and the operators; the controller performs the action only when
// that record exists and says the same as the message (CheckControlRecord). The controller writes
// one for the sequence-skip it sends itself (onGap "skip"). A tick and a wake-up change nothing
// on their own say (the controller checks the tenant's sequence state for them), so they need none.
//
// The record is written with If-None-Match: *, so it is never overwritten: pipectl that finds a
// record of its request id already there sends that record's body instead
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).

// MaxControlRecordBytes bounds a control record. The largest message (a replay of a 1,024-byte
// key with a 1,024-byte reason, each character escaped by JSON as \u00XX) is under 14 KiB.
const MaxControlRecordBytes = 16 * 1024

// ControlRequestKey is the control record of a request: control/<tenant>/requests/<request id>.json.
// Request ids are [A-Za-z0-9-] (DecodeControl), so the key stays under the tenant's prefix.
func ControlRequestKey(o Owner, requestID string) string {
	return ControlRequestsPrefix(o) + requestID + ".json"
}

// ControlRequestsPrefix is where a tenant's control records live.
func ControlRequestsPrefix(o Owner) string { return ControlDir(o) + "requests/" }

// NeedsRecord reports whether a control message's action is performed only as a control record
// says: redrive, replay, sequence-skip and sequence-set.
func NeedsRecord(action string) bool {
	switch action {
	case ControlRedrive, ControlReplay, ControlSequenceSkip, ControlSequenceSet:
		return true
	}
	return false
}

// ErrNoControlRecord and ErrControlRecordDiffers wrap ErrInvalidControl: the message is refused,
// never retried, because no later delivery of it can change the answer.
var (
	ErrNoControlRecord      = fmt.Errorf("%w: no control record", ErrInvalidControl)
	ErrControlRecordDiffers = fmt.Errorf("%w: the message differs from its control record", ErrInvalidControl)
)

// CheckControlRecord compares a decoded control message with the record found for it: the record
// must be a valid control message with every field equal to the message's. The error names the
// fields that differ, never their values.
func CheckControlRecord(m ControlMessage, record []byte) error {
	if len(record) > MaxControlRecordBytes {
		return fmt.Errorf("%w: the record is over %d bytes", ErrControlRecordDiffers, MaxControlRecordBytes)
	}
	r, err := DecodeControl(record)
	if err != nil {
		return fmt.Errorf("%w: the record is not a control message (%v)", ErrControlRecordDiffers, err)
	}
	want, err := json.Marshal(r)
	if err != nil {
		return err
	}
	got, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if bytes.Equal(want, got) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrControlRecordDiffers, strings.Join(differingFields(want, got), ", "))
}

// differingFields lists the top-level JSON fields whose values differ between two encodings.
func differingFields(a, b []byte) []string {
	var x, y map[string]json.RawMessage
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return []string{"the whole message"}
	}
	var out []string
	for k, v := range x {
		if !bytes.Equal(v, y[k]) {
			out = append(out, k)
		}
	}
	for k := range y {
		if _, ok := x[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
