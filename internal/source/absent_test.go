package source

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

func TestAbsent(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"404 NoSuchKey", sourcetest.APIError("GetObject", 404, "NoSuchKey"), true},
		{"404 NoSuchVersion", sourcetest.APIError("GetObject", 404, "NoSuchVersion"), true},
		{"404 HeadObject NotFound", sourcetest.APIError("HeadObject", 404, "NotFound"), true},
		{"403 AccessDenied (no s3:ListBucket)", sourcetest.APIError("GetObject", 403, "AccessDenied"), true},
		{"403 HeadObject Forbidden", sourcetest.APIError("HeadObject", 403, "Forbidden"), true},
		{"403 wrapped by the caller", fmt.Errorf("get s3://b/k: %w", sourcetest.APIError("GetObject", 403, "AccessDenied")), true},
		{"modelled NoSuchKey without a response", &s3types.NoSuchKey{Message: aws.String("x")}, true},
		{"AccessDenied code without a response", &smithy.GenericAPIError{Code: "AccessDenied"}, true},
		{"412 PreconditionFailed", sourcetest.APIError("GetObject", 412, "PreconditionFailed"), false},
		{"400 with a missing-key code is still a bad request", sourcetest.APIError("GetObject", 400, "NoSuchKey"), false},
		{"500 InternalError", sourcetest.APIError("GetObject", 500, "InternalError"), false},
		{"503 SlowDown", sourcetest.APIError("GetObject", 503, "SlowDown"), false},
		{"transport error", errors.New("connection reset by peer"), false},
		{"deadline", context.DeadlineExceeded, false},
		{"other code without a response", &smithy.GenericAPIError{Code: "InvalidAccessKeyId"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Absent(tt.err); got != tt.want {
				t.Errorf("got Absent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestNotFound(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"404 NoSuchKey", sourcetest.APIError("GetObject", 404, "NoSuchKey"), true},
		{"404 NoSuchVersion", sourcetest.APIError("GetObject", 404, "NoSuchVersion"), true},
		{"404 HeadObject NotFound", sourcetest.APIError("HeadObject", 404, "NotFound"), true},
		{"modelled NoSuchKey without a response", &s3types.NoSuchKey{Message: aws.String("x")}, true},
		{"403 AccessDenied is not absence", sourcetest.APIError("GetObject", 403, "AccessDenied"), false},
		{"AccessDenied code without a response", &smithy.GenericAPIError{Code: "AccessDenied"}, false},
		{"400 with a missing-key code", sourcetest.APIError("GetObject", 400, "NoSuchKey"), false},
		{"500 InternalError", sourcetest.APIError("GetObject", 500, "InternalError"), false},
		{"503 SlowDown", sourcetest.APIError("GetObject", 503, "SlowDown"), false},
		{"transport error", errors.New("connection reset by peer"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NotFound(tt.err); got != tt.want {
				t.Errorf("got NotFound %v, want %v", got, tt.want)
			}
		})
	}
}
