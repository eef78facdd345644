package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
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
// the emulators still answer, then stops them and exits 0 (the run was consistent). So it does
// when its output went through a pipe whose reader is gone (`make serve 2>&1 | tee log`: tee
// dies of the same Ctrl-C): the lines it still writes fail with EPIPE, and the reports are
// written all the same.
func TestServeCtrlC(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := deploy.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(deploy.NodeBinary(root)); err != nil {
		t.Fatalf("Node 22 is missing (%v): run make setup", err)
	}
	bin := filepath.Join(t.TempDir(), "local")
	if out, err := exec.Command("go", "build", "-C", root, "-o", bin, "./cmd/local").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/local: %v\n%s", err, out)
	}
	cases := []struct {
		name string
		// readerGone closes the read end of the runner's stdout and stderr (one pipe, as 2>&1)
		// before the interrupt, as tee's death does.
		readerGone bool
	}{
		{"stdout read to the end", false},
		{"stdout's reader gone before the interrupt", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			reportFile := filepath.Join(dir, "report.json")
			cmd := exec.Command(bin, "--serve", "--env-file", filepath.Join(dir, "env"), "--report", reportFile,
				"--cdk-out", filepath.Join(root, "internal/localrun/testdata/fixture"), "--work", filepath.Join(dir, "work"))
			cmd.Dir = root
			// Its own process group, as a shell's job: the test plays the terminal and signals the group.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stdout, cmd.Stderr = pw, &stderr
			if c.readerGone {
				cmd.Stderr = pw
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pw.Close() // the runner holds the write end now
			killed := time.AfterFunc(5*time.Minute, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
			defer killed.Stop()

			var out strings.Builder
			lines := bufio.NewScanner(pr)
			for lines.Scan() {
				out.WriteString(lines.Text() + "\n")
				if strings.HasPrefix(lines.Text(), "phase 3/3") {
					break
				}
			}
			if !strings.Contains(out.String(), "serving;") {
				pr.Close()
				cmd.Wait()
				t.Fatalf("got no serving line before phase 3; stdout:\n%s\nstderr:\n%s", out.String(), stderr.String())
			}
			if c.readerGone {
				pr.Close()
			}
			// Ctrl-C, as the terminal sends it: to every process of the foreground group.
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if !c.readerGone {
				for lines.Scan() {
					out.WriteString(lines.Text() + "\n")
				}
				io.Copy(io.Discard, pr)
				pr.Close()
			}
			err = cmd.Wait()
			code := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = ee.ExitCode() // -1 when a signal (SIGPIPE) killed it
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					t.Errorf("got killed by %v, want an exit", ws.Signal())
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if code != exitOK {
				t.Errorf("got exit %d, want %d (interrupted, consistent)", code, exitOK)
			}
			if !c.readerGone {
				for _, want := range []string{"interrupted: writing the summary and the report, then stopping the emulators\n", "report: " + reportFile} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("got stdout without %q", want)
					}
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
		})
	}
}
