package ops_test

import (
	"context"
	"testing"
	"time"

	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// TestFilesRecordsOfBothPaths: pipectl files counts a file's records from Split's result on the
// full path, and from the SmallFile task's own result on the small-file path, whose history has no
// Split state.
func TestFilesRecordsOfBothPaths(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	w := opsfake.New(now)
	tenant := opsfake.Tenant("acme", pipeline.OnFailureHalt)
	w.AddTenant("TenantPipeline-Tenants-1", tenant)
	small := w.AddExecution(tenant, "acme-small", sfntypes.ExecutionStatusSucceeded, "inbox/acme/s.csv", now.Add(-2*time.Minute))
	small.History = opsfake.SmallFileHistory(37)
	full := w.AddExecution(tenant, "acme-full", sfntypes.ExecutionStatusSucceeded, "inbox/acme/f.csv", now.Add(-time.Minute))
	full.History = opsfake.SplitHistory(2500, 1, 1)

	rep, err := ops.New(w.Clients(), "TenantPipeline").Files(context.Background(), "acme", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"acme-small": 37, "acme-full": 2500}
	for _, f := range rep.Files {
		if f.Records == nil || *f.Records != want[f.ExecutionName] {
			t.Errorf("%s: got records %v, want %d", f.ExecutionName, f.Records, want[f.ExecutionName])
		}
		delete(want, f.ExecutionName)
	}
	if len(want) != 0 {
		t.Errorf("files not listed: %v", want)
	}
}

// TestHeadProgressOfOneSegment: a file of one segment runs the segment's Register loop in its own
// execution, with no Map: its head counts the segment done once a Register task hands on a done
// cursor, and not before.
func TestHeadProgressOfOneSegment(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name        string
		invocations int
		done        bool
		want        ops.Progress
	}{
		{"first invocation running", 0, false, ops.Progress{Records: 2500, Segments: 1}},
		{"three invocations, not done", 3, false, ops.Progress{Records: 2500, Segments: 1}},
		{"done in the first", 1, true, ops.Progress{Records: 2500, Segments: 1, SegmentsOK: 1, Registered: 2500}},
		{"done in a later invocation", 3, true, ops.Progress{Records: 2500, Segments: 1, SegmentsOK: 1, Registered: 2500}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := opsfake.New(now)
			tenant := opsfake.Tenant("acme", pipeline.OnFailureHalt)
			w.AddTenant("TenantPipeline-Tenants-1", tenant)
			e := w.AddExecution(tenant, "acme-1", sfntypes.ExecutionStatusRunning, "inbox/acme/f.csv", now.Add(-time.Minute))
			e.History = opsfake.OneSegmentHistory(2500, tt.invocations, tt.done)
			rep, err := ops.New(w.Clients(), "TenantPipeline").Status(context.Background(), []string{"acme"})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Tenants) != 1 || rep.Tenants[0].Head == nil || rep.Tenants[0].Head.Progress == nil {
				t.Fatalf("got %+v, want acme's head with its progress", rep.Tenants)
			}
			if got := *rep.Tenants[0].Head.Progress; got != tt.want {
				t.Errorf("got progress %+v, want %+v", got, tt.want)
			}
		})
	}
}
