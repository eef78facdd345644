package deploy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// SQS takes integer attributes as decimal strings; 1.2096e+06 is rejected by real SQS.
func TestAttrString(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{float64(1209600), "1209600"}, // MessageRetentionPeriod: 14 days
		{float64(330), "330"},
		{float64(262144), "262144"},
		{"true", "true"},
		{true, "true"},
		{nil, ""},
	} {
		if got := AttrString(tc.in); got != tc.want {
			t.Errorf("AttrString(%v): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The readers fill in what AWS defaults when a template leaves it out.
func TestReadersDefaults(t *testing.T) {
	st := &Stack{Name: "S", Resources: map[string]*Resource{}}
	add := func(id, typ, props string) *Resource {
		r := &Resource{Stack: st, LogicalID: id, Type: typ, Properties: map[string]json.RawMessage{}}
		if err := json.Unmarshal([]byte(props), &r.Properties); err != nil {
			t.Fatal(err)
		}
		st.Resources[id] = r
		return r
	}
	fn := add("Fn", "AWS::Lambda::Function", `{}`)
	fn.Metadata = map[string]json.RawMessage{MetadataSource: json.RawMessage(`"lambdas/controller"`)}
	sized := add("Sized", "AWS::Lambda::Function", `{"Timeout": 60, "MemorySize": 256, "ReservedConcurrentExecutions": 2, "Environment": {"Variables": {"A": "1"}}}`)
	m := add("Map", "AWS::Lambda::EventSourceMapping", `{"EventSourceArn": "arn:q", "FunctionName": "f"}`)
	off := add("Off", "AWS::Lambda::EventSourceMapping", `{"EventSourceArn": "arn:q", "FunctionName": "f", "BatchSize": 1, "Enabled": false, "FunctionResponseTypes": ["ReportBatchItemFailures"]}`)
	fifo := add("TenantQueue", "AWS::SQS::Queue", `{"FifoQueue": true, "VisibilityTimeout": 330}`)
	asm := &Assembly{Stacks: []*Stack{st}}
	res, err := NewResolver(asm, "us-east-1", "000000000000")
	if err != nil {
		t.Fatal(err)
	}
	if f, err := asm.ReadFunction(res, fn); err != nil || f.Source != "lambdas/controller" || f.Timeout != 3*time.Second || f.MemoryMB != 128 || f.Variables == nil {
		t.Errorf("function without settings: got %+v, %v; want lambdas/controller, 3 s, 128 MB, no variables", f, err)
	}
	if f, err := asm.ReadFunction(res, sized); err != nil || f.Timeout != time.Minute || f.MemoryMB != 256 || f.Reserved != 2 || f.Variables["A"] != "1" {
		t.Errorf("function with settings: got %+v, %v", f, err)
	}
	if got, err := ReadMapping(res, m); err != nil || got.BatchSize != 10 || !got.Enabled || got.ReportBatchItemFailures {
		t.Errorf("mapping without settings: got %+v, %v; want batch 10, enabled", got, err)
	}
	if got, err := ReadMapping(res, off); err != nil || got.BatchSize != 1 || got.Enabled || !got.ReportBatchItemFailures {
		t.Errorf("mapping with settings: got %+v, %v; want batch 1, disabled, batch item failures", got, err)
	}
	if q, err := ReadQueue(res, fifo); err != nil || q.Name != "tenantqueue.fifo" || q.Attributes["FifoQueue"] != "true" || q.Attributes["VisibilityTimeout"] != "330" {
		t.Errorf("FIFO queue without a name: got %+v, %v; want tenantqueue.fifo, FifoQueue, VisibilityTimeout 330", q, err)
	}
}

// A role resolves to the name and ARN IAM gives it: its RoleName or a name made of the stack's and
// its own and a suffix of its own, at most 64 characters (two long logical ids that begin alike
// never share one), and an ARN with its path, which the bucket's exemption of the
// pipeline's roles (aws:PrincipalArn under the role path) matches.
func TestRoleIdentity(t *testing.T) {
	st, res := stackOf(t, "TenantPipeline-Pool-default-with-a-name-that-runs-long", "AWS::IAM::Role", map[string]string{
		"Named":   `{"RoleName": "platform-uploader"}`,
		"Pathed":  `{"Path": "/tenantpipeline/TenantPipeline/"}`,
		"Default": `{}`,
	})
	for _, tc := range []struct{ id, wantName, wantARN string }{
		{"Named", "platform-uploader", "arn:aws:iam::000000000000:role/platform-uploader"},
		{"Pathed", "TenantPipeline-Pool-default-with-a-name-that-Pathed-FAE3FD2FE2F2", "arn:aws:iam::000000000000:role/tenantpipeline/TenantPipeline/TenantPipeline-Pool-default-with-a-name-that-Pathed-FAE3FD2FE2F2"},
		{"Default", "TenantPipeline-Pool-default-with-a-name-tha-Default-01835922FE91", "arn:aws:iam::000000000000:role/TenantPipeline-Pool-default-with-a-name-tha-Default-01835922FE91"},
	} {
		name, err := res.ResolveString(st, json.RawMessage(`{"Ref": "`+tc.id+`"}`))
		arn, err2 := res.ResolveString(st, json.RawMessage(`{"Fn::GetAtt": ["`+tc.id+`", "Arn"]}`))
		if err != nil || err2 != nil || name != tc.wantName || arn != tc.wantARN || len(name) > 64 {
			t.Errorf("%s: got %q, %q (%v, %v); want %q, %q", tc.id, name, arn, err, err2, tc.wantName, tc.wantARN)
		}
	}
}

// A rule resolves to the name EventBridge keeps, which policies match through its ARN: its Name,
// or CloudFormation's "<stack>-<logical id>-<random>", cut to 64 characters by the stack name
// first, so that a long logical id leaves too little of the stack name for a pattern
// rule/<stack name>-* to match.
func TestRuleIdentity(t *testing.T) {
	st, res := stackOf(t, "TenantPipeline-Tenants-1", "AWS::Events::Rule", map[string]string{
		"Named":                  `{"Name": "TenantPipeline-Tenants-1-Rule-0a1b2c3d"}`,
		"TenantacmeRuleAA0F7514": `{}`,
		"TenanttenantwithalongidentifierxxxRuleAA0F7514": `{}`,
	})
	for _, tc := range []struct {
		id, wantPrefix string
		keepsStack     bool
	}{
		{"Named", "TenantPipeline-Tenants-1-Rule-0a1b2c3d", true},
		{"TenantacmeRuleAA0F7514", "TenantPipeline-Tenants-1-TenantacmeRuleAA0F7514-", true},
		{"TenanttenantwithalongidentifierxxxRuleAA0F7514", "Tena-Tenanttenantwithalongidentifierxxx", false},
	} {
		arn, err := res.ResolveString(st, json.RawMessage(`{"Fn::GetAtt": ["`+tc.id+`", "Arn"]}`))
		name, _ := strings.CutPrefix(arn, "arn:aws:events:us-east-1:000000000000:rule/")
		if err != nil || !strings.HasPrefix(name, tc.wantPrefix) || len(name) > MaxRuleName || strings.HasPrefix(name, st.Name+"-") != tc.keepsStack {
			t.Errorf("%s: got %q (%v); want a name of at most 64 starting %q, keeping the stack name %v", tc.id, arn, err, tc.wantPrefix, tc.keepsStack)
		}
	}
}

// stackOf is a stack named name of resources of one type, by logical id and properties, and the
// resolver of an assembly of it alone.
func stackOf(t *testing.T, name, typ string, resources map[string]string) (*Stack, *Resolver) {
	t.Helper()
	st := &Stack{Name: name, Resources: map[string]*Resource{}}
	for id, props := range resources {
		r := &Resource{Stack: st, LogicalID: id, Type: typ, Properties: map[string]json.RawMessage{}}
		if err := json.Unmarshal([]byte(props), &r.Properties); err != nil {
			t.Fatal(err)
		}
		st.Resources[id] = r
	}
	res, err := NewResolver(&Assembly{Stacks: []*Stack{st}}, "us-east-1", "000000000000")
	if err != nil {
		t.Fatal(err)
	}
	return st, res
}
