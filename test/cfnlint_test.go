package test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/example/tenantpipeline/internal/stacks"
)

// keptCfnLintWarnings are the cfn-lint warnings this app accepts, each with its reason and the
// exact shape of message it covers; any other warning, and every error, fails TestCfnLint.
var keptCfnLintWarnings = map[string]struct {
	reason  string
	message *regexp.Regexp
}{
	"W3005": {
		reason: "CDK makes each Lambda function and state machine DependsOn its role and the role's default policy, so that the " +
			"policy is attached before the resource can run. The role is also referenced by GetAtt, which cfn-lint reports as an " +
			"obsolete DependsOn; the policy dependency is the one that matters, and the redundant one is harmless.",
		message: regexp.MustCompile(`^'[A-Za-z0-9]+(ServiceRole|Role)[0-9A-F]{8}' dependency already enforced by a 'GetAtt' at 'Resources/[A-Za-z0-9]+/Properties/(Role|RoleArn)'$`),
	},
	"W6001": {
		reason: "Each tenant's stack output (the descriptor pipectl discovers the tenant by) names the ingest bucket, which the " +
			"tenant stack imports from the ingest stack. The stack already imports it for its rule and policies, so the output adds " +
			"no coupling, and pipectl then needs the tenant stack alone.",
		message: regexp.MustCompile(`^The output value \{'Fn::ImportValue': '[A-Za-z0-9-]+:ExportsOutputRefBucket[0-9A-F]{8,16}'\} is an import from another output$`),
	},
}

type cfnLintFinding struct {
	Filename string
	Level    string
	Message  string
	Rule     struct{ Id string }
	Location struct {
		Start struct{ LineNumber int }
	}
}

// TestCfnLint runs cfn-lint (https://github.com/aws-cloudformation/cfn-lint) over every template of
// the app, with the ingest stack and with an existing bucket: zero errors, and only the warnings
// listed in keptCfnLintWarnings, each for its reason.
func TestCfnLint(t *testing.T) {
	lint, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Skip("SKIPPED: cfn-lint is not installed, so the templates were not linted; install it with `pip install cfn-lint`")
	}
	for _, tc := range []struct {
		name string
		o    stacks.Options
	}{
		{"ingest stack", stacks.Options{}},
		{"pools", stacks.Options{TenantsFile: filepath.Join("testdata", "pool.json")}},
		{"core systems", stacks.Options{TenantsFile: filepath.Join("testdata", "coresystems.json")}},
		{"core systems, existing bucket", stacks.Options{TenantsFile: filepath.Join("testdata", "coresystems.json"), BucketName: "existing-ingest-bucket"}},
		{"existing bucket and alarm topic", stacks.Options{BucketName: "existing-ingest-bucket", AlarmTopicArn: "arn:aws:sns:eu-west-1:123456789012:alarms"}},
		{"customer-managed key", stacks.Options{TenantsFile: filepath.Join("testdata", "encryption.json")}},
		{"customer-managed key, existing bucket", stacks.Options{TenantsFile: filepath.Join("testdata", "encryption.json"), BucketName: "existing-ingest-bucket"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(dir)})
			if tc.o.TenantsFile == "" {
				tc.o.TenantsFile = filepath.Join("testdata", "tenants.json")
			}
			if _, err := stacks.Build(app, tc.o); err != nil {
				t.Fatal(err)
			}
			app.Synth(nil)
			templates, _ := filepath.Glob(filepath.Join(dir, "*.template.json"))
			if len(templates) == 0 {
				t.Fatal("got no templates")
			}
			kept, problems := cfnLint(t, lint, templates)
			for _, p := range problems {
				t.Error(p)
			}
			for id, n := range kept {
				t.Logf("kept %d cfn-lint %s warnings: %s", n, id, keptCfnLintWarnings[id].reason)
			}
		})
	}
	// The check itself: a template with a wrongly typed property (an error) and an obsolete
	// DependsOn that is not a role's (a warning outside the kept shape) must both be reported.
	t.Run("a bad template fails", func(t *testing.T) {
		_, problems := cfnLint(t, lint, []string{filepath.Join("testdata", "cfnlint", "bad.template.json")})
		found := map[string]bool{}
		for _, p := range problems {
			f := strings.Fields(p) // cfn-lint <level> <rule> ...
			found[f[1]], found[f[2]] = true, true
		}
		for _, want := range []string{"Error", "W3005"} {
			if !found[want] {
				t.Errorf("got problems %q, want a %s among them", problems, want)
			}
		}
	})
}

// cfnLint lints templates and sorts the findings into kept warnings (counted by rule) and problems.
func cfnLint(t *testing.T, lint string, templates []string) (kept map[string]int, problems []string) {
	t.Helper()
	out, err := exec.Command(lint, append([]string{"--format", "json"}, templates...)...).Output()
	// cfn-lint exits non-zero when it finds anything; its findings are judged below.
	var findings []cfnLintFinding
	if jerr := json.Unmarshal(out, &findings); jerr != nil {
		t.Fatalf("cfn-lint: %v; output %q: %v", err, out, jerr)
	}
	kept = map[string]int{}
	for _, f := range findings {
		k, ok := keptCfnLintWarnings[f.Rule.Id]
		if f.Level == "Warning" && ok && k.message.MatchString(f.Message) {
			kept[f.Rule.Id]++
			continue
		}
		problems = append(problems, fmt.Sprintf("cfn-lint %s %s at %s:%d: %s", f.Level, f.Rule.Id, filepath.Base(f.Filename), f.Location.Start.LineNumber, f.Message))
	}
	return kept, problems
}
