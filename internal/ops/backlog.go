package ops

import (
	"context"
	"strconv"

	"github.com/example/tenantpipeline/internal/backlog"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// A pooled tenant's bounded backlog (internal/backlog; docs/operations.md, "Parked files"). Its
// pool controller's environment names the bound (MAX_QUEUED_FILES_PER_TENANT) and the admission
// table that keeps it; a pool deployed without them has no bound.

// poolBacklog is the backlog of t's pool, or nil for a silo tenant or a pool without a bound.
func (o *Ops) poolBacklog(t pipeline.TenantOutput) *backlog.Backlog {
	if t.Pool == "" || o.DynamoDB == nil {
		return nil
	}
	for _, p := range o.found.pools {
		if p.out.Pool != t.Pool {
			continue
		}
		limit, err := strconv.Atoi(p.env[pipeline.EnvMaxQueuedFilesPerTenant])
		table := p.env[pipeline.EnvPoolAdmissionTable]
		if err != nil || limit < 1 || table == "" {
			return nil
		}
		return &backlog.Backlog{DB: o.DynamoDB, Pool: t.KeysPool, Table: table, S3: o.S3, Bucket: t.Bucket, SQS: o.SQS, QueueURL: t.QueueURL,
			Max: limit, Now: o.Now}
	}
	return nil
}

// backlogState fills a pooled tenant's row with its backlog: files counted in the pool queue and
// files parked outside it. Both stay null without a bound.
func (o *Ops) backlogState(ctx context.Context, t pipeline.TenantOutput, row *TenantStatus) error {
	b := o.poolBacklog(t)
	if b == nil {
		return nil
	}
	st, err := b.State(ctx, t.ID)
	if err != nil {
		return err
	}
	row.Parked, row.QueuedFiles = &st.Parked, &st.Queued
	return nil
}

// sendCounted sends an operator's message that stands for a file (a replay) through the tenant's
// bound, as the router sends a file: counted and sent, or parked behind the tenant's parked files
// when it has its most queued. Without a bound it is sent as before. messageID is empty when the
// message was parked.
func (o *Ops) sendCounted(ctx context.Context, t pipeline.TenantOutput, body, dedupID string) (messageID string, parked bool, err error) {
	b := o.poolBacklog(t)
	if b == nil {
		id, err := o.send(ctx, t, body, dedupID)
		return id, false, err
	}

	m := backlog.Message{Tenant: t.ID, ID: dedupID, Body: body}
	send, err := b.Route(ctx, m)
	if err != nil {
		return "", false, err
	}
	if !send {
		// The tenant's queue may have emptied meanwhile: feed its parked files back now.
		if _, err := b.Drain(ctx, t.ID); err != nil {
			return "", true, err
		}
		return "", true, nil
	}
	if err := b.Send(ctx, m); err != nil {
		return "", false, err
	}
	return dedupID, false, nil
}
