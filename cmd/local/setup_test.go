package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun"
)

// fakeSetup replaces the start-up's slow steps for one test.
func fakeSetup(t *testing.T, synth func(ctx context.Context) error, start func(ctx context.Context) error) {
	t.Helper()
	origSynth, origStart, origBuilt := synthApp, startRun, appBuilt
	t.Cleanup(func() { synthApp, startRun, appBuilt = origSynth, origStart, origBuilt })
	appBuilt = func(context.Context, string) (bool, error) { return true, nil }
	synthApp = func(ctx context.Context, _, _, _ string, _ map[string]string) error { return synth(ctx) }
	startRun = func(ctx context.Context, _ localrun.Config) (*localrun.Run, error) { return nil, start(ctx) }
}

// stepState is what a fake step saw of its context.
type stepState struct {
	err      error
	deadline time.Duration // how far off the step's deadline was when it began
}

// observe records the step's context: its deadline, and whether it was still alive after outlasting
// --timeout (the sleep is longer than the test's 1ms --timeout on any machine).
func observe(ctx context.Context, st *stepState) {
	dl, _ := ctx.Deadline()
	st.deadline = time.Until(dl)
	time.Sleep(20 * time.Millisecond)
	st.err = ctx.Err()
}

// TestSetupTimeout: --timeout does not run during synth and the builds, which have --setup-timeout;
// a step that runs out of it is named, with the flag to raise, and is exit 3.
func TestSetupTimeout(t *testing.T) {
	stop := errors.New("fake start: stopping here")
	waitOut := func(step string) func(ctx context.Context) error {
		return func(ctx context.Context) error { <-ctx.Done(); return fmt.Errorf("%s: %w", step, ctx.Err()) }
	}
	for _, tc := range []struct {
		name         string
		args         []string
		synth, start func(*stepState) func(context.Context) error
		want         int
		wantErr      []string // in stderr
		alive        bool     // each step's context is alive after outlasting --timeout, its deadline --setup-timeout's
	}{
		{
			name: "the pipeline timeout does not run during setup",
			args: []string{"--timeout", "1ms", "--setup-timeout", "1h"},
			synth: func(st *stepState) func(context.Context) error {
				return func(ctx context.Context) error { observe(ctx, st); return nil }
			},
			start: func(st *stepState) func(context.Context) error {
				return func(ctx context.Context) error { observe(ctx, st); return stop }
			},
			want:    exitFailed,
			wantErr: []string{stop.Error()},
			alive:   true,
		},
		{
			name:    "synth runs out",
			args:    []string{"--setup-timeout", "10ms"},
			synth:   func(*stepState) func(context.Context) error { return waitOut("cdk synth") },
			start:   func(*stepState) func(context.Context) error { return func(context.Context) error { return stop } },
			want:    exitTimeout,
			wantErr: []string{"local: cdk synth: context deadline exceeded\n", "ran out of --setup-timeout 10ms", "raise it, e.g. --setup-timeout 20ms"},
		},
		{
			name:    "a build runs out",
			args:    []string{"--setup-timeout", "10ms"},
			synth:   func(*stepState) func(context.Context) error { return func(context.Context) error { return nil } },
			start:   func(*stepState) func(context.Context) error { return waitOut("go build lambdas/register") },
			want:    exitTimeout,
			wantErr: []string{"local: go build lambdas/register: context deadline exceeded\n", "ran out of --setup-timeout 10ms"},
		},
		{
			name: "a step that fails otherwise is exit 1",
			args: []string{"--setup-timeout", "1h"},
			synth: func(*stepState) func(context.Context) error {
				return func(context.Context) error { return errors.New("cdk synth: bad app") }
			},
			start:   func(*stepState) func(context.Context) error { return func(context.Context) error { return stop } },
			want:    exitFailed,
			wantErr: []string{"local: cdk synth: bad app\n"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var synthSt, startSt stepState
			fakeSetup(t, tc.synth(&synthSt), tc.start(&startSt))
			var out, errs bytes.Buffer
			args := append(tc.args, "--work", t.TempDir(), "--inbox", "testdata/inbox-ok")
			if got := run(context.Background(), args, &out, &errs); got != tc.want {
				t.Errorf("got exit %d, want %d (stderr %q)", got, tc.want, errs.String())
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errs.String(), w) {
					t.Errorf("got stderr %q, want it to say %q", errs.String(), w)
				}
			}
			if strings.Contains(errs.String(), "not drained") {
				t.Errorf("got stderr %q, want no pipeline timeout during setup", errs.String())
			}
			if !tc.alive {
				return
			}
			for name, st := range map[string]stepState{"synth": synthSt, "start": startSt} {
				if st.err != nil || st.deadline < 30*time.Minute {
					t.Errorf("%s: got context error %v with a deadline %s off, want none and --setup-timeout's 1h", name, st.err, st.deadline)
				}
			}
		})
	}
}
