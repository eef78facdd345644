// Package source reads the exact object version that triggered a file's workflow and names S3
// failures as the error types the state machine matches on. Split and Register share it, so both
// pin the version the same way and classify failures alike.
package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Name names a source object in messages: the raw key, never URL-decoded.
func Name(src pipeline.Source) string { return "s3://" + src.Bucket + "/" + src.Key }

// GetInput reads exactly the object version that triggered the event: by VersionId when the event
// has one, and always also with If-Match on its ETag when the event has one. Both matter: with
// versioning suspended S3 gives every new object the version id "null", and the next PUT of the
// key replaces that null version, so only the ETag can tell that the content changed; S3 answers
// 412 Precondition Failed when If-Match does not hold for the version read.
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html (VersionId, If-Match)
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/AddingObjectstoVersionSuspendedBuckets.html
func GetInput(src pipeline.Source) (*s3.GetObjectInput, error) {
	if src.Bucket == "" || src.Key == "" {
		return nil, errors.New("the source names no bucket or key")
	}
	if src.VersionID == "" && src.ETag == "" {
		return nil, errors.New("the source has neither a versionId nor an etag, so the exact object cannot be pinned")
	}
	in := &s3.GetObjectInput{Bucket: aws.String(src.Bucket), Key: aws.String(src.Key)}
	if src.VersionID != "" {
		in.VersionId = aws.String(src.VersionID)
	}
	if src.ETag != "" {
		in.IfMatch = aws.String(QuoteETag(src.ETag))
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
//
// A vanished object or version reads as 404 only when the reader also has s3:ListBucket on the
// bucket; without it S3 answers 403 Access Denied
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions"). The
// construct grants Split and Register s3:ListBucket on their tenant's prefix, so a 404 is a
// changed object and a 403 is a real permission problem.
func GetError(src pipeline.Source, err error) error {
	file := Name(src)
	switch HTTPStatus(err) {
	case http.StatusPreconditionFailed:
		return &pipeline.ObjectChangedError{Message: fmt.Sprintf("%s: the object changed after the event: its ETag is no longer %s", file, src.ETag), Err: err}
	case http.StatusNotFound:
		return &pipeline.ObjectChangedError{Message: fmt.Sprintf("%s: the object version of the event no longer exists (%s; versionId %q, etag %q)", file, ErrorCode(err), src.VersionID, src.ETag), Err: err}
	case http.StatusRequestedRangeNotSatisfiable:
		return &pipeline.ObjectChangedError{Message: fmt.Sprintf("%s: the object is shorter than the manifest says", file), Err: err}
	case http.StatusForbidden:
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: access denied reading the object; without s3:ListBucket on the bucket a deleted object or version also reads as access denied, so check that the role has both s3:GetObject(Version) and s3:ListBucket", file), Err: err}
	case http.StatusBadRequest:
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: S3 rejected the request: %v", file, err), Err: err}
	}
	return &pipeline.RetryableError{Message: fmt.Sprintf("%s: reading the object failed: %v", file, err), Err: err}
}

// ErrorCode is the S3 error code of a failed SDK call (NoSuchKey, NoSuchVersion …), or "".
func ErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
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

// LogLevel is the level a handler logs its returned error at: WARN for a RetryableError or a
// RecordLatencyError, which the state machine's Retry usually absorbs, so that it does not raise
// the ERROR-log alarm; INFO for a NotSmallError, which hands a file to the full path and fails
// nothing; ERROR for everything else, which fails the file.
func LogLevel(err error) slog.Level {
	var (
		re *pipeline.RetryableError
		le *pipeline.RecordLatencyError
		ns *pipeline.NotSmallError
	)
	switch {
	case errors.As(err, &ns):
		return slog.LevelInfo
	case errors.As(err, &re) || errors.As(err, &le):
		return slog.LevelWarn
	}
	return slog.LevelError
}

// GetObjectAPI is the part of the S3 client that reads objects.
type GetObjectAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Open reads the source object of an event whose key may be raw or form-encoded, and returns the
// open object and the source it resolved to (src with Key set to the key that was read).
//
// AWS documents neither form for the key of an EventBridge "Object Created" event
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html). Classic S3 event
// notifications form-encode it ("red flower.jpg" arrives as "red+flower.jpg",
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html), and
// AWS's Lambda Powertools decodes the EventBridge key with unquote_plus. The form cannot be told
// from the characters (a literal '+' and an encoded space look the same), so Open asks S3: first
// the key as given, pinned to the event's version id and ETag (GetInput); if S3 answers that no
// such key or version exists (404, or the 403 it gives a caller without s3:ListBucket: Absent),
// or that the key's object does not match the ETag (412: with versioning suspended or off, a
// different object can live under the other form of the key), the form-decoded key (url.QueryUnescape: '+' is a space, %XX a byte), pinned the same way. Whichever
// matches the event's pin is the object; when neither does, the file's object is gone or changed.
//
// Open reads only keys under prefix, the tenant's: a form of the key outside it is never read, and
// an event none of whose forms the tenant holds is refused with a KeyOutsidePrefixError, so one
// tenant's event can never resolve to another tenant's object (a prefix "inbox/a+b/" beside
// "inbox/a b/": the decoded form of the first tenant's key "inbox/a+b/f.csv" is the second's).
//
// Errors are the pipeline's types, as GetError returns them.
func Open(ctx context.Context, api GetObjectAPI, src pipeline.Source, prefix string) (*s3.GetObjectOutput, pipeline.Source, error) {
	in, err := GetInput(src)
	if err != nil {
		return nil, src, &pipeline.PermanentError{Message: fmt.Sprintf("%s: %v", Name(src), err)}
	}
	decoded, derr := url.QueryUnescape(src.Key)
	if derr != nil || decoded == src.Key || decoded == "" {
		decoded = ""
	}
	if !underPrefix(src.Key, prefix) {
		// Never read: only the decoded form, if it is the tenant's, can be the event's object.
		if decoded == "" || !underPrefix(decoded, prefix) {
			return nil, src, outsidePrefix(src, prefix, decoded)
		}
		alt := src
		alt.Key = decoded
		in, _ = GetInput(alt)
		out, err := api.GetObject(ctx, in)
		if err != nil {
			return nil, src, GetError(alt, err)
		}
		return out, alt, nil
	}
	out, err := api.GetObject(ctx, in)
	if err == nil {
		return out, src, nil
	}
	if !notThisKey(err) || decoded == "" {
		return nil, src, GetError(src, err)
	}
	if !underPrefix(decoded, prefix) {
		return nil, src, &pipeline.KeyOutsidePrefixError{
			Message: fmt.Sprintf("%s: the key %q answered %d %s, and its form-decoded key %q is not under the tenant's prefix %q: it is not read and nothing is registered",
				Name(src), src.Key, HTTPStatus(err), ErrorCode(err), decoded, prefix),
			Err: err,
		}
	}
	alt := src
	alt.Key = decoded
	in, _ = GetInput(alt)
	out, altErr := api.GetObject(ctx, in)
	if altErr == nil {
		return out, alt, nil
	}
	if !notThisKey(altErr) {
		return nil, src, GetError(alt, altErr)
	}
	// Neither form holds the event's object. Report the key as given, and what the decoded form
	// answered, so an operator can see both were tried: as a changed object when either form said
	// so (404, 412), as access denied when both forms were denied.
	suffix := fmt.Sprintf("; the form-decoded key %q answered %d %s too", decoded, HTTPStatus(altErr), ErrorCode(altErr))
	var changed *pipeline.ObjectChangedError
	switch first := GetError(src, err); {
	case errors.As(first, &changed):
		return nil, src, &pipeline.ObjectChangedError{Message: changed.Message + suffix, Err: err}
	case errors.As(GetError(alt, altErr), &changed):
		return nil, src, &pipeline.ObjectChangedError{
			Message: fmt.Sprintf("%s: the object version of the event no longer exists (the key as given answered %d %s; versionId %q, etag %q)%s",
				Name(src), HTTPStatus(err), ErrorCode(err), src.VersionID, src.ETag, suffix),
			Err: altErr,
		}
	default:
		return nil, src, &pipeline.PermanentError{Message: first.Error() + suffix, Err: err}
	}
}

// notThisKey reports a read that may have used the wrong form of the key: the key or version does
// not exist under it (Absent: 404, or the 403 S3 answers for a missing key to a caller without
// s3:ListBucket), or its object is not the event's (412).
func notThisKey(err error) bool {
	return Absent(err) || HTTPStatus(err) == http.StatusPreconditionFailed
}

// outsidePrefix refuses an event's object that is not under the tenant's prefix under any form of
// its key: decoded is its form-decoded key ("" when it has none).
func outsidePrefix(src pipeline.Source, prefix, decoded string) error {
	msg := fmt.Sprintf("%s: the key %q is not under the tenant's prefix %q", Name(src), src.Key, prefix)
	if decoded != "" {
		msg += fmt.Sprintf(", nor is its form-decoded key %q", decoded)
	}
	return &pipeline.KeyOutsidePrefixError{Message: msg + ": the object is not read and nothing is registered"}
}

// underPrefix reports whether key lies under the tenant's prefix, a folder ending in "/". An empty
// prefix holds nothing: a key under it could be anyone's.
func underPrefix(key, prefix string) bool {
	return strings.HasSuffix(prefix, "/") && strings.HasPrefix(key, prefix)
}
