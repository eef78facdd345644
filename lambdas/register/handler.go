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
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
	"github.com/example/tenantpipeline/internal/source"
)

// ObjectAPI is the part of the S3 client Register uses.
type ObjectAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
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

// Handler registers one chunk.
type Handler struct {
	S3          ObjectAPI
	HTTP        Doer
	Secrets     *SecretCache
	HTTPTimeout time.Duration
	// DeadlineMargin: Default: DefaultDeadlineMargin.
	DeadlineMargin time.Duration
	Log            *slog.Logger
	now            func() time.Time
}

// Handle is the Register task. It returns only the *pipeline error types, unwrapped, because the
// Lambda runtime reports the Go type name as errorType and the state machine's Retry and Catch
// match on it.
func (h *Handler) Handle(ctx context.Context, req pipeline.ChunkRequest) (pipeline.ChunkResult, error) {
	start := time.Now()
	n, err := h.register(ctx, req)
	attrs := []any{"tenant", req.Tenant.ID, "file", source.Name(req.Source), "execution", req.ExecutionName,
		"chunk", req.Chunk, "registered", n, "ms", time.Since(start).Milliseconds()}
	if err != nil {
		h.Log.Log(ctx, source.LogLevel(err), "register failed", append(attrs, "errorType", source.ErrorType(err), "error", err.Error())...)
		return pipeline.ChunkResult{}, err
	}
	h.Log.Info("chunk registered", attrs...)
	return pipeline.ChunkResult{Chunk: req.Chunk, Registered: n}, nil
}

// IdempotencyKey is the Idempotency-Key header of one record: the file execution's name (the same
// in every segment execution, retry and redrive of the file) and the record's number in the file.
func IdempotencyKey(executionName string, record int64) string {
	return executionName + "-" + strconv.FormatInt(record, 10)
}

