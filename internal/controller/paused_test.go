package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/source/sourcetest"
)

// A paused pooled tenant's message starts nothing and is held for the safety net, with its receipt
// handle in the tenant's wake state for resume; the pool's other tenant flows in the same batch.
func TestPoolPausedTenantHeldOthersFlow(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		wantHold int32
	}{
		{"wake-up events: the safety net", map[string]string{pipeline.EnvWakeEvents: "true", pipeline.EnvSafetyNetSeconds: "45"}, 45},
		{"no wake-up events: MAX_WAIT", nil, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPoolRig(t, tc.env)
			rec, _ := pipeline.EncodePauseRecord(pipeline.PauseRecord{Version: 1, Tenant: "acme", RequestedBy: "arn:aws:iam::123456789012:user/ops",
				RequestedAt: testStart, Reason: "supplier resends"})
			r.s3.objects[testBucket+"/"+pipeline.PauseMarkerKey(pipeline.PoolOwner(testPool, "acme"))] = string(rec)

			resp, err := r.p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
				poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"),
				poolMessage("m2", eventBody(t, evID2, globexKey), "globex"),
			}})
			if err != nil {
				t.Fatal(err)
			}
			var failures []string
			for _, f := range resp.BatchItemFailures {
				failures = append(failures, f.ItemIdentifier)
			}
			if !slices.Contains(failures, "m1") {
				t.Errorf("got failures %v, want m1 (acme's) held", failures)
			}
			tenants := map[string]bool{}
			for _, arn := range r.sfn.created {
				tenants[r.sfn.input(t, arn).Tenant.ID] = true
			}
			if tenants["acme"] || !tenants["globex"] {
				t.Errorf("got executions of %v, want globex's only", tenants)
			}
			if i := slices.IndexFunc(r.sqs.changes, func(c visibilityChange) bool { return c.Receipt == "rh-m1" }); i < 0 || r.sqs.changes[i].Seconds != tc.wantHold {
				t.Errorf("got visibility changes %v, want rh-m1 held %d s", r.sqs.changes, tc.wantHold)
			}
			body, ok := r.s3.objects[testBucket+"/"+pipeline.WakeStateKey(pipeline.PoolOwner(testPool, "acme"))]
			if !ok {
				t.Fatal("no wake state for acme: resume could not release the held message")
			}
			st, err := pipeline.DecodeWakeState([]byte(body))
			if err != nil || !st.Paused || st.ReceiptHandle != "rh-m1" || st.MessageID != "m1" || st.ExecutionName != "" {
				t.Errorf("got wake state %+v (%v), want the paused hold of m1", st, err)
			}
			l := r.findLog(t, "INFO", "tenant paused by an operator")
			if l["tenant"] != "acme" || l["pausedBy"] != "arn:aws:iam::123456789012:user/ops" || l["reason"] != "supplier resends" {
				t.Errorf("got log %v, want acme's pause with who and why", l)
			}
		})
	}
}

// A marker deleted between the controller's two reads (a resume racing the hold) lets the delivery
// go on: the file starts.
func TestPoolPausedTenantResumedDuringHold(t *testing.T) {
	r := newPoolRig(t, nil)
	key := testBucket + "/" + pipeline.PauseMarkerKey(pipeline.PoolOwner(testPool, "acme"))
	r.s3.objects[key] = `{"version":1}`
	r.s3.beforePut = func(k string) {
		if k == testBucket+"/"+pipeline.WakeStateKey(pipeline.PoolOwner(testPool, "acme")) {
			r.s3.mu.Lock()
			delete(r.s3.objects, key)
			r.s3.mu.Unlock()
		}
	}
	if _, err := r.p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{poolMessage("m1", eventBody(t, evID1, acmeKey), "acme")}}); err != nil {
		t.Fatal(err)
	}
	if len(r.sfn.created) != 1 {
		t.Errorf("got %d executions, want acme's file started once the marker is gone", len(r.sfn.created))
	}
}

