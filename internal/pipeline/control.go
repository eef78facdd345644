package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Control messages are operator requests that travel through a tenant's FIFO message group, so that
// the controller performs them at the head of the group, in order with the tenant's files, and holds
// the group until the work they start has finished (docs/operations.md). pipectl writes them; anyone
// allowed sqs:SendMessage on the tenant's queue can, which makes that an operator privilege.
//
// The wire format is one JSON object, version 1:
//
//	{"type":"tenantpipeline.control","version":1,"action":"redrive","tenant":"acme",
//	 "executionName":"...","requestedBy":"arn:aws:sts::...","reason":"...",
//	 "requestedAt":"2026-11-30T12:00:00Z","requestId":"6f1c..."}
//
// "replay" carries "source" ({"bucket","key","versionId","etag","size"}) instead of "executionName".
// Version 2 adds "source.originalExecution" to a replay. Version 3 adds a sequenced tenant's actions:
// "sequence-skip" and "sequence-set" (an operator's, with "number"), "sequence-wake" (the tenant's
// tick asks the head to send the next held file back) and "sequence-tick" (the tick itself, which
// travels in the tenant's TickGroup, never in its files' group). Version 4 adds "outOfOrder" to a
// redrive or a replay: the operator ran the file after later files of the tenant on purpose, and
// the reason says why. A later version may add fields or actions;
// a controller rejects (quarantines) any version it does not know, so a message is never half
// understood.
const (
	ControlType = "tenantpipeline.control"
	// ControlVersion is the version pipectl writes, and ControlVersionOutOfOrder the one it writes
	// for an out-of-order run, so that a controller that does not know the field quarantines the
	// message instead of half understanding it. The controller reads MinControlVersion to
	// MaxControlVersion.
	ControlVersion           = 3
	ControlVersionOutOfOrder = 4
	MinControlVersion        = 1
	MaxControlVersion        = ControlVersionOutOfOrder

	// ControlRedrive redrives a failed file execution of the tenant at the head of its group.
	ControlRedrive = "redrive"
	// ControlReplay registers an object version again under a new execution name.
	ControlReplay = "replay"
	// ControlSequenceSkip skips the missing number Number of a sequenced tenant.
	ControlSequenceSkip = "sequence-skip"
	// ControlSequenceSet sets the next number a sequenced tenant expects to Number.
	ControlSequenceSet = "sequence-set"
	// ControlSequenceWake asks the head to send back the held file whose turn came (a settled name,
	// or the files after numbers onGap "skip" passed).
	ControlSequenceWake = "sequence-wake"
	// ControlSequenceTick is the tenant's tick (TickGroup).
	ControlSequenceTick = "sequence-tick"

	// MaxControlReason bounds the operator's reason, in bytes.
	MaxControlReason = 1024
	// MaxControlRequestID bounds the request id. The replay's execution name is
	// ReplayExecutionPrefix + request id, which must stay within Step Functions' 80 characters.
	MaxControlRequestID = 64
	// ReplayExecutionPrefix starts the execution name of a replay: "rp-" + the request id.
	ReplayExecutionPrefix = "rp-"
)

// ControlMessage is a control message as it travels on a tenant's queue.
type ControlMessage struct {
	Type    string `json:"type"`
	Version int    `json:"version"`
	Action  string `json:"action"`
	Tenant  string `json:"tenant"`
	// ExecutionName is the file execution to redrive (redrive only).
	ExecutionName string `json:"executionName,omitempty"`
	// Source is the object version to register again (replay only).
	Source *ControlSource `json:"source,omitempty"`
	// Number is the number a sequence-skip skips or a sequence-set sets (version 3).
	Number *int64 `json:"number,omitempty"`
	// OutOfOrder says the operator runs the file (redrive, replay) after later files of the tenant
	// on purpose; Reason is then required (version 4).
	OutOfOrder bool `json:"outOfOrder,omitempty"`
	// RequestedBy is the caller's identity (STS GetCallerIdentity ARN), for the audit trail.
	RequestedBy string    `json:"requestedBy"`
	Reason      string    `json:"reason"`
	RequestedAt time.Time `json:"requestedAt"`
	// RequestID is unique per request: the SQS deduplication id, and the replay's execution name.
	RequestID string `json:"requestId"`
}

