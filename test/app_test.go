package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/stacks"
	"github.com/example/tenantpipeline/internal/templatecheck"
)

// TestCdkNag applies the AwsSolutions rule pack to every stack and fails on any unsuppressed
// error or warning. Suppressions live next to the resources they excuse, each with its reason.
func TestCdkNag(t *testing.T) {
	for _, file := range []string{"tenants.json", "sinks.json", "pool.json", "coresystems.json", "uploads.json", "encryption.json", "sequence.json", "reconcile.json"} {
		t.Run(file, func(t *testing.T) {
			app := testApp(t)
			built, err := stacks.Build(app, stacks.Options{TenantsFile: filepath.Join("testdata", file)})
			if err != nil {
				t.Fatal(err)
			}
			awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
			// One synth for all stacks (Annotations_FromStack synthesizes the whole app again for
			// each): the errors and warnings of each stack's artifact, as Annotations reads them.
			asm := app.Synth(nil)
			all := append(append([]awscdk.Stack{built.Ingest}, built.TenantStacks...), built.PoolStacks...)
			for _, stack := range all {
				for _, m := range *asm.GetStackArtifact(stack.ArtifactId()).Messages() {
					level := map[cxapi.SynthesisMessageLevel]string{cxapi.SynthesisMessageLevel_ERROR: "error", cxapi.SynthesisMessageLevel_WARNING: "warning"}[m.Level]
					if data, ok := m.Entry.Data.(string); level != "" && ok && strings.Contains(data, "AwsSolutions-") {
						t.Errorf("%s %s at %s: %v", *stack.StackName(), level, *m.Id, m.Entry.Data)
					}
				}
			}
		})
	}
}

// TestStatefulLogicalIDsArePinned: a changed logical id replaces the resource, and replacing a
// queue or the bucket loses files. Construct ids are an API.
func TestStatefulLogicalIDsArePinned(t *testing.T) {
	sharedApp(t)
	want := map[string]string{"acme": "TenantacmeQueue", "globex": "TenantglobexQueue", "initech": "TenantinitechQueue"}
	for tenant, prefix := range want {
		id, _ := fifoQueue(t, shared.template, tenant)
		if !strings.HasPrefix(id, prefix) || len(id) != len(prefix)+8 {
			t.Errorf("tenant %s queue logical id %s, want %s + 8-character hash", tenant, id, prefix)
		}
	}
	pinned := map[string]string{}
	for _, tenant := range sampleTenants {
		id, _ := fifoQueue(t, shared.template, tenant)
		pinned[tenant] = id
	}
	ingest := templateJSON(shared.ingest)
	for id, r := range ingest["Resources"].(map[string]any) {
		if r.(map[string]any)["Type"] == "AWS::S3::Bucket" {
			pinned["bucket"] = id
		}
	}
	golden := map[string]string{
		"acme":    "TenantacmeQueue845A1A6A",
		"globex":  "TenantglobexQueue0624010D",
		"initech": "TenantinitechQueue67674DFE",
		"bucket":  "Bucket83908E77",
	}
	for k, v := range golden {
		if pinned[k] != v {
			t.Errorf("%s logical id: got %s, want %s", k, pinned[k], v)
		}
	}
}

// TestTenantIsIndependentOfItsNeighbours: adding a tenant must not change another tenant's
// resources (its queue in particular).
func TestTenantIsIndependentOfItsNeighbours(t *testing.T) {
	sharedApp(t)
	_, one := synthApp(t, "one-tenant.json", stacks.Options{})
	alone := stackTemplate(t, one.TenantStacks[0])
	for _, typ := range []string{"AWS::SQS::Queue", "AWS::Events::Rule", "AWS::StepFunctions::StateMachine"} {
		a := tenantResources(t, alone, typ, "acme")
		b := tenantResources(t, shared.template, typ, "acme")
		if scrub(asJSON(a)) != scrub(asJSON(b)) {
			t.Errorf("%s of acme differs when other tenants are added", typ)
		}
	}
}

