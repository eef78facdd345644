// Command controller is the tenant pipeline's controller Lambda. It reads the tenant's FIFO queue
// one file event at a time and keeps each message in flight until that file's Step Functions
// execution has finished, so the queue itself is the tenant's lock. The same function handles the
// execution's status change events, which make the waiting message visible at once. In the pooled
// tier the same binary is a pool's controller, whose tenants share one queue (one message group
// each), or the pool's router, which puts each S3 event under its tenant's group. See
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
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/tenantcreds"
)

func main() {
	// slog's JSON handler writes "level":"INFO"/"WARN"/"ERROR"; the construct's metric filter
	// matches "ERROR".
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	slog.SetDefault(logger)

	// One binary, three roles chosen by the environment: a silo tenant's controller, a pool's
	// controller (POOL set, pool.go), and a pool's router (FUNCTION_ROLE=router, router.go).
	var (
		build func(aws.Config) any
		err   error
	)
	switch role, pool := os.Getenv(pipeline.EnvFunctionRole), os.Getenv(pipeline.EnvPool); {
	case role == pipeline.FunctionRoleRouter:
		var cfg RouterConfig
		cfg, err = routerConfigFromEnv(os.Getenv)
		build = func(awsCfg aws.Config) any {
			q := sqs.NewFromConfig(awsCfg)
			r := NewRouter(cfg, q, logger,
				metrics.NewDimension(os.Stdout, cfg.MetricsNamespace, metrics.DimensionPool, cfg.Pool),
				func(tenant string) *metrics.Emitter { return metrics.New(os.Stdout, cfg.MetricsNamespace, tenant) })
			// Each tenant's bounded backlog (parking.go).
			r.backlog = newBacklog(cfg.Backlog, dynamodb.NewFromConfig(awsCfg), s3.NewFromConfig(awsCfg, awsconfig.S3Options), q, cfg.Bucket, cfg.QueueURL)
			// The pool's intake queue, through its event source mapping.
			return r.Handle
		}
	case role != "":
		err = fmt.Errorf("%s: %q, want %q or unset", pipeline.EnvFunctionRole, role, pipeline.FunctionRoleRouter)
	case pool != "":
		var cfg PoolConfig
		cfg, err = poolConfigFromEnv(os.Getenv)
		build = func(awsCfg aws.Config) any {
			ns := cfg.Shared.MetricsNamespace
			q, s, db := sqs.NewFromConfig(awsCfg), s3.NewFromConfig(awsCfg, awsconfig.S3Options), dynamodb.NewFromConfig(awsCfg)
			p := NewPool(cfg, sfn.NewFromConfig(awsCfg), q, s, logger,
				metrics.NewDimension(os.Stdout, ns, metrics.DimensionPool, cfg.Shared.Pool),
				func(tenant string) *metrics.Emitter { return metrics.New(os.Stdout, ns, tenant) })
			p.admission, p.coreMetrics = newAdmission(cfg.Shared, db), coreMetrics(ns)
			p.events, p.results = eventbridge.NewFromConfig(awsCfg), lambda.NewFromConfig(awsCfg)
			if role := os.Getenv(pipeline.EnvTenantRoleARN); role != "" {
				// Each tenant's control and quarantine objects as that tenant.
				p.tenantObjects = tenantcreds.NewCache(sts.NewFromConfig(awsCfg), role, tenantcreds.DefaultSize,
					func(_ string, creds aws.CredentialsProvider) objectStore {
						return s3.NewFromConfig(awsCfg, awsconfig.S3Options, func(o *s3.Options) { o.Credentials = creds })
					}).For
			}
			// Each tenant's bounded backlog (parking.go).
			p.backlog, p.deleter = newBacklog(cfg.Backlog, db, s, q, cfg.Shared.Bucket, cfg.Shared.QueueURL), q
			// The pool queue's SQS events and the pool's status change events (wake.go).
			return p.Invoke
		}
	default:
		var cfg Config
		cfg, err = configFromEnv(os.Getenv)
		build = func(awsCfg aws.Config) any {
			h := NewHandler(cfg,
				sfn.NewFromConfig(awsCfg),
				sqs.NewFromConfig(awsCfg),
				s3.NewFromConfig(awsCfg, awsconfig.S3Options),
				logger,
				metrics.New(os.Stdout, cfg.MetricsNamespace, cfg.Tenant.ID),
			)
			h.admission, h.coreMetrics = newAdmission(cfg, dynamodb.NewFromConfig(awsCfg)), coreMetrics(cfg.MetricsNamespace)
			h.events, h.results = eventbridge.NewFromConfig(awsCfg), lambda.NewFromConfig(awsCfg)
			// One binary, two event shapes: the tenant queue's SQS events, and the file state
			// machine's status change events from the wake-up rule (wake.go).
			return h.Invoke
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

// coreMetrics makes the emitter of one core system's gate metrics (dimension CoreSystem).
func coreMetrics(ns string) func(string) *metrics.Emitter {
	return func(name string) *metrics.Emitter {
		return metrics.NewDimension(os.Stdout, ns, metrics.DimensionCoreSystem, name)
	}
}
