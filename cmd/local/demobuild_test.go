package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

// TestDemoAnnouncesTheRunnersFirstBuild: scripts/demo.sh says that it is building the runner, and
// about how long that takes, when the runner binary is not there yet, and says nothing of a build
// once it is. The script runs from a copy in a temporary project, with a fake go on PATH that
// "builds" a runner which exits 0.
func TestDemoAnnouncesTheRunnersFirstBuild(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := deploy.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "scripts/demo.sh"))
	if err != nil {
		t.Fatal(err)
	}
	project, bin := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(project, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "scripts/demo.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	// go build -o OUT PKG: write OUT as a runner that exits 0.
	fakeGo := "#!/bin/sh\nmkdir -p \"$(dirname \"$3\")\"\nprintf '#!/bin/sh\\nexit 0\\n' > \"$3\"\nchmod +x \"$3\"\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	line := "demo: building the local runner, .build/bin/local (first run only: about "
	for _, tc := range []struct {
		name     string
		wantLine bool
	}{
		{"first run", true},
		{"runner already built", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			demo := exec.Command(filepath.Join(project, "scripts/demo.sh"))
			demo.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "LOCAL_RUNNER=")
			out, err := demo.CombinedOutput()
			if err != nil {
				t.Fatalf("scripts/demo.sh: %v\n%s", err, out)
			}
			if got := strings.Contains(string(out), line); got != tc.wantLine {
				t.Errorf("got output %q: the line %q present %v, want %v", out, line, got, tc.wantLine)
			}
		})
	}
}