// ControlSource is the object version a replay registers.
type ControlSource struct {
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	VersionID string `json:"versionId,omitempty"`
	ETag      string `json:"etag,omitempty"`
	Size      int64  `json:"size"`
	// LastModified is when that object version was written (RFC 3339, from HeadObject), for the
	// audit trail. The controller does not rank the replay by it: a body cannot set an order.
	LastModified string `json:"lastModified,omitempty"`
	// OriginalExecution names the tenant's execution that registered this object version first
	// (pipectl finds it). The controller reads that execution's input and gives the replay the
	// same order, clamped to the tenant's counter, so a replay never outranks a newer file; absent,
	// unknown or of another version, the replay only fills keys no item holds (docs/data-path.md).
	OriginalExecution string `json:"originalExecution,omitempty"`
}

// IsVersionOf reports whether an execution's source is this object version: same bucket, same key
// (the execution holds the key as the event gave it, which may be form-encoded: docs/data-path.md,
// "Object keys"), and the same version id or, without one, the same ETag.
func (s ControlSource) IsVersionOf(exec Source) bool {
	if exec.Bucket != s.Bucket {
		return false
	}
	if exec.Key != s.Key {
		if decoded, err := url.QueryUnescape(exec.Key); err != nil || decoded != s.Key {
			return false
		}
	}
	if exec.VersionID != "" || s.VersionID != "" {
		return exec.VersionID == s.VersionID
	}
	unquote := func(e string) string { return strings.Trim(e, `"`) }
	return exec.ETag != "" && unquote(exec.ETag) == unquote(s.ETag)
}

// TickGroup is the message group of a sequenced tenant's tick: "<tenant>/sequence", which no
// tenant id can be (ids have no "/"), so the tick never holds the tenant's files.
func TickGroup(tenant string) string { return tenant + TickGroupSuffix }

// TickGroupSuffix ends a tick's message group.
const TickGroupSuffix = "/sequence"

// SequencePrefix is where a sequenced tenant's state and held files live:
// control/<tenant>/sequence/ (internal/sequence). It is here, in the contract, so that the
// constructs grant it without linking the store's S3 client.
func SequencePrefix(o Owner) string { return ControlDir(o) + "sequence/" }

// ReplayExecutionName is the execution name of a replay request: new for every request, so the
// replayed records get new Idempotency-Keys, and the same for every delivery of one request.
func (m ControlMessage) ReplayExecutionName() string { return ReplayExecutionPrefix + m.RequestID }

// ErrInvalidControl is wrapped by every error DecodeControl returns.
var ErrInvalidControl = errors.New("invalid control message")

var (
	requestIDPattern     = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
	executionNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
)

// IsControl reports whether body claims to be a control message (its "type" is ControlType). It
// says nothing about validity: DecodeControl checks that.
func IsControl(body []byte) bool {
	var probe struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(body, &probe) == nil && probe.Type == ControlType
}

// DecodeControl decodes and validates a control message strictly: unknown fields, data after the
// object, an unknown version or action, and missing or extra fields for the action are errors. The
// error never quotes the body.
func DecodeControl(body []byte) (ControlMessage, error) {
	var m ControlMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return ControlMessage{}, fmt.Errorf("%w: %s", ErrInvalidControl, JSONProblem(err, "requestedAt"))
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return ControlMessage{}, fmt.Errorf("%w: data after the message", ErrInvalidControl)
	}
	if err := m.Validate(); err != nil {
		return ControlMessage{}, err
	}
	return m, nil
}

