// Command register is the tenant pipeline's Register Lambda: it reads its configuration, builds
// the AWS clients once and hands each chunk to internal/register. See docs/data-path.md.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/example/tenantpipeline/internal/awsconfig"
	"github.com/example/tenantpipeline/internal/deployed"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/register"
	"github.com/example/tenantpipeline/internal/split"
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
	static, err := register.ParseRequestShares(os.Getenv(pipeline.EnvRequestShares))
	if err != nil {
		logger.Error("register cannot start", "error", err)
		os.Exit(1)
	}
	// The settings it was deployed with: a request's core system URLs, secret and sink must be
	// these (deployed.Check).
	settings, err := deployed.FromEnv(os.Getenv)
	if err != nil {
		logger.Error("register cannot start", "error", err)
		os.Exit(1)
	}
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		logger.Error("register cannot load the AWS SDK configuration", "error", err)
		os.Exit(1)
	}
	objects := s3.NewFromConfig(cfg, awsconfig.S3Options)
	h := &register.Handler{
		S3:          objects,
		DynamoDB:    register.NewDynamoDB(cfg),
		HTTP:        register.NewHTTPClient(timeout),
		Secrets:     register.NewSecretCache(secretsmanager.NewFromConfig(cfg)),
		HTTPTimeout: timeout,
		Log:         logger,
		// How the core system's requests in flight are divided among its running files.
		StaticShares: static,
		// EMF lines on stdout become the RecordsRegistered metric; slog lines are ordinary logs.
		Metrics:          os.Stdout,
		MetricsNamespace: os.Getenv(pipeline.EnvMetricsNamespace),
		Pool:             os.Getenv(pipeline.EnvMetricsPool),
		KeysPool:         keysPool(logger),
		Deployed:         settings,
	}
	if role := os.Getenv(pipeline.EnvTenantRoleARN); role != "" {
		tenantRole := tenantcreds.Role{ARN: role, Pool: os.Getenv(pipeline.EnvTenantRolePool)}
		if err := tenantRole.Check(); err != nil {
			logger.Error("register cannot start", "error", err)
			os.Exit(1)
		}
		// A pool's Register reads, writes and fetches secrets as the execution's tenant.
		h.ForTenant = tenantcreds.NewCache(sts.NewFromConfig(cfg), tenantRole, tenantcreds.DefaultSize,
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
	// The small-file path (register.SmallFile) splits and writes results as the Split function
	// does, with the same clients; WORK_BUCKET names where.
	small := &register.SmallFile{Register: h, Split: &split.Handler{
		S3:         objects,
		WorkBucket: os.Getenv(pipeline.EnvWorkBucket),
		Log:        logger,
		Metrics:    os.Stdout,
		Pool:       os.Getenv(pipeline.EnvMetricsPool),
		KeysPool:   keysPool(logger),
	}}
	if h.ForTenant != nil {
		small.Split.ForTenant = func(tenant string) (split.ObjectAPI, error) {
			c, err := h.ForTenant(tenant)
			if err != nil {
				return nil, err
			}
			objects, ok := c.S3.(split.ObjectAPI) // an *s3.Client, made above
			if !ok {
				return nil, fmt.Errorf("tenant %q: the S3 client cannot list", tenant)
			}
			return objects, nil
		}
	}
	lambda.Start(small.Invoke)
}

// keysPool is the pool the tenants' keys carry (pipeline.EnvKeysPool); any other pool's stops
// the function.
func keysPool(logger *slog.Logger) string {
	v, err := pipeline.SplitRegisterKeysPool(os.Getenv)
	if err != nil {
		logger.Error("register cannot start", "error", err)
		os.Exit(1)
	}
	return v
}
