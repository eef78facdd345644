package pipeline

// The Lambda runtime reports a returned error's Go type name as errorType, and the state machine's
// Retry and Catch match on that name (https://docs.aws.amazon.com/lambda/latest/dg/golang-exceptions.html). These types are that contract:
// return them unwrapped from a handler.
//
// Each type may carry the error it was raised for in Err, so callers can still inspect the cause
// with errors.Is and errors.As; Error() is always Message alone, so the text Step Functions shows
// stays the one the handler wrote.

// RetryableError is a transient failure (throttling, 5xx, timeout). The workflow retries the task
// with backoff.
type RetryableError struct {
	Message string
	Err     error // the cause, if any; not part of Error()
}

func (e *RetryableError) Error() string { return e.Message }
func (e *RetryableError) Unwrap() error { return e.Err }

// PermanentError is a failure that a retry cannot fix (a 4xx from the core system). The workflow
// fails without retrying.
type PermanentError struct {
	Message string
	Err     error // the cause, if any; not part of Error()
}

func (e *PermanentError) Error() string { return e.Message }
func (e *PermanentError) Unwrap() error { return e.Err }

// ValidationError is a file that breaks its format. It is raised before anything is registered
// and names the file and line, never record contents.
type ValidationError struct {
	Message string
	Err     error // the cause, if any; not part of Error()
}

func (e *ValidationError) Error() string { return e.Message }
func (e *ValidationError) Unwrap() error { return e.Err }

// ObjectChangedError means the object no longer matches the version that triggered the event.
type ObjectChangedError struct {
	Message string
	Err     error // the cause, if any; not part of Error()
}

func (e *ObjectChangedError) Error() string { return e.Message }
func (e *ObjectChangedError) Unwrap() error { return e.Err }

// RecordLatencyError is a POST (one record, or one batch) that got no answer within the HTTP
// timeout. Every POST starts with a whole HTTP timeout left, and a retry gives it no more, so the
// core system's latency for it exceeds Register's budget: the one case in which no invocation can
// make progress, because every other stop moves the cursor by record. The workflow retries it as a
// RetryableError (a core system that hangs for a while looks the same from one invocation), then
// fails the file with this name and message.
type RecordLatencyError struct {
	Message string
	Err     error // the cause, if any; not part of Error()
}

// KeyOutsidePrefixError is a source object whose key, as the event gave it or form-decoded, is not
// under its tenant's prefix: another tenant's object, or no tenant's. Nothing of it is registered,
// and no retry can change the key, so the file fails.
type KeyOutsidePrefixError struct {
	Message string
	Err     error // the cause, if any; not part of Error()
}

func (e *RecordLatencyError) Error() string { return e.Message }
func (e *RecordLatencyError) Unwrap() error { return e.Err }

func (e *KeyOutsidePrefixError) Error() string { return e.Message }
func (e *KeyOutsidePrefixError) Unwrap() error { return e.Err }

// Error type names as they appear in Step Functions.
const (
	ErrRetryable        = "RetryableError"
	ErrPermanent        = "PermanentError"
	ErrValidation       = "ValidationError"
	ErrObjectChanged    = "ObjectChangedError"
	ErrRecordLatency    = "RecordLatencyError"
	ErrKeyOutsidePrefix = "KeyOutsidePrefixError"
)
