package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/parking"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/poolsettings"
)

// The pooled tier (docs/controller.md, "Pooled tier"). Many tenants share one pool's FIFO queue,
// one controller function and one file and segment state machine. Each message's tenant is its
// message group id; the Pool hands it to that tenant's Handler, the very controller a silo tenant
// has, built from the shared variables and the tenant's row of the pool's settings file. The
// message group keeps each tenant's files in order and locks the tenant, as a silo's queue does.

// Pool dispatches a pool controller's events to its tenants' Handlers.
type Pool struct {
	cfg PoolConfig
	sfn stepFunctions
	sqs queue
	s3  objectStore
	// log carries the pool; every line about a tenant adds the tenant.
	log *slog.Logger
	// metrics has the Pool dimension: metrics of messages and events that have no tenant.
	metrics *metrics.Emitter
	// tenantMetrics makes a tenant's emitter; handler makes it the pool's (metrics.Emitter.InPool):
	// dimension Pool, and Tenant as a property.
	tenantMetrics func(tenant string) *metrics.Emitter
	// tenantObjects, when set, is the object store of one tenant (tenantStore): a session of the
	// pool's tenant-scoped role tagged with it. Nil: s serves every tenant.
	tenantObjects func(tenant string) (objectStore, error)
	// setup, if set, adjusts each tenant's Handler when it is made (tests: clocks).
	setup func(*Handler)
	// admission and coreMetrics are given to each tenant's Handler (admission.go).
	admission   admitter
	coreMetrics func(coreSystem string) *metrics.Emitter
	// events is given to each tenant's Handler: it puts the File Processed events (fileevent.go).
	events eventBus
	// results is given to each tenant's Handler: it invokes a failed file's results task (results.go).
	results functionInvoker

	// backlog keeps each tenant's bounded backlog (parking.go); nil: no bound. deleter deletes a
	// released counted message before parked files are fed back.
	backlog *backlog.Backlog
	deleter messageDeleter
	sweep   parking.Sweeper

	mu       sync.Mutex
	handlers map[string]*Handler
	// scheduledGates are the core systems' gates of the scheduled reconcile, once found (reconcile.go).
	scheduledGates []coreGate
}

// newPool wires a Pool. cfg must come from PoolConfigFromEnv.
func newPool(cfg PoolConfig, sf stepFunctions, q queue, s objectStore, log *slog.Logger,
	poolMetrics *metrics.Emitter, tenantMetrics func(tenant string) *metrics.Emitter) *Pool {
	return &Pool{cfg: cfg, sfn: sf, sqs: q, s3: s, log: log.With("pool", cfg.Shared.Pool),
		metrics: poolMetrics, tenantMetrics: tenantMetrics, handlers: map[string]*Handler{}}
}

// Invoke is a pool controller's Lambda entry point: the pool queue's SQS events and the pool's
// file state machine's status change events, as a silo controller's Invoke.
func (p *Pool) Invoke(ctx context.Context, payload json.RawMessage) (any, error) {
	return invoke(ctx, p, payload)
}

// maxHandlers bounds the Handlers a warm pool controller keeps. A Handler keeps no state between
// invocations but its tenant's last health line (headmetrics.go), so one dropped is made again,
// from the tenant's row, when next needed, and writes that line again.
const maxHandlers = 1024

