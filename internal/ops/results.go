package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// maxSummaryBytes bounds a summary.json read: a summary is a few hundred bytes.
const maxSummaryBytes = 1 << 20

// summary reads the summary.json of one file execution of the tenant; nil when there is none.
func (o *Ops) summary(ctx context.Context, t pipeline.TenantOutput, execution string) (*results.Summary, error) {
	key := results.Key(t.ID, execution, results.SummaryFile)
	out, err := o.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(key)})
	if _, nk := errorsAs[*s3types.NoSuchKey](err); nk {
		return nil, nil
	}
	if _, nf := errorsAs[*s3types.NotFound](err); nf {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", t.Bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxSummaryBytes))
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", t.Bucket, key, err)
	}
	var s results.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("s3://%s/%s: %w", t.Bucket, key, err)
	}
	return &s, nil
}
