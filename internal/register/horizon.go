package register

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/source"
	"github.com/example/tenantpipeline/spec"
)

// The idempotency horizon (docs/data-path.md, "The idempotency horizon"). A core system that keeps
// Idempotency-Keys for a while only (its idempotencyRetention) would register twice a record
// re-sent after it forgot its key. The cursor bounds the records a Retry or a redrive re-sends to
// one invocation's; the segment's progress also records when they were first sent (SentAt), which
// Register writes before it sends them. An invocation that would re-send records first sent longer
// ago than the retention looks each one up (the core system's lookupUrl) and sends only those the
// core system does not have; without a lookupUrl it refuses, unless an operator accepted the
// duplicates (pipectl redrive --accept-duplicates).

// horizon is one invocation's view of the horizon: when the records from its cursor were first
// sent, and whether it looks them up.
type horizon struct {
	core   *pipeline.CoreSystem
	keyed  bool
	sentAt time.Time // the first send of the records from the cursor: an earlier invocation's, or this one's
	// lookup: the records from the cursor are looked up before they are sent, until the first one
	// the core system does not have (file order) or MaxKeyedLead records after it (key order, whose
	// earlier invocation may have registered records of other keys that far past it).
	lookup bool
	past   int // key order: records looked up after the first missing one
	now    time.Time

	lookedUp, found int64
}

// active reports whether the next record is looked up.
func (z *horizon) active() bool {
	return z != nil && z.lookup
}

// missing notes a record the core system does not have: in file order the earlier invocation
// stopped there, and nothing after it was sent.
func (z *horizon) missing() {
	if !z.keyed {
		z.endLookups()
		return
	}
	z.past++
	if z.past > pipeline.MaxKeyedLead {
		z.endLookups()
	}
}

// endLookups: no record from here on was sent before this invocation.
func (z *horizon) endLookups() {
	z.lookup, z.sentAt = false, z.now
}

// carry is the SentAt the progress keeps for the cursor this invocation hands on: the first send
// of the records from there, when one may have been sent (a stop on a failure or a wait, or
// lookups not yet done); "" when none was (a stop between chunks after the lookups), and the next
// invocation records its own.
func (z *horizon) carry(stopped bool) string {
	if z == nil || !stopped && !z.lookup {
		return ""
	}
	return z.sentAt.UTC().Format(time.RFC3339Nano)
}

// openHorizon decides, before an invocation sends anything, how it treats the records from its
// cursor (from, at). It returns nil for a tenant the horizon does not concern: no segment (the
// per-chunk design keeps no progress), the DynamoDB sink (its _seq never expires), or a core
// system that keeps its keys for ever (no idempotencyRetention). stored is the progress resume
// read, nil when there was none. Otherwise:
//   - the progress records a first send of these records (its cursor is this one and it has a
//     SentAt) longer ago than the retention: with a lookupUrl the records are looked up; without
//     one the invocation fails with a PermanentError that names the fixes, unless the operator's
//     accept-duplicates marker exists;
//   - it records none: the invocation writes the cursor with SentAt now before it sends, and
//     fails with a RetryableError when it cannot (fail closed: a later redrive could not know).
func (h *Handler) openHorizon(ctx context.Context, req pipeline.ChunkRequest, from int, at int64, stored *pipeline.Progress) (*horizon, error) {
	core := req.Tenant.CoreSystem
	if req.Segment == nil || req.Tenant.DynamoDB != nil || core == nil || retention(core) <= 0 {
		return nil, nil
	}
	now := h.clock()()
	z := &horizon{core: core, keyed: req.Tenant.KeyedOrder(), sentAt: now, now: now}
	if stored != nil && stored.Next == from && stored.Record == at && stored.SentAt != "" {
		z.sentAt = stored.Sent()
		age := now.Sub(z.sentAt)
		if age <= retention(core) {
			return z, nil
		}
		if core.LookupURL != "" {
			z.lookup = true
			h.Log.Info("records past the idempotency horizon are looked up before they are sent",
				"tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName,
				"chunk", from, "record", at, "firstSent", stored.SentAt, "retention", retention(core).String())
			return z, nil
		}
		accepted, err := h.duplicatesAccepted(ctx, req)
		if err != nil {
			return nil, err
		}
		if !accepted {
			return nil, horizonRefusal(req, from, at, z.sentAt, age)
		}
		h.Log.Warn("records past the idempotency horizon are re-sent without a lookup: the operator accepted duplicates",
			"tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName,
			"chunk", from, "record", at, "firstSent", stored.SentAt, "marker", pipeline.AcceptDuplicatesKey(h.owner(req), req.ExecutionName))
		return z, nil
	}
	p := pipeline.Progress{Next: from, Record: at, SentAt: now.UTC().Format(time.RFC3339Nano)}
	if stored != nil && stored.Next == from && stored.Record == at {
		p.Registered = stored.Registered
	}
	if stored != nil {
		p.Window = stored.Window
	}
	if err := h.writeProgress(ctx, req, p); err != nil {
		return nil, &pipeline.RetryableError{Message: fmt.Sprintf(
			"%s: recording the first send of chunk %d's records failed, so none is sent (a later redrive could not tell whether the core system still knows their keys): %v",
			source.Name(req.Source), from, err), Err: err}
	}
	return z, nil
}

