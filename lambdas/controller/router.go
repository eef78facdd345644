package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
)

// The pool's router (FUNCTION_ROLE=router; docs/controller.md, "Pooled tier"). The pool's
// EventBridge rule sends S3 "Object Created" events under POOL_PREFIX to the pool's intake queue, a
// FIFO queue with one message group, so the events wait there in the order EventBridge delivered
// them, as a silo tenant's events wait in its own queue. The router reads the intake through an
// event source mapping, one ordered batch at a time, and puts each event on the pool's FIFO queue
// under its tenant's message group, unchanged: the body is the event JSON as EventBridge's SQS
// target wrote it, so the controller and pipectl replay --from-dlq read it as they read a silo
// queue's.
//
// An asynchronous Lambda target would not do: Lambda does not keep the order of asynchronous
// invocations, so a burst of one tenant's files would reach the pool queue out of arrival order.

// sender is the slice of the SQS client the router uses.
type sender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ sender = (*sqs.Client)(nil)

// RouterConfig is the router's environment.
type RouterConfig struct {
	Pool     string
	Bucket   string
	QueueURL string
	// DeadLetterQueueURL is a standard queue: events of no tenant are kept there.
	DeadLetterQueueURL string
	MetricsNamespace   string
	Settings           *pipeline.PoolSettings
}

// routerConfigFromEnv reads and validates the router's environment. Every problem is reported,
// each naming its variable.
func routerConfigFromEnv(getenv func(string) string) (RouterConfig, error) {
	e := newEnvReader(getenv)
	c := RouterConfig{
		Bucket:             e.required(pipeline.EnvBucket),
		QueueURL:           e.required(pipeline.EnvQueueURL),
		DeadLetterQueueURL: e.required(pipeline.EnvDeadLetterQueueURL),
		MetricsNamespace:   e.optional(pipeline.EnvMetricsNamespace, pipeline.DefaultMetricsNamespace),
	}
	c.Pool, c.Settings = e.pool()
	if c.QueueURL != "" {
		checkURL(pipeline.EnvQueueURL, c.QueueURL, e.bad)
		if !strings.HasSuffix(c.QueueURL, ".fifo") {
			e.bad(pipeline.EnvQueueURL, "%q is not a FIFO queue: the pool's queue keeps each tenant's files in order by message group", c.QueueURL)
		}
	}
	if c.DeadLetterQueueURL != "" {
		checkURL(pipeline.EnvDeadLetterQueueURL, c.DeadLetterQueueURL, e.bad)
		if strings.HasSuffix(c.DeadLetterQueueURL, ".fifo") {
			e.bad(pipeline.EnvDeadLetterQueueURL, "%q is a FIFO queue, want a standard queue", c.DeadLetterQueueURL)
		}
	}
	if err := errors.Join(e.errs...); err != nil {
		return RouterConfig{}, fmt.Errorf("router environment: %w", err)
	}
	return c, nil
}

// Router routes a pool's S3 events to its tenants' message groups.
type Router struct {
	cfg RouterConfig
	sqs sender
	// log carries the pool.
	log *slog.Logger
	// metrics has the Pool dimension; tenantMetrics makes a tenant's emitter (Tenant dimension).
	metrics       *metrics.Emitter
	tenantMetrics func(tenant string) *metrics.Emitter
}

// NewRouter wires a Router. cfg must come from routerConfigFromEnv. q uses the SDK's default
// retryer.
func NewRouter(cfg RouterConfig, q sender, log *slog.Logger, poolMetrics *metrics.Emitter, tenantMetrics func(tenant string) *metrics.Emitter) *Router {
	return &Router{cfg: cfg, sqs: q, log: log.With("pool", cfg.Pool), metrics: poolMetrics, tenantMetrics: tenantMetrics}
}

// Message attributes of an event the router kept on its dead-letter queue.
const (
	attrUnroutedReason = "UnroutedReason" // one of the unrouted* codes
	attrUnroutedDetail = "UnroutedDetail" // what was wrong, in words
	attrPool           = "Pool"
)

// Why an event was not routed.
const (
	unroutedNoTenant    = "no-tenant"
	unroutedOtherBucket = "other-bucket"
	unroutedNotCreated  = "not-object-created"
)

// maxDeduplicationID is the longest MessageDeduplicationId SQS accepts.
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
const maxDeduplicationID = 128

// Handle routes a batch of intake messages in order. When one cannot be stored on either queue,
// it and every later message of the batch are reported as failures: they stay on the intake queue
// and come back, still in order, after its visibility timeout, while the earlier ones are deleted.
// A message that belongs to no tenant is never a failure (it goes to the dead-letter queue), so one
// bad event cannot hold up the pool.
// https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html
func (r *Router) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for i, rec := range ev.Records {
		if err := r.Route(ctx, json.RawMessage(rec.Body)); err != nil {
			for _, later := range ev.Records[i:] {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: later.MessageId})
			}
			r.log.WarnContext(ctx, "intake messages kept for the next delivery, in order", "kept", len(ev.Records)-i, "error", err)
			break
		}
	}
	return resp, nil
}

