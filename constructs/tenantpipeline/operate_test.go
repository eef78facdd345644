package tenantpipeline

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// TestGrantOperate: an operator's grant is pipectl's permissions table for one tenant, in both
// tiers: the tenant's keys (its prefix, skip markers, sequence state, work), its queue and the
// rule's dead-letter queue, its state machines and their executions, its controller, and the
// mapping (silo) or the pause marker (pool); with a customer-managed key, that key through SQS,
// Step Functions and S3 for those resources only. Without a key, no kms statement.
func TestGrantOperate(t *testing.T) {
	for _, tier := range []string{"silo", "pool"} {
		for _, withKey := range []bool{false, true} {
			name := tier
			if withKey {
				name += "/key"
			}
			t.Run(name, func(t *testing.T) {
				stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("Ops"), nil)
				bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true), Versioned: jsii.Bool(true)})
				var shared SharedProps
				if withKey {
					shared.EncryptionKey = awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
				}
				operator := awsiam.NewRole(stack, jsii.String("Operator"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
				tenant := Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"}
				prefix := "inbox/acme/"
				var c constructs.Construct
				if tier == "silo" {
					p := New(stack, "Tenant-acme", &Props{Tenant: tenant, Bucket: bucket, SharedProps: shared})
					if !*p.GrantOperate(operator).Success() {
						t.Error("got an unsuccessful grant")
					}
					c = p.Construct
				} else {
					p := NewPool(stack, "Pool", &PoolProps{Name: "p", Bucket: bucket, Tenants: []Tenant{tenant}, Shared: shared})
					if !*p.GrantOperate("acme", operator).Success() {
						t.Error("got an unsuccessful grant")
					}
					c, prefix = p.Construct, "pools/p/acme/"
				}
				if msgs := *c.Node().Validate(); len(msgs) != 0 {
					t.Errorf("got validation messages %q, want none", *msgs[0])
				}
				got := statementsOf(t, stack, operator)
				for _, want := range []string{
					`"Action":"cloudformation:DescribeStacks","Effect":"Allow","Resource":"*"`,
					`"Action":"lambda:ListEventSourceMappings","Effect":"Allow","Resource":"*"`,
					`"Action":"lambda:GetFunction"`,
					`"Action":["sqs:GetQueueAttributes","sqs:SendMessage","sqs:ChangeMessageVisibility"]`,
					`"Action":["sqs:GetQueueAttributes","sqs:ReceiveMessage","sqs:DeleteMessage"]`,
					`"Action":"states:ListExecutions"`,
					`"Action":["states:DescribeExecution","states:GetExecutionHistory","states:RedriveExecution"]`,
					`":execution:"`,
					`"/` + prefix + `*"`, `"/control/acme/skip/*"`, `"/control/acme/requests/*"`, `"/control/acme/sequence/*"`, `"/work/acme/*"`,
					`"s3:prefix":["` + prefix + `*","control/acme/*"]`,
				} {
					if !strings.Contains(got, want) {
						t.Errorf("got statements %s, want them to contain %s", got, want)
					}
				}
				if steered := strings.Contains(got, "lambda:UpdateEventSourceMapping"); steered != (tier == "silo") {
					t.Errorf("UpdateEventSourceMapping granted: %v, want %v (the silo's own mapping only)", steered, tier == "silo")
				}
				marker := false
				var parsed []map[string]any
				if err := json.Unmarshal([]byte(got), &parsed); err != nil {
					t.Fatal(err)
				}
				for _, s := range parsed {
					a, _ := json.Marshal(s["Action"])
					r, _ := json.Marshal(s["Resource"])
					marker = marker || strings.Contains(string(a), `"s3:PutObject"`) && strings.Contains(string(r), `/control/acme/paused.json"`)
				}
				records := false
				for _, s := range parsed {
					a, _ := json.Marshal(s["Action"])
					r, _ := json.Marshal(s["Resource"])
					records = records || strings.Contains(string(a), `"s3:PutObject"`) && strings.Contains(string(r), `/control/acme/requests/*"`)
				}
				if !records {
					t.Error("the operator may not write the tenant's control records (control/acme/requests/*), without which the controller performs no redrive, replay or sequence request")
				}
				if marker != (tier == "pool") {
					t.Errorf("the pause marker writable: %v, want %v (a pool's tenant is paused by its marker)", marker, tier == "pool")
				}
				// Nothing of another tenant, nor its results, secrets or tables.
				for _, other := range []string{`/control/*"`, `/work/*"`, `/results/`, `/quarantine/`, `"secretsmanager:`, `"dynamodb:`} {
					if strings.Contains(got, other) {
						t.Errorf("got statements reaching %s, want the tenant's alone: %s", other, got)
					}
				}
				var sts []map[string]any
				if err := json.Unmarshal([]byte(got), &sts); err != nil {
					t.Fatal(err)
				}
				var kms []string
				for _, s := range sts {
					b, _ := json.Marshal(s)
					if strings.Contains(string(b), `"kms:`) {
						kms = append(kms, string(b))
					}
				}
				if !withKey {
					if len(kms) != 0 {
						t.Errorf("got kms statements %q without a key", kms)
					}
					return
				}
				joined := strings.Join(kms, "\n")
				for _, want := range []string{`"kms:EncryptionContext:aws:sqs:arn"`, `"kms:EncryptionContext:aws:states:stateMachineArn"`, `"kms:EncryptionContext:aws:s3:arn"`} {
					if !strings.Contains(joined, want) {
						t.Errorf("got kms statements\n%s\nwant one scoped by %s", joined, want)
					}
				}
				for _, s := range kms {
					if !strings.Contains(s, `"Condition"`) {
						t.Errorf("got a kms statement without a condition: %s", s)
					}
				}
			})
		}
	}
}