// horizonRefusal is the PermanentError of records past the horizon with no way to look them up.
func horizonRefusal(req pipeline.ChunkRequest, from int, at int64, sent time.Time, age time.Duration) error {
	where := fmt.Sprintf("chunk %d", from)
	if at > 0 {
		where = fmt.Sprintf("record %d (chunk %d)", at, from)
	}
	return &pipeline.PermanentError{Message: fmt.Sprintf(
		"%s: the records from %s were first sent at %s, %s ago, longer than core system %s's idempotencyRetention %s: "+
			"it may have forgotten their Idempotency-Keys and would register again those it has; nothing is sent. "+
			"Set the core system's lookupUrl so that Register looks them up first, or redrive with pipectl redrive --accept-duplicates",
		source.Name(req.Source), where, sent.UTC().Format(time.RFC3339), age.Round(time.Second), req.Tenant.CoreSystem.Name, retention(req.Tenant.CoreSystem))}
}

// duplicatesAccepted reports whether the operator's accept-duplicates marker of the file
// execution exists. A failure to read it other than its absence is retryable (fail closed).
func (h *Handler) duplicatesAccepted(ctx context.Context, req pipeline.ChunkRequest) (bool, error) {
	c, err := h.clientsFor(req.Tenant.ID)
	if err != nil {
		return false, err
	}
	b := h.budget(ctx, req)
	ctx, cancel, err := b.call(ctx, "reading the accept-duplicates marker", minCallTime, 0)
	if err != nil {
		return false, err
	}
	defer cancel()
	key := pipeline.AcceptDuplicatesKey(h.owner(req), req.ExecutionName)
	out, err := c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(req.Manifest.Bucket), Key: aws.String(key)})
	if source.Absent(err) {
		return false, nil
	}
	if err != nil {
		return false, &pipeline.RetryableError{Message: fmt.Sprintf("%s: reading s3://%s/%s failed: %v", b.file, req.Manifest.Bucket, key, err), Err: err}
	}
	out.Body.Close()
	return true, nil
}

// lookUpRecords drops from recs, in file order, those the core system has registered already,
// while the horizon looks records up; it returns the records to send and the number dropped. A
// lookup that holds (a wait that does not fit, the deadline guard) is a *WriteError at that record.
func (h *Handler) lookUpRecords(ctx context.Context, b budget, req pipeline.ChunkRequest, z *horizon, p *pace, c *TenantClients, recs []records.Record) ([]records.Record, error) {
	if !z.active() {
		return recs, nil
	}
	core := coreClient{http: h.HTTP, secrets: c.Secrets, timeout: h.HTTPTimeout, pace: p}
	auth, err := core.auth(ctx, b, req, false)
	if err != nil {
		return nil, &WriteError{Record: recs[0].Number, Kind: rejection(err, 0), Err: err}
	}
	if req.Tenant.BatchMode() {
		// One key for the chunk, which the core system applies whole.
		has, err := z.lookUp(ctx, b, core, auth, BatchIdempotencyKey(req.ExecutionName, req.Chunk), fmt.Sprintf("the lookup of chunk %d", req.Chunk))
		if err != nil {
			return nil, &WriteError{Record: recs[0].Number, Kind: Stopped, Err: err}
		}
		if has {
			z.found += int64(len(recs))
			return nil, nil
		}
		z.endLookups()
		return recs, nil
	}
	send := make([]records.Record, 0, len(recs))
	for i, rec := range recs {
		if !z.active() {
			return append(send, recs[i:]...), nil
		}
		has, err := z.lookUp(ctx, b, core, auth, IdempotencyKey(req.ExecutionName, rec.Number), fmt.Sprintf("the lookup of record %d", rec.Number))
		if err != nil {
			if len(send) > 0 {
				// Records before it are to be sent: the stop is at the first of them.
				rec = send[0]
			}
			return nil, &WriteError{Record: rec.Number, Kind: Stopped, Err: err}
		}
		if has {
			z.found++
			continue
		}
		send = append(send, rec)
		z.missing()
	}
	return send, nil
}

// lookUp GETs the core system's lookupUrl for key: true on 200 (registered), false on 404 (not).
// Anything else holds like a 503 (pace.slowedDown: Retry-After, else the backoff), and a wait
// that does not fit the invocation stops it with errSlowDown, as a POST's would: the next
// invocation looks the record up again.
func (z *horizon) lookUp(ctx context.Context, b budget, core coreClient, auth, key, what string) (bool, error) {
	for attempt := 1; ; attempt++ {
		resp, err := core.get(ctx, b, what, lookupFor(z.core, key), auth)
		var stop *pipeline.RetryableError
		if errors.As(err, &stop) {
			return false, stop // the budget stopped before the GET
		}
		if err == nil {
			z.lookedUp++
			switch resp.status {
			case http.StatusOK:
				return true, nil
			case http.StatusNotFound:
				return false, nil
			}
		}
		if werr := core.pace.slowedDown(ctx, b, what, resp, attempt, core.timeout); werr != nil {
			return false, werr
		}
	}
}

// get sends one GET of url with the Authorization header, under the budget like a POST.
func (c coreClient) get(ctx context.Context, b budget, what, url, auth string) (response, error) {
	ctx, cancel, err := b.call(ctx, what, c.timeout, c.timeout)
	if err != nil {
		return response{}, err
	}
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return response{}, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return response{}, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return response{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}, nil
}

// retention is the core system's idempotencyRetention (spec.CoreSystem.Retention): 0, keys kept
// for ever, when unset.
func retention(c *pipeline.CoreSystem) time.Duration {
	return spec.CoreSystem{IdempotencyRetention: c.IdempotencyRetention}.Retention()
}

// lookupFor is the core system's lookupUrl for key (spec.CoreSystem.LookupFor).
func lookupFor(c *pipeline.CoreSystem, key string) string {
	return spec.CoreSystem{LookupURL: c.LookupURL}.LookupFor(key)
}

// clock is the handler's time source.
func (h *Handler) clock() func() time.Time {
	if h.now == nil {
		return time.Now
	}
	return h.now
}
