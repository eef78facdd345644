package tenantpipeline

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// With a customer-managed key, the rules that send to the encrypted queues are named
// "<stack name>-…" in at most 64 characters, whatever the tenant's id, so the key policy's
// rule/<stack name>-* matches them (CloudFormation's own names would cut the stack name for a long
// id); without a key they keep CloudFormation's names. A stack name that leaves no room fails synth.
func TestKeyedRuleNames(t *testing.T) {
	longID := "tenant-with-a-long-id-0123456789" // 32 characters, the most an id has
	longStack := "TenantPipeline-" + strings.Repeat("s", MaxKeyedStackName-len("TenantPipeline-"))
	for _, tc := range []struct {
		name, stack string
		tier        string
		key         bool
		wantProblem string
	}{
		{"silo, a long id", "TenantPipeline-Tenants-1", "silo", true, ""},
		{"pool, a long id", "TenantPipeline-Pool-default", "pool", true, ""},
		{"silo, the longest stack name", longStack, "silo", true, ""},
		{"pool, the longest stack name", longStack, "pool", true, ""},
		{"silo, no key", "TenantPipeline-Tenants-1", "silo", false, ""},
		{"pool, no key", "TenantPipeline-Pool-default", "pool", false, ""},
		{"silo, a stack name one too long", longStack + "x", "silo", true, "may have at most 54"},
		{"pool, a stack name one too long", longStack + "x", "pool", true, "may have at most 54"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String(tc.stack), nil)
			bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true)})
			var shared SharedProps
			if tc.key {
				shared.EncryptionKey = awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
			}
			tenant := Tenant{ID: longID, RegisterURL: "https://core.example.com/records"}
			var c constructs.Construct
			if tc.tier == "silo" {
				c = New(stack, "Tenant-"+longID, &Props{Tenant: tenant, Bucket: bucket, SharedProps: shared}).Construct
			} else {
				c = NewPool(stack, "Pool", &PoolProps{Name: "p", Bucket: bucket, Tenants: []Tenant{tenant}, Shared: shared, IntakeGroups: 4}).Construct
			}
			msgs := *c.Node().Validate()
			var all []string
			for _, m := range msgs {
				all = append(all, *m)
			}
			if tc.wantProblem != "" {
				if !strings.Contains(strings.Join(all, "\n"), tc.wantProblem) {
					t.Fatalf("got validation messages %q, want one containing %q", all, tc.wantProblem)
				}
				return
			}
			if len(all) != 0 {
				t.Fatalf("got validation messages %q, want none", all)
			}
			rules := assertions.Template_FromStack(stack, nil).FindResources(jsii.String("AWS::Events::Rule"), nil)
			queued := 0
			names := map[string]bool{}
			for id, r := range *rules {
				props := (*r)["Properties"].(map[string]any)
				if strings.Contains(id, "StatusRule") || strings.Contains(id, "ReconcileRule") {
					continue // a function's rule: its target is no queue
				}
				queued++
				name, named := props["Name"].(string)
				if !tc.key {
					if named {
						t.Errorf("rule %s: got name %q without a key, want CloudFormation's", id, name)
					}
					continue
				}
				if !named || !strings.HasPrefix(name, tc.stack+"-") || len(name) > MaxRuleName || names[name] {
					t.Errorf("rule %s: got name %q (%d characters), want a new name starting %q within %d", id, name, len(name), tc.stack+"-", MaxRuleName)
				}
				names[name] = true
			}
			if want := map[string]int{"silo": 1, "pool": 4}[tc.tier]; queued != want {
				t.Errorf("got %d rules to a queue, want %d", queued, want)
			}
		})
	}
}
