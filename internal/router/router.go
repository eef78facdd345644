// Package router is the pool's router (FUNCTION_ROLE=router; docs/controller.md, "Pooled tier").
// The pool's EventBridge rules send S3 "Object Created" events under POOL_PREFIX to the pool's
// intake queue, a FIFO queue with one message group per rule, each tenant's events always in the same group, so
// they wait there in the order EventBridge delivered them, as a silo tenant's events wait in its
// own queue. The router reads the intake through an event source mapping, one ordered batch of a
// group at a time (one invocation per group at once), and puts each event on the pool's FIFO queue
// under its tenant's message group, unchanged: the body is the event JSON as EventBridge's SQS
// target wrote it, so the controller and pipectl replay --from-dlq read it as they read a silo
// queue's. It sends up to 10 events in one SendMessageBatch call, never two of one tenant. A
// tenant's files past its bound in the pool queue, and the files of a tenant the settings do not
// name yet, are parked instead, in order (parking.go).
//
// An asynchronous Lambda target would not do: Lambda does not keep the order of asynchronous
// invocations, so a burst of one tenant's files would reach the pool queue out of arrival order.
package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/env"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/parking"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
	"github.com/example/tenantpipeline/internal/s3event"
)

// sender is the slice of the SQS client the router uses.
type sender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var _ sender = (*sqs.Client)(nil)

// SendMessageBatch takes at most 10 entries, and at most 256 KiB of bodies in all (the API
// reference now says 1 MiB; the router keeps to the older, smaller figure, safe either way).
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html
const (
	maxSendBatchEntries = 10
	maxSendBatchBytes   = 256 * 1024
)

// Config is the router's environment.
type Config struct {
	Pool string
	// KeysPool is the pool its tenants' keys carry (EnvKeysPool, pipeline.Owner): Pool, or empty
	// for the KeysPerTenant layout.
	KeysPool string
	Bucket   string
	QueueURL string
	// DeadLetterQueueURL is a standard queue: events of no tenant are kept there.
	DeadLetterQueueURL string
	MetricsNamespace   string
	Settings           *poolsettings.Index
	// SendBatchSize caps the entries of a SendMessageBatch call (ROUTER_SEND_BATCH_SIZE): 1 to
	// 10, default 10.
	SendBatchSize int
	// Backlog bounds each tenant's messages in the pool queue (parking.go); zero: no bound.
	Backlog parking.Config
	// ParkEach counts and feeds back each parked file (ROUTER_PARK_EACH), a reference for
	// measuring the router; false, the default, parks a batch's later files of a tenant straight
	// away.
	ParkEach bool
}

// ConfigFromEnv reads and validates the router's environment. Every problem is reported,
// each naming its variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	e := env.NewReader(getenv)
	c := Config{
		Bucket:             e.Required(pipeline.EnvBucket),
		QueueURL:           e.Required(pipeline.EnvQueueURL),
		DeadLetterQueueURL: e.Required(pipeline.EnvDeadLetterQueueURL),
		MetricsNamespace:   e.Optional(pipeline.EnvMetricsNamespace, pipeline.DefaultMetricsNamespace),
	}
	c.Pool, c.Settings = e.Pool()
	c.KeysPool = e.KeysPool(c.Pool)
	c.Backlog = parking.ConfigFromEnv(e)
	c.SendBatchSize = maxSendBatchEntries
	if v := e.Optional(pipeline.EnvRouterSendBatchSize, ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSendBatchEntries {
			e.Bad(pipeline.EnvRouterSendBatchSize, "%q is out of range, want 1 to %d", v, maxSendBatchEntries)
		}
		c.SendBatchSize = n
	}
	switch v := e.Optional(pipeline.EnvRouterParkEach, "false"); v {
	case "true", "false":
		c.ParkEach = v == "true"
	default:
		e.Bad(pipeline.EnvRouterParkEach, "%q is invalid, want true or false", v)
	}
	if c.QueueURL != "" {
		env.CheckURL(pipeline.EnvQueueURL, c.QueueURL, e.Bad)
		if !strings.HasSuffix(c.QueueURL, ".fifo") {
			e.Bad(pipeline.EnvQueueURL, "%q is not a FIFO queue: the pool's queue keeps each tenant's files in order by message group", c.QueueURL)
		}
	}
	if c.DeadLetterQueueURL != "" {
		env.CheckURL(pipeline.EnvDeadLetterQueueURL, c.DeadLetterQueueURL, e.Bad)
		if strings.HasSuffix(c.DeadLetterQueueURL, ".fifo") {
			e.Bad(pipeline.EnvDeadLetterQueueURL, "%q is a FIFO queue, want a standard queue", c.DeadLetterQueueURL)
		}
	}
	if err := e.Err(); err != nil {
		if c.Settings != nil {
			c.Settings.Close()
		}
		return Config{}, fmt.Errorf("router environment: %w", err)
	}
	return c, nil
}

