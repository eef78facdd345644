// Package register is the Register Lambda's logic. For one chunk of a file it reads the chunk's
// byte range of the exact object version, parses its records, and sends them in order to the
// tenant's core system (HTTP, HTTP batch or DynamoDB; for a tenant in key order, in order per key
// with several keys at once), stopping at the first failure. See docs/data-path.md. Command
// lambdas/register wires it to the AWS clients.
package register

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/deployed"
	"github.com/example/tenantpipeline/internal/metrics"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/source"
)

// ObjectAPI is the part of the S3 client Register uses.
type ObjectAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var _ ObjectAPI = (*s3.Client)(nil)

// Doer sends one HTTP request.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

var _ Doer = (*http.Client)(nil)

// DefaultDeadlineMargin is kept free before the Lambda deadline on top of one HTTP timeout, for
// the handler to return its error and the runtime to report it.
const DefaultDeadlineMargin = 2 * time.Second

// Handler registers a run of consecutive chunks of one file (registerRun), one chunk at a time.
type Handler struct {
	S3          ObjectAPI
	DynamoDB    ItemAPI // the DynamoDB sink's client; unused by HTTP tenants
	HTTP        Doer
	Secrets     *SecretCache
	HTTPTimeout time.Duration
	// DeadlineMargin: Default: DefaultDeadlineMargin.
	DeadlineMargin time.Duration
	Log            *slog.Logger
	// Metrics receives one EMF line per successful invocation (metrics.RecordsRegistered, dimension
	// Tenant, with metrics.CoreSystemThrottles and metrics.RateLimitWaitSeconds when not zero):
	// stdout on Lambda. When the tenant names a core system the line also records, with the
	// dimension CoreSystem, CoreSystemThrottles and the POSTs sent (metrics.InCoreSystem). A failed
	// invocation emits no RecordsRegistered, because its retry re-registers its chunks and counts
	// them; only its throttles, requests and waits, if any. Nil: no metrics.
	Metrics io.Writer
	// MetricsNamespace is the EMF namespace. Default: pipeline.DefaultMetricsNamespace.
	MetricsNamespace string
	// Pool is the pool this function serves (pipeline.EnvMetricsPool), empty for a silo tenant's. In a
	// pool the metrics have the dimension Pool instead of Tenant, and the tenant is a property of
	// the line (metrics.Emitter.InPool), so that the pool's metrics do not grow with its tenants.
	Pool string
	// KeysPool is the pool its tenants' keys carry (pipeline.EnvKeysPool, pipeline.Owner): Pool
	// under the KeysPerPool layout, else empty.
	KeysPool string
	// ForTenant, when set, gives the clients that act for one tenant, by the id of the execution's
	// input: in a pool, each made with a session of the pool's tenant-scoped role tagged with the
	// tenant (internal/tenantcreds), which may read only that tenant's prefix and work/ keys, its
	// secret and its table. Nil: S3, DynamoDB and Secrets serve every request (a silo, whose role is
	// the tenant's own). DynamoDB stays the function's own for what is not one tenant's data (a
	// core system's adaptive limits).
	ForTenant func(tenant string) (*TenantClients, error)
	// Deployed, when set, gives the settings the function was deployed with; a request whose core
	// system URLs, secret or sink differ from them is refused (deployed.Check). Nil: not checked.
	Deployed deployed.Settings
	now      func() time.Time
	sleep    func(context.Context, time.Duration) error // Default: a timer under the context.
	limiters limiters                                   // the current file's token bucket
	lines    lineCounter                                // where the current file's chunks start, for rejections

	// keyedAnswered, when set, is told each record whose answer the keyed schedule has taken in
	// (keyedSink), so that a test can order its replies after it.
	keyedAnswered func(record int64)
	// breakers, when set, is the store of a core system's breaker (tests); else the breaker item
	// in the core system's admission table, with DynamoDB.
	breakers func(pipeline.CoreSystem) breakerStore
	// StaticShares gives each running file of a core system the even share
	// CoreSystem.FileShare instead of a share of what the others leave (shares.go;
	// pipeline.EnvRequestShares).
	StaticShares bool
	// sharers, when set, is an invocation's membership of its core system's shares (tests); else
	// the shares item in the core system's admission table, with DynamoDB. sharesPoll, when set,
	// replaces shares.RefreshInterval.
	sharers    func(pipeline.ChunkRequest) sharer
	sharesPoll time.Duration
}

