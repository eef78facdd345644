package register

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// DefaultHTTPTimeout bounds one POST to the core system when HTTP_TIMEOUT_SECONDS is unset.
const DefaultHTTPTimeout = 10 * time.Second

// ParseHTTPTimeout reads HTTP_TIMEOUT_SECONDS: a whole number of seconds from 1 to 300, or
// DefaultHTTPTimeout when it is empty.
func ParseHTTPTimeout(v string) (time.Duration, error) {
	if v == "" {
		return DefaultHTTPTimeout, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 300 {
		return 0, fmt.Errorf("HTTP_TIMEOUT_SECONDS %q must be a whole number of seconds from 1 to 300", v)
	}
	return time.Duration(n) * time.Second, nil
}

// NewHTTPClient builds the one client an execution environment reuses across invocations, so the
// records of a chunk, and of the next chunks, share one keep-alive connection (a keyed file's
// window of them).
//
// A connection kept idle while Lambda freezes the environment may be dead on thaw. net/http
// resends a request that failed on a reused connection before any response only when the request
// is idempotent, and it treats a request with an Idempotency-Key header as such, provided the body
// can be replayed (GetBody, which http.NewRequest sets for a bytes.Reader).
// https://pkg.go.dev/net/http#Transport
func NewHTTPClient(timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Timeout: timeout,
		// Never follow a redirect: for a 301, 302 or 303 net/http would resend the POST as a GET
		// without a body, and a 2xx answer to that GET would count as "registered"
		// (https://pkg.go.dev/net/http#Client: "If CheckRedirect returns ErrUseLastResponse, then the
		// most recent response is returned with its body unclosed"). classify makes every 3xx a
		// PermanentError.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			Proxy:             http.ProxyFromEnvironment,
			DialContext:       dialer.DialContext,
			ForceAttemptHTTP2: true,
			// A keyed file keeps up to its window of POSTs in flight, each on its own HTTP/1.1
			// connection (HTTP/2 multiplexes them on one): keep that many idle between chunks and invocations, or every round past
			// the idle ones dials (and for https handshakes) again. MaxConnsPerHost stays unset:
			// the window bounds the connections.
			MaxIdleConns:          pipeline.MaxMaxRecordsInFlight,
			MaxIdleConnsPerHost:   pipeline.MaxMaxRecordsInFlight,
			IdleConnTimeout:       60 * time.Second,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: timeout,
			ExpectContinueTimeout: time.Second,
		},
	}
}

// coreClient is what the two HTTP sinks share: the client, the registerUrl, the Authorization
// header and one POST under the budget.
type coreClient struct {
	http    Doer
	secrets *SecretCache
	timeout time.Duration // one POST's HTTP timeout
	target  string
	pace    *pace
	// answers: keep the first maxAnswerBytes of each answer's body (response.body), for the
	// rejections it may carry; only for a tenant that can reject records (Tenant.CanReject).
	answers bool
	// rejects: a status of the tenant's rejectStatuses rejects the one record the POST carries
	// (record mode), rather than failing it.
	rejects bool
	// window, set for a keyed file, numbers each POST and is told of each 429 or 503 answer
	// before the wait: it halves once per round trip (window.slowed).
	window *window
}

// maxAnswerBytes bounds the body Register keeps of one answer: a batch's "rejected" array of a
// thousand records fits.
const maxAnswerBytes = 1 << 20

// wireSource is the source object of a POST's body (docs/data-path.md, "Register wire format").
type wireSource struct {
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	VersionID string `json:"versionId,omitempty"`
}

func wireSourceOf(src pipeline.Source) wireSource {
	return wireSource{Bucket: src.Bucket, Key: src.Key, VersionID: src.VersionID}
}

// auth returns the Authorization header value: "" without a registerAuthSecretArn, else the
// secret, from the cache or (refresh, or not cached) from Secrets Manager under the budget.
func (c coreClient) auth(ctx context.Context, b budget, req pipeline.ChunkRequest, refresh bool) (string, error) {
	arn := req.Tenant.RegisterAuthSecretARN
	if arn == "" {
		return "", nil
	}
	if refresh {
		c.secrets.Forget(arn)
	}
	ctx, cancel, err := b.call(ctx, "fetching the registerAuthSecretArn secret", minCallTime, 0)
	if err != nil {
		return "", err
	}
	defer cancel()
	v, err := c.secrets.Get(ctx, arn)
	if err != nil {
		return "", secretError(b.file, err)
	}
	return v, nil
}

