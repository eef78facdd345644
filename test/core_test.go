package test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/stacks"
)

// bothTiers synthesizes, once, a silo tenant (scope Silo, bucket SiloBucket) and a pool of one
// tenant (scope Pool, bucket PoolBucket), both naming one core system, in one stack.
var bothTiers = sync.OnceValue(func() map[string]any {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(os.TempDir(), "core-both-tiers"))})
	stack := awscdk.NewStack(app, jsii.String("Tiers"), nil)
	ledger := tenantpipeline.NewCoreSystem(stack, "Ledger", &tenantpipeline.CoreSystemProps{Name: "ledger", MaxRunningFiles: 10})
	tenantpipeline.New(stack, "Silo", &tenantpipeline.Props{
		Tenant: tenantpipeline.Tenant{ID: "acme", RegisterURL: "https://core.example.com/acme", CoreSystem: ledger.Props.Name},
		Bucket: stacks.NewIngestBucket(stack, "SiloBucket"),
	})
	tenantpipeline.NewPool(stack, "Pool", &tenantpipeline.PoolProps{
		Name: "p", Bucket: stacks.NewIngestBucket(stack, "PoolBucket"), IntakeGroups: 1,
		Tenants: []tenantpipeline.Tenant{{ID: "hooli", RegisterURL: "https://core.example.com/hooli", CoreSystem: ledger.Props.Name}},
	})
	return templateJSON(assertions.Template_FromStack(stack, nil))
})

// tierStatements returns the statements of every policy whose logical id starts with prefix
// (AWS::IAM::Policy, AWS::SQS::QueuePolicy, AWS::S3::BucketPolicy), each as JSON.
func tierStatements(tpl map[string]any, prefix string) []string {
	var out []string
	for id, r := range tpl["Resources"].(map[string]any) {
		res := r.(map[string]any)
		switch res["Type"] {
		case "AWS::IAM::Policy", "AWS::SQS::QueuePolicy", "AWS::S3::BucketPolicy":
		default:
			continue
		}
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		for _, s := range props(res)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			out = append(out, asJSON(s))
		}
	}
	return out
}

// tier is how the table's placeholders read in one tier: S the scope's logical id prefix, T a
// tenant's id in keys, P a tenant's prefix, Data the holder of a tenant's own keys by function
// (none: the function's own role).
type tier struct {
	name, S, T, P string
	Data          map[string]string
}

var tiers = []tier{
	// A silo's function roles hold its one tenant's keys.
	{name: "silo", S: "Silo", T: "acme", P: "inbox/acme/"},
	// A pool's functions serve every tenant: a tenant's keys are the function's tenant-scoped
	// role's (tenantrole.go), named by the session's tag.
	{name: "pool", S: "Pool", T: "${aws:PrincipalTag/tenant}", P: "pools/p/${aws:PrincipalTag/tenant}/",
		Data: map[string]string{"Controller": "TenantRole", "Split": "SplitTenantRole", "Register": "RegisterTenantRole"}},
}

func (tr tier) fill(s string) string {
	return strings.NewReplacer("<S>", tr.S, "<T>", tr.T, "<P>", tr.P).Replace(s)
}

