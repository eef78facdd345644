package ops_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/spec"
)

// TestRedriveOrderGuard: a redrive of a file that later files of its tenant passed is refused,
// naming them, unless --out-of-order; then the control message and the audit record in the
// file's results folder say so. A tenant with a DynamoDB sink is not guarded.
func TestRedriveOrderGuard(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		policy     string
		later      int  // files started after the failed one
		queued     int  // files in the tenant's queue
		dynamoDB   bool // the tenant writes to a DynamoDB sink
		outOfOrder bool
		reason     string
		wantErr    string // "" means a control message is sent
		wantOOO    bool   // the message and an audit record say out of order
	}{
		{name: "continue, no later file", policy: pipeline.OnFailureContinue},
		{name: "continue, a later file", policy: pipeline.OnFailureContinue, later: 1,
			wantErr: "redrive of acme-1 refused: 1 later file(s) of tenant acme ran after it: inbox/acme/l0.csv (acme-l0, SUCCEEDED)"},
		{name: "continue, 12 later files: 10 named, then how many more", policy: pipeline.OnFailureContinue, later: 12,
			wantErr: "(acme-l2, SUCCEEDED) and 2 more;"},
		{name: "continue, out of order with a reason", policy: pipeline.OnFailureContinue, later: 2, outOfOrder: true, reason: "orders re-sent", wantOOO: true},
		{name: "continue, out of order without a reason", policy: pipeline.OnFailureContinue, later: 2, outOfOrder: true,
			wantErr: "--out-of-order needs --reason"},
		{name: "halt, a skipped file passed by later ones", policy: pipeline.OnFailureHalt, later: 1,
			wantErr: "redrive of acme-1 refused: 1 later file(s)"},
		{name: "halt, a skipped file, out of order", policy: pipeline.OnFailureHalt, later: 1, outOfOrder: true, reason: "r", wantOOO: true},
		{name: "DynamoDB sink: not guarded", policy: pipeline.OnFailureContinue, later: 3, dynamoDB: true},
		{name: "continue, no later file but two queued ahead", policy: pipeline.OnFailureContinue, queued: 2,
			wantErr: "redrive of acme-1 refused: 2 file(s) of tenant acme are queued and run before it"},
		{name: "continue, queued ahead, out of order", policy: pipeline.OnFailureContinue, queued: 2, outOfOrder: true, reason: "r", wantOOO: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := opsfake.New(now)
			if tc.dynamoDB {
				w.SettingsOf["acme"] = pipeline.Tenant{Tenant: spec.Tenant{DynamoDB: &spec.DynamoDB{Key: []string{"id"}}}}
			}
			tenant := opsfake.Tenant("acme", tc.policy)
			w.AddTenant("TenantPipeline-Tenants-1", tenant)
			e := w.AddExecution(tenant, "acme-1", sfntypes.ExecutionStatusFailed, "inbox/acme/a.csv", now.Add(-time.Hour))
			e.Error, e.Cause = pipeline.ErrPermanent, `{"errorMessage":"core system answered 400","errorType":"PermanentError"}`
			for i := range tc.later {
				w.AddExecution(tenant, fmt.Sprintf("acme-l%d", i), sfntypes.ExecutionStatusSucceeded, fmt.Sprintf("inbox/acme/l%d.csv", i), now.Add(-time.Hour+time.Duration(i+1)*time.Minute))
			}
			w.Queues[tenant.QueueURL].Visible = int64(tc.queued)
			o := ops.New(w.Clients(), "TenantPipeline")
			o.Now = func() time.Time { return now }
			o.NewRequestID = func() string { return "req-1" }
			res, err := o.RedriveWith(context.Background(), "acme", "acme-1", ops.RedriveOptions{Reason: tc.reason, OutOfOrder: tc.outOfOrder})
			sent := w.Queues[tenant.QueueURL].Sent
			audit, audited := w.Body("ingest", "results/acme/acme-1/out-of-order.json")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				if len(sent) != 0 || len(w.Redrives) != 0 || audited {
					t.Errorf("got %d messages, %d redrives, audit record %v; want nothing done", len(sent), len(w.Redrives), audited)
				}
				var ooe *ops.OutOfOrderError
				if tc.later+tc.queued > 0 && !tc.outOfOrder && (!errors.As(err, &ooe) || ooe.Count != tc.later || ooe.Queued != tc.queued || len(ooe.Later) != min(tc.later, ops.MaxLaterListed)) {
					t.Errorf("got %#v, want an OutOfOrderError counting %d later files", err, tc.later)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(sent) != 1 {
				t.Fatalf("got %d messages, want 1", len(sent))
			}
			m, err := pipeline.DecodeControl([]byte(*sent[0].MessageBody))
			if err != nil {
				t.Fatal(err)
			}
			if m.OutOfOrder != tc.wantOOO || res.OutOfOrder != tc.wantOOO || audited != tc.wantOOO {
				t.Errorf("got message outOfOrder %v, result %v, audit record %v; want %v", m.OutOfOrder, res.OutOfOrder, audited, tc.wantOOO)
			}
			if tc.wantOOO && (!strings.Contains(audit, `"reason": "`+tc.reason+`"`) || m.Reason != tc.reason ||
				tc.later > 0 && !strings.Contains(audit, `"execution": "acme-l0"`) || !strings.Contains(audit, fmt.Sprintf(`"queued": %d`, tc.queued))) {
				t.Errorf("got audit record %s, message reason %q; want the reason %q and the later files", audit, m.Reason, tc.reason)
			}
		})
	}
}

// TestReplayOrderGuard: a replay of a version that later files passed is refused unless
// out of order; one with no later file goes ahead.
func TestReplayOrderGuard(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		later      bool
		outOfOrder bool
		wantErr    string
	}{
		{name: "no later file"},
		{name: "a later file", later: true, wantErr: "replay of inbox/acme/a.csv refused: 1 later file(s) of tenant acme ran after it: inbox/acme/b.csv (acme-2, SUCCEEDED)"},
		{name: "a later file, out of order", later: true, outOfOrder: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := opsfake.New(now)
			tenant := opsfake.Tenant("acme", pipeline.OnFailureContinue)
			w.AddTenant("TenantPipeline-Tenants-1", tenant)
			w.AddExecution(tenant, "acme-1", sfntypes.ExecutionStatusSucceeded, "inbox/acme/a.csv", now.Add(-time.Hour))
			if tc.later {
				w.AddExecution(tenant, "acme-2", sfntypes.ExecutionStatusSucceeded, "inbox/acme/b.csv", now.Add(-30*time.Minute))
			}
			o := ops.New(w.Clients(), "TenantPipeline")
			o.Now = func() time.Time { return now }
			o.NewRequestID = func() string { return "req-1" }
			_, err := o.ReplayWith(context.Background(), "acme", "inbox/acme/a.csv", "", "lost", tc.outOfOrder)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, audited := w.Body("ingest", "results/acme/rp-req-1/out-of-order.json")
			if audited != tc.outOfOrder {
				t.Errorf("got audit record %v, want %v", audited, tc.outOfOrder)
			}
		})
	}
}