// TestResourceCounts states the per-tenant resource count (README quotes it) and checks that the
// largest allowed stack stays under CloudFormation's 500 resources: a tenant is 44 resources, 45
// with a DynamoDB table the construct creates, and each tenant stack adds one dashboard.
func TestResourceCounts(t *testing.T) {
	sharedApp(t)
	count := func(tpl map[string]any, tenants []string) (map[string]int, int) {
		per := map[string]int{}
		total := len(tpl["Resources"].(map[string]any))
		for _, tenant := range tenants {
			for id := range tpl["Resources"].(map[string]any) {
				if strings.HasPrefix(id, "Tenant"+tenant) {
					per[tenant]++
				}
			}
			total -= per[tenant]
		}
		return per, total
	}
	const (
		perTenant      = 44 // docs/quotas-and-cost.md, "Resources and quotas of a silo tenant"
		perTenantTable = 45 // with the DynamoDB table the construct creates
		perStack       = 1  // the dashboard
	)
	per, stackLevel := count(shared.template, sampleTenants)
	for tenant, n := range per {
		if n != perTenant {
			t.Errorf("tenant %s: got %d resources, want %d (update docs/quotas-and-cost.md and docs/tiers.md if this changed on purpose)", tenant, n, perTenant)
		}
	}
	if stackLevel != perStack {
		t.Errorf("stack-level resources: got %d, want %d (the dashboard)", stackLevel, perStack)
	}
	per, _ = count(sinksApp(t), []string{"ledger", "orders", "stock"})
	for tenant, want := range map[string]int{"ledger": perTenantTable, "orders": perTenantTable, "stock": perTenant} {
		if per[tenant] != want {
			t.Errorf("DynamoDB tenant %s: got %d resources, want %d", tenant, per[tenant], want)
		}
	}
	// A numbered sequence adds its SequenceGap alarm; a named one adds nothing.
	silo, _ := sequenceApp(t)
	per, _ = count(silo, []string{"ledger", "tally", "diary", "plain"})
	for tenant, want := range map[string]int{"ledger": perTenant + 1, "tally": perTenant + 1, "diary": perTenant, "plain": perTenant} {
		if per[tenant] != want {
			t.Errorf("sequenced tenant %s: got %d resources, want %d (update docs/quotas-and-cost.md and docs/tiers.md if this changed on purpose)", tenant, per[tenant], want)
		}
	}
	if max := stacks.MaxTenantsPerStack*perTenantTable + perStack; max > 500 {
		t.Errorf("%d tenants per stack would make up to %d resources, over 500", stacks.MaxTenantsPerStack, max)
	}
	if more := (stacks.MaxTenantsPerStack+1)*perTenantTable + perStack; more <= 500 {
		t.Errorf("MaxTenantsPerStack %d is lower than it needs to be: %d tenants make at most %d resources", stacks.MaxTenantsPerStack, stacks.MaxTenantsPerStack+1, more)
	}
}

