//go:build e2e

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

// TestDemoKeepsRunnerStatus: scripts/demo.sh, make demo's recipe, exits with the runner's own
// status, and make names that status in its last line (make itself exits 2 for any failed recipe).
// A fake runner stands in for the real one (LOCAL_RUNNER), and make's setup is not remade (-o setup).
func TestDemoKeepsRunnerStatus(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := deploy.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("SKIPPED: make is not installed; scripts/demo.sh alone is tested")
	}
	for _, status := range []int{exitOK, exitFailed, exitUsage, exitTimeout, exitHalted} {
		t.Run(fmt.Sprint("exit ", status), func(t *testing.T) {
			dir := t.TempDir()
			runner := filepath.Join(dir, "local")
			script := fmt.Sprintf("#!/bin/sh\necho \"$@\" > %s/args\nexit %d\n", dir, status)
			if err := os.WriteFile(runner, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), "LOCAL_RUNNER="+runner)

			demo := exec.Command(filepath.Join(root, "scripts/demo.sh"), "--timeout", "20m")
			demo.Env = env
			out, err := demo.CombinedOutput()
			if got := exitCode(t, err); got != status {
				t.Errorf("scripts/demo.sh: got exit %d, want the runner's %d\n%s", got, status, out)
			}
			if args, _ := os.ReadFile(filepath.Join(dir, "args")); string(args) != "--report .build/local/report.json --timeout 20m\n" {
				t.Errorf("scripts/demo.sh: got runner arguments %q, want the report and then the script's own", args)
			}

			mk := exec.Command(makeBin, "--no-print-directory", "-C", root, "-o", "setup", "demo")
			mk.Env = env
			out, err = mk.CombinedOutput()
			wantMake, wantLine := 0, ""
			if status != exitOK {
				wantMake, wantLine = 2, fmt.Sprintf(`\*\*\* \[Makefile:\d+: demo\] Error %d\n$`, status)
			}
			if got := exitCode(t, err); got != wantMake {
				t.Errorf("make demo: got exit %d, want %d\n%s", got, wantMake, out)
			}
			if wantLine != "" && !regexp.MustCompile(wantLine).Match(out) {
				t.Errorf("make demo: got output %q, want its last line to end in \"Error %d\"", out, status)
			}
			if strings.Contains(string(out), "go build") {
				t.Errorf("make demo: got %q, want nothing built with LOCAL_RUNNER", out)
			}
		})
	}
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}
