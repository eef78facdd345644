package test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// TestStatusRule: one rule per tenant on the default bus matches exactly the end
// statuses of the tenant's own file state machine's "Step Functions Execution Status Change"
// events, and sends the whole event to the tenant's controller; only that rule may invoke it.
// https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html
// https://docs.aws.amazon.com/step-functions/latest/dg/cw-events.html
func TestStatusRule(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		t.Run(tenant, func(t *testing.T) {
			tpl := shared.template
			ruleID := logicalIDOf(t, tpl, "AWS::Events::Rule", tenant, "StatusRule")
			rule := props(tenantResources(t, tpl, "AWS::Events::Rule", tenant)[ruleID])
			fileSM := logicalIDOf(t, tpl, "AWS::StepFunctions::StateMachine", tenant, "WorkflowFile")
			want := `{"detail":{"stateMachineArn":[{"Ref":"` + fileSM + `"}],"status":["SUCCEEDED","FAILED","TIMED_OUT","ABORTED"]},` +
				`"detail-type":["Step Functions Execution Status Change"],"source":["aws.states"]}`
			if got := asJSON(rule["EventPattern"]); got != want {
				t.Errorf("EventPattern:\ngot  %s\nwant %s", got, want)
			}
			if _, ok := rule["EventBusName"]; ok {
				t.Errorf("EventBusName: got %v, want none (the default bus, where Step Functions sends)", rule["EventBusName"])
			}
			if rule["State"] != "ENABLED" {
				t.Errorf("State: got %v, want ENABLED", rule["State"])
			}
			targets := rule["Targets"].([]any)
			if len(targets) != 1 {
				t.Fatalf("got %d targets, want 1", len(targets))
			}
			ctl := controllerID(t, tpl, tenant)
			target := targets[0].(map[string]any)
			if got := asJSON(target["Arn"]); got != `{"Fn::GetAtt":["`+ctl+`","Arn"]}` {
				t.Errorf("target: got %s, want the tenant's controller %s", got, ctl)
			}
			for _, k := range []string{"Input", "InputPath", "InputTransformer", "RoleArn"} {
				if _, ok := target[k]; ok {
					t.Errorf("target %s: got %v, want none (the whole event is the input)", k, target[k])
				}
			}
			// The function's resource policy lets exactly this rule invoke it.
			var perms []string
			for _, p := range tenantResources(t, tpl, "AWS::Lambda::Permission", tenant) {
				pp := props(p)
				if asJSON(pp["SourceArn"]) == `{"Fn::GetAtt":["`+ruleID+`","Arn"]}` {
					perms = append(perms, asJSON(pp))
					if pp["Action"] != "lambda:InvokeFunction" || pp["Principal"] != "events.amazonaws.com" ||
						asJSON(pp["FunctionName"]) != `{"Fn::GetAtt":["`+ctl+`","Arn"]}` {
						t.Errorf("permission: got %s, want lambda:InvokeFunction by events.amazonaws.com on the controller", asJSON(pp))
					}
				}
			}
			if len(perms) != 1 {
				t.Errorf("got %d permissions for the status rule, want 1", len(perms))
			}
		})
	}
}

// TestWakeGrantsAreExact: the controller reads and writes exactly the tenant's two wake
// objects, in one statement: control/<tenant>/wake.json and control/<tenant>/wake-done.json.
func TestWakeGrantsAreExact(t *testing.T) {
	sharedApp(t)
	for _, tenant := range sampleTenants {
		t.Run(tenant, func(t *testing.T) {
			var wake []map[string]any
			for _, s := range statementsOf(t, shared.template, tenant, "Controller") {
				if strings.Contains(asJSON(s["Resource"]), "wake") {
					wake = append(wake, s)
				}
			}
			if len(wake) != 1 {
				t.Fatalf("got %d statements on wake objects, want 1: %s", len(wake), asJSON(wake))
			}
			if got := actionsOf(wake); !slices.Equal(got, []string{"s3:GetObject", "s3:PutObject"}) {
				t.Errorf("actions: got %v, want [s3:GetObject s3:PutObject]", got)
			}
			res, ok := wake[0]["Resource"].([]any)
			if !ok || len(res) != 2 {
				t.Fatalf("resources: got %s, want the two wake objects", asJSON(wake[0]["Resource"]))
			}
			var keys []string
			for _, r := range res {
				f := flatten(t, r)
				keys = append(keys, f[strings.Index(f, "/")+1:])
			}
			slices.Sort(keys)
			if want := []string{"control/" + tenant + "/wake-done.json", "control/" + tenant + "/wake.json"}; !slices.Equal(keys, want) {
				t.Errorf("keys: got %v, want %v", keys, want)
			}
		})
	}
}