func (h *Handler) register(ctx context.Context, req pipeline.ChunkRequest) (int64, error) {
	file := source.Name(req.Source)
	t := req.Tenant
	permanent := func(format string, a ...any) error {
		return &pipeline.PermanentError{Message: file + ": " + fmt.Sprintf(format, a...)}
	}
	f, err := records.FormatOf(t)
	if err != nil {
		return 0, permanent("tenant %q configuration: %v", t.ID, err)
	}
	if t.ChunkSize < pipeline.MinChunkSize || t.ChunkSize > pipeline.MaxChunkSize {
		return 0, permanent("tenant %q chunkSize %d is outside %d..%d", t.ID, t.ChunkSize, pipeline.MinChunkSize, pipeline.MaxChunkSize)
	}
	target, err := url.Parse(t.RegisterURL)
	if err != nil || (target.Scheme != "https" && target.Scheme != "http") || target.Host == "" {
		return 0, permanent("tenant %q registerUrl is not an http(s) URL", t.ID)
	}
	want := req.RecordCount()
	if req.Chunk < 0 || want == 0 {
		return 0, permanent("chunk %d is outside the file's %d records", req.Chunk, req.Records)
	}
	if req.ExecutionName == "" {
		return 0, permanent("the request has no executionName, so records would have no stable idempotency key")
	}

	recs, err := h.read(ctx, req, f)
	if err != nil {
		return 0, err
	}
	if int64(len(recs)) != want {
		return 0, permanent("chunk %d holds %d records, want %d: the manifest does not match the request", req.Chunk, len(recs), want)
	}

	auth := ""
	if arn := t.RegisterAuthSecretARN; arn != "" {
		if auth, err = h.Secrets.Get(ctx, arn); err != nil {
			return 0, secretError(file, err)
		}
	}
	margin := h.DeadlineMargin
	if margin == 0 {
		margin = DefaultDeadlineMargin
	}
	now := h.now
	if now == nil {
		now = time.Now
	}
	for i, rec := range recs {
		if deadline, ok := ctx.Deadline(); ok && now().Add(h.HTTPTimeout+margin).After(deadline) {
			return int64(i), &pipeline.RetryableError{Message: fmt.Sprintf(
				"%s: stopped before record %d of chunk %d: the Lambda timeout is near; the retry resends the chunk from record %d with the same idempotency keys",
				file, rec.Number, req.Chunk, req.FirstRecord())}
		}
		obj, err := rec.Object(req.Header)
		if err != nil {
			return int64(i), permanent("record %d: %v", rec.Number, err)
		}
		body, err := json.Marshal(wireRecord{
			Tenant:       t.ID,
			Source:       wireSource{Bucket: req.Source.Bucket, Key: req.Source.Key, VersionID: req.Source.VersionID},
			RecordNumber: rec.Number,
			Record:       obj,
		})
		if err != nil {
			return int64(i), permanent("record %d: %v", rec.Number, err)
		}
		resp, err := h.post(ctx, target.String(), IdempotencyKey(req.ExecutionName, rec.Number), auth, body)
		if resp.status == http.StatusUnauthorized && t.RegisterAuthSecretARN != "" {
			// The secret may have been rotated since it was cached: fetch it again, resend once.
			h.Secrets.Forget(t.RegisterAuthSecretARN)
			if auth, err = h.Secrets.Get(ctx, t.RegisterAuthSecretARN); err != nil {
				return int64(i), secretError(file, err)
			}
			resp, err = h.post(ctx, target.String(), IdempotencyKey(req.ExecutionName, rec.Number), auth, body)
		}
		if err := classify(file, rec.Number, resp, err); err != nil {
			return int64(i), err
		}
	}
	return int64(len(recs)), nil
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

// post sends one record and returns the response, or an error if there was no response.
func (h *Handler) post(ctx context.Context, target, key, auth string, body []byte) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, h.HTTPTimeout)
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
func classify(file string, record int64, resp response, err error) error {
	if err != nil {
		var ue *url.Error
		reason := err.Error()
		if errors.As(err, &ue) {
			reason = ue.Err.Error() // without the URL, which may carry credentials
			if ue.Timeout() {
				reason = "timed out: " + reason
			}
		}
		return &pipeline.RetryableError{Message: fmt.Sprintf("%s: record %d: the core system did not answer: %s", file, record, reason), Err: err}
	}
	status := resp.status
	switch {
	case status >= 200 && status < 300, status == http.StatusConflict:
		return nil
	case status >= 300 && status < 400:
		return &pipeline.PermanentError{Message: fmt.Sprintf(
			"%s: record %d: the core system answered %d %s with Location %q: redirects are never followed, because the POST would be resent as a GET; set registerUrl to the final URL",
			file, record, status, http.StatusText(status), redactURL(resp.location))}
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return &pipeline.RetryableError{Message: fmt.Sprintf("%s: record %d: the core system answered %d %s", file, record, status, http.StatusText(status))}
	default:
		return &pipeline.PermanentError{Message: fmt.Sprintf("%s: record %d: the core system rejected it with %d %s", file, record, status, http.StatusText(status))}
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

func (h *Handler) read(ctx context.Context, req pipeline.ChunkRequest, f records.Format) ([]records.Record, error) {
	file := source.Name(req.Source)
	m := req.Manifest
	out, err := h.S3.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(m.Bucket),
		Key:    aws.String(m.Key),
		Range:  aws.String(pipeline.ManifestRange(req.Chunk)),
	})
	if err != nil {
		msg := fmt.Sprintf("%s: reading the manifest s3://%s/%s failed: %v", file, m.Bucket, m.Key, err)
		switch source.HTTPStatus(err) {
		case http.StatusNotFound, http.StatusForbidden, http.StatusRequestedRangeNotSatisfiable, http.StatusBadRequest:
			return nil, &pipeline.PermanentError{Message: msg}
		}
		return nil, &pipeline.RetryableError{Message: msg}
	}
	entry, err := io.ReadAll(io.LimitReader(out.Body, 17))
	out.Body.Close()
	if err != nil {
		return nil, &pipeline.RetryableError{Message: fmt.Sprintf("%s: reading the manifest failed: %v", file, err)}
	}
	start, end, err := pipeline.DecodeChunkRange(entry)
	if err != nil {
		return nil, &pipeline.PermanentError{Message: fmt.Sprintf("%s: manifest s3://%s/%s, chunk %d: %v", file, m.Bucket, m.Key, req.Chunk, err)}
	}
	if start == end {
		return nil, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d is empty in the manifest, want %d records", file, req.Chunk, req.RecordCount())}
	}

	in, err := source.GetInput(req.Source)
	if err != nil {
		return nil, &pipeline.PermanentError{Message: fmt.Sprintf("%s: %v", file, err)}
	}
	in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", start, end-1))
	src, err := h.S3.GetObject(ctx, in)
	if err != nil {
		return nil, source.GetError(req.Source, err)
	}
	defer src.Body.Close()
	if n := aws.ToInt64(src.ContentLength); src.ContentLength != nil && n != end-start {
		return nil, &pipeline.ObjectChangedError{Message: fmt.Sprintf("%s: chunk %d: got %d bytes of the range %d-%d, want %d: the object is not the one Split read", file, req.Chunk, n, start, end-1, end-start)}
	}
	recs, err := records.ParseRange(src.Body, f, req.Header, req.FirstRecord(), req.RecordCount())
	var fe *records.Error
	switch {
	case errors.Is(err, records.ErrTooManyRecords):
		return nil, &pipeline.PermanentError{Message: fmt.Sprintf("%s: chunk %d holds more than %d records: the manifest does not match the request", file, req.Chunk, req.RecordCount())}
	case errors.As(err, &fe):
		return nil, &pipeline.ValidationError{Message: fmt.Sprintf("%s: chunk %d: %v", file, req.Chunk, fe)}
	case err != nil:
		return nil, &pipeline.RetryableError{Message: fmt.Sprintf("%s: chunk %d: reading the object failed: %v", file, req.Chunk, err)}
	}
	return recs, nil
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
			return &pipeline.PermanentError{Message: msg}
		}
	}
	return &pipeline.RetryableError{Message: msg}
}
