package split

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/results"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// TestResultsComplete: a file that succeeded is announced to its core system's completeUrl once,
// with its name, execution, record count and SHA-256 under the execution's completion key; the
// answer is in summary.json. A retryable answer is retried up to CompleteAttempts, a refusal is
// not; a failure is recorded and never fails the results task.
func TestResultsComplete(t *testing.T) {
	data := resultsFile(4)
	digest := sha256.Sum256(data)
	for _, tt := range []struct {
		name       string
		noURL      bool
		status     string // the execution's
		answers    []int  // the completeUrl's answers, in order; the last repeats
		smallFile  bool   // the split result carries no hash (the SmallFile task's)
		wantPosts  int
		wantStatus int
		wantError  string
		noComplete bool
	}{
		{name: "taken", status: pipeline.StatusSucceeded, answers: []int{200}, wantPosts: 1, wantStatus: 200},
		{name: "already taken (409)", status: pipeline.StatusSucceeded, answers: []int{409}, wantPosts: 1, wantStatus: 409},
		{name: "a 503 then taken", status: pipeline.StatusSucceeded, answers: []int{503, 200}, wantPosts: 2, wantStatus: 200},
		{name: "5xx every time: recorded after the last attempt", status: pipeline.StatusSucceeded, answers: []int{500},
			wantPosts: CompleteAttempts, wantStatus: 500, wantError: "the core system answered 500 Internal Server Error"},
		{name: "refused: not retried", status: pipeline.StatusSucceeded, answers: []int{400},
			wantPosts: 1, wantStatus: 400, wantError: "the core system refused it with 400 Bad Request"},
		{name: "a small file is hashed from its object", status: pipeline.StatusSucceeded, answers: []int{200}, smallFile: true, wantPosts: 1, wantStatus: 200},
		{name: "a failed file is not announced", status: pipeline.StatusFailed, answers: []int{200}, noComplete: true},
		{name: "no completeUrl", noURL: true, status: pipeline.StatusSucceeded, answers: []int{200}, noComplete: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				posts []*http.Request
				body  completion
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				defer mu.Unlock()
				posts = append(posts, r)
				if err := json.Unmarshal(b, &body); err != nil {
					t.Errorf("got body %q: %v", b, err)
				}
				w.WriteHeader(tt.answers[min(len(posts), len(tt.answers))-1])
				_, _ = w.Write([]byte(`{"received":true}`))
			}))
			defer srv.Close()
			fake := sourcetest.NewFakeS3()
			tn := tenant()
			tn.CoreSystem = &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 1, CompleteURL: srv.URL + "/complete"}
			if tt.noURL {
				tn.CoreSystem.CompleteURL = ""
			}
			sp := splitFor(t, fake, tn, data)
			if tt.smallFile {
				sp.SHA256 = ""
			}
			h := newHandler(fake)
			h.HTTP = srv.Client()
			h.sleep = func(context.Context, time.Duration) error { return nil }
			req := pipeline.ResultsRequest{Kind: pipeline.TaskResults, Status: tt.status, ExecutionName: "exec",
				State: pipeline.ResultsState{Tenant: tn, Source: sp.Source, Split: &sp}}
			if tt.status != pipeline.StatusSucceeded {
				req.State.Error = &pipeline.TaskError{Error: "PermanentError", Cause: "x"}
			}
			if err := h.Results(context.Background(), req); err != nil {
				t.Fatalf("got %v, want the results written", err)
			}
			var sum results.Summary
			if err := json.Unmarshal(fake.Puts[work+"/"+results.Key(pipeline.SiloOwner("t1"), "exec", results.SummaryFile)], &sum); err != nil {
				t.Fatal(err)
			}
			if tt.noComplete {
				if len(posts) != 0 || sum.Complete != nil {
					t.Fatalf("got %d POSTs and complete %+v, want none", len(posts), sum.Complete)
				}
				return
			}
			if len(posts) != tt.wantPosts {
				t.Errorf("got %d POSTs, want %d", len(posts), tt.wantPosts)
			}
			for _, p := range posts {
				if got := p.Header.Get("Idempotency-Key"); got != "exec-complete" {
					t.Errorf("got Idempotency-Key %q, want exec-complete", got)
				}
			}
			want := completion{File: completionFile{Bucket: sp.Source.Bucket, Key: sp.Source.Key, VersionID: sp.Source.VersionID},
				Execution: "exec", Records: 4, SHA256: hex.EncodeToString(digest[:])}
			if !reflect.DeepEqual(body, want) {
				t.Errorf("got body %+v, want %+v", body, want)
			}
			c := sum.Complete
			if c == nil || c.Status != tt.wantStatus || c.Error != tt.wantError || c.Attempts != tt.wantPosts || c.Body != `{"received":true}` {
				t.Errorf("got complete %+v, want status %d, error %q, %d attempts and the answer's body", c, tt.wantStatus, tt.wantError, tt.wantPosts)
			}
		})
	}
}