// TestWakeEventsOffAndSafetyNetProps: DisableWakeEvents removes the status rule and the
// wake variables and keeps the 30 s visibility and the 10 s poll budget; SafetyNetInterval moves
// SAFETY_NET_SECONDS and the default visibility timeout (safety net + 30 s) with it.
func TestWakeEventsOffAndSafetyNetProps(t *testing.T) {
	for _, tc := range []struct {
		name           string
		props          tenantpipeline.Props
		wantRules      int
		wantVisibility float64
		wantEnv        map[string]any // nil value: absent
	}{
		{"wake events off", tenantpipeline.Props{SharedProps: tenantpipeline.SharedProps{DisableWakeEvents: true}}, 1, 30,
			map[string]any{"WAKE_EVENTS": nil, "SAFETY_NET_SECONDS": nil, "POLL_BUDGET_SECONDS": "10", "MAX_WAIT_SECONDS": "30"}},
		{"safety net 10 minutes", tenantpipeline.Props{SharedProps: tenantpipeline.SharedProps{SafetyNetInterval: 10 * time.Minute}}, 2, 630,
			map[string]any{"WAKE_EVENTS": "true", "SAFETY_NET_SECONDS": "600", "POLL_BUDGET_SECONDS": "0", "MAX_WAIT_SECONDS": "630"}},
		{"explicit visibility", tenantpipeline.Props{SharedProps: tenantpipeline.SharedProps{SafetyNetInterval: time.Minute, VisibilityTimeout: 2 * time.Minute}}, 2, 120,
			map[string]any{"WAKE_EVENTS": "true", "SAFETY_NET_SECONDS": "60", "POLL_BUDGET_SECONDS": "0", "MAX_WAIT_SECONDS": "120"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("Wake"), nil)
			p := tc.props
			p.Tenant = tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/r"}
			p.Bucket = stacks.NewIngestBucket(stack, "Bucket")
			tenantpipeline.New(stack, "Tenant-acme", &p)
			tpl := templateJSON(assertions.Template_FromStack(stack, nil))
			if got := len(tenantResources(t, tpl, "AWS::Events::Rule", "acme")); got != tc.wantRules {
				t.Errorf("got %d rules, want %d", got, tc.wantRules)
			}
			_, q := fifoQueue(t, tpl, "acme")
			if got := props(q)["VisibilityTimeout"]; got != tc.wantVisibility {
				t.Errorf("VisibilityTimeout: got %v, want %v", got, tc.wantVisibility)
			}
			env := get(t, props(tenantResources(t, tpl, "AWS::Lambda::Function", "acme")[controllerID(t, tpl, "acme")]), "Environment", "Variables").(map[string]any)
			for k, want := range tc.wantEnv {
				got, ok := env[k]
				if want == nil && ok {
					t.Errorf("%s: got %v, want none", k, got)
				} else if want != nil && got != want {
					t.Errorf("%s: got %v, want %v", k, got, want)
				}
			}
		})
	}
}

