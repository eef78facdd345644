package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// TestRedriveRefusesWhenWorkFilesAreGone: a redrive reads the manifest Split wrote and the source
// version its chunks are byte ranges of. When either is gone, pipectl refuses with a message that
// names it, and neither redrives nor queues anything; before Split has finished there is nothing
// to check.
func TestRedriveRefusesWhenWorkFilesAreGone(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const manifestKey = "work/acme/acme-1/manifest"
	for _, tc := range []struct {
		name      string
		policy    string
		setup     func(w *opsfake.World, e *opsfake.Execution)
		wantError string // "" means the redrive goes ahead
	}{
		{name: "halt: manifest and source present", policy: pipeline.OnFailureHalt},
		{name: "halt: manifest expired", policy: pipeline.OnFailureHalt,
			setup:     func(w *opsfake.World, _ *opsfake.Execution) { delete(w.Objects, "ingest/"+manifestKey) },
			wantError: "execution acme-1 cannot be redriven: its manifest s3://ingest/work/acme/acme-1/manifest is gone (work/ expires after 366 days)"},
		{name: "continue: manifest expired", policy: pipeline.OnFailureContinue,
			setup:     func(w *opsfake.World, _ *opsfake.Execution) { delete(w.Objects, "ingest/"+manifestKey) },
			wantError: "its manifest s3://ingest/work/acme/acme-1/manifest is gone"},
		{name: "manifest expired: the replay hint names the file's version", policy: pipeline.OnFailureHalt,
			setup:     func(w *opsfake.World, _ *opsfake.Execution) { delete(w.Objects, "ingest/"+manifestKey) },
			wantError: "register the file again with pipectl replay acme inbox/acme/a.csv --version-id v-acme-1 (new Idempotency-Keys)"},
		{name: "halt: the source version expired", policy: pipeline.OnFailureHalt,
			setup: func(w *opsfake.World, _ *opsfake.Execution) {
				w.Objects["ingest/inbox/acme/a.csv"].VersionID = "v-newer"
			},
			wantError: "execution acme-1 cannot be redriven: the file version its chunks are read from, s3://ingest/inbox/acme/a.csv (version v-acme-1), is gone"},
		{name: "halt: Split never finished, nothing to check", policy: pipeline.OnFailureHalt,
			setup: func(w *opsfake.World, e *opsfake.Execution) {
				delete(w.Objects, "ingest/"+manifestKey)
				e.History = e.History[:1]
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := opsfake.New(now)
			tenant := opsfake.Tenant("acme", tc.policy)
			w.AddTenant("TenantPipeline-Tenants-1", tenant)
			e := w.AddExecution(tenant, "acme-1", sfntypes.ExecutionStatusFailed, "inbox/acme/a.csv", now.Add(-time.Hour))
			// A core-system failure: a file that failed validation is refused before its work files are looked at.
			e.Error, e.Cause = pipeline.ErrPermanent, `{"errorMessage":"core system answered 503 three times","errorType":"PermanentError"}`
			w.Queues[tenant.QueueURL].Visible, w.Queues[tenant.QueueURL].InFlight = 1, 1
			e.History = splitExited(t, pipeline.SplitResult{
				Source:   pipeline.Source{Bucket: "ingest", Key: "inbox/acme/a.csv", VersionID: "v-acme-1"},
				Manifest: pipeline.Location{Bucket: "ingest", Key: manifestKey},
				Records:  2, Chunks: 1, Segments: []pipeline.Segment{{}},
			})
			w.Objects["ingest/"+manifestKey] = &opsfake.Object{VersionID: "m1", Body: "manifest"}
			if tc.setup != nil {
				tc.setup(w, e)
			}
			o := ops.New(w.Clients(), "TenantPipeline")
			o.Now = func() time.Time { return now }
			_, err := o.Redrive(context.Background(), "acme", "acme-1", "core fixed", false)
			acted := len(w.Redrives) + len(w.Queues[tenant.QueueURL].Sent)
			if tc.wantError == "" {
				if err != nil || acted != 1 {
					t.Fatalf("got %v and %d redrives or control messages, want the redrive", err, acted)
				}
				return
			}
			var refused *ops.RefusedError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("got %v, want a refusal containing %q", err, tc.wantError)
			}
			if acted != 0 {
				t.Errorf("got %d redrives or control messages, want none", acted)
			}
		})
	}
}

// splitExited is the start of a file execution's history up to Split's exit with sr.
func splitExited(t *testing.T, sr pipeline.SplitResult) []sfntypes.HistoryEvent {
	t.Helper()
	out, err := json.Marshal(map[string]any{"split": sr})
	if err != nil {
		t.Fatal(err)
	}
	return []sfntypes.HistoryEvent{
		{Id: 1, Type: sfntypes.HistoryEventTypeExecutionStarted},
		{Id: 2, Type: sfntypes.HistoryEventTypeTaskStateEntered},
		{Id: 3, Type: sfntypes.HistoryEventTypeLambdaFunctionSucceeded},
		{Id: 4, Type: sfntypes.HistoryEventTypeTaskStateExited,
			StateExitedEventDetails: &sfntypes.StateExitedEventDetails{Name: aws.String("Split"), Output: aws.String(string(out))}},
	}
}
