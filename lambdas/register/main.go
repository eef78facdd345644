// Command register is the tenant pipeline's Register Lambda: it reads its configuration, builds
// the AWS clients once and hands each chunk to internal/register. See docs/data-path.md.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/example/tenantpipeline/internal/awsconfig"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/register"
	"github.com/example/tenantpipeline/internal/tenantcreds"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	slog.SetDefault(logger)

	timeout, err := register.ParseHTTPTimeout(os.Getenv(pipeline.EnvHTTPTimeoutSeconds))
	if err != nil {
		logger.Error("register cannot start", "error", err)
		os.Exit(1)
	}
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		logger.Error("register cannot load the AWS SDK configuration", "error", err)
		os.Exit(1)
	}
	h := &register.Handler{
		S3:          s3.NewFromConfig(cfg, awsconfig.S3Options),
		DynamoDB:    register.NewDynamoDB(cfg),
		HTTP:        register.NewHTTPClient(timeout),
		Secrets:     register.NewSecretCache(secretsmanager.NewFromConfig(cfg)),
		HTTPTimeout: timeout,
		Log:         logger,
		// EMF lines on stdout become the RecordsRegistered metric; slog lines are ordinary logs.
		Metrics:          os.Stdout,
		MetricsNamespace: os.Getenv(pipeline.EnvMetricsNamespace),
		Pool:             os.Getenv(pipeline.EnvMetricsPool),
	}
	if role := os.Getenv(pipeline.EnvTenantRoleARN); role != "" {
		// A pool's Register reads, writes and fetches secrets as the execution's tenant.
		h.ForTenant = tenantcreds.NewCache(sts.NewFromConfig(cfg), role, tenantcreds.DefaultSize,
			func(_ string, creds aws.CredentialsProvider) *register.TenantClients {
				tc := cfg.Copy()
				tc.Credentials = creds
				return &register.TenantClients{
					S3:       s3.NewFromConfig(tc, awsconfig.S3Options),
					DynamoDB: register.NewDynamoDB(tc),
					Secrets:  register.NewSecretCache(secretsmanager.NewFromConfig(tc)),
				}
			}).For
	}
	lambda.Start(h.Handle)
}
