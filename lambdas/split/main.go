// Command split is the tenant pipeline's Split Lambda: it reads its configuration, builds the S3
// clients once and hands each file execution to internal/split. See docs/data-path.md.
package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/example/tenantpipeline/internal/awsconfig"
	"github.com/example/tenantpipeline/internal/deployed"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/split"
	"github.com/example/tenantpipeline/internal/tenantcreds"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	slog.SetDefault(logger)

	workBucket := os.Getenv(pipeline.EnvWorkBucket)
	if workBucket == "" {
		logger.Error("split cannot start: " + pipeline.EnvWorkBucket + " is not set")
		os.Exit(1)
	}
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		logger.Error("split cannot load the AWS SDK configuration", "error", err)
		os.Exit(1)
	}
	// The settings it was deployed with: a request's tenant and core system URLs must be these
	// (deployed.Check).
	settings, err := deployed.FromEnv(os.Getenv)
	if err != nil {
		logger.Error("split cannot start", "error", err)
		os.Exit(1)
	}
	h := &split.Handler{
		Deployed:   settings,
		S3:         s3.NewFromConfig(cfg, awsconfig.S3Options),
		WorkBucket: workBucket,
		Log:        logger,
		Metrics:    os.Stdout,
		Pool:       os.Getenv(pipeline.EnvMetricsPool),
		KeysPool:   keysPool(logger),
		// A core system's completeUrl; never follow a redirect, which would turn the POST into a GET.
		HTTP: &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
	if role := os.Getenv(pipeline.EnvTenantRoleARN); role != "" {
		tenantRole := tenantcreds.Role{ARN: role, Pool: os.Getenv(pipeline.EnvTenantRolePool)}
		if err := tenantRole.Check(); err != nil {
			logger.Error("split cannot start", "error", err)
			os.Exit(1)
		}
		// A pool's Split reads and writes as the execution's tenant.
		h.ForTenant = tenantcreds.NewCache(sts.NewFromConfig(cfg), tenantRole, tenantcreds.DefaultSize,
			func(_ string, creds aws.CredentialsProvider) split.ObjectAPI {
				return s3.NewFromConfig(cfg, awsconfig.S3Options, func(o *s3.Options) { o.Credentials = creds })
			}).For
	}
	lambda.Start(h.Invoke)
}

// keysPool is the pool the tenants' keys carry (pipeline.EnvKeysPool); any other pool's stops
// the function.
func keysPool(logger *slog.Logger) string {
	v, err := pipeline.SplitRegisterKeysPool(os.Getenv)
	if err != nil {
		logger.Error("split cannot start", "error", err)
		os.Exit(1)
	}
	return v
}