// TestTenantsAreGroupedIntoStacks: 25 tenants at 10 per stack make three tenant stacks.
func TestTenantsAreGroupedIntoStacks(t *testing.T) {
	dir := t.TempDir()
	var entries []string
	for i := range 25 {
		entries = append(entries, fmt.Sprintf(`{"id": "t%02d", "registerUrl": "https://core.example.com/r"}`, i))
	}
	p := filepath.Join(dir, "many.json")
	if err := os.WriteFile(p, []byte(`{"tenants": [`+strings.Join(entries, ",")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	app := testApp(t)
	built, err := stacks.Build(app, stacks.Options{TenantsFile: p})
	if err != nil {
		t.Fatal(err)
	}
	if len(built.TenantStacks) != 3 {
		t.Fatalf("got %d tenant stacks, want 3", len(built.TenantStacks))
	}
	for i, want := range []int{10, 10, 5} {
		tpl := assertions.Template_FromStack(built.TenantStacks[i], nil)
		templatecheck.Assert(t, func() { tpl.ResourceCountIs(jsii.String("AWS::SQS::Queue"), jsii.Number(2*want)) }) // FIFO queue and rule dead-letter queue
	}
}

// TestSnapshot pins one whole tenant stack and the ingest stack, asset hashes scrubbed;
// `go test ./test -run Snapshot -update` rewrites them.
func TestSnapshot(t *testing.T) {
	_, one := synthApp(t, "one-tenant.json", stacks.Options{})
	for name, stack := range map[string]awscdk.Stack{"tenants": one.TenantStacks[0], "ingest": one.Ingest} {
		got := scrub(prettyJSON(stackTemplate(t, stack)))
		path := filepath.Join("testdata", "snapshots", name+".template.json")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create)", err)
		}
		if got != string(want) {
			t.Errorf("%s template differs from %s; review the change and run with -update if intended", name, path)
		}
	}
}

// synthPanic synthesizes app and returns the message it fails with ("" when it succeeds): in a Go
// test, CDK's validation failure is a panic out of Synth.
func synthPanic(app awscdk.App) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	app.Synth(nil)
	return ""
}

// propsFailure runs build, which creates constructs under app, then synthesizes app and returns
// the message CDK's validation fails with ("" when synth succeeds). Building never panics: a
// construct with invalid props stays an empty scope whose validation lists its problems.
func propsFailure(t *testing.T, app awscdk.App, build func()) string {
	t.Helper()
	build()
	return synthPanic(app)
}

// TestInvalidPropsFailBeforeAnythingIsCreated: New refuses invalid props at once, before it
// creates anything: the construct is an empty scope, and synth fails with CDK's validation error,
// every problem listed under the construct's path, one message each, and writes no template.
func TestInvalidPropsFailBeforeAnythingIsCreated(t *testing.T) {
	outdir := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir)})
	stack := awscdk.NewStack(app, jsii.String("Bad"), nil)
	bucket := stacks.NewIngestBucket(stack, "Bucket")
	var wants []string
	for _, tc := range []struct {
		id    string
		props *tenantpipeline.Props
		want  []string
	}{
		{"Tenant-bad", &tenantpipeline.Props{
			Tenant: tenantpipeline.Tenant{ID: "Bad_Id", ChunkSize: 5000},
			Bucket: bucket,
			SharedProps: tenantpipeline.SharedProps{
				ControllerTimeout: 45 * time.Second,
				VisibilityTimeout: 30 * time.Second,
			},
		}, []string{
			"\n  [Bad/Tenant-bad] Tenant.ID (tenant \"Bad_Id\"): \"Bad_Id\" is invalid",
			"\n  [Bad/Tenant-bad] Tenant.ChunkSize (tenant \"Bad_Id\"): 5000 is out of range",
			"\n  [Bad/Tenant-bad] tenant \"Bad_Id\": registerUrl is required",
			"\n  [Bad/Tenant-bad] tenant \"Bad_Id\": controller timeout 45s must be shorter than the queue visibility timeout 30s",
			"\n  [Bad/Tenant-bad] tenant \"Bad_Id\": visibility timeout 30s is shorter than the safety net interval 5m0s",
		}},
		{"Tenant-nobucket", &tenantpipeline.Props{
			Tenant:      tenantpipeline.Tenant{ID: "nobucket", RegisterURL: "https://core.example.com/r"},
			SharedProps: tenantpipeline.SharedProps{SplitMemoryMB: 64},
		}, []string{
			"\n  [Bad/Tenant-nobucket] tenant \"nobucket\": Bucket is required",
			"\n  [Bad/Tenant-nobucket] tenant \"nobucket\": split memory 64 MB is invalid",
		}},
	} {
		c := tenantpipeline.New(stack, tc.id, tc.props)
		if n := len(*c.Node().Children()); n != 0 || c.Queue != nil {
			t.Errorf("%s: got %d children (queue %v), want an empty scope", tc.id, n, c.Queue)
		}
		wants = append(wants, tc.want...)
	}
	msg := synthPanic(app)
	for _, want := range append([]string{"Validation failed with the following errors:\n"}, wants...) {
		if !strings.Contains(msg, want) {
			t.Errorf("got failure %q, want it to contain %q", msg, want)
		}
	}
	if _, err := os.Stat(filepath.Join(outdir, "Bad.template.json")); err == nil {
		t.Errorf("got a template of the stack, want synth to stop at validation")
	}
}

