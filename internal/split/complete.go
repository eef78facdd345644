package split

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source"
)

// A core system's completeUrl (docs/core-system-contract.md) receives one POST per file after its
// last record: the results task of a file that succeeded sends it, before it writes summary.json,
// which records the answer (results.Completion). The POST is retried like a record's (a 5xx, 408,
// 429, a timeout or no answer, with backoff and Retry-After), up to CompleteAttempts; a failure
// is recorded in the summary and logged at ERROR, and never fails the file, whose records are
// registered: the on-call engineer sees it in summary.json, pipectl results and the log, and a
// redrive or replay is not needed to register anything.

// Doer sends one HTTP request.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

var _ Doer = (*http.Client)(nil)

const (
	// CompleteAttempts bounds the POSTs of one file's completion.
	CompleteAttempts = 4
	// completeBackoff is the first wait between attempts, doubled each time.
	completeBackoff = time.Second
	// maxCompleteWait caps one wait (a Retry-After included).
	maxCompleteWait = 20 * time.Second
	// maxCompleteBody is how much of the answer's body the summary keeps.
	maxCompleteBody = 256
)

// completion is the body POSTed to the completeUrl.
type completion struct {
	File      completionFile `json:"file"`
	Execution string         `json:"execution"`
	Records   int64          `json:"records"`
	SHA256    string         `json:"sha256"`
}

type completionFile struct {
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	VersionID string `json:"versionId,omitempty"`
}

// CompleteIdempotencyKey is the Idempotency-Key of a file's completion POST: the same for every
// run of the results task of the execution (a retry, a redrive that ends again).
func CompleteIdempotencyKey(executionName string) string { return executionName + "-complete" }

// complete POSTs the file's completion when its core system has a completeUrl and the file
// succeeded, and returns what the summary records; nil when nothing is sent.
func (h *Handler) complete(ctx context.Context, req pipeline.ResultsRequest, objects ObjectAPI) *results.Completion {
	st := req.State
	cs := st.Tenant.CoreSystem
	if cs == nil || cs.CompleteURL == "" || req.Status != pipeline.StatusSucceeded || st.Split == nil {
		return nil
	}
	sp := st.Split
	src := sp.Source
	if src.Bucket == "" {
		src = st.Source
	}
	c := &results.Completion{}
	sum := sp.SHA256
	if sum == "" {
		// A small file's task leaves only its count: hash the (small) object again.
		var err error
		if sum, err = h.hashObject(ctx, objects, src); err != nil {
			c.Error = "the file's SHA-256 could not be read: " + err.Error()
			h.completeFailed(req, c)
			return c
		}
	}
	body, err := json.Marshal(completion{
		File:      completionFile{Bucket: src.Bucket, Key: src.Key, VersionID: src.VersionID},
		Execution: req.ExecutionName, Records: sp.Records, SHA256: sum,
	})
	if err != nil {
		c.Error = err.Error()
		return c
	}
	if h.HTTP == nil {
		c.Error = "the results task has no HTTP client"
		h.completeFailed(req, c)
		return c
	}
	wait := completeBackoff
	for c.Attempts = 1; ; c.Attempts++ {
		retry, after := h.postComplete(ctx, cs.CompleteURL, req.ExecutionName, body, c)
		if !retry || c.Attempts >= CompleteAttempts {
			break
		}
		d := wait
		if after > 0 {
			d = after
		}
		pause := h.sleep
		if pause == nil {
			pause = sleep
		}
		if err := pause(ctx, min(d, maxCompleteWait)); err != nil {
			c.Error = fmt.Sprintf("%s; stopped waiting to retry: %v", c.Error, err)
			break
		}
		wait *= 2
	}
	now := h.now().UTC()
	c.At = &now
	if c.Error != "" {
		h.completeFailed(req, c)
	}
	return c
}

// postComplete sends one POST and records its answer in c; it reports whether a retry may help
// and the Retry-After asked for.
func (h *Handler) postComplete(ctx context.Context, target, execution string, body []byte, c *results.Completion) (bool, time.Duration) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		c.Status, c.Body, c.Error = 0, "", "the completeUrl is not a URL"
		return false, 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", CompleteIdempotencyKey(execution))
	resp, err := h.HTTP.Do(req)
	if err != nil {
		reason := err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			reason = ue.Err.Error() // without the URL, which may carry credentials
		}
		c.Status, c.Body, c.Error = 0, "", "the core system did not answer: "+reason
		return true, 0
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxCompleteBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	c.Status, c.Body, c.Error = resp.StatusCode, string(b), ""
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300, s == http.StatusConflict:
		return false, 0
	case s == http.StatusRequestTimeout, s == http.StatusTooManyRequests, s >= 500:
		c.Error = fmt.Sprintf("the core system answered %d %s", s, http.StatusText(s))
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return true, time.Duration(secs) * time.Second
	default:
		c.Error = fmt.Sprintf("the core system refused it with %d %s", s, http.StatusText(s))
		return false, 0
	}
}

// completeFailed logs a completion that failed; the file's records are registered.
func (h *Handler) completeFailed(req pipeline.ResultsRequest, c *results.Completion) {
	h.Log.Error("the core system's completeUrl POST failed; the file's records are registered, and summary.json records the answer",
		"tenant", req.State.Tenant.ID, "execution", req.ExecutionName, "attempts", c.Attempts, "status", c.Status, "error", c.Error)
}

// hashObject reads the source version and returns its hex SHA-256.
func (h *Handler) hashObject(ctx context.Context, objects ObjectAPI, src pipeline.Source) (string, error) {
	in, err := source.GetInput(src)
	if err != nil {
		return "", err
	}
	out, err := objects.GetObject(ctx, in)
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	d := sha256.New()
	if _, err := io.Copy(d, out.Body); err != nil {
		return "", err
	}
	return hex.EncodeToString(d.Sum(nil)), nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