// handler returns the Handler of the pool's tenant id, made on first use from the tenant's row of
// the settings file and kept (at most maxHandlers of them). The error is
// poolsettings.ErrUnknownTenant for an id that is no tenant of the pool, or names the problems of
// the tenant's row; a tenant whose row is bad gets no Handler, and its row is read again on its
// next message.
func (p *Pool) handler(id string) (*Handler, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h, ok := p.handlers[id]; ok {
		return h, nil
	}
	cfg, err := p.cfg.tenantConfig(id)
	if err != nil {
		return nil, err
	}
	// The tenant's metrics are the pool's, [Pool], and the tenant is a property of each line: the
	// pool's Contributor Insights rules key the lines by it (metrics.Emitter.InPool).
	var objects objectStore = p.s3
	if p.tenantObjects != nil {
		objects = tenantStore{tenant: id, objects: p.tenantObjects}
	}
	h := newHandler(cfg, p.sfn, p.sqs, objects, p.log, p.tenantMetrics(id).InPool(p.cfg.Shared.Pool))
	h.admission, h.coreMetrics, h.events, h.results = p.admission, p.coreMetrics, p.events, p.results
	if p.backlog != nil {
		// A held file sent back is counted in the tenant's bounded backlog, or parked, as the
		// router does with a new file.
		h.fileSender = func(ctx context.Context, dedupID, body string) error {
			m := backlog.Message{Tenant: id, ID: dedupID, Body: body}
			send, err := p.backlog.Route(ctx, m)
			if err != nil || !send {
				return err
			}
			return p.backlog.Send(ctx, m)
		}
	}
	if p.setup != nil {
		p.setup(h)
	}
	if len(p.handlers) >= maxHandlers {
		for k := range p.handlers { // any one
			delete(p.handlers, k)
			break
		}
	}
	p.handlers[id] = h
	return h, nil
}

// Handle gives each record to the Handler of its message group's tenant. The event source mapping
// delivers one record at a time, but a batch of several records and groups is handled too: each
// tenant's records, in their order, go to its Handler, and the batch item failures of all of them
// are merged.
func (p *Pool) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	var order []string
	groups := map[string][]events.SQSMessage{}
	for _, rec := range ev.Records {
		g := rec.Attributes["MessageGroupId"]
		if _, seen := groups[g]; !seen {
			order = append(order, g)
		}
		groups[g] = append(groups[g], rec)
	}
	var errs []error
	for _, g := range order {
		// A sequenced tenant's tick travels in a group of its own, beside its files' group.
		h, err := p.handler(strings.TrimSuffix(g, pipeline.TickGroupSuffix))
		if err != nil {
			for _, rec := range groups[g] {
				if errors.Is(err, poolsettings.ErrUnknownTenant) {
					p.unknownTenant(ctx, rec)
				} else {
					p.badTenant(ctx, rec, err)
				}
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			}
			continue
		}
		// The batch was received before the first tenant's turn: each tenant's holds count from
		// there (received.go), not from when its own turn in the batch came.
		ctx = withInvoked(ctx, h.now())
		r, err := h.Handle(ctx, events.SQSEvent{Records: groups[g]})
		if err != nil {
			errs = append(errs, fmt.Errorf("tenant %s: %w", g, err))
			continue
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, r.BatchItemFailures...)
		kept := map[string]bool{}
		for _, f := range r.BatchItemFailures {
			kept[f.ItemIdentifier] = true
		}
		for _, rec := range groups[g] {
			if !kept[rec.MessageId] && !p.released(ctx, g, rec) {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			}
		}
	}
	p.sweepParked(ctx)
	return resp, errors.Join(errs...)
}

// unknownTenant keeps a message whose group is no tenant of the pool: its tenant was removed from
// the settings file while its files were still queued. The message is never deleted: it comes back
// every MAX_WAIT_SECONDS until the tenant is added again or an operator moves it, and each delivery
// logs ERROR and counts UnknownTenantMessages. The queue's redrive policy, if any, applies as to
// any kept message.
func (p *Pool) unknownTenant(ctx context.Context, rec events.SQSMessage) {
	wait := p.cfg.Shared.MaxWait
	log := p.log.With("tenant", rec.Attributes["MessageGroupId"], "messageId", rec.MessageId, "attempt", receiveCount(rec))
	log.ErrorContext(ctx, "message of no tenant of the pool; message kept: add the tenant to the pool's settings again, or move the message",
		"nextWaitSeconds", wait.Seconds())
	if err := setVisibility(ctx, p.sqs, p.cfg.Shared.QueueURL, rec, wait); err != nil {
		log.WarnContext(ctx, "could not change the message visibility; it returns after the queue's visibility timeout", "error", err)
	}
	if err := p.metrics.Emit(metrics.Count(metrics.UnknownTenantMessages, 1)); err != nil {
		log.WarnContext(ctx, "metrics not written", "error", err)
	}
}

