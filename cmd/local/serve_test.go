//go:build e2e

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/report"
)

// TestServeCtrlC: Ctrl-C on a --serve run, sent as a terminal sends it (SIGINT to the whole
// foreground process group), reaches the runner only: it writes the summary and both reports while
// the emulators still answer, then stops them and exits 0 (the run was consistent).
func TestServeCtrlC(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := deploy.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(deploy.NodeBinary(root)); err != nil {
		t.Fatalf("Node 22 is missing (%v): run make setup", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "local")
	if out, err := exec.Command("go", "build", "-C", root, "-o", bin, "./cmd/local").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/local: %v\n%s", err, out)
	}
	reportFile := filepath.Join(dir, "report.json")
	cmd := exec.Command(bin, "--serve", "--env-file", filepath.Join(dir, "env"), "--report", reportFile,
		"--cdk-out", filepath.Join(root, "internal/localrun/testdata/fixture"), "--work", filepath.Join(dir, "work"))
	cmd.Dir = root
	// Its own process group, as a shell's job: the test plays the terminal and signals the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := time.AfterFunc(5*time.Minute, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer killed.Stop()

	var out strings.Builder
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "phase 3/3") {
			break
		}
	}
	if !strings.Contains(out.String(), "serving;") {
		cmd.Wait()
		t.Fatalf("got no serving line before phase 3; stdout:\n%s\nstderr:\n%s", out.String(), stderr.String())
	}
	// Ctrl-C, as the terminal sends it: to every process of the foreground group.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
	}
	err = cmd.Wait()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != exitOK {
		t.Errorf("got exit %d, want %d (interrupted, consistent)", code, exitOK)
	}
	for _, want := range []string{"interrupted: writing the summary and the report, then stopping the emulators\n", "report: " + reportFile} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("got stdout without %q", want)
		}
	}
	var rep report.Report
	if b, err := os.ReadFile(reportFile); err != nil {
		t.Errorf("JSON report: %v", err)
	} else if err := json.Unmarshal(b, &rep); err != nil || rep.Tenants["acme"] == nil {
		t.Errorf("JSON report: got %v and tenants %v, want acme's report", err, rep.Tenants)
	}
	if _, err := os.Stat(report.HTMLPath(reportFile)); err != nil {
		t.Errorf("HTML report: %v", err)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), stderr.String())
	}
}
