package ops_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	smithy "github.com/aws/smithy-go"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// Every operator action the controller performs (replay here) is written as a control record
// before its message is sent, once: a retried request id sends the record already there, and a
// record pipectl cannot write sends nothing.
func TestControlRecordBeforeTheMessage(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const record = "control/acme/requests/req-1.json"
	earlier := func(w *opsfake.World) {
		m := pipeline.ControlMessage{Type: pipeline.ControlType, Version: pipeline.ControlVersion, Action: pipeline.ControlReplay, Tenant: "acme",
			Source: &pipeline.ControlSource{Bucket: "ingest", Key: "inbox/acme/a.csv", Size: 1}, RequestedBy: "arn:aws:iam::123456789012:user/first",
			Reason: "the first try", RequestedAt: now.Add(-time.Minute), RequestID: "req-1"}
		b, err := pipeline.EncodeControl(m)
		if err != nil {
			t.Fatal(err)
		}
		w.Objects["ingest/"+record] = &opsfake.Object{VersionID: "v0", Body: string(b)}
	}
	tests := []struct {
		name       string
		setup      func(w *opsfake.World)
		wantErr    string
		wantReason string // of the message sent, which equals the record
	}{
		{name: "a new request writes its record and sends the same body", wantReason: "lost"},
		{name: "a retried request id sends the record already there", setup: earlier, wantReason: "the first try"},
		{name: "a key holding something else is refused", setup: func(w *opsfake.World) {
			w.Objects["ingest/"+record] = &opsfake.Object{VersionID: "v0", Body: "not a record"}
		}, wantErr: "holds no valid control record for request req-1"},
		{name: "a record pipectl may not write sends nothing", setup: func(w *opsfake.World) {
			w.Err["PutObject"] = &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}
		}, wantErr: "write the control record s3://ingest/" + record},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := opsfake.New(now)
			tenant := opsfake.Tenant("acme", pipeline.OnFailureContinue)
			w.AddTenant("TenantPipeline-Tenants-1", tenant)
			w.AddExecution(tenant, "acme-1", sfntypes.ExecutionStatusSucceeded, "inbox/acme/a.csv", now.Add(-time.Hour))
			if tc.setup != nil {
				tc.setup(w)
			}
			o := ops.New(w.Clients(), "TenantPipeline")
			o.Now = func() time.Time { return now }
			o.NewRequestID = func() string { return "req-1" }
			_, err := o.ReplayWith(context.Background(), "acme", "inbox/acme/a.csv", "", "lost", false)
			sent := w.Queues[tenant.QueueURL].Sent
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				if len(sent) != 0 {
					t.Fatalf("got %d messages sent, want none", len(sent))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			body, ok := w.Body("ingest", record)
			if !ok || len(sent) != 1 || aws.ToString(sent[0].MessageBody) != body {
				t.Fatalf("got record %v and sent %d, want one message equal to the record %s", ok, len(sent), record)
			}
			m, err := pipeline.DecodeControl([]byte(body))
			if err != nil || m.Reason != tc.wantReason {
				t.Fatalf("got record reason %q (%v), want %q", m.Reason, err, tc.wantReason)
			}
			if err := pipeline.CheckControlRecord(m, []byte(body)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
