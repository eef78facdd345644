package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestFirstCompileIsAnnounced: when the CDK app is not in the build cache (or go list cannot
// tell), the runner compiles it as its own step before cdk synth and says what it builds and about
// how long it takes; when it is built, it goes straight to synth and says nothing of a compile.
func TestFirstCompileIsAnnounced(t *testing.T) {
	stop := errors.New("fake start: stopping here")
	for _, tc := range []struct {
		name      string
		built     bool
		builtErr  error
		buildErr  error
		wantSteps string
		wantLine  bool
		wantErr   string
	}{
		{name: "cold cache", wantSteps: "build synth", wantLine: true},
		{name: "warm cache", built: true, wantSteps: "synth"},
		{name: "go list fails", builtErr: errors.New("go list: no go"), wantSteps: "build synth", wantLine: true},
		{name: "the compile fails", buildErr: errors.New("go tool -n tenantpipeline: app.go:1: syntax error"), wantSteps: "build", wantLine: true,
			wantErr: "local: go tool -n tenantpipeline: app.go:1: syntax error\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []string
			fakeSetup(t, func(context.Context) error { steps = append(steps, "synth"); return nil },
				func(context.Context) error { return stop })
			appBuilt = func(context.Context, string) (bool, error) { return tc.built, tc.builtErr }
			origBuild := buildApp
			t.Cleanup(func() { buildApp = origBuild })
			buildApp = func(context.Context, string) error { steps = append(steps, "build"); return tc.buildErr }
			var out, errs bytes.Buffer
			run(context.Background(), []string{"--work", t.TempDir(), "--inbox", "testdata/inbox-ok"}, &out, &errs)
			if got := strings.Join(steps, " "); got != tc.wantSteps {
				t.Errorf("got steps %q, want %q", got, tc.wantSteps)
			}
			line := "phase 1/3: compiling the CDK app (first run only: about "
			if got := strings.Contains(out.String(), line); got != tc.wantLine {
				t.Errorf("got stdout %q: the line %q present %v, want %v", out.String(), line, got, tc.wantLine)
			}
			if tc.wantErr != "" && !strings.Contains(errs.String(), tc.wantErr) {
				t.Errorf("got stderr %q, want it to say %q", errs.String(), tc.wantErr)
			}
		})
	}
}