// Router routes a pool's S3 events to its tenants' message groups.
type Router struct {
	cfg Config
	sqs sender
	// log carries the pool.
	log *slog.Logger
	// metrics has the Pool dimension; tenantMetrics makes a tenant's emitter, which the router makes
	// the pool's (metrics.Emitter.InPool): dimension Pool, Tenant a property.
	metrics       *metrics.Emitter
	tenantMetrics func(tenant string) *metrics.Emitter
	// backlog keeps each tenant's bounded backlog (parking.go); nil: no bound.
	backlog *backlog.Backlog
	sweep   parking.Sweeper
}

// Clients are the AWS clients of a router, each built once by its main.
type Clients struct {
	SQS      *sqs.Client
	DynamoDB *dynamodb.Client // the backlog's table; used only with a bound
	S3       *s3.Client       // the parked files; used only with a bound
}

// New is the router of cfg (from ConfigFromEnv): its SQS client uses the SDK's default retryer;
// its metrics (EMF) are written to out.
func New(cfg Config, c Clients, log *slog.Logger, out io.Writer) *Router {
	ns := cfg.MetricsNamespace
	r := newRouter(cfg, c.SQS, log,
		metrics.NewDimension(out, ns, metrics.DimensionPool, cfg.Pool),
		func(tenant string) *metrics.Emitter { return metrics.New(out, ns, tenant) })
	// Each tenant's bounded backlog (parking.go).
	r.backlog = parking.New(cfg.Backlog, cfg.KeysPool, c.DynamoDB, c.S3, c.SQS, cfg.Bucket, cfg.QueueURL)
	return r
}