// deliver POSTs body, which holds n records, with the idempotency key, and returns the outcome
// classified (nil when registered) and its Rejection; what names the request in messages. Each
// POST, and a secret's refresh, runs under the budget.
//   - Each POST first takes n tokens of the rate limit (pace.take).
//   - On a 401 with a secret configured the secret may have been rotated since it was cached: it
//     fetches the secret once more and resends once; a second 401 is permanent.
//   - On a 429 or 503 it waits as the core system asks (pace.slowedDown) and resends the same
//     body with the same key, as often as the core system asks; a wait that does not fit the
//     invocation stops it (Stopped, errSlowDown), and the next invocation resends.
//   - With rejects set, a status of the tenant's rejectStatuses is RejectedRecord with a
//     PermanentError, whatever classify would make of it (a 409 included): the sink rejects the
//     record and goes on.
//
// The response is returned with the error, for the status and body a rejection keeps.
func (c coreClient) deliver(ctx context.Context, b budget, req pipeline.ChunkRequest, what, key string, n int, auth *string, body []byte) (response, Rejection, error) {
	sending, refreshed, probe := what, false, false
	for attempt := 1; ; attempt++ {
		if !probe {
			var err error
			if probe, err = c.pace.guard.admit(ctx, b, what, c.timeout); err != nil {
				return response{}, Stopped, err
			}
		}
		if err := c.pace.take(ctx, b, what, n, c.timeout); err != nil {
			c.pace.guard.abandon(probe)
			return response{}, Stopped, err
		}
		sent := c.window.sending()
		resp, err := c.post(ctx, b, sending, key, *auth, body)
		if err == nil && resp.status == http.StatusUnauthorized && req.Tenant.RegisterAuthSecretARN != "" && !refreshed {
			if *auth, err = c.auth(ctx, b, req, true); err != nil {
				c.pace.release()
				return response{}, rejection(err, 0), err
			}
			sending, refreshed = "resending "+what+" after a 401", true
			sent = c.window.sending()
			resp, err = c.post(ctx, b, sending, key, *auth, body)
		}
		c.pace.release()
		if err == nil && slowDown(resp.status) {
			c.window.slowed(sent)
			if err := c.pace.slowedDown(ctx, b, what, resp, attempt, c.timeout); err != nil {
				c.pace.guard.abandon(probe)
				return response{}, Stopped, err
			}
			continue
		}
		var stop *pipeline.RetryableError
		if errors.As(err, &stop) {
			c.pace.guard.abandon(probe)
			if attempt > 1 && errors.Is(err, errNearDeadline) {
				// The resend after a slow-down answer no longer fits: still a wait, not a failure.
				return response{}, Stopped, b.slowedDown(what, 0)
			}
			return response{}, Stopped, stop // the budget stopped before the POST
		}
		if c.pace.guard.answered(ctx, b, probe, resp, err) {
			// The core system's breaker is open: hold at this request instead of failing it.
			probe = false
			continue
		}
		probe = false
		if err == nil && c.rejects && req.Tenant.RejectsStatus(resp.status) {
			return resp, RejectedRecord, &pipeline.PermanentError{Message: fmt.Sprintf("%s: %s: the core system rejected it with %d %s", b.file, what, resp.status, http.StatusText(resp.status))}
		}
		err = classify(b.file, what, resp, err)
		if errors.Is(err, errNoAnswerInTime) {
			err = c.latencyError(b.file, what, err)
		}
		return resp, rejection(err, resp.status), err
	}
}

// latencyError is the RecordLatencyError of a POST that got no answer within its time. Every POST
// starts with a whole HTTP timeout left (the deadline guard), and a retry gives it no more, so its
// latency exceeds what any invocation can give it: it names the record (or batch) and says so,
// rather than a bare timeout that the Retry repeats until the file fails anyway.
func (c coreClient) latencyError(file, what string, err error) error {
	return &pipeline.RecordLatencyError{Message: fmt.Sprintf(
		"%s: %s got no answer within the HTTP timeout %s, the most one POST may take: the core system's latency for it exceeds Register's budget, "+
			"and a retry gives it no more (the records before it are registered); make the core system answer within the HTTP timeout, "+
			"or raise RegisterHTTPTimeout with RegisterTimeout (in batch mode, or lower maxBatchBytes or chunkSize so that Split cuts smaller batches)",
		file, what, c.timeout), Err: err}
}

// response is what Register keeps of the core system's answer. Its body, kept only for a tenant
// that can reject records, goes to the tenant's rejections and never to a log or an error message,
// since it may echo the record.
type response struct {
	status     int
	location   string // the Location header, for a redirect's message
	retryAfter string // the Retry-After header, for a 429's or 503's wait
	body       []byte // the first maxAnswerBytes, with coreClient.answers only
}

// post sends one request and returns the response, or an error if there was no response. It
// starts only when one whole HTTP timeout is left in the budget (what names the POST in that
// RetryableError).
func (c coreClient) post(ctx context.Context, b budget, what, key, auth string, body []byte) (response, error) {
	ctx, cancel, err := b.call(ctx, what, c.timeout, c.timeout)
	if err != nil {
		return response{}, err
	}
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.target, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	c.pace.sent()
	resp, err := c.http.Do(req)
	c.pace.answered()
	if err != nil {
		return response{}, err
	}
	// Drain a little of the body so the connection goes back to the pool; never log it, since a
	// core system may echo the record.
	var kept []byte
	if c.answers {
		kept, _ = io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return response{status: resp.StatusCode, location: resp.Header.Get("Location"), retryAfter: resp.Header.Get("Retry-After"), body: kept}, nil
}

// errNoAnswerInTime marks a POST that got no answer before its time ran out (net/http reports the
// HTTP timeout and the budget's context alike, as a *url.Error whose Timeout is true).
var errNoAnswerInTime = errors.New("the POST got no answer in time")

// classify maps one POST's outcome to the retry classes of the state machine: 2xx and 409
// (already registered) succeed; 408, 429, 5xx and transport failures are retried (deliver waits on
// a 429 or 503 itself and classifies only other answers); anything else,
// every 3xx included, is permanent. The HTTP client never follows a redirect (NewHTTPClient), so a
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
				err = fmt.Errorf("%w: %w", errNoAnswerInTime, err)
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
