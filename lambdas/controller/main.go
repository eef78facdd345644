// Command controller is the tenant pipeline's controller Lambda. It reads the tenant's FIFO queue
// one file event at a time and keeps each message in flight until that file's Step Functions
// execution has finished, so the queue itself is the tenant's lock. The same function handles the
// execution's status change events, which make the waiting message visible at once. See
// docs/controller.md.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/awsconfig"
	"github.com/example/tenantpipeline/internal/metrics"
)

func main() {
	// slog's JSON handler writes "level":"INFO"/"WARN"/"ERROR"; the construct's metric filter
	// matches "ERROR".
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	slog.SetDefault(logger)

	cfg, err := configFromEnv(os.Getenv)
	if err != nil {
		logger.Error("controller cannot start", "error", err)
		os.Exit(1)
	}
	awsCfg, err := awsconfig.Load(context.Background())
	if err != nil {
		logger.Error("controller cannot load the AWS SDK configuration", "error", err)
		os.Exit(1)
	}
	h := NewHandler(cfg,
		sfn.NewFromConfig(awsCfg),
		sqs.NewFromConfig(awsCfg),
		s3.NewFromConfig(awsCfg, awsconfig.S3Options),
		logger,
		metrics.New(os.Stdout, cfg.MetricsNamespace, cfg.Tenant.ID),
	)
	// One binary, two event shapes: the tenant queue's SQS events, and the file state machine's
	// status change events from the wake-up rule (wake.go).
	lambda.Start(h.Invoke)
}