// newRouter wires a Router of cfg to q, without a bound.
func newRouter(cfg Config, q sender, log *slog.Logger, poolMetrics *metrics.Emitter, tenantMetrics func(tenant string) *metrics.Emitter) *Router {
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

// Handle routes a batch of intake messages in order, the pool queue's in SendMessageBatch calls of
// at most SendBatchSize entries, never two of one tenant in one call (so that a failed entry can
// never let a later file of its tenant through). When a message cannot be stored on either queue,
// it and every later message of the batch are reported as failures: they stay on the intake queue
// and come back, still in order, after its visibility timeout, while the earlier ones are deleted.
// Lambda's advice for FIFO sources: "stop processing messages after the first failure and return
// all failed and unprocessed messages in batchItemFailures"
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).
//
// A later message of the same call may have been stored although it is reported: it is sent again
// with the same MessageDeduplicationId, and SQS accepts it without storing it twice when it comes
// within the 5-minute deduplication interval
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/using-messagededuplicationid-property.html).
// Past it (the intake's visibility timeout is 3 minutes, so only after more failures) the pool
// queue holds the event twice, one after the other in its tenant's group, and the controller finds
// the first copy's execution under the same name (IDEMPOTENCY_KEY), so the file is processed once.
//
// A message that belongs to no tenant is never a failure (it goes to the dead-letter queue), so one
// bad event cannot hold up the pool.
func (r *Router) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	keep := func(from int, err error) {
		for _, later := range ev.Records[from:] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: later.MessageId})
		}
		r.log.WarnContext(ctx, "intake messages kept for the next delivery, in order", "kept", len(ev.Records)-from, "error", err)
	}
	var batch []routed
	var bytes int
	flush := func() (int, error) {
		defer func() { batch, bytes = batch[:0], 0 }()
		return r.send(ctx, batch)
	}
	r.sweepParked(ctx)
	// The tenants with a file parked in this batch, in the order they first had one; fed back
	// after the batch's last send, so a file drained then can never overtake an earlier one.
	var parked []string
	defer func() { r.drainParked(ctx, parked) }()
	for i, rec := range ev.Records {
		m, u := r.classify(i, json.RawMessage(rec.Body))
		if u != nil || len(batch) == r.cfg.SendBatchSize || bytes+len(m.body) > maxSendBatchBytes || slices.ContainsFunc(batch, m.sameTenant) {
			if from, err := flush(); err != nil {
				keep(from, err)
				return resp, nil
			}
		}
		if u != nil {
			if err := r.unrouted(ctx, *u); err != nil {
				keep(i, err)
				return resp, nil
			}
			continue
		}
		behind := !r.cfg.ParkEach && slices.Contains(parked, m.tenant)
		send, err := r.admit(ctx, m, behind)
		if err != nil {
			if from, ferr := flush(); ferr != nil {
				keep(from, ferr)
				return resp, nil
			}
			keep(i, err)
			return resp, nil
		}
		if !send {
			switch {
			case m.unknown, behind:
			case r.cfg.ParkEach:
				r.drainParked(ctx, []string{m.tenant})
			default:
				parked = append(parked, m.tenant)
			}
			continue
		}
		batch, bytes = append(batch, m), bytes+len(m.body)
	}
	if from, err := flush(); err != nil {
		keep(from, err)
	}
	return resp, nil
}

// routed is an intake message bound for its tenant's message group of the pool queue.
type routed struct {
	index  int // in the intake batch
	tenant string
	id     string // the event's id
	key    string
	body   string
	// unknown: the key's first segment is a tenant id the settings do not name yet (parking.go).
	unknown bool
}

func (m routed) sameTenant(o routed) bool { return m.tenant == o.tenant }

// unroutedEvent is an intake message that belongs to no tenant, and why.
type unroutedEvent struct {
	body, id, key, reason, detail string
}

// classify finds the tenant of the intake message at index i of its batch. The payload is kept byte
// for byte: it becomes the message body. Object keys are used exactly as the event gives them,
// never URL-decoded (internal/s3event).
func (r *Router) classify(i int, payload json.RawMessage) (routed, *unroutedEvent) {
	body := string(payload)
	ev, err := s3event.Parse(payload)
	if err != nil {
		return routed{}, &unroutedEvent{body, eventID(payload), "", unroutedNotCreated, err.Error()}
	}
	key := ev.Detail.Object.Key
	if b := ev.Detail.Bucket.Name; b != r.cfg.Bucket {
		return routed{}, &unroutedEvent{body, ev.ID, key, unroutedOtherBucket, fmt.Sprintf("event is for bucket %q, want %q", b, r.cfg.Bucket)}
	}
	t, ok := r.cfg.Settings.TenantOf(key)
	if !ok && r.backlog != nil {
		if id, ok := backlog.OnboardingTenant(r.cfg.Settings.Prefix, key); ok {
			return routed{index: i, tenant: id, id: ev.ID, key: key, body: body, unknown: true}, nil
		}
	}
	if !ok {
		return routed{}, &unroutedEvent{body, ev.ID, key, unroutedNoTenant, fmt.Sprintf("key is under no tenant's prefix in pool %q (prefix %q)", r.cfg.Pool, r.cfg.Settings.Prefix)}
	}
	// The index alone routes the file. A tenant whose row is bad still gets its files, in order, in
	// its message group, where the pool controller keeps them until the row is fixed; the error is
	// logged here too, where it is first seen.
	if _, err := r.cfg.Settings.Tenant(t.ID); err != nil {
		r.log.Error("the tenant's settings in the pool's settings file are invalid; its file is routed and kept on the pool queue until they are fixed",
			"tenant", t.ID, "key", key, "eventId", ev.ID, "error", err.Error())
	}
	return routed{index: i, tenant: t.ID, id: ev.ID, key: key, body: body}, nil
}