// badTenant keeps a message of a tenant whose row of the settings file is bad, as unknownTenant
// keeps one of no tenant: never deleted, back every MAX_WAIT_SECONDS, each delivery logging ERROR
// with the tenant and the problem, until a deployment fixes the row. The pool's other tenants are
// not held.
func (p *Pool) badTenant(ctx context.Context, rec events.SQSMessage, problem error) {
	wait := p.cfg.Shared.MaxWait
	log := p.log.With("tenant", rec.Attributes["MessageGroupId"], "messageId", rec.MessageId, "attempt", receiveCount(rec))
	log.ErrorContext(ctx, "the tenant's settings in the pool's settings file are invalid; message kept: fix the tenant and deploy",
		"error", problem.Error(), "nextWaitSeconds", wait.Seconds())
	if err := setVisibility(ctx, p.sqs, p.cfg.Shared.QueueURL, rec, wait); err != nil {
		log.WarnContext(ctx, "could not change the message visibility; it returns after the queue's visibility timeout", "error", err)
	}
}

// Wake hands a status change event of the pool's file state machine to the Handler of the
// execution's tenant. The tenant is the one in the execution's input (pipeline.WorkflowInput),
// which the event carries in detail.input; when the event leaves it out, DescribeExecution reads
// it. An event of no tenant of the pool is logged and counted, never an error: a wake-up only
// shortens a wait, and the safety net looks again.
func (p *Pool) Wake(ctx context.Context, ev events.EventBridgeEvent) error {
	p.sweepParked(ctx)
	var sc struct {
		statusChange
		Input *string `json:"input"`
	}
	if err := json.Unmarshal(ev.Detail, &sc); err != nil || sc.ExecutionARN == "" || sc.StateMachineARN == "" || sc.Name == "" || sc.Status == "" {
		return p.unknownShape(ctx, fmt.Errorf("event %s: detail lacks executionArn, stateMachineArn, name or status (%v)", ev.ID, err))
	}
	log := p.log.With("eventId", ev.ID, "executionName", sc.Name, "status", sc.Status)
	if sc.StateMachineARN != p.cfg.Shared.StateMachineARN || sc.ExecutionARN != p.cfg.Shared.ExecutionARN(sc.Name) {
		err := fmt.Errorf("event %s is about %s of %s, want an execution of %s", ev.ID, sc.ExecutionARN, sc.StateMachineARN, p.cfg.Shared.StateMachineARN)
		log.ErrorContext(ctx, "status event of another state machine: check the pool's wake-up rule", "error", err)
		return err
	}
	input, from := aws.ToString(sc.Input), "event"
	if input == "" {
		out, err := p.sfn.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(sc.ExecutionARN)})
		if err != nil {
			log.Log(ctx, stateErrorLevel(err), "the execution's tenant could not be read; the safety net will look again", "error", err)
			p.countUnknownEvent(ctx, log)
			return nil
		}
		input, from = aws.ToString(out.Input), "DescribeExecution"
	}
	var in pipeline.WorkflowInput
	if err := json.Unmarshal([]byte(input), &in); err != nil || in.Tenant.ID == "" {
		log.ErrorContext(ctx, "the execution's input names no tenant; nothing to wake", "inputFrom", from, "error", err)
		p.countUnknownEvent(ctx, log)
		return nil
	}
	h, err := p.handler(in.Tenant.ID)
	switch {
	case errors.Is(err, poolsettings.ErrUnknownTenant):
		log.ErrorContext(ctx, "status event of an execution of no tenant of the pool; nothing to wake", "tenant", in.Tenant.ID, "inputFrom", from)
		p.countUnknownEvent(ctx, log)
		return nil
	case err != nil:
		log.ErrorContext(ctx, "status event of a tenant whose settings in the pool's settings file are invalid; nothing to wake", "tenant", in.Tenant.ID, "error", err.Error())
		return nil
	}
	return h.Wake(ctx, ev)
}

func (p *Pool) countUnknownEvent(ctx context.Context, log *slog.Logger) {
	if err := p.metrics.Emit(metrics.Count(metrics.UnknownTenantEvents, 1)); err != nil {
		log.WarnContext(ctx, "metrics not written", "error", err)
	}
}

func (p *Pool) unknownShape(ctx context.Context, err error) error {
	err = fmt.Errorf("controller received an event it does not handle: %w", err)
	p.log.ErrorContext(ctx, "unknown event shape", "error", err)
	return err
}