// checkValidation checks synth's failure msg: none when want is "", else CDK's validation listing
// want, told once: never on the construct notOn.
func checkValidation(t *testing.T, msg, want, notOn string) {
	t.Helper()
	switch {
	case want == "" && msg != "":
		t.Errorf("got synth failure %q, want success", msg)
	case want != "" && !strings.Contains(msg, "Validation failed with the following errors:\n  "+want):
		t.Errorf("got synth failure %q, want one listing %q", msg, want)
	case want != "" && strings.Contains(msg, notOn):
		t.Errorf("got %q, want the conflict told once, not on %s", msg, notOn)
	}
}

// TestOverlappingPipelinesFailValidation: two pipelines on one bucket whose prefixes overlap fail
// synth, as two such tenants in tenants.json do; the later one names the earlier. Sibling prefixes,
// other buckets and unresolved prefixes pass.
func TestOverlappingPipelinesFailValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second func(awscdk.Stack, awss3.IBucket) (awss3.IBucket, string)
		want   string // "" = synth succeeds
	}{
		{"nested prefix on the same bucket", func(_ awscdk.Stack, b awss3.IBucket) (awss3.IBucket, string) { return b, "inbox/ok/sub/" },
			`[One/Tenant-b] tenant "b": prefix "inbox/ok/sub/" overlaps the prefix "inbox/ok/" of tenant "a" (One/Tenant-a) on the same bucket`},
		{"same prefix on the same bucket imported twice by name", func(s awscdk.Stack, _ awss3.IBucket) (awss3.IBucket, string) {
			return awss3.Bucket_FromBucketName(s, jsii.String("Again"), jsii.String("ingest-bucket")), "inbox/ok/"
		}, `[One/Tenant-b] tenant "b": prefix "inbox/ok/" overlaps the prefix "inbox/ok/" of tenant "a"`},
		{"sibling prefix", func(_ awscdk.Stack, b awss3.IBucket) (awss3.IBucket, string) { return b, "inbox/okay/" }, ""},
		{"another bucket", func(s awscdk.Stack, _ awss3.IBucket) (awss3.IBucket, string) {
			return awss3.Bucket_FromBucketName(s, jsii.String("Other"), jsii.String("other-bucket")), "inbox/ok/sub/"
		}, ""},
		{"unresolved prefix", func(s awscdk.Stack, b awss3.IBucket) (awss3.IBucket, string) {
			return b, *awscdk.NewCfnParameter(s, jsii.String("Prefix"), nil).ValueAsString() + "/"
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(t)
			stack := awscdk.NewStack(app, jsii.String("One"), nil)
			bucket := awss3.Bucket_FromBucketName(stack, jsii.String("Ingest"), jsii.String("ingest-bucket"))
			tenantpipeline.New(stack, "Tenant-a", &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: "a", Prefix: "inbox/ok/", RegisterURL: "https://core.example.com/r"}, Bucket: bucket,
			})
			b, prefix := tc.second(stack, bucket)
			tenantpipeline.New(stack, "Tenant-b", &tenantpipeline.Props{
				Tenant: tenantpipeline.Tenant{ID: "b", Prefix: prefix, RegisterURL: "https://core.example.com/r"}, Bucket: b,
			})
			checkValidation(t, synthPanic(app), tc.want, "[One/Tenant-a]")
		})
	}
}
