package test

import (
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// TestTenantOutputs: each tenant stack has one output per tenant, logical id
// pipeline.TenantOutputKey(id), whose value decodes with pipeline.DecodeTenantOutput and names the
// tenant's own resources (placeholders stand for the values CloudFormation fills in).
func TestTenantOutputs(t *testing.T) {
	sharedApp(t)
	tpl := shared.template
	outputs, _ := tpl["Outputs"].(map[string]any)
	if len(outputs) != len(sampleTenants) {
		t.Errorf("got %d outputs %v, want one per tenant (%d)", len(outputs), keys(outputs), len(sampleTenants))
	}
	policy := map[string]string{"acme": "continue", "globex": "halt", "initech": "continue"}
	idem := map[string]string{"acme": "object-version", "globex": "object-version", "initech": "object-version"}
	prefix := map[string]string{"acme": "inbox/acme/", "globex": "inbox/globex/", "initech": "drop/initech/"}
	for _, tenant := range sampleTenants {
		t.Run(tenant, func(t *testing.T) {
			key := pipeline.TenantOutputKey(tenant)
			out, ok := outputs[key].(map[string]any)
			if !ok {
				t.Fatalf("no output %s in %v", key, keys(outputs))
			}
			value := flatten(t, out["Value"])
			o, err := pipeline.DecodeTenantOutput(value)
			if err != nil {
				t.Fatalf("DecodeTenantOutput(%s): %v", value, err)
			}
			q, _ := fifoQueue(t, tpl, tenant)
			dlq, _ := ruleDLQ(t, tpl, tenant)
			esm, _ := only(t, tpl, "AWS::Lambda::EventSourceMapping", tenant)
			for _, c := range []struct{ field, got, want string }{
				{"id", o.ID, tenant},
				{"policy", o.Policy, policy[tenant]},
				{"idempotencyKey", o.IdempotencyKey, idem[tenant]},
				{"prefix", o.Prefix, prefix[tenant]},
				{"queueUrl", o.QueueURL, "<Ref:" + q + ">"},
				{"queueArn", o.QueueARN, "<GetAtt:" + q + ".Arn>"},
				{"stateMachineArn", o.StateMachineARN, "<Ref:" + logicalIDOf(t, tpl, "AWS::StepFunctions::StateMachine", tenant, "WorkflowFile") + ">"},
				{"segmentStateMachineArn", o.SegmentStateMachineARN, "<Ref:" + logicalIDOf(t, tpl, "AWS::StepFunctions::StateMachine", tenant, "WorkflowSegment") + ">"},
				{"controllerFunction", o.ControllerFunction, "<Ref:" + controllerID(t, tpl, tenant) + ">"},
				{"eventSourceMappingUuid", o.EventSourceMappingUUID, "<Ref:" + esm + ">"},
				{"dlqUrl", o.DLQURL, "<Ref:" + dlq + ">"},
			} {
				if c.got != c.want {
					t.Errorf("%s: got %q, want %q", c.field, c.got, c.want)
				}
			}
			// The bucket lives in the ingest stack: its name is imported.
			if !strings.HasPrefix(o.Bucket, "<Import:") || !strings.Contains(o.Bucket, "Bucket83908E77") {
				t.Errorf("bucket: got %q, want the ingest stack's bucket, imported", o.Bucket)
			}
			if len(value) > pipeline.MaxTenantOutputBytes {
				t.Errorf("got a %d-byte value, want at most %d", len(value), pipeline.MaxTenantOutputBytes)
			}
		})
	}
}
