package pipeline

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeTenantOutput(t *testing.T) {
	valid := `{"version":1,"id":"acme","policy":"halt","idempotencyKey":"event-id","bucket":"ingest","prefix":"inbox/acme/",` +
		`"queueUrl":"https://sqs.eu-west-1.amazonaws.com/123456789012/acme.fifo","queueArn":"arn:aws:sqs:eu-west-1:123456789012:acme.fifo",` +
		`"stateMachineArn":"arn:aws:states:eu-west-1:123456789012:stateMachine:acme-files","segmentStateMachineArn":"arn:aws:states:eu-west-1:123456789012:stateMachine:acme-segments",` +
		`"controllerFunction":"acme-controller","eventSourceMappingUuid":"a1b2c3d4-5678-90ab-cdef-11111EXAMPLE"}`
	for _, tc := range []struct {
		name    string
		value   string
		wantErr string // "" for none
	}{
		{"valid", valid, ""},
		{"unknown field of a newer stack", strings.Replace(valid, `"version":1,`, `"version":1,"dashboard":"x",`, 1), ""},
		{"newer version", strings.Replace(valid, `"version":1`, `"version":2`, 1), "has version 2, this pipectl reads version 1"},
		{"bad policy", strings.Replace(valid, `"halt"`, `"stop"`, 1), `policy is "stop"`},
		{"missing queue", strings.Replace(valid, `"queueUrl":"https://sqs.eu-west-1.amazonaws.com/123456789012/acme.fifo",`, ``, 1), "queueUrl is empty"},
		{"not JSON", `{"version":`, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := DecodeTenantOutput(tc.value)
			if tc.wantErr == "" {
				if err != nil || o.ID != "acme" || o.Policy != OnFailureHalt {
					t.Errorf("got %+v, %v, want acme/halt and no error", o, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// The descriptor of a tenant with the longest names AWS allows stays below the bound.
func TestTenantOutputSize(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	o := TenantOutput{
		Version: 1, ID: long(32), Policy: OnFailureContinue, IdempotencyKey: IdempotencyObjectVersion,
		Bucket: long(63), Prefix: long(1024), // S3 bucket names ≤ 63, keys ≤ 1,024 bytes
		QueueURL: "https://sqs.ap-southeast-3.amazonaws.com/123456789012/" + long(80), // queue names ≤ 80
		QueueARN: "arn:aws-us-gov:sqs:ap-southeast-3:123456789012:" + long(80),
		// state machine names ≤ 80, function names ≤ 64
		StateMachineARN:        "arn:aws-us-gov:states:ap-southeast-3:123456789012:stateMachine:" + long(80),
		SegmentStateMachineARN: "arn:aws-us-gov:states:ap-southeast-3:123456789012:stateMachine:" + long(80),
		ControllerFunction:     long(64), EventSourceMappingUUID: "a1b2c3d4-5678-90ab-cdef-11111EXAMPLE",
		DLQURL: "https://sqs.ap-southeast-3.amazonaws.com/123456789012/" + long(80),
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxTenantOutputBytes {
		t.Errorf("got %d bytes, want at most %d", len(b), MaxTenantOutputBytes)
	}
}

func TestTenantOutputKey(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"acme", "PipelineTenant61636d65"},
		{"a-b", "PipelineTenant612d62"},
		{"ab", "PipelineTenant6162"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			got := TenantOutputKey(tc.id)
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			// A CloudFormation logical id is alphanumeric and at most 255 characters.
			if len(got) > 255 || strings.IndexFunc(got, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
			}) >= 0 {
				t.Errorf("got %q, want an alphanumeric logical id of at most 255 characters", got)
			}
		})
	}
	if n := len(TenantOutputKey(strings.Repeat("x", 32))); n != 78 {
		t.Errorf("got %d characters for a 32-character id, want 78", n)
	}
}