// Handle is the Register task. It returns only the *pipeline error types, unwrapped, because the
// Lambda runtime reports the Go type name as errorType and the state machine's Retry and Catch
// match on it.
func (h *Handler) Handle(ctx context.Context, req pipeline.ChunkRequest) (pipeline.ChunkResult, error) {
	return h.handle(ctx, req, runOptions{})
}

// runOptions are what the small-file path changes in a run.
type runOptions struct {
	// lastRun: no invocation follows a run that is done (the SmallFile task), so its progress is
	// not written.
	lastRun bool
	// file, when set, is the run's file in memory (the SmallFile task's, which writes no
	// manifest): its chunks' spans and the object's bytes, read by Split a moment before.
	file *memFile
	// reserve is time kept free after the run's last chunk, on top of the progress's write: a
	// chunk starts only if the slowest chunk so far, one HTTP timeout and the reserve fit (the
	// SmallFile task's results, which it writes in the same invocation).
	reserve time.Duration
	// horizon, when set, looks records up before they are sent (horizon.go).
	horizon *horizon
	// ahead, when set, reads a keyed file's next chunk before the chunk's records are sent, so
	// that the keyed sink may send its records before the chunk's end (keyedSink).
	ahead *readAhead
}

// readAhead is the next chunk a keyed run read ahead, for register to use when it comes to it.
type readAhead struct {
	until int // the run's last chunk
	chunk int // the chunk read, -1: none
	span  pipeline.ChunkSpan
	recs  []records.Record
}

// memFile is a file in memory: the manifest's entries (each chunk's span of data), the lines
// object's (each chunk's first line; nil when the tenant's records cannot be rejected), and the
// whole object.
type memFile struct {
	spans []pipeline.ChunkSpan
	lines []int64
	data  []byte
}

// span is chunk i's span, if the file in memory has it.
func (m *memFile) span(i int) (pipeline.ChunkSpan, bool) {
	if m == nil || i < 0 || i >= len(m.spans) {
		return pipeline.ChunkSpan{}, false
	}
	return m.spans[i], true
}

func (h *Handler) handle(ctx context.Context, req pipeline.ChunkRequest, o runOptions) (pipeline.ChunkResult, error) {
	if err := deployed.Resolve(h.Deployed, &req.Tenant, req.Source); err != nil {
		h.Log.Log(ctx, source.LogLevel(err), "register failed", "tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName,
			"errorType", source.ErrorType(err), "error", err.Error())
		return pipeline.ChunkResult{}, err
	}
	start := time.Now()
	p := h.newPace(req)
	p.guard.start(ctx, h.budget(ctx, req))
	p.shares.join(ctx, h.budget(ctx, req))
	defer p.shares.leave(ctx)
	res, err := h.registerRun(ctx, req, p, o)
	attrs := []any{"tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName,
		"chunk", req.Chunk, "lastChunk", req.Until(), "ms", time.Since(start).Milliseconds()}
	if err != nil {
		h.Log.Log(ctx, source.LogLevel(err), "register failed", append(attrs, "errorType", source.ErrorType(err), "error", err.Error())...)
		h.emit(req.Tenant.ID, p.coreSystem(), p.metrics()...)
		return pipeline.ChunkResult{}, err
	}
	attrs = append(attrs, "registered", res.Registered, "next", res.Next, "done", res.Done)
	if req.Tenant.KeyedOrder() {
		attrs = append(attrs, "peakInFlight", p.peak())
	}
	h.Log.Info("chunks registered", attrs...)
	p.settle(ctx, h.budget(ctx, req), res.Registered)
	h.emit(req.Tenant.ID, p.coreSystem(), append([]metrics.Metric{metrics.Count(metrics.RecordsRegistered, float64(res.Registered))}, p.metrics()...)...)
	return res, nil
}

