package pipeline

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Every tenant stack describes each of its tenants in one CloudFormation stack output, so that an
// operator's tool (cmd/pipectl) finds a tenant's resources from the deployed stacks alone: the
// stack prefix and the tenant id, no cdk.out and no tenants.json (docs/operations.md).
//
// The output's logical id is TenantOutputKey(tenant id); its value is the JSON of TenantOutput.
// pipectl reads every output whose logical id starts with TenantOutputKeyPrefix, and the id inside
// the value, not the key, names the tenant.
//
// CloudFormation allows 200 outputs per template and output logical ids of at most 255
// alphanumeric characters (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html,
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/outputs-section-structure.html);
// a stack holds at most 11 tenants (internal/stacks.MaxTenantsPerStack), so 11 outputs. It documents no size limit of its own for an
// output value; the descriptor is kept below MaxTenantOutputBytes, the documented limit of a
// parameter value, as a conservative bound.
const (
	TenantOutputKeyPrefix = "PipelineTenant"
	TenantOutputVersion   = 1
	MaxTenantOutputBytes  = 4096
)

// TenantOutputKey is the logical id of a tenant's output: the prefix and the id in hex. Logical ids
// are alphanumeric, and hex keeps "a-b" and "ab" apart; a 32-character id gives 78 characters.
func TenantOutputKey(tenantID string) string {
	return TenantOutputKeyPrefix + hex.EncodeToString([]byte(tenantID))
}

// TenantOutput is what pipectl needs to operate one tenant.
type TenantOutput struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Policy is the tenant's onFailure: continue or halt.
	Policy string `json:"policy"`
	// IdempotencyKey is event-id or object-version (docs/controller.md).
	IdempotencyKey string `json:"idempotencyKey"`
	// Bucket is the ingest bucket; Prefix the tenant's key prefix in it.
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix"`
	// QueueURL and QueueARN are the tenant's FIFO queue.
	QueueURL string `json:"queueUrl"`
	QueueARN string `json:"queueArn"`
	// StateMachineARN is the file state machine; SegmentStateMachineARN the segment one.
	StateMachineARN        string `json:"stateMachineArn"`
	SegmentStateMachineARN string `json:"segmentStateMachineArn"`
	// ControllerFunction is the controller Lambda's name.
	ControllerFunction string `json:"controllerFunction"`
	// EventSourceMappingUUID is the controller's SQS event source mapping; empty: pipectl finds it
	// with ListEventSourceMappings.
	EventSourceMappingUUID string `json:"eventSourceMappingUuid,omitempty"`
	// DLQURL is the dead-letter queue of the EventBridge rule's target, if the stack has one.
	DLQURL string `json:"dlqUrl,omitempty"`
	// UploaderRoleARN is a silo tenant's uploader role, which its uploaders assume (no session
	// tag) to upload its files; empty when the tenant names no uploaders. A pooled tenant's is its
	// pool's (PoolOutput.UploaderRoleARN).
	UploaderRoleARN string `json:"uploaderRoleArn,omitempty"`
	// Pool is the pool of a pooled tenant, whose queue, functions and state machines the pool's
	// other tenants share. No stack writes it: pipectl builds a pooled tenant's descriptor from its
	// pool's output and settings file and sets it. Empty for a silo tenant.
	Pool string `json:"pool,omitempty"`
	// KeysPool is the pool a pooled tenant's keys carry (Owner): its pool when the pool's keys are
	// KeysPerPool, else empty. Set by pipectl from the pool's output, as Pool.
	KeysPool string `json:"keysPool,omitempty"`
}

// DecodeTenantOutput reads one output value. Unknown fields are allowed (a newer stack may add
// some within version 1); a different version is an error that says which.
func DecodeTenantOutput(value string) (TenantOutput, error) {
	var o TenantOutput
	if err := json.Unmarshal([]byte(value), &o); err != nil {
		return TenantOutput{}, fmt.Errorf("tenant output is not JSON: %s", JSONProblem(err, "time"))
	}
	if o.Version != TenantOutputVersion {
		return TenantOutput{}, fmt.Errorf("tenant output %q has version %d, this pipectl reads version %d", o.ID, o.Version, TenantOutputVersion)
	}
	return o, o.Validate()
}

// Validate checks the fields pipectl relies on, reporting every problem at once.
func (o TenantOutput) Validate() error {
	var p []string
	req := func(name, v string) {
		if v == "" {
			p = append(p, name+" is empty")
		}
	}
	req("id", o.ID)
	req("bucket", o.Bucket)
	req("prefix", o.Prefix)
	req("queueUrl", o.QueueURL)
	req("queueArn", o.QueueARN)
	req("stateMachineArn", o.StateMachineARN)
	req("controllerFunction", o.ControllerFunction)
	if o.Policy != OnFailureContinue && o.Policy != OnFailureHalt {
		p = append(p, fmt.Sprintf("policy is %q, want %q or %q", o.Policy, OnFailureContinue, OnFailureHalt))
	}
	if o.Prefix != "" && !strings.HasSuffix(o.Prefix, "/") {
		p = append(p, "prefix must end with '/'")
	}
	if len(p) > 0 {
		return fmt.Errorf("tenant output %q: %w", o.ID, errors.New(strings.Join(p, "; ")))
	}
	return nil
}
