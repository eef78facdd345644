package ops

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source"
)

// splitResult reads Split's result from the start of an execution's history, or nil when Split
// has not finished (a redrive runs it again) or the history cannot tell.
func (o *Ops) splitResult(ctx context.Context, arn string) (*pipeline.SplitResult, error) {
	out, err := o.StepFunctions.GetExecutionHistory(ctx, &sfn.GetExecutionHistoryInput{
		ExecutionArn: aws.String(arn), IncludeExecutionData: aws.Bool(true), MaxResults: splitHistoryEvents})
	if err != nil {
		return nil, fmt.Errorf("get execution history %s: %w", arn, err)
	}
	for _, ev := range out.Events {
		if ev.Type != sfntypes.HistoryEventTypeTaskStateExited || ev.StateExitedEventDetails == nil ||
			aws.ToString(ev.StateExitedEventDetails.Name) != "Split" {
			continue
		}
		var state struct {
			Split *pipeline.SplitResult `json:"split"`
		}
		if json.Unmarshal([]byte(aws.ToString(ev.StateExitedEventDetails.Output)), &state) != nil {
			return nil, nil // cut short (HistoryEventExecutionDataDetails.truncated): cannot tell
		}
		return state.Split, nil
	}
	return nil, nil
}

// workFilesPresent refuses a redrive that could only fail again because what the execution reads
// is gone: the manifest Split wrote (work/ expires after pipeline.WorkExpirationDays), or the
// source version whose byte ranges are the chunks (an overwritten or deleted file's old version
// expires with the bucket's noncurrent-version rule). Before Split has finished there is nothing
// to check: the redrive runs Split again, which reads the source and reports it missing itself.
func (o *Ops) workFilesPresent(ctx context.Context, tenant, arn, name string) error {
	sr, err := o.splitResult(ctx, arn)
	if err != nil || sr == nil {
		return err
	}
	m := sr.Manifest
	if m.Bucket != "" && m.Key != "" {
		gone, err := o.gone(ctx, &s3.HeadObjectInput{Bucket: aws.String(m.Bucket), Key: aws.String(m.Key)})
		if err != nil {
			return err
		}
		if gone {
			again := "pipectl replay"
			if sr.Source.Key != "" {
				again = replayCommand(tenant, sr.Source.Key, sr.Source.VersionID)
			}
			return refuse("execution %s cannot be redriven: its manifest s3://%s/%s is gone (work/ expires after %d days), so its chunks cannot be read; "+
				"register the file again with %s (new Idempotency-Keys)", name, m.Bucket, m.Key, pipeline.WorkExpirationDays, again)
		}
	}
	src := sr.Source
	if src.Bucket == "" || src.Key == "" || (src.VersionID == "" && src.ETag == "") {
		return nil
	}
	in := &s3.HeadObjectInput{Bucket: aws.String(src.Bucket), Key: aws.String(src.Key)}
	if src.VersionID != "" {
		in.VersionId = aws.String(src.VersionID)
	}
	if src.ETag != "" {
		in.IfMatch = aws.String(source.QuoteETag(src.ETag))
	}
	gone, err := o.gone(ctx, in)
	if err != nil {
		return err
	}
	if gone {
		version := src.VersionID
		if version == "" {
			version = "ETag " + src.ETag
		}
		return refuse("execution %s cannot be redriven: the file version its chunks are read from, s3://%s/%s (version %s), is gone", name, src.Bucket, src.Key, version)
	}
	return nil
}

// gone reports whether HeadObject finds no such object or version: 404, or 412 when the ETag no
// longer matches. S3 answers 403 instead of 404 to a caller that may not list the bucket; that
// stays an error, since it cannot tell.
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html
func (o *Ops) gone(ctx context.Context, in *s3.HeadObjectInput) (bool, error) {
	_, err := o.S3.HeadObject(ctx, in)
	if err == nil {
		return false, nil
	}
	if _, nf := errorsAs[*s3types.NotFound](err); nf {
		return true, nil
	}
	if _, nk := errorsAs[*s3types.NoSuchKey](err); nk {
		return true, nil
	}
	if status := source.HTTPStatus(err); status == 404 || status == 412 {
		return true, nil
	}
	return false, fmt.Errorf("head s3://%s/%s: %w", aws.ToString(in.Bucket), aws.ToString(in.Key), err)
}
