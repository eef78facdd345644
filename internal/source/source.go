// Package source reads the exact object version that triggered a file's workflow and names S3
// failures as the error types the state machine matches on. Split and Register share it, so both
// pin the version the same way and classify failures alike.
package source

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Name names a source object in messages: the raw key, never URL-decoded.
func Name(src pipeline.Source) string { return "s3://" + src.Bucket + "/" + src.Key }

// GetInput reads exactly the object version that triggered the event: by VersionId on a versioned bucket,
// otherwise with If-Match on the ETag (412 Precondition Failed once the object is overwritten).
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html
func GetInput(src pipeline.Source) (*s3.GetObjectInput, error) {
	if src.Bucket == "" || src.Key == "" {
		return nil, errors.New("the source names no bucket or key")
	}
	in := &s3.GetObjectInput{Bucket: aws.String(src.Bucket), Key: aws.String(src.Key)}
	switch {
	case src.VersionID != "":
		in.VersionId = aws.String(src.VersionID)
	case src.ETag != "":
		in.IfMatch = aws.String(QuoteETag(src.ETag))
	default:
		return nil, errors.New("the source has neither a versionId nor an etag, so the exact object cannot be pinned")
	}
	return in, nil
}

// QuoteETag makes an event's ETag (EventBridge sends it bare) an RFC 7232 entity tag.
func QuoteETag(etag string) string {
	if strings.HasPrefix(etag, `"`) || strings.HasPrefix(etag, `W/"`) {
		return etag
	}
	return `"` + etag + `"`
}

// GetError classifies a failed GetObject of the source (whole or ranged).
func GetError(src pipeline.Source, err error) error {
	file := Name(src)
	switch HTTPStatus(err) {
	case http.StatusPreconditionFailed:
		return &pipeline.ObjectChangedError{Message: fmt.Sprintf("%s: the object changed after the event: its ETag is no longer %s", file, src.ETag)}
	case http.StatusNotFound:
		return &pipeline.ObjectChangedError{Message: fmt.Sprintf("%s: the object version of the event no longer exists (versionId %q, etag %q)", file, src.VersionID, src.ETag)}
	case http.StatusRequestedRangeNotSatisfiable:
		return &pipeline.ObjectChangedError{Message: fmt.Sprintf("%s: the object is shorter than the manifest says", file)}
	case http.StatusForbidden:
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: access denied reading the object", file)}
	case http.StatusBadRequest:
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: S3 rejected the request: %v", file, err)}
	}
	return &pipeline.RetryableError{Message: fmt.Sprintf("%s: reading the object failed: %v", file, err)}
}

// HTTPStatus is the HTTP status of a failed SDK call, or 0. The SDK's response errors expose it
// through HTTPStatusCode (smithy-go transport/http.ResponseError).
func HTTPStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// ErrorType is the name the Lambda runtime reports for err ("" for nil).
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// LogLevel is the level a handler logs its returned error at: WARN for a RetryableError, which the
// state machine's Retry usually absorbs, so that it does not raise the ERROR-log alarm; ERROR for
// everything else, which fails the file.
func LogLevel(err error) slog.Level {
	var re *pipeline.RetryableError
	if errors.As(err, &re) {
		return slog.LevelWarn
	}
	return slog.LevelError
}