// EncodeControl validates m and returns its wire form.
func EncodeControl(m ControlMessage) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// Validate checks every field, reporting all problems at once.
func (m ControlMessage) Validate() error {
	var p []string
	if m.Type != ControlType {
		p = append(p, fmt.Sprintf("type is %q, want %q", m.Type, ControlType))
	}
	if m.Version < MinControlVersion || m.Version > MaxControlVersion {
		p = append(p, fmt.Sprintf("version is %d, want %d to %d", m.Version, MinControlVersion, MaxControlVersion))
	}
	if m.Tenant == "" {
		p = append(p, "tenant is empty")
	}
	if !requestIDPattern.MatchString(m.RequestID) {
		p = append(p, fmt.Sprintf("requestId must be 1-%d of A-Z a-z 0-9 -", MaxControlRequestID))
	}
	if m.RequestedBy == "" {
		p = append(p, "requestedBy is empty")
	}
	if m.RequestedAt.IsZero() {
		p = append(p, "requestedAt is missing")
	}
	if len(m.Reason) > MaxControlReason || !utf8.ValidString(m.Reason) {
		p = append(p, fmt.Sprintf("reason must be valid UTF-8 of at most %d bytes", MaxControlReason))
	}
	if m.OutOfOrder {
		switch {
		case m.Action != ControlRedrive && m.Action != ControlReplay:
			p = append(p, m.Action+": outOfOrder must be absent")
		case m.Version < ControlVersionOutOfOrder:
			p = append(p, m.Action+": outOfOrder needs version 4")
		case strings.TrimSpace(m.Reason) == "":
			p = append(p, m.Action+": outOfOrder needs a reason")
		}
	}
	switch m.Action {
	case ControlRedrive:
		if !executionNamePattern.MatchString(m.ExecutionName) {
			p = append(p, "redrive: executionName must be 1-80 of A-Z a-z 0-9 _ -")
		}
		if m.Source != nil {
			p = append(p, "redrive: source must be absent")
		}
	case ControlReplay:
		if m.ExecutionName != "" {
			p = append(p, "replay: executionName must be absent")
		}
		switch {
		case m.Source == nil:
			p = append(p, "replay: source is missing")
		case m.Source.Bucket == "" || m.Source.Key == "":
			p = append(p, "replay: source.bucket and source.key are required")
		case m.Source.Size < 0:
			p = append(p, "replay: source.size must be >= 0")
		}
		if m.Source != nil && m.Source.OriginalExecution != "" {
			if !executionNamePattern.MatchString(m.Source.OriginalExecution) {
				p = append(p, "replay: source.originalExecution must be 1-80 of A-Z a-z 0-9 _ -")
			}
			if m.Version < 2 {
				p = append(p, "replay: source.originalExecution needs version 2")
			}
		}
		if m.Source != nil && m.Source.LastModified != "" {
			if _, err := time.Parse(time.RFC3339Nano, m.Source.LastModified); err != nil {
				p = append(p, "replay: source.lastModified is not RFC 3339")
			}
		}
	case ControlSequenceSkip, ControlSequenceSet, ControlSequenceWake, ControlSequenceTick:
		if m.Version < 3 {
			p = append(p, m.Action+": needs version 3")
		}
		if m.ExecutionName != "" || m.Source != nil {
			p = append(p, m.Action+": executionName and source must be absent")
		}
		numbered := m.Action == ControlSequenceSkip || m.Action == ControlSequenceSet
		switch {
		case numbered && (m.Number == nil || *m.Number < 0):
			p = append(p, m.Action+": number must be 0 or more")
		case !numbered && m.Number != nil:
			p = append(p, m.Action+": number must be absent")
		}
	default:
		p = append(p, fmt.Sprintf("action is %q, want %q, %q, %q or %q", m.Action, ControlRedrive, ControlReplay, ControlSequenceSkip, ControlSequenceSet))
	}
	if m.Number != nil && m.Action != ControlSequenceSkip && m.Action != ControlSequenceSet {
		if m.Action == ControlRedrive || m.Action == ControlReplay {
			p = append(p, m.Action+": number must be absent")
		}
	}
	if len(p) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidControl, strings.Join(p, "; "))
	}
	return nil
}