// emit writes the invocation's datapoints in one line: RecordsRegistered when it succeeded, and the
// pace's CoreSystemThrottles, CoreSystemRequests and RateLimitWaitSeconds when not zero, those of
// the core system also by core (core "" when the tenant names none). A metric that cannot be
// written never fails an invocation whose records are registered: it is logged at WARN.
func (h *Handler) emit(tenant, core string, ms ...metrics.Metric) {
	if h.Metrics == nil || len(ms) == 0 {
		return
	}
	ns := h.MetricsNamespace
	if ns == "" {
		ns = pipeline.DefaultMetricsNamespace
	}
	if err := metrics.New(h.Metrics, ns, tenant).InPool(h.Pool).InCoreSystem(core).Emit(ms...); err != nil {
		h.Log.Warn("records registered metric not written", "tenant", tenant, "error", err.Error())
	}
}

// register is the thin loop of one chunk: validate the request, read the chunk, then hand its
// records to the tenant's sink (openSink), which writes them in order and stops at the first
// failure. Every call runs under the invocation's budget (deadline guard). It returns the number of
// records done (registered or rejected), the chunk's first record sent, its rejections and the
// sink's *WriteError, whose Err is the error for the state machine.
func (h *Handler) register(ctx context.Context, req pipeline.ChunkRequest, p *pace, o runOptions) (chunkOutcome, error) {
	f, target, err := validateRequest(req)
	if err != nil {
		return chunkOutcome{}, err
	}
	c, err := h.clientsFor(req.Tenant.ID)
	if err != nil {
		return chunkOutcome{}, err
	}
	b := h.budget(ctx, req)
	var (
		span pipeline.ChunkSpan
		recs []records.Record
	)
	if a := o.ahead; a != nil && a.chunk == req.Chunk && req.Record == 0 {
		span, recs, a.chunk = a.span, a.recs, -1
		b.first = span.FirstRecord
	} else if span, recs, err = h.readChunk(ctx, &b, req, f, c.S3, o.file); err != nil {
		return chunkOutcome{}, err
	}
	if len(recs) == 0 {
		// Every record of the chunk was invalid and rejected by Split (skipRecord): none to send.
		return chunkOutcome{}, nil
	}
	if recs, err = fromRecord(b, req, recs); err != nil {
		return chunkOutcome{}, err
	}
	b.first = recs[0].Number
	out := chunkOutcome{first: recs[0].Number, rejects: &chunkRejects{chunk: req.Chunk, start: span.Start}}
	send, err := h.lookUpRecords(ctx, b, req, o.horizon, p, c, recs)
	if err != nil {
		out.done = doneBefore(recs, err)
		return out, err
	}
	if len(send) == 0 {
		out.done = int64(len(recs)) // every record is registered already
		return out, nil
	}
	sink := h.sinkFor(req.Tenant, target, p, c, out.rejects)
	if ks, ok := sink.(*keyedSink); ok && o.ahead != nil && req.Chunk < o.ahead.until && len(send) == len(recs) {
		ks.ahead, ks.aheadReq, ks.aheadBudget = h.readNext(ctx, req, f, c, o)
	}
	n, err := sink.Write(ctx, b, req, send)
	out.done = n
	if len(send) < len(recs) && err != nil {
		out.done = doneBefore(recs, err)
	} else if len(send) < len(recs) {
		out.done = int64(len(recs))
	}
	return out, err
}

// readNext reads the chunk after req's into o.ahead, and returns its records with the request
// and budget they are sent under. A read that fails leaves nothing ahead: the chunk's own
// register reads it again and reports the failure.
func (h *Handler) readNext(ctx context.Context, req pipeline.ChunkRequest, f records.Format, c *TenantClients, o runOptions) ([]records.Record, pipeline.ChunkRequest, budget) {
	next := req
	next.Chunk, next.Record = req.Chunk+1, 0
	b := h.budget(ctx, next)
	span, recs, err := h.readChunk(ctx, &b, next, f, c.S3, o.file)
	if err != nil {
		return nil, next, b
	}
	o.ahead.chunk, o.ahead.span, o.ahead.recs = next.Chunk, span, recs
	if len(recs) > 0 {
		b.first = recs[0].Number
	}
	return recs, next, b
}

