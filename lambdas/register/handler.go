package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

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
	// Tenant): stdout on Lambda. A failed invocation emits none, because its retry re-registers its
	// chunks and counts them. Nil: no metrics.
	Metrics io.Writer
	// MetricsNamespace is the EMF namespace. Default: pipeline.DefaultMetricsNamespace.
	MetricsNamespace string
	now              func() time.Time
}

// Handle is the Register task. It returns only the *pipeline error types, unwrapped, because the
// Lambda runtime reports the Go type name as errorType and the state machine's Retry and Catch
// match on it.
func (h *Handler) Handle(ctx context.Context, req pipeline.ChunkRequest) (pipeline.ChunkResult, error) {
	start := time.Now()
	res, err := h.registerRun(ctx, req)
	attrs := []any{"tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName,
		"chunk", req.Chunk, "lastChunk", req.Until(), "ms", time.Since(start).Milliseconds()}
	if err != nil {
		h.Log.Log(ctx, source.LogLevel(err), "register failed", append(attrs, "errorType", source.ErrorType(err), "error", err.Error())...)
		return pipeline.ChunkResult{}, err
	}
	h.Log.Info("chunks registered", append(attrs, "registered", res.Registered, "next", res.Next, "done", res.Done)...)
	h.emitRegistered(req.Tenant.ID, res.Registered)
	return res, nil
}

// emitRegistered writes the invocation's RecordsRegistered datapoint. A metric that cannot be written
// never fails an invocation whose records are registered: it is logged at WARN.
func (h *Handler) emitRegistered(tenant string, n int64) {
	if h.Metrics == nil {
		return
	}
	ns := h.MetricsNamespace
	if ns == "" {
		ns = pipeline.DefaultMetricsNamespace
	}
	if err := metrics.New(h.Metrics, ns, tenant).Emit(metrics.Count(metrics.RecordsRegistered, float64(n))); err != nil {
		h.Log.Warn("records registered metric not written", "tenant", tenant, "error", err.Error())
	}
}

// IdempotencyKey is the Idempotency-Key header of one record: the file execution's name (the same
// in every segment execution, retry and redrive of the file) and the record's number in the file.
func IdempotencyKey(executionName string, record int64) string {
	return executionName + "-" + strconv.FormatInt(record, 10)
}