// TestCoreGrantsInBothTiers lists every grant and Deny of the core both tiers build (core.go), and
// of the tenant's own keys, and finds each in both tiers' templates. holder is the policy's
// logical id after the scope: a function's role policy, a queue's or a bucket's policy, or, for a
// tenant's keys ("<data>"), the function's own role in a silo and the tenant-scoped role in a pool.
// Tier-only grants are listed in TestTierOnlyGrants with the reason.
func TestCoreGrantsInBothTiers(t *testing.T) {
	tpl := bothTiers()
	for _, g := range []struct {
		name   string
		holder string
		want   []string // substrings of one statement, placeholders filled by tier
	}{
		// The core's own resources.
		{"controller puts File Processed events", "ControllerServiceRoleDefaultPolicy", []string{`"events:PutEvents"`, `event-bus/default`, `"events:source":"tenantpipeline"`}},
		{"controller runs a failed file's results task", "ControllerServiceRoleDefaultPolicy", []string{`"Action":"lambda:InvokeFunction"`, `"<S>Split`}},
		{"controller consumes the queue", "ControllerServiceRoleDefaultPolicy", []string{`"sqs:ReceiveMessage"`, `"sqs:ChangeMessageVisibility"`, `"sqs:DeleteMessage"`, `"<S>Queue`}},
		{"controller starts the file state machine", "ControllerServiceRoleDefaultPolicy", []string{`"Action":"states:StartExecution"`, `"<S>WorkflowFile`}},
		{"controller describes, reads and redrives file executions", "ControllerServiceRoleDefaultPolicy", []string{`"states:DescribeExecution"`, `"states:GetExecutionHistory"`, `"states:RedriveExecution"`, `:execution:`, `<S>WorkflowFile`}},
		{"controller stops a stopped file's segment", "ControllerServiceRoleDefaultPolicy", []string{`"states:DescribeExecution"`, `"states:StopExecution"`, `:execution:`, `<S>WorkflowSegment`}},
		{"file state machine invokes Split", "WorkflowFileRoleDefaultPolicy", []string{`"lambda:InvokeFunction"`, `"<S>Split`}},
		{"file state machine starts segments", "WorkflowFileRoleDefaultPolicy", []string{`"states:StartExecution"`, `<S>WorkflowSegment`}},
		{"segment state machine invokes Register", "WorkflowSegmentRoleDefaultPolicy", []string{`"lambda:InvokeFunction"`, `"<S>Register`}},
		{"file state machine invokes Register (the SmallFile task)", "WorkflowFileRoleDefaultPolicy", []string{`"lambda:InvokeFunction"`, `"<S>Register`}},
		{"core system leases", "ControllerServiceRoleDefaultPolicy", []string{`"dynamodb:PutItem"`, `"dynamodb:DeleteItem"`, `LedgerTable`}},
		{"core system wake-ups", "ControllerServiceRoleDefaultPolicy", []string{`"Action":"sqs:ChangeMessageVisibility"`, `"aws:ResourceTag/tenantpipeline:wake:ledger":"true"`}},
		{"Register's adaptive limit", "RegisterServiceRoleDefaultPolicy", []string{`"dynamodb:UpdateItem"`, `LedgerTable`, `"dynamodb:LeadingKeys"`}},
		{"only the pipeline sends to the queue", "QueuePolicy", []string{`"Effect":"Deny"`, `"Action":"sqs:SendMessage"`, `<S>Queue`}},
		{"only the pipeline sends to the rule's dead-letter queue", "RuleDeadLetterQueuePolicy", []string{`"Effect":"Deny"`, `"Action":"sqs:SendMessage"`, `<S>RuleDeadLetterQueue`}},
		{"only the pipeline writes control/, work/, quarantine/, results/", "BucketPolicy", []string{`"Effect":"Deny"`, `OnlyThePipelineAndOperatorsWriteControlWorkQuarantine`}},

		// A tenant's own keys.
		{"controller reads the File Processed counts", "<data>Controller", []string{`"s3:GetObject"`, `/results/<T>/*/summary.json`}},
		{"controller keeps the event markers", "<data>Controller", []string{`"s3:PutObject"`, `/results/<T>/*/event-*.json`}},
		{"controller quarantines messages", "<data>Controller", []string{`"Action":"s3:PutObject"`, `/quarantine/<T>/*`}},
		{"controller reads skip markers", "<data>Controller", []string{`"Action":"s3:GetObject"`, `/control/<T>/skip/*`}},
		{"controller reads the operators' control records", "<data>Controller", []string{`"s3:GetObject"`, `/control/<T>/requests/*`}},
		{"controller keeps the wake-up state", "<data>Controller", []string{`"s3:PutObject"`, `/control/<T>/wake`}},
		{"controller lists the control keys", "<data>Controller", []string{`"Action":"s3:ListBucket"`, `control/<T>/`}},
		{"Split and Register read the tenant's files", "<data>Split", []string{`"s3:GetObjectVersion"`, `/<P>*`}},
		{"Split writes manifests, Register reads them", "<data>Register", []string{`"s3:GetObjectVersion"`, `"s3:PutObject"`, `/work/<T>/*`}},
		{"Split's results task and Register keep the results", "<data>Split", []string{`"s3:PutObject"`, `/results/<T>/*`}},
		{"the SmallFile task reads and writes the results", "<data>Register", []string{`"s3:GetObject"`, `"s3:PutObject"`, `/results/<T>/*`}},
		{"the SmallFile task lists the results", "<data>Register", []string{`"Action":"s3:ListBucket"`, `results/<T>/`}},
		{"the SmallFile task writes the manifest", "<data>Register", []string{`"s3:PutObject"`, `/work/<T>/*`}},
	} {
		for _, tr := range tiers {
			t.Run(g.name+"/"+tr.name, func(t *testing.T) {
				holder := tr.S + g.holder
				if fn, ok := strings.CutPrefix(g.holder, "<data>"); ok {
					holder = tr.S + fn + "ServiceRoleDefaultPolicy"
					if role, ok := tr.Data[fn]; ok {
						holder = tr.S + role + "DefaultPolicy"
					}
				}
				statements := tierStatements(tpl, holder)
				if len(statements) == 0 {
					t.Fatalf("got no policy %s*, want one", holder)
				}
				if !slices.ContainsFunc(statements, func(s string) bool {
					for _, w := range g.want {
						if !strings.Contains(s, tr.fill(w)) {
							return false
						}
					}
					return true
				}) {
					t.Errorf("got no statement in %s* with %q; statements:\n%s", holder, fillAll(tr, g.want), strings.Join(statements, "\n"))
				}
			})
		}
	}
}