// doneBefore is the number of recs before the record err stops at (a *WriteError's), all of
// them when it names none: with records the horizon found registered left out of the sink's
// write, the sink's own count is of the records it was given.
func doneBefore(recs []records.Record, err error) int64 {
	var we *WriteError
	if errors.As(err, &we) {
		if i := slices.IndexFunc(recs, func(r records.Record) bool { return r.Number == we.Record }); i >= 0 {
			return int64(i)
		}
	}
	return int64(len(recs))
}

// chunkOutcome is what one chunk's register did.
type chunkOutcome struct {
	done    int64 // records registered or rejected, in file order from first
	first   int64 // the first record sent
	rejects *chunkRejects
}

// TenantClients are the clients that read and write one tenant's data.
type TenantClients struct {
	S3       ObjectAPI
	DynamoDB ItemAPI
	// Secrets is the tenant's own cache, so that a secret read for one tenant is never handed to
	// another's request.
	Secrets *SecretCache
}

// clientsFor returns the clients of the tenant: ForTenant's, or the handler's own.
func (h *Handler) clientsFor(tenant string) (*TenantClients, error) {
	if h.ForTenant == nil {
		return &TenantClients{S3: h.S3, DynamoDB: h.DynamoDB, Secrets: h.Secrets}, nil
	}
	c, err := h.ForTenant(tenant)
	if err != nil {
		return nil, &pipeline.PermanentError{Message: fmt.Sprintf("tenant %q: %v", tenant, err), Err: err}
	}
	return c, nil
}

// validateRequest checks what a retry cannot fix: the tenant's format settings, chunk size and
// sink (registerUrl, or the DynamoDB table and key), the manifest version, the chunk index and the
// execution name the idempotency keys are built from. The target is "" for the DynamoDB sink.
func validateRequest(req pipeline.ChunkRequest) (records.Format, string, error) {
	t := req.Tenant
	permanent := func(format string, a ...any) error {
		return &pipeline.PermanentError{Message: source.Name(req.Source) + ": " + fmt.Sprintf(format, a...)}
	}
	f, err := records.FormatOf(t)
	if err != nil {
		return f, "", permanent("tenant %q configuration: %v", t.ID, err)
	}
	if t.ChunkSize < pipeline.MinChunkSize || t.ChunkSize > pipeline.MaxChunkSize {
		return f, "", permanent("tenant %q chunkSize %d is outside %d..%d", t.ID, t.ChunkSize, pipeline.MinChunkSize, pipeline.MaxChunkSize)
	}
	var targetURL string
	if d := t.DynamoDB; d != nil {
		if d.Table == "" || len(d.Key) < 1 || len(d.Key) > 2 || slices.Contains(d.Key, "") {
			return f, "", permanent("tenant %q dynamodb needs a table and 1 or 2 key fields", t.ID)
		}
		if _, err := pipeline.SeqOf(req.Source, 1); err != nil {
			return f, "", permanent("the DynamoDB sink cannot order this file's records: %v", err)
		}
	} else {
		target, err := url.Parse(t.RegisterURL)
		if err != nil || (target.Scheme != "https" && target.Scheme != "http") || target.Host == "" {
			return f, "", permanent("tenant %q registerUrl is not an http(s) URL", t.ID)
		}
		targetURL = target.String()
	}
	switch req.Manifest.Version {
	case 0, pipeline.ManifestV1:
		if req.Chunk < 0 || req.RecordCount() == 0 {
			return f, "", permanent("chunk %d is outside the file's %d records", req.Chunk, req.Records)
		}
	case pipeline.ManifestV2:
		// The manifest says which records the chunk holds; a chunk past the end reads as 416.
		if req.Chunk < 0 {
			return f, "", permanent("chunk %d is outside the file", req.Chunk)
		}
	default:
		return f, "", permanent("manifest version %d is not 1 or 2", req.Manifest.Version)
	}
	if req.ExecutionName == "" {
		return f, "", permanent("the request has no executionName, so records would have no stable idempotency key")
	}
	return f, targetURL, nil
}

