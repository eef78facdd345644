package controller

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
)

// maxReasonBytes bounds how much of an operator's skip reason is read and logged.
const maxReasonBytes = 256

// skipMarkerKey is the object an operator writes to skip a halted tenant's failed file
// (pipeline.SkipMarkerKey).
var skipMarkerKey = pipeline.SkipMarkerKey

type skipMarker struct {
	versionID string
	reason    string // operator text, at most maxReasonBytes, valid UTF-8
	size      int64  // the whole reason's size in bytes
	// denied: not found because S3 answered 403, which it also answers for a missing key to a
	// caller without s3:ListBucket.
	denied bool
}

// skipMarker reads the marker at key. A missing marker is not an error. S3 answers 404 for a missing
// key only when the caller may list the bucket, otherwise 403
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html), so both read as absent
// (source.Absent): the tenant stays blocked, which is safe, and the halted log says it was a 403.
func (h *Handler) skipMarker(ctx context.Context, key string) (skipMarker, bool, error) {
	out, err := h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key)})
	if source.Absent(err) {
		return skipMarker{denied: accessDeniedError(err)}, false, nil
	}
	if err != nil {
		return skipMarker{}, false, fmt.Errorf("get s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxReasonBytes))
	if err != nil {
		return skipMarker{}, false, fmt.Errorf("read s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	return skipMarker{
		versionID: aws.ToString(out.VersionId),
		reason:    cleanReason(b),
		size:      max(aws.ToInt64(out.ContentLength), int64(len(b))),
	}, true, nil
}

// cleanReason makes the reason one line of valid UTF-8 (a rune cut by the byte limit becomes U+FFFD).
func cleanReason(b []byte) string {
	return strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "\uFFFD")), " ")
}
