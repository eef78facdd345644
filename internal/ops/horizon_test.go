package ops_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// TestRedriveIdempotencyHorizon: a redrive re-sends the records from each segment's cursor. When
// the progress says they were first sent longer ago than the core system's idempotencyRetention
// and the core system has no lookupUrl, pipectl refuses and says why and how to go on, unless
// --accept-duplicates, which writes the audited marker Register reads.
func TestRedriveIdempotencyHorizon(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	progressKey := pipeline.ProgressKey(pipeline.SiloOwner("acme"), "acme-1", 0)
	sentAt := func(ago time.Duration) string {
		return string(pipeline.Progress{Next: 3, Record: 305, SentAt: now.Add(-ago).Format(time.RFC3339Nano)}.Encode())
	}
	for _, tc := range []struct {
		name       string
		core       *pipeline.CoreSystem
		progress   string // "" for none
		accept     bool
		wantError  string // "" means the redrive goes ahead
		wantMarker bool
	}{
		{name: "no core system", progress: sentAt(48 * time.Hour)},
		{name: "keys kept for ever", core: &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 1}, progress: sentAt(48 * time.Hour)},
		{name: "within the retention", core: &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 1, IdempotencyRetention: "24h"}, progress: sentAt(time.Hour)},
		{name: "past the retention with a lookupUrl: Register looks them up",
			core:     &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 1, IdempotencyRetention: "24h", LookupURL: "https://erp.example/orders/{key}"},
			progress: sentAt(48 * time.Hour)},
		{name: "past the retention without a lookupUrl: refused",
			core:     &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 1, IdempotencyRetention: "24h"},
			progress: sentAt(48 * time.Hour),
			wantError: "execution acme-1 cannot be redriven: segment 0's records from record 305 were first sent at 2026-11-28T12:00:00Z (48h0m0s ago), " +
				"longer ago than core system erp's idempotencyRetention 24h0m0s"},
		{name: "the refusal names both ways on",
			core:      &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 1, IdempotencyRetention: "24h"},
			progress:  sentAt(48 * time.Hour),
			wantError: "Set the core system's lookupUrl so that Register looks them up first, or redrive with --accept-duplicates"},
		{name: "no first send recorded", core: &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 1, IdempotencyRetention: "24h"},
			progress: string(pipeline.EncodeProgress(3, 305))},
		{name: "past the retention, duplicates accepted: marker written",
			core:     &pipeline.CoreSystem{Name: "erp", MaxRunningFiles: 1, IdempotencyRetention: "24h"},
			progress: sentAt(48 * time.Hour), accept: true, wantMarker: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := opsfake.New(now)
			if tc.core != nil {
				w.CoreSystemOf["acme"] = tc.core
			}
			tenant := opsfake.Tenant("acme", pipeline.OnFailureHalt)
			w.AddTenant("TenantPipeline-Tenants-1", tenant)
			e := w.AddExecution(tenant, "acme-1", sfntypes.ExecutionStatusFailed, "inbox/acme/a.csv", now.Add(-48*time.Hour))
			e.Error, e.Cause = pipeline.ErrRetryable, `{"errorMessage":"core system answered 502","errorType":"RetryableError"}`
			w.Queues[tenant.QueueURL].Visible, w.Queues[tenant.QueueURL].InFlight = 1, 1
			if tc.progress != "" {
				w.Objects["ingest/"+progressKey] = &opsfake.Object{VersionID: "p1", Body: tc.progress}
			}
			o := ops.New(w.Clients(), "TenantPipeline")
			o.Now = func() time.Time { return now }
			res, err := o.RedriveWith(context.Background(), "acme", "acme-1", ops.RedriveOptions{Reason: "core fixed", AcceptDuplicates: tc.accept})
			acted := len(w.Redrives) + len(w.Queues[tenant.QueueURL].Sent)
			marker, wrote := w.Objects["ingest/"+pipeline.AcceptDuplicatesKey(w.OwnerOf("acme"), "acme-1")]
			if wrote != tc.wantMarker || (res.DuplicatesAccepted != "") != tc.wantMarker {
				t.Errorf("got marker written %v (result %q), want %v", wrote, res.DuplicatesAccepted, tc.wantMarker)
			}
			if wrote && !strings.Contains(marker.Body, "requested-by: arn:aws:sts::123456789012:assumed-role/Operator/alice") {
				t.Errorf("got marker %q, want the audit record naming the caller", marker.Body)
			}
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
