package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// A pooled tenant's bounded backlog (internal/backlog; README, "A bounded backlog per tenant").
// The pool queue holds at most MAX_QUEUED_FILES_PER_TENANT messages of one tenant:
//   - the router counts each file it sends (backlog.Admit), or parks it when the tenant has that
//     many queued or earlier files parked, and then feeds the tenant's parked files back while
//     there is room. The intake queue is FIFO, each tenant's events in one intake group, and the
//     router handles a group one batch at a time, so one tenant's files are counted and parked
//     in arrival order;
//   - a file under the pool's prefix whose first path segment is a tenant id the router does not
//     know yet is parked for that id (onboarding), never dead-lettered;
//   - the pool controller, whenever it lets a counted message go (file done, skipped,
//     quarantined, replayed: every decision that releases a record, Pool.Handle), uncounts it,
//     deletes it and feeds the tenant's parked files back;
//   - both look at the index of tenants with parked files now and then (sweeper), so a tenant
//     whose queue emptied with files still parked (a crash between two steps, or a tenant the
//     settings named only later) gets them without a new file arriving.

// backlogConfig is the environment of the bound; zero Max: no bound.
type backlogConfig struct {
	Table string
	Max   int
}

// backlog reads the bound: MAX_QUEUED_FILES_PER_TENANT, and the admission table that holds it.
func (e *envReader) backlog() backlogConfig {
	v := e.optional(pipeline.EnvMaxQueuedFilesPerTenant, "")
	if v == "" {
		return backlogConfig{}
	}
	c := backlogConfig{Max: e.number(pipeline.EnvMaxQueuedFilesPerTenant, v, backlog.MinMaxQueued, backlog.MaxMaxQueued)}
	c.Table = e.required(pipeline.EnvPoolAdmissionTable)
	if c.Table != "" {
		checkTableName(pipeline.EnvPoolAdmissionTable, c.Table, e.bad)
	}
	return c
}

// newBacklog is the pool's backlog; nil when the bound is off.
func newBacklog(c backlogConfig, db admission.ItemAPI, s3 backlog.Objects, q backlog.Sender, bucket, queueURL string) *backlog.Backlog {
	if c.Max == 0 {
		return nil
	}
	return &backlog.Backlog{DB: db, Table: c.Table, S3: s3, Bucket: bucket, SQS: q, QueueURL: queueURL,
		Max: c.Max, Retention: queueRetention}
}

// queueRetention is the pool queue's message retention (the construct's QueueRetention, 14 days):
// a counted entry older than it names a message SQS has deleted by itself.
const queueRetention = 14 * 24 * time.Hour

// admit counts a routed file in its tenant's backlog, or parks it. send is true when the caller
// sends it to the pool queue now. With no bound, every known tenant's file is sent.
func (r *Router) admit(ctx context.Context, m routed) (send bool, err error) {
	if r.backlog == nil {
		return true, nil
	}
	log := r.log.With("tenant", m.tenant, "key", m.key, "eventId", m.id)
	msg := backlog.Message{Tenant: m.tenant, ID: deduplicationID(m.id, m.body), Body: m.body}
	if m.unknown {
		slot, err := r.backlog.Park(ctx, msg)
		if err != nil {
			log.ErrorContext(ctx, "file of a tenant the pool's settings do not name yet could not be parked; it stays on the intake queue", "error", err)
			return false, err
		}
		log.WarnContext(ctx, "file of a tenant the pool's settings do not name yet parked: it is routed, in order, once the settings name the tenant",
			"slot", slot, "parkedKey", backlog.ParkedKey(m.tenant, slot))
		if err := r.metrics.Emit(metrics.Count(metrics.FilesParkedForUnknownTenant, 1)); err != nil {
			log.WarnContext(ctx, "metrics not written", "error", err)
		}
		return false, nil
	}
	send, err = r.backlog.Route(ctx, msg)
	if err != nil {
		log.ErrorContext(ctx, "the tenant's backlog could not be kept; the file stays on the intake queue", "error", err)
		return false, err
	}
	if send {
		return true, nil
	}
	log.InfoContext(ctx, "file parked: the tenant has its most files queued or earlier files parked", "maxQueuedFilesPerTenant", r.backlog.Max)
	if err := r.tenantMetrics(m.tenant).Emit(metrics.Count(metrics.FilesParked, 1)); err != nil {
		log.WarnContext(ctx, "metrics not written", "error", err)
	}
	drain(ctx, r.backlog, log, m.tenant)
	return false, nil
}