// TestControlPrefixProtectedEnv: CONTROL_PREFIX_PROTECTED is "true" exactly when the ingest bucket
// is created in the app and its policy carries BucketWriteDeny for the pipeline's role path and
// operators, in both tiers; an imported bucket, or one whose statement spares another role path,
// keep the confirming DescribeExecution ("false") and warn at synth. On a bucket created in the
// app, the constructs add the Deny themselves, once, and never beside the app's own.
func TestControlPrefixProtectedEnv(t *testing.T) {
	t.Run("app", func(t *testing.T) {
		for _, tc := range []struct {
			name, bucketName, want string
		}{
			{"bucket created with the Deny", "", "true"},
			{"imported bucket", "corp-ingest", "false"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				o := stackOptions("")
				o.BucketName = tc.bucketName
				_, built := synthApp(t, "pool.json", o)
				tpl := stackTemplate(t, built.TenantStacks[0])
				env := get(t, props(tenantResources(t, tpl, "AWS::Lambda::Function", "acme")[controllerID(t, tpl, "acme")]), "Environment", "Variables")
				if got := get(t, env, pipeline.EnvControlPrefixProtected); got != tc.want {
					t.Errorf("silo: got %s=%v, want %s", pipeline.EnvControlPrefixProtected, got, tc.want)
				}
				for _, stack := range built.PoolStacks {
					if got := poolControllerEnv(t, stack)[pipeline.EnvControlPrefixProtected]; got != tc.want {
						t.Errorf("pool %s: got %s=%v, want %s", *stack.StackName(), pipeline.EnvControlPrefixProtected, got, tc.want)
					}
				}
			})
		}
	})
	t.Run("construct", func(t *testing.T) {
		deny := func(rolePath string) func(b awss3.Bucket) awsiam.PolicyStatement {
			return func(b awss3.Bucket) awsiam.PolicyStatement {
				return tenantpipeline.BucketWriteDeny(b, rolePath, tenantpipeline.Operators{})
			}
		}
		for _, tc := range []struct {
			name          string
			imported      bool
			before, after func(b awss3.Bucket) awsiam.PolicyStatement // the app's own Deny; nil: none
			want          string
			wantDenies    int // statements of the Deny's Sid in the bucket's policy
			wantWarnings  int // one per app, bucket, role path and operators
		}{
			{name: "no Deny of the app's: the constructs add it", want: "true", wantDenies: 1},
			{name: "the Deny, added after the constructs", after: deny(tenantpipeline.DefaultRolePath), want: "true", wantDenies: 1},
			{name: "the Deny, added before the constructs", before: deny(tenantpipeline.DefaultRolePath), want: "true", wantDenies: 1},
			{name: "a Deny that spares another role path", after: deny("/other/"), want: "false", wantDenies: 1, wantWarnings: 1},
			{name: "imported bucket", imported: true, want: "false", wantDenies: 0, wantWarnings: 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				app := testApp(t)
				stack := awscdk.NewStack(app, jsii.String("Protected"), nil)
				var bucket awss3.IBucket
				if tc.imported {
					bucket = awss3.Bucket_FromBucketName(stack, jsii.String("Bucket"), jsii.String("corp-ingest"))
				} else {
					b := stacks.NewIngestBucket(stack, "Bucket")
					if tc.before != nil {
						b.AddToResourcePolicy(tc.before(b))
					}
					bucket = b
				}
				tenantpipeline.New(stack, "Tenant-acme", &tenantpipeline.Props{
					Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/r"}, Bucket: bucket})
				tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{Name: "default", Bucket: bucket,
					Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/h"}}})
				if tc.after != nil {
					b := bucket.(awss3.Bucket)
					b.AddToResourcePolicy(tc.after(b))
				}
				tpl := templateJSON(assertions.Template_FromStack(stack, nil))
				env := get(t, props(tenantResources(t, tpl, "AWS::Lambda::Function", "acme")[controllerID(t, tpl, "acme")]), "Environment", "Variables")
				if got := get(t, env, pipeline.EnvControlPrefixProtected); got != tc.want {
					t.Errorf("silo: got %s=%v, want %s", pipeline.EnvControlPrefixProtected, got, tc.want)
				}
				if got := poolControllerEnv(t, stack)[pipeline.EnvControlPrefixProtected]; got != tc.want {
					t.Errorf("pool: got %s=%v, want %s", pipeline.EnvControlPrefixProtected, got, tc.want)
				}
				denies := 0
				for _, pol := range byType(tpl, "AWS::S3::BucketPolicy") {
					for _, st := range get(t, props(pol), "PolicyDocument", "Statement").([]any) {
						if st.(map[string]any)["Sid"] == "OnlyThePipelineAndOperatorsWriteControlWorkQuarantine" {
							denies++
						}
					}
				}
				if denies != tc.wantDenies {
					t.Errorf("got %d write Denies in the bucket's policy, want %d", denies, tc.wantDenies)
				}
				warnings := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"),
					assertions.Match_StringLikeRegexp(jsii.String("add the statement of BucketWriteDenyJSON")))
				if got := len(*warnings); got != tc.wantWarnings {
					t.Errorf("got %d warnings about the missing Deny, want %d", got, tc.wantWarnings)
				}
			})
		}
	})
}

// poolControllerEnv is the environment of the pool controller in stack.
func poolControllerEnv(t *testing.T, stack awscdk.Stack) map[string]any {
	t.Helper()
	for id, f := range byType(templateJSON(assertions.Template_FromStack(stack, nil)), "AWS::Lambda::Function") {
		if strings.HasPrefix(id, "PoolController") {
			return get(t, props(f), "Environment", "Variables").(map[string]any)
		}
	}
	t.Fatalf("no pool controller in stack %s", *stack.StackName())
	return nil
}
