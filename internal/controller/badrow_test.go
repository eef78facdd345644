package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/testfake"
	"github.com/example/tenantpipeline/spec"
)

const badKey = testfake.BadRowKey

// A tenant whose row is bad does not stop the pool: the other tenants' files start, the bad
// tenant's message is kept (a batch item failure, back after MAX_WAIT_SECONDS), and an ERROR
// line names the tenant and the problem. Its status events wake nothing.
func TestPoolBadRowHoldsOnlyItsTenant(t *testing.T) {
	tests := []struct {
		kind, wantProblem string
	}{
		{"undecodable", `unknown field "fxrmat"`},
		{"invalid", `onFailure: "stop"`},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			r := newPoolRig(t, map[string]string{pipeline.EnvPoolSettings: testfake.BadRowSettings(t, testPool, testPoolPrefix, tt.kind)})
			records := []events.SQSMessage{
				poolMessage("m1", eventBody(t, evID1, acmeKey), "acme"),
				poolMessage("m9", eventBody(t, evID3, badKey), "bad"),
				poolMessage("m2", eventBody(t, evID2, globexKey), "globex"),
			}
			for round := range 2 { // the row is read again, and still holds only its tenant
				r.sqs.changes = nil
				resp, err := r.p.Handle(context.Background(), events.SQSEvent{Records: records})
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if !slices.ContainsFunc(resp.BatchItemFailures, func(f events.SQSBatchItemFailure) bool { return f.ItemIdentifier == "m9" }) {
					t.Errorf("round %d: got failures %v, want m9 kept", round, resp.BatchItemFailures)
				}
				if !slices.Contains(r.sqs.changes, visibilityChange{"rh-m9", 60}) {
					t.Errorf("round %d: got visibility changes %v, want m9 back in 60 s", round, r.sqs.changes)
				}
			}
			var started []string
			for _, arn := range r.sfn.created {
				started = append(started, r.sfn.input(t, arn).Tenant.ID)
			}
			slices.Sort(started)
			if !slices.Equal(slices.Compact(started), []string{"acme", "globex"}) {
				t.Errorf("got executions of %v, want acme's and globex's only", started)
			}
			l := r.findLog(t, "ERROR", "settings in the pool's settings file are invalid; message kept")
			if l["tenant"] != "bad" || !strings.Contains(l["error"].(string), tt.wantProblem) || l["messageId"] != "m9" {
				t.Errorf("got log %v, want tenant bad, messageId m9 and an error containing %q", l, tt.wantProblem)
			}

			wake := events.EventBridgeEvent{ID: "ev-1", Detail: mustJSON(t, map[string]any{
				"executionArn": testExecPrefix + "x", "stateMachineArn": testStateMachine, "name": "x", "status": "SUCCEEDED",
				"input": string(mustJSON(t, pipeline.WorkflowInput{Tenant: pipeline.Tenant{Tenant: spec.Tenant{ID: "bad"}}})),
			})}
			if err := r.p.Wake(context.Background(), wake); err != nil {
				t.Errorf("Wake: got %v, want nil", err)
			}
			r.findLog(t, "ERROR", "status event of a tenant whose settings in the pool's settings file are invalid")
		})
	}
}