// minCallTime is the least time left (after the margin) in which Register starts an S3 or Secrets
// Manager call; a POST needs one whole HTTP timeout.
const minCallTime = time.Second

// budget is the deadline guard of one invocation. Lambda ends an invocation at its timeout without
// letting the handler return (https://docs.aws.amazon.com/lambda/latest/dg/golang-context.html:
// the context's deadline is the function's timeout), so every call gets a context that ends a
// margin before the deadline, and no call starts unless it can have the time it needs. Either way
// the handler returns a RetryableError in time, instead of being killed mid-call.
type budget struct {
	deadline time.Time // the Lambda deadline; zero when the context has none
	margin   time.Duration
	now      func() time.Time
	file     string
	chunk    int
	first    int64 // the chunk's first record, where a retry resumes; 0 until a version 2 manifest is read
}

func (h *Handler) budget(ctx context.Context, req pipeline.ChunkRequest) budget {
	b := budget{margin: h.DeadlineMargin, now: h.now, file: source.Name(req.Source), chunk: req.Chunk}
	if req.Manifest.Version != pipeline.ManifestV2 {
		b.first = req.FirstRecord()
	}
	if b.margin == 0 {
		b.margin = DefaultDeadlineMargin
	}
	if b.now == nil {
		b.now = time.Now
	}
	b.deadline, _ = ctx.Deadline()
	return b
}

