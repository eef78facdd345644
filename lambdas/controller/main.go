// Command controller is the tenant pipeline's controller Lambda. One binary, three roles chosen by
// the environment: a silo tenant's controller and a pool's controller (POOL set), both
// internal/controller, and a pool's router (FUNCTION_ROLE=router), internal/router. It reads the
// role's configuration, builds the AWS clients once and starts the role's handler. See
// docs/controller.md.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	lambdaruntime "github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/example/tenantpipeline/internal/awsconfig"
	"github.com/example/tenantpipeline/internal/controller"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/router"
	"github.com/example/tenantpipeline/internal/tenantcreds"
)

func main() {
	// slog's JSON handler writes "level":"INFO"/"WARN"/"ERROR"; the construct's metric filter
	// matches "ERROR".
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	slog.SetDefault(logger)

	// Each role's configuration is read before the SDK's, and its handler is built once the
	// clients are: EMF metric lines go to stdout beside the logs.
	var (
		build func(aws.Config) any
		err   error
	)
	switch role, pool := os.Getenv(pipeline.EnvFunctionRole), os.Getenv(pipeline.EnvPool); {
	case role == pipeline.FunctionRoleRouter:
		var cfg router.Config
		cfg, err = router.ConfigFromEnv(os.Getenv)
		build = func(awsCfg aws.Config) any {
			// The pool's intake queue, through its event source mapping.
			return router.New(cfg, router.Clients{
				SQS:      sqs.NewFromConfig(awsCfg),
				DynamoDB: dynamodb.NewFromConfig(awsCfg),
				S3:       s3.NewFromConfig(awsCfg, awsconfig.S3Options),
			}, logger, os.Stdout).Handle
		}
	case role != "":
		err = fmt.Errorf("%s: %q, want %q or unset", pipeline.EnvFunctionRole, role, pipeline.FunctionRoleRouter)
	case pool != "":
		var cfg controller.PoolConfig
		cfg, err = controller.PoolConfigFromEnv(os.Getenv)
		tenantRole := tenantcreds.Role{ARN: os.Getenv(pipeline.EnvTenantRoleARN), Pool: os.Getenv(pipeline.EnvTenantRolePool)}
		if err == nil && tenantRole.ARN != "" {
			err = tenantRole.Check()
		}
		build = func(awsCfg aws.Config) any {
			c := clients(awsCfg)
			if tenantRole.ARN != "" {
				// Each tenant's control and quarantine objects as that tenant.
				c.TenantS3 = tenantcreds.NewCache(sts.NewFromConfig(awsCfg), tenantRole, tenantcreds.DefaultSize,
					func(_ string, creds aws.CredentialsProvider) *s3.Client {
						return s3.NewFromConfig(awsCfg, awsconfig.S3Options, func(o *s3.Options) { o.Credentials = creds })
					}).For
			}
			// The pool queue's SQS events and the pool's status change events.
			return controller.NewPool(cfg, c, logger, os.Stdout).Invoke
		}
	default:
		var cfg controller.Config
		cfg, err = controller.ConfigFromEnv(os.Getenv)
		build = func(awsCfg aws.Config) any {
			// The tenant queue's SQS events, and the file state machine's status change events
			// from the wake-up rule.
			return controller.New(cfg, clients(awsCfg), logger, os.Stdout).Invoke
		}
	}
	if err != nil {
		logger.Error("controller cannot start", "error", err)
		os.Exit(1)
	}
	awsCfg, err := awsconfig.Load(context.Background())
	if err != nil {
		logger.Error("controller cannot load the AWS SDK configuration", "error", err)
		os.Exit(1)
	}
	lambdaruntime.Start(build(awsCfg))
}

// clients are a controller's AWS clients, silo or pool.
func clients(awsCfg aws.Config) controller.Clients {
	return controller.Clients{
		StepFunctions: sfn.NewFromConfig(awsCfg),
		SQS:           sqs.NewFromConfig(awsCfg),
		S3:            s3.NewFromConfig(awsCfg, awsconfig.S3Options),
		DynamoDB:      dynamodb.NewFromConfig(awsCfg),
		EventBridge:   eventbridge.NewFromConfig(awsCfg),
		Lambda:        lambda.NewFromConfig(awsCfg),
	}
}
