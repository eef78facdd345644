package ops

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"golang.org/x/time/rate"
)

// DefaultRate is the calls per second a bulk action (bulk.go) makes to the control-plane APIs
// together: Step Functions, SQS, Lambda and S3. The tightest quota it draws from is Step
// Functions' ListExecutions token bucket, refilled at 2 a second in most Regions and 5 in the
// largest, with a bucket of 100 (200); about a third of a bulk action's calls are
// ListExecutions, so 5 calls a second stays within its refill where a run is long, and a throttle
// that happens all the same is retried by the SDK's standard retryer. docs/operations.md lists
// the quotas.
// https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html#service-limits-api-action-throttling-general
const DefaultRate = 5

// Limit makes every call Ops makes to Step Functions, SQS, Lambda and S3 wait for a token of l
// first, so that a bulk action stays within the services' request quotas however many tenants
// it acts on. Calls already made (the stacks read) are not counted again.
func (o *Ops) Limit(l *rate.Limiter) {
	o.StepFunctions = limitedSFN{o.StepFunctions, l}
	o.SQS = limitedSQS{o.SQS, l}
	o.Lambda = limitedLambda{o.Lambda, l}
	o.S3 = limitedS3{o.S3, l}
}

type limitedSFN struct {
	c StepFunctions
	l *rate.Limiter
}

func (c limitedSFN) ListExecutions(ctx context.Context, in *sfn.ListExecutionsInput, optFns ...func(*sfn.Options)) (*sfn.ListExecutionsOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.ListExecutions(ctx, in, optFns...)
}

func (c limitedSFN) DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, optFns ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.DescribeExecution(ctx, in, optFns...)
}

func (c limitedSFN) RedriveExecution(ctx context.Context, in *sfn.RedriveExecutionInput, optFns ...func(*sfn.Options)) (*sfn.RedriveExecutionOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.RedriveExecution(ctx, in, optFns...)
}

func (c limitedSFN) GetExecutionHistory(ctx context.Context, in *sfn.GetExecutionHistoryInput, optFns ...func(*sfn.Options)) (*sfn.GetExecutionHistoryOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.GetExecutionHistory(ctx, in, optFns...)
}

type limitedSQS struct {
	c SQS
	l *rate.Limiter
}

func (c limitedSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.GetQueueAttributes(ctx, in, optFns...)
}

func (c limitedSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.SendMessage(ctx, in, optFns...)
}

func (c limitedSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.ReceiveMessage(ctx, in, optFns...)
}

func (c limitedSQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.DeleteMessage(ctx, in, optFns...)
}

func (c limitedSQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.ChangeMessageVisibility(ctx, in, optFns...)
}

type limitedLambda struct {
	c Lambda
	l *rate.Limiter
}

func (c limitedLambda) ListEventSourceMappings(ctx context.Context, in *lambda.ListEventSourceMappingsInput, optFns ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.ListEventSourceMappings(ctx, in, optFns...)
}

func (c limitedLambda) UpdateEventSourceMapping(ctx context.Context, in *lambda.UpdateEventSourceMappingInput, optFns ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.UpdateEventSourceMapping(ctx, in, optFns...)
}

func (c limitedLambda) GetFunction(ctx context.Context, in *lambda.GetFunctionInput, optFns ...func(*lambda.Options)) (*lambda.GetFunctionOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.GetFunction(ctx, in, optFns...)
}

type limitedS3 struct {
	c S3
	l *rate.Limiter
}

func (c limitedS3) PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.PutObject(ctx, in, optFns...)
}

func (c limitedS3) HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.HeadObject(ctx, in, optFns...)
}

func (c limitedS3) GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.GetObject(ctx, in, optFns...)
}

func (c limitedS3) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.DeleteObject(ctx, in, optFns...)
}

func (c limitedS3) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.ListObjectsV2(ctx, in, optFns...)
}

func (c limitedS3) GetBucketEncryption(ctx context.Context, in *s3.GetBucketEncryptionInput, optFns ...func(*s3.Options)) (*s3.GetBucketEncryptionOutput, error) {
	if err := c.l.Wait(ctx); err != nil {
		return nil, err
	}
	return c.c.GetBucketEncryption(ctx, in, optFns...)
}