// call returns the context for one call that needs at least need, bounded by limit (0: none) and
// by the time left; or a RetryableError naming what would not fit.
func (b budget) call(ctx context.Context, what string, need, limit time.Duration) (context.Context, context.CancelFunc, error) {
	if b.deadline.IsZero() {
		if limit > 0 {
			ctx, cancel := context.WithTimeout(ctx, limit)
			return ctx, cancel, nil
		}
		ctx, cancel := context.WithCancel(ctx)
		return ctx, cancel, nil
	}
	left := b.deadline.Sub(b.now()) - b.margin
	if left < need {
		from := "its first record"
		if b.first > 0 {
			from = fmt.Sprintf("record %d", b.first)
		}
		return nil, nil, &pipeline.RetryableError{Message: fmt.Sprintf(
			"%s: stopped before %s of chunk %d: the Lambda timeout is near (%s left, it needs %s); the retry resends the chunk from %s with the same idempotency keys",
			b.file, what, b.chunk, left.Round(time.Millisecond), need, from), Err: errNearDeadline}
	}
	if limit > 0 && limit < left {
		left = limit
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	return ctx, cancel, nil
}

// stopped is the RetryableError of a call the budget's context ended: the Lambda timeout is near.
func (b budget) stopped(what string) error {
	return &pipeline.RetryableError{Message: fmt.Sprintf(
		"%s: stopped %s of chunk %d: the Lambda timeout is near; the retry rewrites the chunk, and records already written are kept by their _seq",
		b.file, what, b.chunk), Err: errNearDeadline}
}

// readChunk reads the chunk's manifest entries, then its byte range of the pinned object version,
// and parses it; each read under the budget. It sets b.first from a version 2 manifest.
func (h *Handler) readChunk(ctx context.Context, b *budget, req pipeline.ChunkRequest, f records.Format, objects ObjectAPI, mem *memFile) (pipeline.ChunkSpan, []records.Record, error) {
	if span, ok := mem.span(req.Chunk); ok {
		b.first = span.FirstRecord
		if span.Start < 0 || span.Start > span.End || span.End > int64(len(mem.data)) {
			return span, nil, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d's bytes %d-%d are outside the file's %d", b.file, req.Chunk, span.Start, span.End, len(mem.data))}
		}
		recs, skipped, err := h.parseChunk(*b, req, f, span, bytes.NewReader(mem.data[span.Start:span.End]))
		if err == nil && int64(len(recs))+skipped != span.Records {
			err = &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d holds %d records, want %d", b.file, req.Chunk, int64(len(recs))+skipped, span.Records)}
		}
		return span, recs, err
	}
	span, err := h.readManifestEntry(ctx, *b, req, objects)
	if err != nil {
		return span, nil, err
	}
	b.first = span.FirstRecord
	recs, skipped, err := h.readRange(ctx, *b, req, f, span, objects)
	if err != nil {
		return span, nil, err
	}
	if want := span.Records; int64(len(recs))+skipped != want {
		return span, nil, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d holds %d records, want %d: the manifest does not match the request", b.file, req.Chunk, int64(len(recs))+skipped, want)}
	}
	return span, recs, nil
}

// readManifestEntry reads the chunk's span: its byte range from either manifest version, and its
// records from a version 2 manifest or, for version 1, from the chunk index and ChunkSize.
func (h *Handler) readManifestEntry(ctx context.Context, b budget, req pipeline.ChunkRequest, objects ObjectAPI) (pipeline.ChunkSpan, error) {
	m := req.Manifest
	v2 := m.Version == pipeline.ManifestV2
	rng, size := pipeline.ManifestRange(req.Chunk), 16
	if v2 {
		rng, size = pipeline.ManifestRangeV2(req.Chunk), 32
	}
	ctx, cancel, err := b.call(ctx, "reading the manifest", minCallTime, 0)
	if err != nil {
		return pipeline.ChunkSpan{}, err
	}
	defer cancel()
	out, err := objects.GetObject(ctx, pinnedInput(m, rng))
	if err != nil {
		return pipeline.ChunkSpan{}, workReadError(b, "the manifest", m, err)
	}
	entry, err := io.ReadAll(io.LimitReader(out.Body, int64(size)+1))
	out.Body.Close()
	if err != nil {
		return pipeline.ChunkSpan{}, &pipeline.RetryableError{Message: fmt.Sprintf("%s: reading the manifest failed: %v", b.file, err), Err: err}
	}
	bad := func(err error) error {
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: manifest s3://%s/%s, chunk %d: %v", b.file, m.Bucket, m.Key, req.Chunk, err), Err: err}
	}
	if v2 {
		span, err := pipeline.DecodeChunkSpan(entry)
		if err != nil {
			return pipeline.ChunkSpan{}, bad(err)
		}
		return span, nil
	}
	start, end, err := pipeline.DecodeChunkRange(entry)
	if err != nil {
		return pipeline.ChunkSpan{}, bad(err)
	}
	if start == end {
		return pipeline.ChunkSpan{}, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d is empty in the manifest, want %d records", b.file, req.Chunk, req.RecordCount())}
	}
	return pipeline.ChunkSpan{Start: start, End: end, FirstRecord: req.FirstRecord(), Records: req.RecordCount()}, nil
}

// pinnedInput reads range rng of an object Split wrote under work/ (the manifest, its lines
// object) exactly as Split wrote it: by the version id and with If-Match on the ETag that its
// PutObject answered (source.GetInput pins them as it pins a source object), so that anyone who can
// write under work/ cannot make Register read another one. A location without either (a manifest
// written before Split recorded them) is read unpinned.
func pinnedInput(m pipeline.Location, rng string) *s3.GetObjectInput {
	in, err := source.GetInput(pipeline.Source{Bucket: m.Bucket, Key: m.Key, VersionID: m.VersionID, ETag: m.ETag})
	if err != nil {
		in = &s3.GetObjectInput{Bucket: aws.String(m.Bucket), Key: aws.String(m.Key)}
	}
	in.Range = aws.String(rng)
	return in
}

// workReadError is the error of a failed GET of what, the object at loc that Split wrote: a
// permanent one when it was overwritten (412), is gone or out of reach, since a retry cannot bring
// it back; else retryable.
func workReadError(b budget, what string, loc pipeline.Location, err error) error {
	switch source.HTTPStatus(err) {
	case http.StatusPreconditionFailed:
		return &pipeline.PermanentError{Message: fmt.Sprintf(
			"%s: %s s3://%s/%s was overwritten after Split wrote it (its ETag is no longer %s); it is not read", b.file, what, loc.Bucket, loc.Key, loc.ETag), Err: err}
	case http.StatusNotFound, http.StatusForbidden, http.StatusRequestedRangeNotSatisfiable, http.StatusBadRequest:
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: reading %s s3://%s/%s failed: %v", b.file, what, loc.Bucket, loc.Key, err), Err: err}
	}
	return &pipeline.RetryableError{Message: fmt.Sprintf("%s: reading %s s3://%s/%s failed: %v", b.file, what, loc.Bucket, loc.Key, err), Err: err}
}

// readRange reads bytes [start, end) of the source, pinned as Split read it (source.GetInput: the
// key Split resolved, its version id and ETag), and parses them while the call's context lives.
func (h *Handler) readRange(ctx context.Context, b budget, req pipeline.ChunkRequest, f records.Format, span pipeline.ChunkSpan, objects ObjectAPI) ([]records.Record, int64, error) {
	start, end := span.Start, span.End
	in, err := source.GetInput(req.Source)
	if err != nil {
		return nil, 0, &pipeline.PermanentError{Message: fmt.Sprintf("%s: %v", b.file, err), Err: err}
	}
	in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", start, end-1))
	ctx, cancel, err := b.call(ctx, "reading the chunk", minCallTime, 0)
	if err != nil {
		return nil, 0, err
	}
	defer cancel()
	src, err := objects.GetObject(ctx, in)
	if err != nil {
		return nil, 0, source.GetError(req.Source, err)
	}
	defer src.Body.Close()
	if n := aws.ToInt64(src.ContentLength); src.ContentLength != nil && n != end-start {
		return nil, 0, &pipeline.ObjectChangedError{Message: fmt.Sprintf("%s: chunk %d: got %d bytes of the range %d-%d, want %d: the object is not the one Split read", b.file, req.Chunk, n, start, end-1, end-start)}
	}
	return h.parseChunk(b, req, f, span, src.Body)
}

// parseChunk parses the chunk's bytes, from body.
func (h *Handler) parseChunk(b budget, req pipeline.ChunkRequest, f records.Format, span pipeline.ChunkSpan, body io.Reader) ([]records.Record, int64, error) {
	start, end := span.Start, span.End
	// Under skipRecord the chunk's invalid records are skipped by the same parse that Split ran, so
	// they are exactly the ones Split rejected; they are never sent.
	var skip records.Skip
	var skipped int64
	if req.Tenant.SkipsInvalid() {
		skip = func(records.Invalid) error { skipped++; return nil }
	}
	recs, err := parseRange(body, end-start, req, f, span, skip)
	var fe *records.Error
	switch {
	case errors.Is(err, records.ErrTooManyRecords):
		return nil, 0, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d holds more than %d records: the manifest does not match the request", b.file, req.Chunk, span.Records), Err: err}
	case errors.As(err, &fe):
		return nil, 0, &pipeline.ValidationError{Message: fmt.Sprintf("%s: chunk %d: %v", b.file, req.Chunk, fe), Err: err}
	case err != nil:
		return nil, 0, &pipeline.RetryableError{Message: fmt.Sprintf("%s: chunk %d: reading the object failed: %v", b.file, req.Chunk, err), Err: err}
	}
	return recs, skipped, nil
}

// parseRange parses the chunk's n bytes from body; for a tenant that can reject records, from the
// bytes in memory, so that each record keeps its original bytes (records.ParseRawRange).
func parseRange(body io.Reader, n int64, req pipeline.ChunkRequest, f records.Format, span pipeline.ChunkSpan, skip records.Skip) ([]records.Record, error) {
	if !req.Tenant.CanReject() {
		return records.ParseRangeSkip(body, f, req.Header, span.FirstRecord, span.Records, skip)
	}
	raw, err := io.ReadAll(io.LimitReader(body, n+1))
	if err != nil {
		return nil, err
	}
	return records.ParseRawRangeSkip(raw, f, req.Header, span.FirstRecord, span.Records, skip)
}
