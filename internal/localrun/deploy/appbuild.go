package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// appTool is the CDK app as cdk.json runs it ("go tool tenantpipeline"), and appPackage a package
// of it that holds every slow dependency (the CDK's Go bindings): once it is in the build cache, the
// app is compiled but for its own small packages.
const (
	appTool    = "tenantpipeline"
	appPackage = "./internal/stacks"
)

// AppBuilt reports whether the CDK app's packages are in the Go build cache, so that cdk synth
// starts the app in seconds instead of compiling it first. It asks go list whether appPackage is
// stale ("go help list": Stale says whether go install would do anything; for a package that is
// not a command, whether its compiled form is missing from the build cache).
func AppBuilt(ctx context.Context, root string) (bool, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-f", "{{.Stale}}", appPackage)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("go list %s: %v\n%s", appPackage, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)) == "false", nil
}

// BuildApp compiles the CDK app the way cdk synth will start it: "go tool -n" builds the tool's
// binary into the build cache and prints its path instead of running it, so the "go tool
// tenantpipeline" that cdk synth runs next finds it built.
func BuildApp(ctx context.Context, root string) error {
	cmd := exec.CommandContext(ctx, "go", "tool", "-n", appTool)
	cmd.Dir = root
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("go tool -n %s: %w", appTool, ctx.Err())
		}
		return fmt.Errorf("go tool -n %s: %v\n%s", appTool, err, strings.TrimSpace(buf.String()))
	}
	return nil
}