// TestGrantOperateFailsLoudly: a grantee whose policy the app cannot change fails synth naming
// it, in both tiers; a pool's unknown tenant panics with a *PropsError.
func TestGrantOperateFailsLoudly(t *testing.T) {
	const ops = "arn:aws:iam::123456789012:role/ops/oncall"
	for _, tier := range []string{"silo", "pool"} {
		t.Run(tier, func(t *testing.T) {
			stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("Ops"), nil)
			bucket := awss3.NewBucket(stack, jsii.String("Ingest"), &awss3.BucketProps{EventBridgeEnabled: jsii.Bool(true)})
			tenant := Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme"}
			var c constructs.Construct
			if tier == "silo" {
				p := New(stack, "Tenant-acme", &Props{Tenant: tenant, Bucket: bucket})
				p.GrantOperate(awsiam.NewArnPrincipal(jsii.String(ops)))
				c = p.Construct
			} else {
				p := NewPool(stack, "Pool", &PoolProps{Name: "p", Bucket: bucket, Tenants: []Tenant{tenant}})
				p.GrantOperate("acme", awsiam.NewArnPrincipal(jsii.String(ops)))
				func() {
					defer func() {
						var pe *PropsError
						if err, _ := recover().(error); !errors.As(err, &pe) || !strings.Contains(pe.Error(), `GrantOperate: "hooli" is not a tenant of the pool`) {
							t.Errorf("got %v, want a *PropsError naming hooli", err)
						}
					}()
					p.GrantOperate("hooli", awsiam.NewArnPrincipal(jsii.String(ops)))
				}()
				c = p.Construct
			}
			msgs := *c.Node().Validate()
			if len(msgs) != 1 || !strings.Contains(*msgs[0], `GrantOperate to {"AWS":"`+ops+`"}`) && !strings.Contains(*msgs[0], `GrantOperate to {"AWS":["`+ops+`"]}`) {
				t.Errorf("got %d messages (first %q), want one naming %s", len(msgs), first(msgs), ops)
			}
		})
	}
}
