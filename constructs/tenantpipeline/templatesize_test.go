package tenantpipeline

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// TestSynthRefusesTemplatesOverCloudFormationsLimit: Synth fails when a stack's template is over
// MaxTemplateBytes, naming the stack and its size, and passes one just under it.
func TestSynthRefusesTemplatesOverCloudFormationsLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		padding int
		wantErr bool
	}{
		{"small", 1000, false},
		{"over 1 MB", MaxTemplateBytes, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			err := Synth(app, func() error {
				stack := awscdk.NewStack(app, jsii.String("Big"), nil)
				awscdk.NewCfnResource(stack, jsii.String("Padded"), &awscdk.CfnResourceProps{
					Type:       jsii.String("AWS::SSM::Parameter"),
					Properties: &map[string]any{"Type": "String", "Value": strings.Repeat("x", tc.padding)},
				})
				return nil
			})
			if !tc.wantErr {
				if err != nil {
					t.Errorf("got %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "stack Big: its template is ") || !strings.Contains(err.Error(), "over CloudFormation's 1048576 (1 MB)") {
				t.Errorf("got %v, want stack Big refused as over 1 MB", err)
			}
		})
	}
}
