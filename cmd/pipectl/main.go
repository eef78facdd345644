// Command pipectl operates the tenant pipeline's tenants: status, files, pause, resume, skip,
// redrive and replay, a sequenced tenant's sequence skip and set, and uploads into a tenant's
// prefix (docs/operations.md). It finds every tenant from the deployed stacks alone
// (stack prefix + tenant id) and uses the AWS SDK's standard credential, region and endpoint chain,
// including AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE>, so the same binary works against AWS
// and against the local run.
//
// Exit status: 0 success, 1 failure (including a refused operation), 2 bad usage.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/example/tenantpipeline/internal/awsconfig"
	"github.com/example/tenantpipeline/internal/ops"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, awsOps))
}

// awsOps builds Ops on the SDK's default configuration. config.LoadDefaultConfig reads
// AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> (CLOUDFORMATION, SQS, SFN, LAMBDA, S3, STS, DYNAMODB, CLOUDWATCH) since
// github.com/aws/aws-sdk-go-v2/config v1.21.0; go.mod requires a later one.
// https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html
//
// The SDK's logger is quiet while the configuration loads, because the instance-role client (IMDS)
// it builds then keeps that logger: outside EC2 it would warn "falling back to IMDSv1" before
// every missing-credentials error. The service clients log as the SDK does by default. A read whose
// answer is cut short is asked again (awsconfig.RetryTruncatedReads): status and the reports read
// many pages.
func awsOps(ctx context.Context, stackPrefix string) (*ops.Ops, error) {
	cfg, err := awsconfig.Load(ctx, config.WithLogger(logging.Nop{}), config.WithRetryer(retryer),
		config.WithAPIOptions([]func(*middleware.Stack) error{awsconfig.RetryTruncatedReads}))
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	cfg.Logger = logging.NewStandardLogger(os.Stderr)
	if err := checkCredentials(ctx, cfg); err != nil {
		return nil, err
	}
	return ops.New(ops.Clients{
		CloudFormation: cloudformation.NewFromConfig(cfg),
		SQS:            sqs.NewFromConfig(cfg),
		StepFunctions:  sfn.NewFromConfig(cfg),
		Lambda:         lambda.NewFromConfig(cfg),
		S3:             s3.NewFromConfig(cfg, awsconfig.S3Options),
		STS:            sts.NewFromConfig(cfg),
		DynamoDB:       dynamodb.NewFromConfig(cfg),
		CloudWatch:     cloudwatch.NewFromConfig(cfg),
		Credentials:    cfg.Credentials,
		Presigner: func(creds aws.CredentialsProvider) ops.Presigner {
			return s3.NewPresignClient(s3.NewFromConfig(cfg, awsconfig.S3Options, func(o *s3.Options) { o.Credentials = creds }))
		},
	}, stackPrefix), nil
}

// maxAttempts is how often pipectl tries one AWS call. A bulk action (--all-halted, ...) keeps
// within the services' quotas with its rate (--rate); a throttle that happens all the same (a
// quota shared with other callers) is retried by the SDK's standard retryer, with exponential
// backoff and jitter up to 20 s, more times than its default 3 so that a long run rides it out.
// https://docs.aws.amazon.com/sdk-for-go/v2/developer-guide/configure-retries-timeouts.html
const maxAttempts = 10

func retryer() aws.Retryer { return retry.AddWithMaxAttempts(retry.NewStandard(), maxAttempts) }

// newOpsFunc builds the operations for a stack prefix (a fake in tests).
type newOpsFunc func(ctx context.Context, stackPrefix string) (*ops.Ops, error)
