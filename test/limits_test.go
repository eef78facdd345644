package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/stacks"
)

// TestLargestStackFitsCloudFormation synthesizes the largest stack the app allows:
// MaxTenantsPerStack tenants with 32-character ids, each with a DynamoDB table the construct
// creates, and checks it against CloudFormation's limits: 500 resources, 200 outputs and 1 MB for
// a template body read from S3 (how the CDK CLI deploys large templates).
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html
func TestLargestStackFitsCloudFormation(t *testing.T) {
	var entries []string
	for i := range stacks.MaxTenantsPerStack {
		id := fmt.Sprintf("tenant-%02d-", i) + strings.Repeat("x", 32-10)
		entries = append(entries, fmt.Sprintf(`{"id": %q, "onFailure": "halt", "dynamodb": {"key": ["customer-account-number", "order-line-identifier"]}}`, id))
	}
	file := filepath.Join(t.TempDir(), "largest.json")
	if err := os.WriteFile(file, []byte(`{"tenants": [`+strings.Join(entries, ",")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
	built, err := stacks.Build(app, stacks.Options{TenantsFile: file, TenantsPerStack: stacks.MaxTenantsPerStack})
	if err != nil {
		t.Fatal(err)
	}
	if len(built.TenantStacks) != 1 {
		t.Fatalf("got %d tenant stacks, want 1", len(built.TenantStacks))
	}
	app.Synth(nil)
	path := filepath.Join(out, *built.TenantStacks[0].StackName()+".template.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Resources map[string]any
		Outputs   map[string]any
	}
	flattenJSON(t, string(b), &tpl)
	t.Logf("largest stack: %d resources, %d outputs, %d bytes", len(tpl.Resources), len(tpl.Outputs), len(b))
	if len(tpl.Resources) > 500 || len(tpl.Outputs) > 200 || len(b) > 1<<20 {
		t.Errorf("got %d resources, %d outputs, %d bytes; want at most 500, 200, %d", len(tpl.Resources), len(tpl.Outputs), len(b), 1<<20)
	}
}
