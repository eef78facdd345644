package controller

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// With tenant-scoped stores, each message group's tenant reads its control objects with its own
// store, never the function's own nor another tenant's: acme's pause marker holds acme only where
// acme's store has it, a marker put where acme's store cannot see it holds nothing, and a tenant
// without a store is held (fail closed), its file never started.
func TestPoolTenantStores(t *testing.T) {
	rec, _ := pipeline.EncodePauseRecord(pipeline.PauseRecord{Version: 1, Tenant: "acme", RequestedBy: "arn:aws:iam::123456789012:user/ops",
		RequestedAt: testStart, Reason: "supplier resends"})
	for _, tc := range []struct {
		name string
		// markerIn is the store that holds acme's pause marker: "acme", "globex" or "own".
		markerIn    string
		refuseAcme  bool
		wantStarted []string
	}{
		{"acme's marker in acme's store holds acme", "acme", false, []string{"globex"}},
		{"acme's marker in the function's own store is not read", "own", false, []string{"acme", "globex"}},
		{"acme's marker in globex's store is not read", "globex", false, []string{"acme", "globex"}},
		{"no session for acme holds acme", "", true, []string{"globex"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPoolRig(t, nil)
			stores := map[string]*fakeS3{"acme": newFakeS3(), "globex": newFakeS3(), "own": r.s3}
			if tc.markerIn != "" {
				stores[tc.markerIn].objects[testBucket+"/"+pipeline.PauseMarkerKey(pipeline.PoolOwner(testPool, "acme"))] = string(rec)
			}
			var asked []string
			r.p.tenantObjects = func(id string) (objectStore, error) {
				asked = append(asked, id)
				if id == "acme" && tc.refuseAcme {
					return nil, errors.New("no session")
				}
				return stores[id], nil
			}
			_, err := r.p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
				poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"),
				poolMessage("m2", eventBody(t, evID2, globexKey), "globex"),
			}})
			if err != nil {
				t.Fatal(err)
			}
			var started []string
			for _, arn := range r.sfn.created {
				started = append(started, r.sfn.input(t, arn).Tenant.ID)
			}
			slices.Sort(started)
			if !slices.Equal(started, tc.wantStarted) {
				t.Errorf("got executions of %v, want %v", started, tc.wantStarted)
			}
			for _, id := range asked {
				if id != "acme" && id != "globex" {
					t.Errorf("got a store asked for %q, want only the message groups' tenants", id)
				}
			}
			if len(r.s3.puts) != 0 {
				t.Errorf("got %d writes with the function's own store, want 0", len(r.s3.puts))
			}
		})
	}
}