func fillAll(tr tier, ws []string) []string {
	var out []string
	for _, w := range ws {
		out = append(out, tr.fill(w))
	}
	return out
}

// TestTierOnlyGrants: the grants one tier has and the other does not, each because the other tier
// lacks the resource.
func TestTierOnlyGrants(t *testing.T) {
	tpl := bothTiers()
	for _, g := range []struct {
		name, tier, holder, want, why string
	}{
		{"assume the tenant-scoped role", "Pool", "ControllerServiceRoleDefaultPolicy", `"sts:AssumeRole"`,
			"a silo has no tenant-scoped role: its function roles hold its one tenant's keys"},
		{"the pool gate's leases", "Pool", "ControllerServiceRoleDefaultPolicy", `PoolAdmissionTable`,
			"a silo has no pool gate; its admission is its core system's, granted in both tiers"},
		{"unpark a tenant's backlog", "Pool", "ControllerServiceRoleDefaultPolicy", `/control/*/parked/*`,
			"a silo's backlog waits in its own queue, which holds one tenant's files"},
		{"send to the queue", "Pool", "RouterServiceRoleDefaultPolicy", `"sqs:SendMessage"`,
			"a silo has no router: its rule sends to its queue"},
	} {
		t.Run(g.name, func(t *testing.T) {
			has := func(scope string) bool {
				return slices.ContainsFunc(tierStatements(tpl, scope+g.holder), func(s string) bool { return strings.Contains(s, g.want) })
			}
			other := map[string]string{"Pool": "Silo", "Silo": "Pool"}[g.tier]
			if !has(g.tier) {
				t.Errorf("%s: got no statement with %s in %s%s*, want one", g.tier, g.want, g.tier, g.holder)
			}
			if has(other) {
				t.Errorf("%s: got a statement with %s in %s%s*, want none (%s)", other, g.want, other, g.holder, g.why)
			}
		})
	}
}

// TestInvalidPropsBundleNothing: a construct with a prop mistake bundles and stages no Lambda
// asset: it stays an empty scope, and synth fails with CDK's validation error naming the prop,
// through Synth as an error, with the assembly directory empty.
func TestInvalidPropsBundleNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(awscdk.Stack)
		want  string
	}{
		{"silo", func(stack awscdk.Stack) {
			tenantpipeline.New(stack, "Bad", &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: "bad", RegisterURL: "https://core.example.com/bad"}, Bucket: stacks.NewIngestBucket(stack, "Bucket"),
				SharedProps: tenantpipeline.SharedProps{SplitMemoryMB: 64},
			})
		}, `[Stack/Bad] tenant "bad": split memory 64 MB is invalid`},
		{"pool", func(stack awscdk.Stack) {
			tenantpipeline.NewPool(stack, "Bad", &tenantpipeline.PoolProps{
				Name: "bad", Bucket: stacks.NewIngestBucket(stack, "Bucket"),
				Tenants: []tenantpipeline.Tenant{{ID: "a", RegisterURL: "https://core.example.com/a"}},
				Shared:  tenantpipeline.SharedProps{SplitMemoryMB: 64},
			})
		}, `[Stack/Bad] pool "bad": Shared: split memory 64 MB is invalid`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outdir := t.TempDir()
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir)})
			err := tenantpipeline.Synth(app, func() error {
				stack := awscdk.NewStack(app, jsii.String("Stack"), nil)
				tc.first(stack)
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), "Validation failed with the following errors:") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want CDK's validation failure containing %q", err, tc.want)
			}
			entries, _ := os.ReadDir(outdir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if len(names) != 0 {
				t.Errorf("got %q in the assembly directory, want no asset bundled or staged", names)
			}
		})
	}
}
