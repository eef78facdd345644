package pipeline

import (
	"errors"
	"io"
	"reflect"
	"testing"
)

// TestErrorTypesUnwrap pins that every error type keeps its cause for errors.Is/As while its text,
// and the type name Step Functions matches on, stay as they were.
func TestErrorTypesUnwrap(t *testing.T) {
	cause := io.ErrUnexpectedEOF
	tests := []struct {
		err      error
		wantName string
	}{
		{&RetryableError{Message: "m", Err: cause}, ErrRetryable},
		{&PermanentError{Message: "m", Err: cause}, ErrPermanent},
		{&ValidationError{Message: "m", Err: cause}, ErrValidation},
		{&ObjectChangedError{Message: "m", Err: cause}, ErrObjectChanged},
		{&RecordLatencyError{Message: "m", Err: cause}, ErrRecordLatency},
		{&KeyOutsidePrefixError{Message: "m", Err: cause}, ErrKeyOutsidePrefix},
		{&NotSmallError{Message: "m", Err: cause}, ErrNotSmall},
	}
	for _, tt := range tests {
		t.Run(tt.wantName, func(t *testing.T) {
			if got := reflect.TypeOf(tt.err).Elem().Name(); got != tt.wantName {
				t.Errorf("got type name %q, want %q", got, tt.wantName)
			}
			if got := tt.err.Error(); got != "m" {
				t.Errorf("got Error() %q, want %q (the cause is not part of the text)", got, "m")
			}
			if !errors.Is(tt.err, cause) {
				t.Errorf("got errors.Is(err, cause) false, want true")
			}
		})
	}
}
