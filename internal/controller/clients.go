package controller

import (
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/parking"
)

// Clients are the AWS clients of a controller, each built once by its main.
type Clients struct {
	StepFunctions *sfn.Client
	SQS           *sqs.Client
	S3            *s3.Client
	// DynamoDB holds the admission tables (admission.go) and a pool's backlog (parking.go).
	DynamoDB *dynamodb.Client
	// EventBridge puts the File Processed events (fileevent.go).
	EventBridge *eventbridge.Client
	// Lambda invokes a failed file's results task (results.go).
	Lambda *lambda.Client
	// TenantS3, when set, is the S3 client of one of a pool's tenants: a session of the pool's
	// tenant-scoped role tagged with it, for the tenant's control and quarantine objects
	// (tenantstore.go). Nil: S3 serves every tenant.
	TenantS3 func(tenant string) (*s3.Client, error)
}

// New is a silo tenant's controller, of cfg (from ConfigFromEnv). Its metrics (EMF) are written
// to out.
func New(cfg Config, c Clients, log *slog.Logger, out io.Writer) *Handler {
	h := newHandler(cfg, c.StepFunctions, c.SQS, c.S3, log, metrics.New(out, cfg.MetricsNamespace, cfg.Tenant.ID))
	h.admission, h.coreMetrics = newAdmission(cfg, c.DynamoDB), coreMetrics(out, cfg.MetricsNamespace)
	h.events, h.results = c.EventBridge, c.Lambda
	return h
}

// NewPool is a pool's controller, of cfg (from PoolConfigFromEnv). Its metrics (EMF) are written
// to out.
func NewPool(cfg PoolConfig, c Clients, log *slog.Logger, out io.Writer) *Pool {
	ns := cfg.Shared.MetricsNamespace
	p := newPool(cfg, c.StepFunctions, c.SQS, c.S3, log,
		metrics.NewDimension(out, ns, metrics.DimensionPool, cfg.Shared.Pool),
		func(tenant string) *metrics.Emitter { return metrics.New(out, ns, tenant) })
	p.admission, p.coreMetrics = newAdmission(cfg.Shared, c.DynamoDB), coreMetrics(out, ns)
	p.events, p.results = c.EventBridge, c.Lambda
	if c.TenantS3 != nil {
		p.tenantObjects = func(tenant string) (objectStore, error) {
			s, err := c.TenantS3(tenant)
			if err != nil {
				return nil, err
			}
			return s, nil
		}
	}
	// Each tenant's bounded backlog (parking.go).
	p.backlog, p.deleter = parking.New(cfg.Backlog, cfg.Shared.KeysPool, c.DynamoDB, c.S3, c.SQS, cfg.Shared.Bucket, cfg.Shared.QueueURL), c.SQS
	return p
}

// coreMetrics makes the emitter of one core system's gate metrics (dimension CoreSystem).
func coreMetrics(out io.Writer, ns string) func(string) *metrics.Emitter {
	return func(name string) *metrics.Emitter {
		return metrics.NewDimension(out, ns, metrics.DimensionCoreSystem, name)
	}
}