// Route routes one EventBridge event. The payload is kept byte for byte: it becomes the message
// body. Object keys are used exactly as the event gives them, never URL-decoded (internal/s3event).
//
// An error is returned only when the event could not be stored on either queue; Handle then keeps
// it on the intake queue for the next delivery.
func (r *Router) Route(ctx context.Context, payload json.RawMessage) error {
	body := string(payload)
	ev, err := s3event.Parse(payload)
	if err != nil {
		return r.unrouted(ctx, body, eventID(payload), "", unroutedNotCreated, err.Error())
	}
	key := ev.Detail.Object.Key
	if b := ev.Detail.Bucket.Name; b != r.cfg.Bucket {
		return r.unrouted(ctx, body, ev.ID, key, unroutedOtherBucket, fmt.Sprintf("event is for bucket %q, want %q", b, r.cfg.Bucket))
	}
	t, ok := r.cfg.Settings.TenantOf(key)
	if !ok {
		return r.unrouted(ctx, body, ev.ID, key, unroutedNoTenant, fmt.Sprintf("key is under no tenant's prefix in pool %q (prefix %q)", r.cfg.Pool, r.cfg.Settings.Prefix))
	}
	log := r.log.With("tenant", t.ID(), "key", key, "eventId", ev.ID)
	// The deduplication id is the EventBridge event id, the same on every redelivery of the intake
	// message, so a message sent again within SQS's 5-minute
	// deduplication interval is accepted and not queued twice. A later duplicate still finds its
	// file's execution under the same name (IDEMPOTENCY_KEY event-id) or object version.
	out, err := r.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(r.cfg.QueueURL),
		MessageBody:            aws.String(body),
		MessageGroupId:         aws.String(t.ID()),
		MessageDeduplicationId: aws.String(deduplicationID(ev.ID, body)),
	})
	if err != nil {
		log.ErrorContext(ctx, "event could not be put on the pool queue; it stays on the intake queue", "error", err)
		return fmt.Errorf("send event %s to the pool queue for tenant %s: %w", ev.ID, t.ID(), err)
	}
	log.InfoContext(ctx, "file routed to its tenant", "messageId", aws.ToString(out.MessageId))
	if err := r.tenantMetrics(t.ID()).Emit(metrics.Count(metrics.FilesRouted, 1)); err != nil {
		log.WarnContext(ctx, "metrics not written", "error", err)
	}
	return nil
}

// unrouted keeps an event that belongs to no tenant of the pool on the router's dead-letter queue,
// unchanged, with attributes saying why: it can be replayed once the tenant is added.
func (r *Router) unrouted(ctx context.Context, body, id, key, reason, detail string) error {
	log := r.log.With("eventId", id, "key", key, "reason", reason, "detail", detail)
	out, err := r.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(r.cfg.DeadLetterQueueURL),
		MessageBody: aws.String(body),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			attrUnroutedReason: {DataType: aws.String("String"), StringValue: aws.String(reason)},
			attrUnroutedDetail: {DataType: aws.String("String"), StringValue: aws.String(detail)},
			attrPool:           {DataType: aws.String("String"), StringValue: aws.String(r.cfg.Pool)},
		},
	})
	if err != nil {
		log.ErrorContext(ctx, "object belongs to no tenant of the pool, and the event could not be kept on the dead-letter queue; it stays on the intake queue", "error", err)
		return fmt.Errorf("send unrouted event %s to the dead-letter queue: %w", id, err)
	}
	log.ErrorContext(ctx, "object belongs to no tenant of the pool; event kept on the dead-letter queue", "messageId", aws.ToString(out.MessageId))
	if err := r.metrics.Emit(metrics.Count(metrics.UnroutedObjects, 1)); err != nil {
		log.WarnContext(ctx, "metrics not written", "error", err)
	}
	return nil
}

// deduplicationID is the event id, or the SHA-256 of the body when the id is not a usable
// MessageDeduplicationId: empty, longer than 128 characters, or outside the printable ASCII
// SQS accepts.
func deduplicationID(id, body string) string {
	ok := id != "" && len(id) <= maxDeduplicationID
	for i := 0; ok && i < len(id); i++ {
		ok = id[i] >= '!' && id[i] <= '~'
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// eventID is the "id" of an event that is not a well-formed Object Created event, for the logs.
func eventID(payload []byte) string {
	var probe struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(payload, &probe)
	return probe.ID
}
