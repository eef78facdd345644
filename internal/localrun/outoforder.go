package localrun

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
)

// outOfOrder is the reason an operator gave for running the tenant's execution after later files
// (pipectl --out-of-order), from the audit record in its results folder; "" for an execution
// never redriven or replayed, or run in order.
func (r *Run) outOfOrder(ctx context.Context, o pipeline.Owner, e sfnExecution) string {
	if r.s3 == nil || (e.RedriveCount == 0 && !strings.HasPrefix(e.Name, pipeline.ReplayExecutionPrefix)) {
		return ""
	}
	out, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(results.Key(o, e.Name, results.OutOfOrderFile))})
	if err != nil {
		return ""
	}
	defer out.Body.Close()
	var rec results.OutOfOrder
	if json.NewDecoder(out.Body).Decode(&rec) != nil || !rec.OutOfOrder {
		return ""
	}
	return rec.Reason
}
