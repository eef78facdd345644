// Package parking runs a pooled tenant's bounded backlog (internal/backlog; README, "A bounded
// backlog per tenant") the way the pool's Lambdas share it. The pool queue holds at most
// MAX_QUEUED_FILES_PER_TENANT messages of one tenant:
//   - the router (internal/router) counts each file it sends (backlog.Route), or parks it when the
//     tenant has that many queued or earlier files parked (a later file of the tenant in the same
//     intake batch is parked straight away), and after the batch feeds the tenant's parked files
//     back while there is room. The intake queue is FIFO, each tenant's events in one intake group,
//     and the router handles a group one batch at a time, so one tenant's files are counted and
//     parked in arrival order;
//   - a file under the pool's prefix whose first path segment is a tenant id the router does not
//     know yet is parked for that id (onboarding), never dead-lettered;
//   - the pool controller (internal/controller), whenever it lets a counted message go (file done,
//     skipped, quarantined, replayed: every decision that releases a record), uncounts it, deletes
//     it and feeds the tenant's parked files back (Drain);
//   - both look at the index of tenants with parked files now and then (Sweeper), so a tenant
//     whose queue emptied with files still parked (a crash between two steps, or a tenant the
//     settings named only later) gets them without a new file arriving.
package parking

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/example/tenantpipeline/internal/admission"
	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/env"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
)

// Config is the environment of the bound; zero Max: no bound.
type Config struct {
	Table string
	Max   int
}

// ConfigFromEnv reads the router's bound: MAX_QUEUED_FILES_PER_TENANT, and the admission table
// that holds it. (The pool controller reads the table as its admission table.)
func ConfigFromEnv(e *env.Reader) Config {
	v := e.Optional(pipeline.EnvMaxQueuedFilesPerTenant, "")
	if v == "" {
		return Config{}
	}
	c := Config{Max: MaxFromEnv(e, v)}
	c.Table = e.Required(pipeline.EnvPoolAdmissionTable)
	if c.Table != "" {
		env.CheckTableName(pipeline.EnvPoolAdmissionTable, c.Table, e.Bad)
	}
	return c
}

// MaxFromEnv reads v, the value of MAX_QUEUED_FILES_PER_TENANT.
func MaxFromEnv(e *env.Reader, v string) int {
	return e.Number(pipeline.EnvMaxQueuedFilesPerTenant, v, schema.MinMaxQueued, schema.MaxMaxQueued)
}

// New is the backlog of pool's tenants; nil when the bound is off.
func New(c Config, pool string, db admission.ItemAPI, s3 backlog.Objects, q backlog.Sender, bucket, queueURL string) *backlog.Backlog {
	if c.Max == 0 {
		return nil
	}
	return &backlog.Backlog{DB: db, Pool: pool, Table: c.Table, S3: s3, Bucket: bucket, SQS: q, QueueURL: queueURL,
		Max: c.Max, Retention: QueueRetention}
}

// QueueRetention is the pool queue's message retention (the construct's QueueRetention, 14 days):
// a counted entry older than it names a message SQS has deleted by itself.
const QueueRetention = 14 * 24 * time.Hour

// Drain feeds a tenant's parked files back while there is room. A failure is the tenant's alone:
// its files stay parked, in order, until the next release, file or sweep drains it.
func Drain(ctx context.Context, b *backlog.Backlog, log *slog.Logger, tenant string) {
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

// Sweeper looks at the index of tenants with parked files at most once per SweepInterval, one
// page of sweepPage tenants a time, going on where it stopped and starting over at the end, so
// its cost is bounded whatever the number of tenants. The zero value is ready to use.
type Sweeper struct {
	mu   sync.Mutex
	last time.Time
	from backlog.Cursor
	// Now, if set, is the clock (tests); nil: time.Now.
	Now func() time.Time
}

const (
	// SweepInterval is the least time between two sweeps of one Sweeper.
	SweepInterval = time.Minute
	sweepPage     = 25
)

// Run drains the next page of tenants with parked files that known says the caller serves, unless
// the last sweep was less than SweepInterval ago.
func (s *Sweeper) Run(ctx context.Context, b *backlog.Backlog, log *slog.Logger, known func(string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	if !s.last.IsZero() && now.Sub(s.last) < SweepInterval {
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
		Drain(ctx, b, log, id)
		if err := b.Forget(ctx, id); err != nil {
			log.WarnContext(ctx, "the tenant stays in the index of parked files; the next sweep tries again", "tenant", id, "error", err)
		}
	}
}
