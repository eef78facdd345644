package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Wake-up state (docs/controller.md, "Wake-up on the execution's completion event").
//
// The controller keeps a tenant's head message in flight while the file's execution runs. Only the
// holder of the message's current receipt handle can make it visible at once
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html),
// so on every delivery the controller writes that handle, with the execution's name, to
// control/<tenant>/wake.json. When Step Functions reports the execution's end, the wake-up handler
// reads it, records the status in control/<tenant>/wake-done.json and makes the message visible.
// Each object has exactly one writer: the controller writes wake.json, the wake-up handler writes
// wake-done.json, so neither can overwrite the other's newer state.
const (
	// WakeStateVersion is the only WakeState.Version this code reads and writes.
	WakeStateVersion = 1
	// WakeDoneVersion is the only WakeDone.Version this code reads and writes.
	WakeDoneVersion = 1
	// MaxWakeObjectBytes bounds a wake object. A receipt handle is a few hundred bytes; anything
	// larger is not an object this code wrote.
	MaxWakeObjectBytes = 8 * 1024
)

// Terminal execution statuses of a Standard workflow
// (https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html).
const (
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
	StatusTimedOut  = "TIMED_OUT"
	StatusAborted   = "ABORTED"
)

// TerminalStatus reports whether s is a status an execution ends in.
func TerminalStatus(s string) bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusTimedOut, StatusAborted:
		return true
	}
	return false
}

// WakeStateKey is the controller's wake-up state of a tenant: control/<tenant>/wake.json.
func WakeStateKey(o Owner) string { return ControlDir(o) + "wake.json" }

// WakeDoneKey is where the wake-up handler records an execution's end: control/<tenant>/wake-done.json.
func WakeDoneKey(o Owner) string { return ControlDir(o) + "wake-done.json" }

// SkipMarkerKey is the object an operator writes to skip a halted tenant's failed file:
// control/<tenant>/skip/<execution name>. The bucket is versioned and its writes are recorded by
// CloudTrail, which makes the marker its own audit trail.
func SkipMarkerKey(o Owner, executionName string) string {
	return ControlDir(o) + "skip/" + executionName
}

// WakeState is what the controller stores on each delivery of a tenant's head message whose
// execution it waits for: enough for the wake-up handler to make exactly that delivery visible.
type WakeState struct {
	Version       int       `json:"version"`
	ExecutionName string    `json:"executionName"`
	ExecutionARN  string    `json:"executionArn"`
	MessageID     string    `json:"messageId"`
	ReceiptHandle string    `json:"receiptHandle"`
	QueueURL      string    `json:"queueUrl"`
	WrittenAt     time.Time `json:"writtenAt"`
	// Paused marks a message a pool controller holds because its tenant is paused
	// (PauseMarkerKey): it waits for no execution, so ExecutionName and ExecutionARN are empty and
	// no status event ever matches it. pipectl resume makes exactly this delivery visible.
	Paused bool `json:"paused,omitempty"`
}

// WakeDone is what the wake-up handler records when a status change event ends the execution the
// wake state names. Status is the event's detail.status; StartDate and StopDate are its
// detail.startDate and detail.stopDate, when the event has them.
type WakeDone struct {
	Version       int        `json:"version"`
	ExecutionName string     `json:"executionName"`
	ExecutionARN  string     `json:"executionArn"`
	Status        string     `json:"status"`
	EventID       string     `json:"eventId"`
	StartDate     *time.Time `json:"startDate,omitempty"`
	StopDate      *time.Time `json:"stopDate,omitempty"`
	WrittenAt     time.Time  `json:"writtenAt"`
}

func (s WakeState) validate() error {
	var errs []error
	if s.Version != WakeStateVersion {
		errs = append(errs, fmt.Errorf("version %d, want %d", s.Version, WakeStateVersion))
	}
	fields := []struct{ name, v string }{
		{"messageId", s.MessageID}, {"receiptHandle", s.ReceiptHandle}, {"queueUrl", s.QueueURL},
	}
	if !s.Paused {
		fields = append(fields, struct{ name, v string }{"executionName", s.ExecutionName}, struct{ name, v string }{"executionArn", s.ExecutionARN})
	}
	for _, f := range fields {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("%s is empty", f.name))
		}
	}
	if s.WrittenAt.IsZero() {
		errs = append(errs, errors.New("writtenAt is missing"))
	}
	return errors.Join(errs...)
}

func (d WakeDone) validate() error {
	var errs []error
	if d.Version != WakeDoneVersion {
		errs = append(errs, fmt.Errorf("version %d, want %d", d.Version, WakeDoneVersion))
	}
	if d.ExecutionName == "" {
		errs = append(errs, errors.New("executionName is empty"))
	}
	if d.ExecutionARN == "" {
		errs = append(errs, errors.New("executionArn is empty"))
	}
	if !TerminalStatus(d.Status) {
		errs = append(errs, fmt.Errorf("status %q is not a terminal status", d.Status))
	}
	if d.WrittenAt.IsZero() {
		errs = append(errs, errors.New("writtenAt is missing"))
	}
	return errors.Join(errs...)
}

// EncodeWakeState renders s after checking it is complete.
func EncodeWakeState(s WakeState) ([]byte, error) {
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("wake state: %w", err)
	}
	return encodeWake(s)
}

// DecodeWakeState parses a wake state strictly: one JSON object, known fields only, nothing after
// it, every field set, and the version this code writes.
func DecodeWakeState(b []byte) (WakeState, error) {
	var s WakeState
	if err := decodeStrict(b, &s); err != nil {
		return WakeState{}, fmt.Errorf("wake state: %w", err)
	}
	if err := s.validate(); err != nil {
		return WakeState{}, fmt.Errorf("wake state: %w", err)
	}
	return s, nil
}

// EncodeWakeDone renders d after checking it is complete.
func EncodeWakeDone(d WakeDone) ([]byte, error) {
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("wake done: %w", err)
	}
	return encodeWake(d)
}

// DecodeWakeDone parses a wake-done record as strictly as DecodeWakeState.
func DecodeWakeDone(b []byte) (WakeDone, error) {
	var d WakeDone
	if err := decodeStrict(b, &d); err != nil {
		return WakeDone{}, fmt.Errorf("wake done: %w", err)
	}
	if err := d.validate(); err != nil {
		return WakeDone{}, fmt.Errorf("wake done: %w", err)
	}
	return d, nil
}

func encodeWake(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxWakeObjectBytes {
		return nil, fmt.Errorf("%d bytes, more than the %d a wake object may have", len(b), MaxWakeObjectBytes)
	}
	return b, nil
}

func decodeStrict(b []byte, v any) error {
	if len(b) > MaxWakeObjectBytes {
		return fmt.Errorf("%d bytes, more than the %d a wake object may have", len(b), MaxWakeObjectBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("data after the JSON object at offset %d", dec.InputOffset())
	}
	return nil
}