// drain feeds a tenant's parked files back while there is room. A failure is the tenant's alone:
// its files stay parked, in order, until the next release, file or sweep drains it.
func drain(ctx context.Context, b *backlog.Backlog, log *slog.Logger, tenant string) {
	n, err := b.Drain(ctx, tenant)
	switch {
	case errors.Is(err, backlog.ErrMissingParkedFile):
		log.ErrorContext(ctx, "a parked file of the tenant is missing; its later files hold: repair the backlog (docs/operations.md, \"Parked files\")", "tenant", tenant, "error", err)
	case err != nil:
		log.WarnContext(ctx, "parked files not fed back yet; the next release, file or sweep tries again", "tenant", tenant, "unparked", n, "error", err)
	case n > 0:
		log.InfoContext(ctx, "parked files fed back to the pool queue, in order", "tenant", tenant, "unparked", n)
	}
}

// sweepParked drains the tenants of the index the router knows, a page at a time.
func (r *Router) sweepParked(ctx context.Context) {
	if r.backlog == nil {
		return
	}
	if r.sweep == nil {
		r.sweep = &sweeper{}
	}
	r.sweep.run(ctx, r.backlog, r.log, func(id string) bool { _, ok := r.cfg.Settings.Entry(id); return ok })
}

// sweeper looks at the index of tenants with parked files at most once per sweepInterval, one
// page of sweepPage tenants a time, going on where it stopped and starting over at the end, so
// its cost is bounded whatever the number of tenants.
type sweeper struct {
	mu   sync.Mutex
	last time.Time
	from backlog.Cursor
	now  func() time.Time
}

const (
	sweepInterval = time.Minute
	sweepPage     = 25
)

func (s *sweeper) run(ctx context.Context, b *backlog.Backlog, log *slog.Logger, known func(string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	if !s.last.IsZero() && now.Sub(s.last) < sweepInterval {
		return
	}
	s.last = now
	ids, next, err := b.Indexed(ctx, s.from, sweepPage)
	if err != nil {
		log.WarnContext(ctx, "the tenants with parked files could not be listed; the next sweep tries again", "error", err)
		return
	}
	s.from = next
	for _, id := range ids {
		if !known(id) {
			continue
		}
		drain(ctx, b, log, id)
		if err := b.Forget(ctx, id); err != nil {
			log.WarnContext(ctx, "the tenant stays in the index of parked files; the next sweep tries again", "tenant", id, "error", err)
		}
	}
}

// messageDeleter is the SQS client's part the pool controller uses to delete a counted message
// itself, before it feeds a parked file back, so that the tenant never has more than the bound
// in the queue.
type messageDeleter interface {
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

var _ messageDeleter = (*sqs.Client)(nil)

// released is the one place a pool controller lets a tenant's message go: the record was not
// reported as a batch item failure, so the event source mapping would delete it. A counted message
// (backlog.AttrMessageID) is uncounted first (a retry after a crash uncounts nothing twice), then
// deleted here, then the tenant's parked files are fed back. false: the message could not be
// uncounted; it is kept (reported as a failure) and comes back, to be released again.
func (p *Pool) released(ctx context.Context, tenant string, rec events.SQSMessage) bool {
	if p.backlog == nil {
		return true
	}
	a, ok := rec.MessageAttributes[backlog.AttrMessageID]
	if !ok || aws.ToString(a.StringValue) == "" {
		return true // not counted: an operator's message
	}
	log := p.log.With("tenant", tenant, "messageId", rec.MessageId)
	if err := p.backlog.Released(ctx, tenant, aws.ToString(a.StringValue)); err != nil {
		log.WarnContext(ctx, "the released message could not be uncounted; it is kept and released again when it comes back", "error", err)
		return false
	}
	// The event source mapping deletes the record again after the invocation. SQS documents that a
	// DeleteMessage with a receipt handle that is not the latest "will still succeed"
	// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_DeleteMessage.html);
	// it does not say what a second delete of a deleted message answers, nor what the mapping does
	// with a failed delete. Safe either way: the message is gone, so nothing can deliver it again.
	if p.deleter != nil {
		if _, err := p.deleter.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.cfg.Shared.QueueURL), ReceiptHandle: aws.String(rec.ReceiptHandle)}); err != nil {
			// The event source mapping deletes it; until then the tenant may have one more
			// message queued than the bound.
			log.WarnContext(ctx, "the released message could not be deleted before its tenant's parked files are fed back", "error", err)
		}
	}
	drain(ctx, p.backlog, log, tenant)
	return true
}

// sweepParked drains the tenants of the index the controller knows, a page at a time.
func (p *Pool) sweepParked(ctx context.Context) {
	if p.backlog == nil {
		return
	}
	p.sweep.run(ctx, p.backlog, p.log, func(id string) bool { _, ok := p.cfg.Settings.Entry(id); return ok })
}