// A silo controller never reads a pause marker: its pause is the event source mapping.
func TestSiloIgnoresPauseMarker(t *testing.T) {
	r := newRig(t, nil)
	r.s3.objects[testBucket+"/"+pipeline.PauseMarkerKey(pipeline.PoolOwner(testPool, "acme"))] = `{"version":1}`
	if _, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", eventBody(t, evID1, key1), 1)}}); err != nil {
		t.Fatal(err)
	}
	if len(r.sfn.created) != 1 {
		t.Errorf("got %d executions, want the silo file started", len(r.sfn.created))
	}
}

// A pause marker that cannot be read holds its tenant: only a documented absence (404, or a 403
// whose key a permitted listing shows absent) lets the file start. A mis-scoped s3:GetObject grant
// on control/*/paused.json must never turn a pause off.
func TestPoolPauseMarkerUnreadableHolds(t *testing.T) {
	marker := testBucket + "/" + pipeline.PauseMarkerKey(pipeline.PoolOwner(testPool, "acme"))
	denied := sourcetest.APIError("GetObject", 403, "AccessDenied")
	tests := []struct {
		name      string
		setup     func(*fakeS3)
		wantHeld  bool
		wantError string // in the ERROR line of a held delivery
	}{
		{"403 on a marker that exists (GetObject not granted)", func(s *fakeS3) {
			s.objects[marker] = `{"version":1}`
			s.keyGetErrs[marker] = []error{denied}
		}, true, "the marker exists"},
		{"403 and the listing is denied too", func(s *fakeS3) {
			s.keyGetErrs[marker] = []error{denied}
			s.listErr = sourcetest.APIError("ListObjectsV2", 403, "AccessDenied")
		}, true, "listing it failed"},
		{"403 without s3:ListBucket", func(s *fakeS3) { s.noListBucket = true }, true, "AccessDenied"},
		{"500", func(s *fakeS3) {
			s.keyGetErrs[marker] = []error{sourcetest.APIError("GetObject", 500, "InternalError")}
		}, true, "InternalError"},
		{"503 SlowDown", func(s *fakeS3) { s.keyGetErrs[marker] = []error{sourcetest.APIError("GetObject", 503, "SlowDown")} }, true, "SlowDown"},
		{"404 NoSuchKey: not paused", func(*fakeS3) {}, false, ""},
		{"403 on a key the listing shows absent: not paused", func(s *fakeS3) { s.keyGetErrs[marker] = []error{denied} }, false, ""},
	}
	// Each case directly and through a tenant's session (tenantStore), which is how a pool
	// controller with the tenant-scoped role reads the marker.
	for _, sessions := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/sessions=%v", tt.name, sessions), func(t *testing.T) {
				r := newPoolRig(t, nil)
				if sessions {
					r.p.tenantObjects = func(string) (objectStore, error) { return r.s3, nil }
				}
				tt.setup(r.s3)
				resp, err := r.p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
					poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"),
				}})
				if err != nil {
					t.Fatal(err)
				}
				started := len(r.sfn.created) > 0
				held := slices.ContainsFunc(resp.BatchItemFailures, func(f events.SQSBatchItemFailure) bool { return f.ItemIdentifier == "m1" })
				if !tt.wantHeld {
					if !started {
						t.Errorf("got no execution started, want acme's file started: its marker is absent")
					}
					return
				}
				if started || !held {
					t.Errorf("got %d executions started, message kept %v; want none started and the message kept", len(r.sfn.created), held)
				}
				l := r.findLog(t, "ERROR", "pause marker could not be read")
				if l["tenant"] != "acme" || !strings.Contains(fmt.Sprint(l["error"]), tt.wantError) {
					t.Errorf("got log %v, want an ERROR naming tenant acme and %q", l, tt.wantError)
				}
			})
		}
	}
}
