//go:build e2e || figures

package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
)

// TestSFNServer runs the Step Functions server's own tests (Map stop, retries, redrive,
// sync:2 children, history counting).
func TestSFNServer(t *testing.T) { nodeTests(t, "local/sfn-server/server.test.mjs") }

// TestAPIGatewayRender runs the local API Gateway mapping-template renderer's own tests ($input,
// $util, $context, the Java string methods it allows, and the calls it refuses).
func TestAPIGatewayRender(t *testing.T) { nodeTests(t, "local/apigateway/render.test.mjs") }

// nodeTests runs a Node test file of the module with node --test.
func nodeTests(t *testing.T, file string) {
	t.Parallel()
	root := moduleRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, deploy.NodeBinary(root), "--test", filepath.Join(root, file))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node --test %s: %v\n%s", file, err, out)
	}
}

func TestPattern(t *testing.T) {
	p, err := emulate.ParsePattern([]byte(`{"source":["aws.s3"],"detail-type":["Object Created"],"detail":{"bucket":{"name":["b"]},"object":{"key":[{"prefix":"inbox/acme/"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ev := func(bucket, key string) map[string]any {
		return map[string]any{"source": "aws.s3", "detail-type": "Object Created", "detail": map[string]any{"bucket": map[string]any{"name": bucket}, "object": map[string]any{"key": key}}}
	}
	for _, tc := range []struct {
		name string
		ev   map[string]any
		want bool
	}{
		{"match", ev("b", "inbox/acme/a b 日本.csv"), true},
		{"other tenant", ev("b", "inbox/acme2/x"), false},
		{"other bucket", ev("c", "inbox/acme/x"), false},
		{"work prefix", ev("b", "work/acme/x"), false},
		{"missing detail", map[string]any{"source": "aws.s3", "detail-type": "Object Created"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Match(tc.ev); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{`{"a":[{"numeric":[">",1]}]}`, `{"a":"x"}`} {
		if _, err := emulate.ParsePattern([]byte(bad)); err == nil {
			t.Errorf("ParsePattern(%s): got no error, want one", bad)
		}
	}
	q, _ := emulate.ParsePattern([]byte(`{"a":[{"anything-but":["x"]}],"b":[{"exists":false}],"c":[{"suffix":".csv"}]}`))
	if !q.Match(map[string]any{"a": "y", "c": "f.csv"}) || q.Match(map[string]any{"a": "x", "c": "f.csv"}) || q.Match(map[string]any{"a": "y", "b": 1, "c": "f.csv"}) {
		t.Error("anything-but/exists/suffix: got a wrong match")
	}
}

// startFixture runs the hand-made fixture templates (testdata/fixture): the real controller with
// the harness's own split and register doubles, so the harness is tested on its own.
func startFixture(t *testing.T, cfg Config) *Run {
	t.Helper()
	root := moduleRoot(t)
	cfg.ModuleRoot, cfg.Assembly, cfg.Node = root, filepath.Join(root, "internal/localrun/testdata/fixture"), deploy.NodeBinary(root)
	// The binaries go where the scenarios' go, which lasts as long as the test binary: the build is
	// cached per process, so a binary in one test's temporary folder would vanish under another
	// test that runs beside it.
	cfg.WorkDir, cfg.BinDir = t.TempDir(), filepath.Join(shared, "bin")
	return startRun(t, cfg, 3*time.Minute)
}

// startRun starts cfg with a run log in cfg.WorkDir; everything it starts is stopped when the test
// ends, and the log's tail is printed when the test failed.
func startRun(t *testing.T, cfg Config, startTimeout time.Duration) *Run {
	t.Helper()
	logs, err := os.Create(filepath.Join(cfg.WorkDir, "run.log"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logs = logs
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	r, err := Start(ctx, cfg)
	if err != nil {
		logs.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close()
		logs.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("run log (tail):\n%s", tail(string(b), 6000))
		}
	})
	return r
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func csv(records int, bad bool) []byte {
	var b strings.Builder
	b.WriteString("id,name\n")
	for i := 1; i <= records; i++ {
		if bad && i == 6 {
			b.WriteString("BAD\n")
			continue
		}
		fmt.Fprintf(&b, "%d,name %d\n", i, i)
	}
	return []byte(b.String())
}

func TestFixtureEndToEnd(t *testing.T) {
	t.Parallel()
	r := startFixture(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, u := range []struct {
		tenant, rel string
		n           int
	}{{"acme", "a 1 日本.csv", 7}, {"acme", "b.csv", 4}, {"globex", "x.csv", 5}} {
		if _, err := r.Upload(ctx, u.tenant, u.rel, csv(u.n, false)); err != nil {
			t.Fatal(err)
		}
	}
	drainErr := r.WaitDrained(ctx, nil, 500*time.Millisecond)
	rep, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) > 0 {
		t.Errorf("violations: %v", rep.Violations)
	}
	if drainErr != nil {
		t.Error(drainErr)
	}
	for tenant, want := range map[string]int64{"acme": 11, "globex": 5} {
		if got := rep.Tenants[tenant].RecordsRegistered; got != want {
			t.Errorf("%s: got %d records, want %d", tenant, got, want)
		}
		for _, f := range rep.Tenants[tenant].Files {
			if f.Status != "SUCCEEDED" {
				t.Errorf("%s %s: got %s (%s %s), want SUCCEEDED", tenant, f.Key, f.Status, f.Error, f.Cause)
			}
		}
	}
	if rep.InterFileGapSecond.N != 1 {
		t.Errorf("inter-file gaps: got %d, want 1", rep.InterFileGapSecond.N)
	}
}

// lambdaLogs returns the JSON log lines of the run's Lambda processes (run.log) that match.
func lambdaLogs(t *testing.T, r *Run, match func(map[string]any) bool) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.cfg.WorkDir, "run.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["level"] != nil && match(l) {
			out = append(out, l)
		}
	}
	return out
}
