//go:build e2e || figures

package localrun

import (
	"bytes"
	"context"
	"errors"
	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestSetupStepsNameThemselves: a build or a synth stopped because the caller's time ran out says
// which step it was and that its time ran out (not "signal: killed"); each build says what it
// builds, and for which platform, and its time when done.
func TestSetupStepsNameThemselves(t *testing.T) {
	t.Parallel() // a serial test holds back every parallel scenario until it ends
	root := moduleRoot(t)
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	target := runtime.GOOS + "/" + runtime.GOARCH
	if os.Getenv("GOOS") != "" || os.Getenv("GOARCH") != "" {
		t.Skip("SKIPPED: GOOS or GOARCH is set; the platform the progress line names is the default one here")
	}
	for _, tc := range []struct {
		name     string
		step     func(r *Run) error
		wantErr  string
		progress []string
	}{
		{
			name:     "a build runs out",
			step:     func(r *Run) error { _, err := r.build(expired, "lambdas/split", t.TempDir()); return err },
			wantErr:  "go build lambdas/split: context deadline exceeded",
			progress: []string{"  building lambdas/split (" + target + ") ...\n"},
		},
		{
			name: "synth runs out",
			step: func(*Run) error {
				return deploy.Synth(expired, root, root+"/tenants.json", t.TempDir()+"/cdk.out", nil)
			},
			wantErr: "cdk synth: context deadline exceeded",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var progress bytes.Buffer
			err := tc.step(&Run{Cloud: &Cloud{moduleRoot: root, opts: cloudOptions{code: codeOptions{progress: &progress}}}})
			if err == nil || err.Error() != tc.wantErr || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v, want %q wrapping context.DeadlineExceeded", err, tc.wantErr)
			}
			if got := progress.String(); got != strings.Join(tc.progress, "") {
				t.Errorf("got progress %q, want %q", got, strings.Join(tc.progress, ""))
			}
		})
	}
	t.Run("a build that succeeds says how long it took", func(t *testing.T) {
		var progress bytes.Buffer
		r := &Run{Cloud: &Cloud{moduleRoot: root, opts: cloudOptions{code: codeOptions{progress: &progress}}}}
		if _, err := r.build(context.Background(), "lambdas/split", t.TempDir()); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(progress.String(), "\n"), "\n")
		if len(lines) != 2 || lines[0] != "  building lambdas/split ("+target+") ..." || !strings.HasPrefix(lines[1], "  built lambdas/split in ") || !strings.HasSuffix(lines[1], "s") {
			t.Errorf("got progress %q, want the building line, then \"  built lambdas/split in N.Ns\"", progress.String())
		}
	})
}