// register is the thin loop of one chunk: validate the request, read the chunk, fetch the
// Authorization header, then send the records in order, stopping at the first failure. Every call
// it makes runs under the invocation's budget (deadline guard), and returns the number of records
// registered.
func (h *Handler) register(ctx context.Context, req pipeline.ChunkRequest) (int64, error) {
	f, target, err := validateRequest(req)
	if err != nil {
		return 0, err
	}
	b := h.budget(ctx, req)
	recs, err := h.readChunk(ctx, &b, req, f)
	if err != nil {
		return 0, err
	}
	if req.Tenant.DynamoDB != nil {
		return h.writeItems(ctx, b, req, recs)
	}
	auth, err := h.auth(ctx, b, req, false)
	if err != nil {
		return 0, err
	}
	if req.Tenant.BatchMode() {
		if err := h.sendBatch(ctx, b, req, target, &auth, recs); err != nil {
			return 0, err
		}
		return int64(len(recs)), nil
	}
	for i, rec := range recs {
		if err := h.send(ctx, b, req, target, &auth, rec); err != nil {
			return int64(i), err
		}
	}
	return int64(len(recs)), nil
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
func (h *Handler) readChunk(ctx context.Context, b *budget, req pipeline.ChunkRequest, f records.Format) ([]records.Record, error) {
	span, err := h.readManifestEntry(ctx, *b, req)
	if err != nil {
		return nil, err
	}
	b.first = span.FirstRecord
	recs, err := h.readRange(ctx, *b, req, f, span)
	if err != nil {
		return nil, err
	}
	if want := span.Records; int64(len(recs)) != want {
		return nil, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d holds %d records, want %d: the manifest does not match the request", b.file, req.Chunk, len(recs), want)}
	}
	return recs, nil
}

// readManifestEntry reads the chunk's span: its byte range from either manifest version, and its
// records from a version 2 manifest or, for version 1, from the chunk index and ChunkSize.
func (h *Handler) readManifestEntry(ctx context.Context, b budget, req pipeline.ChunkRequest) (pipeline.ChunkSpan, error) {
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
	out, err := h.S3.GetObject(ctx, manifestInput(m, rng))
	if err != nil {
		msg := fmt.Sprintf("%s: reading the manifest s3://%s/%s failed: %v", b.file, m.Bucket, m.Key, err)
		switch source.HTTPStatus(err) {
		case http.StatusPreconditionFailed:
			return pipeline.ChunkSpan{}, &pipeline.PermanentError{Message: fmt.Sprintf(
				"%s: the manifest s3://%s/%s was overwritten after Split wrote it (its ETag is no longer %s); it is not read", b.file, m.Bucket, m.Key, m.ETag), Err: err}
		case http.StatusNotFound, http.StatusForbidden, http.StatusRequestedRangeNotSatisfiable, http.StatusBadRequest:
			return pipeline.ChunkSpan{}, &pipeline.PermanentError{Message: msg, Err: err}
		}
		return pipeline.ChunkSpan{}, &pipeline.RetryableError{Message: msg, Err: err}
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

// manifestInput reads range rng of the manifest exactly as Split wrote it: by the version id and
// with If-Match on the ETag that its PutObject answered (source.GetInput pins them as it pins a
// source object), so that anyone who can write under work/ cannot make Register read another
// manifest. A location without either (written before Split recorded them) is read unpinned.
func manifestInput(m pipeline.Location, rng string) *s3.GetObjectInput {
	in, err := source.GetInput(pipeline.Source{Bucket: m.Bucket, Key: m.Key, VersionID: m.VersionID, ETag: m.ETag})
	if err != nil {
		in = &s3.GetObjectInput{Bucket: aws.String(m.Bucket), Key: aws.String(m.Key)}
	}
	in.Range = aws.String(rng)
	return in
}

// readRange reads bytes [start, end) of the source, pinned as Split read it (source.GetInput: the
// key Split resolved, its version id and ETag), and parses them while the call's context lives.
func (h *Handler) readRange(ctx context.Context, b budget, req pipeline.ChunkRequest, f records.Format, span pipeline.ChunkSpan) ([]records.Record, error) {
	start, end := span.Start, span.End
	in, err := source.GetInput(req.Source)
	if err != nil {
		return nil, &pipeline.PermanentError{Message: fmt.Sprintf("%s: %v", b.file, err), Err: err}
	}
	in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", start, end-1))
	ctx, cancel, err := b.call(ctx, "reading the chunk", minCallTime, 0)
	if err != nil {
		return nil, err
	}
	defer cancel()
	src, err := h.S3.GetObject(ctx, in)
	if err != nil {
		return nil, source.GetError(req.Source, err)
	}
	defer src.Body.Close()
	if n := aws.ToInt64(src.ContentLength); src.ContentLength != nil && n != end-start {
		return nil, &pipeline.ObjectChangedError{Message: fmt.Sprintf("%s: chunk %d: got %d bytes of the range %d-%d, want %d: the object is not the one Split read", b.file, req.Chunk, n, start, end-1, end-start)}
	}
	recs, err := records.ParseRange(src.Body, f, req.Header, span.FirstRecord, span.Records)
	var fe *records.Error
	switch {
	case errors.Is(err, records.ErrTooManyRecords):
		return nil, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d holds more than %d records: the manifest does not match the request", b.file, req.Chunk, span.Records), Err: err}
	case errors.As(err, &fe):
		return nil, &pipeline.ValidationError{Message: fmt.Sprintf("%s: chunk %d: %v", b.file, req.Chunk, fe), Err: err}
	case err != nil:
		return nil, &pipeline.RetryableError{Message: fmt.Sprintf("%s: chunk %d: reading the object failed: %v", b.file, req.Chunk, err), Err: err}
	}
	return recs, nil
}

// auth returns the Authorization header value: "" without a registerAuthSecretArn, else the
// secret, from the cache or (refresh, or not cached) from Secrets Manager under the budget.
func (h *Handler) auth(ctx context.Context, b budget, req pipeline.ChunkRequest, refresh bool) (string, error) {
	arn := req.Tenant.RegisterAuthSecretARN
	if arn == "" {
		return "", nil
	}
	if refresh {
		h.Secrets.Forget(arn)
	}
	ctx, cancel, err := b.call(ctx, "fetching the registerAuthSecretArn secret", minCallTime, 0)
	if err != nil {
		return "", err
	}
	defer cancel()
	v, err := h.Secrets.Get(ctx, arn)
	if err != nil {
		return "", secretError(b.file, err)
	}
	return v, nil
}

// send POSTs one record. On a 401 with a secret configured the secret may have been rotated since
// it was cached: it fetches the secret once more and resends once; a second 401 is permanent.
// Each POST, and the refresh, runs under the budget.
func (h *Handler) send(ctx context.Context, b budget, req pipeline.ChunkRequest, target string, auth *string, rec records.Record) error {
	obj, err := rec.Object(req.Header)
	if err != nil {
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: record %d: %v", b.file, rec.Number, err), Err: err}
	}
	body, err := json.Marshal(wireRecord{
		Tenant:       req.Tenant.ID,
		Source:       wireSource{Bucket: req.Source.Bucket, Key: req.Source.Key, VersionID: req.Source.VersionID},
		RecordNumber: rec.Number,
		Record:       obj,
	})
	if err != nil {
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: record %d: %v", b.file, rec.Number, err), Err: err}
	}
	key := IdempotencyKey(req.ExecutionName, rec.Number)
	resp, err := h.post(ctx, b, fmt.Sprintf("record %d", rec.Number), target, key, *auth, body)
	if err == nil && resp.status == http.StatusUnauthorized && req.Tenant.RegisterAuthSecretARN != "" {
		if *auth, err = h.auth(ctx, b, req, true); err != nil {
			return err
		}
		resp, err = h.post(ctx, b, fmt.Sprintf("resending record %d after a 401", rec.Number), target, key, *auth, body)
	}
	var stop *pipeline.RetryableError
	if errors.As(err, &stop) {
		return stop // the budget stopped before the POST
	}
	return classify(b.file, fmt.Sprintf("record %d", rec.Number), resp, err)
}

// wireRecord is the JSON body of one POST (docs/data-path.md, "Register wire format").
type wireRecord struct {
	Tenant       string          `json:"tenant"`
	Source       wireSource      `json:"source"`
	RecordNumber int64           `json:"recordNumber"`
	Record       json.RawMessage `json:"record"`
}

type wireSource struct {
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	VersionID string `json:"versionId,omitempty"`
}

// response is what Register keeps of the core system's answer: never the body, which may echo the
// record.
type response struct {
	status   int
	location string // the Location header, for a redirect's message
}

// post sends one record and returns the response, or an error if there was no response. It
// starts only when one whole HTTP timeout is left in the budget (what names the POST in that
// RetryableError).
func (h *Handler) post(ctx context.Context, b budget, what, target, key, auth string, body []byte) (response, error) {
	ctx, cancel, err := b.call(ctx, what, h.HTTPTimeout, h.HTTPTimeout)
	if err != nil {
		return response{}, err
	}
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := h.HTTP.Do(req)
	if err != nil {
		return response{}, err
	}
	// Drain a little of the body so the connection goes back to the pool; never log it, since a
	// core system may echo the record.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return response{status: resp.StatusCode, location: resp.Header.Get("Location")}, nil
}

// classify maps one POST's outcome to the retry classes of the state machine: 2xx and 409
// (already registered) succeed; 408, 429, 5xx and transport failures are retried; anything else,
// every 3xx included, is permanent. The HTTP client never follows a redirect (newHTTPClient), so a
// redirect is reported with its status and Location: following it would turn the POST into a GET.
// Messages name the file and record, never its contents or the response body.
func classify(file, what string, resp response, err error) error {
	if err != nil {
		var ue *url.Error
		reason := err.Error()
		if errors.As(err, &ue) {
			reason = ue.Err.Error() // without the URL, which may carry credentials
			if ue.Timeout() {
				reason = "timed out: " + reason
			}
		}
		return &pipeline.RetryableError{Message: fmt.Sprintf("%s: %s: the core system did not answer: %s", file, what, reason), Err: err}
	}
	status := resp.status
	switch {
	case status >= 200 && status < 300, status == http.StatusConflict:
		return nil
	case status >= 300 && status < 400:
		return &pipeline.PermanentError{Message: fmt.Sprintf(
			"%s: %s: the core system answered %d %s with Location %q: redirects are never followed, because the POST would be resent as a GET; set registerUrl to the final URL",
			file, what, status, http.StatusText(status), redactURL(resp.location))}
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return &pipeline.RetryableError{Message: fmt.Sprintf("%s: %s: the core system answered %d %s", file, what, status, http.StatusText(status))}
	default:
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: %s: the core system rejected it with %d %s", file, what, status, http.StatusText(status))}
	}
}

// redactURL drops the user info of a URL, which may carry credentials.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

func secretError(file string, err error) error {
	msg := fmt.Sprintf("%s: fetching the registerAuthSecretArn secret failed: %v", file, err)
	// Secrets Manager answers every client error with HTTP 400, throttling included, so the error
	// code decides. These codes will not change on a retry:
	// https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html#API_GetSecretValue_Errors
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ResourceNotFoundException", "AccessDeniedException", "DecryptionFailure",
			"InvalidParameterException", "InvalidRequestException":
			return &pipeline.PermanentError{Message: msg, Err: err}
		}
	}
	return &pipeline.RetryableError{Message: msg, Err: err}
}
