//go:build e2e

package test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

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
// listed in keptCfnLintWarnings, each for its reason. A template that several apps share is linted
// once, and one cfn-lint process lints them all while the package's other tests run. Where cfn-lint
// is missing it skips, except in CI (CI=true, or REQUIRE_CFN_LINT=1, which .ci/run sets), where an
// unlinted build must not pass.
func TestCfnLint(t *testing.T) {
	lint, err := exec.LookPath("cfn-lint")
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("REQUIRE_CFN_LINT") == "1" {
			t.Fatal("cfn-lint is not installed, and CI requires the template lint: put cfn-lint on PATH (`pip install cfn-lint`, from PyPI)")
		}
		t.Skip("SKIPPED: cfn-lint is not installed, so the templates were not linted; install it with `pip install cfn-lint`")
	}
	cases := []struct {
		name string
		o    stacks.Options
	}{
		{"ingest stack", stacks.Options{}},
		{"pools", stacks.Options{TenantsFile: filepath.Join("testdata", "pool.json")}},
		{"a pool's uploader role", stacks.Options{TenantsFile: filepath.Join("testdata", "uploads.json")}},
		{"core systems", stacks.Options{TenantsFile: filepath.Join("testdata", "coresystems.json")}},
		{"core systems, existing bucket", stacks.Options{TenantsFile: filepath.Join("testdata", "coresystems.json"), BucketName: "existing-ingest-bucket"}},
		{"existing bucket and alarm topic", stacks.Options{BucketName: "existing-ingest-bucket", AlarmTopicArn: "arn:aws:sns:eu-west-1:123456789012:alarms"}},
		{"customer-managed key", stacks.Options{TenantsFile: filepath.Join("testdata", "encryption.json")}},
		{"customer-managed key, existing bucket", stacks.Options{TenantsFile: filepath.Join("testdata", "encryption.json"), BucketName: "existing-ingest-bucket"}},
		{"sequenced tenants, both tiers", stacks.Options{TenantsFile: filepath.Join("testdata", "sequence.json"), AlarmTopicArn: "arn:aws:sns:eu-west-1:123456789012:alarms"}},
	}
	// The templates of every case, each distinct one copied once into one folder: cases[i] reads
	// the findings of linted[i].
	dir := t.TempDir()
	linted := make([][]string, len(cases))
	byContent := map[[32]byte]string{}
	var files []string
	for i, tc := range cases {
		if tc.o.TenantsFile == "" {
			tc.o.TenantsFile = filepath.Join("testdata", "tenants.json")
		}
		app, _ := builtApp(t, tc.o)
		artifacts := *app.Synth(nil).Stacks()
		if len(artifacts) == 0 {
			t.Fatalf("%s: got no templates", tc.name)
		}
		for _, st := range artifacts {
			b, err := os.ReadFile(*st.TemplateFullPath())
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			if _, ok := byContent[sum]; !ok {
				f := filepath.Join(dir, fmt.Sprintf("%d-%s", i, filepath.Base(*st.TemplateFullPath())))
				if err := os.WriteFile(f, b, 0o644); err != nil {
					t.Fatal(err)
				}
				byContent[sum] = f
				files = append(files, f)
			}
			linted[i] = append(linted[i], byContent[sum])
		}
	}
	// The check itself: a template with a wrongly typed property (an error) and an obsolete
	// DependsOn that is not a role's (a warning outside the kept shape) must both be reported.
	bad := filepath.Join("testdata", "cfnlint", "bad.template.json")
	run := startCfnLint(t, lint, append(files, bad))
	t.Parallel() // cfn-lint runs on while the package's serial tests go on
	findings := run()
	t.Logf("cfn-lint: %d distinct templates of %d cases", len(files), len(cases))
	// Each finding is judged under the case whose template it names: one naming no linted file
	// would be judged nowhere.
	for _, f := range findings {
		if !slices.Contains(append(files, bad), filepath.Clean(f.Filename)) {
			t.Errorf("cfn-lint %s %s names %q, not one of the linted templates", f.Level, f.Rule.Id, f.Filename)
		}
	}

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kept, problems := judgeCfnLint(findings, linted[i])
			for _, p := range problems {
				t.Error(p)
			}
			for id, n := range kept {
				t.Logf("kept %d cfn-lint %s warnings: %s", n, id, keptCfnLintWarnings[id].reason)
			}
		})
	}
	t.Run("a bad template fails", func(t *testing.T) {
		_, problems := judgeCfnLint(findings, []string{bad})
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

// startCfnLint starts one cfn-lint over templates; the function it returns waits for its findings.
func startCfnLint(t *testing.T, lint string, templates []string) func() []cfnLintFinding {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(lint, append([]string{"--format", "json"}, templates...)...)
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("cfn-lint: %v", err)
	}
	return func() []cfnLintFinding {
		t.Helper()
		// cfn-lint exits non-zero when it finds anything; its findings are judged by the caller.
		err := cmd.Wait()
		var findings []cfnLintFinding
		if jerr := json.Unmarshal(out.Bytes(), &findings); jerr != nil {
			t.Fatalf("cfn-lint: %v; output %q: %v", err, out.Bytes(), jerr)
		}
		return findings
	}
}

// judgeCfnLint sorts the findings in templates into kept warnings (counted by rule) and problems.
func judgeCfnLint(findings []cfnLintFinding, templates []string) (kept map[string]int, problems []string) {
	of := map[string]bool{}
	for _, f := range templates {
		of[filepath.Clean(f)] = true
	}
	kept = map[string]int{}
	for _, f := range findings {
		if !of[filepath.Clean(f.Filename)] {
			continue
		}
		k, ok := keptCfnLintWarnings[f.Rule.Id]
		if f.Level == "Warning" && ok && k.message.MatchString(f.Message) {
			kept[f.Rule.Id]++
			continue
		}
		problems = append(problems, fmt.Sprintf("cfn-lint %s %s at %s:%d: %s", f.Level, f.Rule.Id, filepath.Base(f.Filename), f.Location.Start.LineNumber, f.Message))
	}
	return kept, problems
}