// Route routes one EventBridge event, as a batch of one. An error is returned only when the event
// could not be stored on either queue.
func (r *Router) Route(ctx context.Context, payload json.RawMessage) error {
	m, u := r.classify(0, payload)
	if u != nil {
		return r.unrouted(ctx, *u)
	}
	send, err := r.admit(ctx, m, false)
	if err != nil {
		return err
	}
	if !send {
		if !m.unknown {
			r.drainParked(ctx, []string{m.tenant})
		}
		return nil
	}
	_, err = r.send(ctx, []routed{m})
	return err
}

// send puts a batch of events, one per tenant, on the pool queue in one SendMessageBatch call. It
// returns the intake index of the first event that was not stored, with the error, or -1 when all
// were. An entry the answer names neither as sent nor as failed counts as failed.
//
// The deduplication id is the EventBridge event id, the same on every redelivery of the intake
// message (Handle). A later duplicate of the event still finds its file's execution under the same
// name (IDEMPOTENCY_KEY event-id) or object version.
func (r *Router) send(ctx context.Context, batch []routed) (int, error) {
	if len(batch) == 0 {
		return -1, nil
	}
	entries := make([]sqstypes.SendMessageBatchRequestEntry, len(batch))
	for j, m := range batch {
		entries[j] = sqstypes.SendMessageBatchRequestEntry{
			Id:                     aws.String(strconv.Itoa(j)),
			MessageBody:            aws.String(m.body),
			MessageGroupId:         aws.String(m.tenant),
			MessageDeduplicationId: aws.String(deduplicationID(m.id, m.body)),
		}
		if r.backlog != nil {
			entries[j].MessageAttributes = backlog.Attributes(deduplicationID(m.id, m.body))
		}
	}
	out, err := r.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(r.cfg.QueueURL), Entries: entries})
	if err != nil {
		r.log.ErrorContext(ctx, "events could not be put on the pool queue; they stay on the intake queue", "events", len(batch), "error", err)
		return batch[0].index, fmt.Errorf("send %d events to the pool queue: %w", len(batch), err)
	}
	sent := map[string]string{}
	for _, s := range out.Successful {
		sent[aws.ToString(s.Id)] = aws.ToString(s.MessageId)
	}
	failed := map[string]sqstypes.BatchResultErrorEntry{}
	for _, f := range out.Failed {
		failed[aws.ToString(f.Id)] = f
	}
	for j, m := range batch {
		log := r.log.With("tenant", m.tenant, "key", m.key, "eventId", m.id)
		id, ok := sent[strconv.Itoa(j)]
		if !ok {
			f := failed[strconv.Itoa(j)]
			log.ErrorContext(ctx, "event could not be put on the pool queue; it and the later intake messages stay on the intake queue",
				"code", aws.ToString(f.Code), "senderFault", f.SenderFault, "error", aws.ToString(f.Message))
			return m.index, fmt.Errorf("send event %s to the pool queue for tenant %s: %s: %s", m.id, m.tenant, aws.ToString(f.Code), aws.ToString(f.Message))
		}
		log.InfoContext(ctx, "file routed to its tenant", "messageId", id)
		if err := r.tenantMetrics(m.tenant).InPool(r.cfg.Pool).Emit(metrics.Count(metrics.FilesRouted, 1)); err != nil {
			log.WarnContext(ctx, "metrics not written", "error", err)
		}
	}
	return -1, nil
}

// unrouted keeps an event that belongs to no tenant of the pool on the router's dead-letter queue,
// unchanged, with attributes saying why: it can be replayed once the tenant is added.
func (r *Router) unrouted(ctx context.Context, u unroutedEvent) error {
	body, id, reason, detail := u.body, u.id, u.reason, u.detail
	log := r.log.With("eventId", id, "key", u.key, "reason", reason, "detail", detail)
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
