package ops

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithy "github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// recordControl writes the control record the controller checks before it performs an operator
// action (pipeline.ControlRequestKey), under the bucket's Deny on writes to control/ that spares only
// the pipeline's roles and the operators. It creates the record once (If-None-Match: *): a request
// id that already has one (a retried request) sends the record's body, so that the message always
// equals its record.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
func (o *Ops) recordControl(ctx context.Context, t pipeline.TenantOutput, body []byte, requestID string) ([]byte, error) {
	key := pipeline.ControlRequestKey(t.Owner(), requestID)
	in := &s3.PutObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentType: aws.String("application/json"), IfNoneMatch: aws.String("*")}
	// No encryption headers: the object takes the bucket's default, as the operators' markers do.
	_, err := o.S3.PutObject(ctx, in)
	if err == nil {
		return body, nil
	}
	if api, ok := errorsAs[smithy.APIError](err); !ok || (api.ErrorCode() != "PreconditionFailed" && api.ErrorCode() != "ConditionalRequestConflict") {
		return nil, fmt.Errorf("write the control record s3://%s/%s: %w", t.Bucket, key, err)
	}
	out, err := o.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("read the control record s3://%s/%s of request %s: %w", t.Bucket, key, requestID, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, pipeline.MaxControlRecordBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the control record s3://%s/%s: %w", t.Bucket, key, err)
	}
	if _, err := pipeline.DecodeControl(b); err != nil || len(b) > pipeline.MaxControlRecordBytes {
		return nil, fmt.Errorf("s3://%s/%s holds no valid control record for request %s: choose another request id", t.Bucket, key, requestID)
	}
	return b, nil
}
