package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// appBinary builds the CDK app (the module root's main package) once per test binary, into the
// project's ignored .build folder.
var appBinary = sync.OnceValues(func() (string, error) {
	bin, err := filepath.Abs(filepath.Join("..", ".build", "test", "app"))
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

type appRun struct {
	out    string // stdout and stderr
	code   int
	outdir string
	tmp    string // the TMPDIR the app ran with
}

// runApp runs the app as the CDK CLI does: context in CDK_CONTEXT_JSON, the assembly directory in
// CDK_OUTDIR; with its own empty TMPDIR, so that what it leaves there can be seen.
func runApp(t *testing.T, context map[string]any, env ...string) appRun {
	t.Helper()
	bin, err := appBinary()
	if err != nil {
		t.Fatalf("building the app: %v", err)
	}
	ctx, _ := json.Marshal(context)
	r := appRun{outdir: t.TempDir(), tmp: t.TempDir()}
	cmd := exec.Command(bin)
	cmd.Dir = ".." // the app finds its Lambda sources from the module
	cmd.Env = append(os.Environ(), "CDK_CONTEXT_JSON="+string(ctx), "CDK_OUTDIR="+r.outdir, "TMPDIR="+r.tmp, "TENANTPIPELINE_REGISTER_URL=")
	cmd.Env = append(cmd.Env, env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	r.out = buf.String()
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAppInvalidInputExitsCleanly: invalid tenants files, context and props end the app with one
// clear message and status 1 - never a panic's goroutine dump (Go exits 2 on a panic).
func TestAppInvalidInputExitsCleanly(t *testing.T) {
	good := `{"tenants": [{"id": "acme", "registerUrl": "https://core.example.com/acme"}]}`
	for _, tc := range []struct {
		name    string
		tenants string
		context map[string]any
		want    []string
		env     []string
	}{
		{"JSON syntax error", "{\"tenants\": [\n  {\"id\": \"acme\",}\n]}", nil,
			[]string{"line 2, column 17: JSON syntax error"}, nil},
		{"missing registerUrl and an unknown field", `{"tenants": [{"id": "acme", "chunksize": 5}, {"id": "Bad"}]}`, nil,
			[]string{`tenant "acme": registerUrl: missing`, `unknown field "chunksize"`, `tenant "Bad": id`}, nil},
		{"invalid context", good, map[string]any{"tenantsPerStack": 99}, []string{"tenantsPerStack: 99 is out of range"}, nil},
		{"invalid register design", good, map[string]any{"registerDesign": "per-file"},
			[]string{`context registerDesign: "per-file" is not a register design: use "per-invocation" (the default) or "per-chunk"`}, nil},
		{"CDK error raised through jsii", good, map[string]any{"alarmTopicArn": "not-an-arn"}, []string{`ARNs must start with "arn:"`}, nil},
		// A Go panic inside a jsii callback, during app.Synth: the build cache cannot be created.
		{"bundling fails during synth", good, nil, []string{"bundling lambdas/", "failed to initialize build cache"}, []string{"GOCACHE=/proc/nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := map[string]any{"tenantsFile": writeFile(t, "tenants.json", tc.tenants)}
			for k, v := range tc.context {
				ctx[k] = v
			}
			r := runApp(t, ctx, tc.env...)
			if r.code != 1 {
				t.Errorf("got exit status %d, want 1", r.code)
			}
			for _, bad := range []string{"goroutine ", "panic:", "    at "} {
				if strings.Contains(r.out, bad) {
					t.Errorf("got output containing %q, want one clear message:\n%s", bad, r.out)
				}
			}
			if n := strings.Count(r.out, "synth failed:"); n != 1 {
				t.Errorf("got %d \"synth failed:\" lines, want 1:\n%s", n, r.out)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.out, w) {
					t.Errorf("got output %q, want it to contain %q", r.out, w)
				}
			}
		})
	}
}

// TestAppRegisterURLForTenantsWithout: tenants without registerUrl synthesize when the app is
// given one endpoint for them (-c registerUrl=URL, or the local run's environment variable), and
// a tenant's own registerUrl still wins. A synth leaves nothing in the temp folder.
func TestAppRegisterURLForTenantsWithout(t *testing.T) {
	tenantsFile := writeFile(t, "tenants.json", `{"tenants": [{"id": "acme"}, {"id": "globex", "registerUrl": "https://own.example.com/globex"}]}`)
	for _, tc := range []struct {
		name    string
		context map[string]any
		env     []string
	}{
		{"context", map[string]any{"tenantsFile": tenantsFile, "registerUrl": "https://core.example.com/all"}, nil},
		{"local run environment", map[string]any{"tenantsFile": tenantsFile}, []string{"TENANTPIPELINE_REGISTER_URL=https://core.example.com/all"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runApp(t, tc.context, tc.env...)
			if r.code != 0 {
				t.Fatalf("got exit status %d, want 0:\n%s", r.code, r.out)
			}
			b, err := os.ReadFile(filepath.Join(r.outdir, "TenantPipeline-Tenants-1.template.json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`\"registerUrl\":\"https://core.example.com/all\"`, `\"registerUrl\":\"https://own.example.com/globex\"`} {
				if !strings.Contains(string(b), want) {
					t.Errorf("got a template without %s in a controller's TENANT", want)
				}
			}
			left, _ := os.ReadDir(r.tmp)
			for _, e := range left {
				t.Errorf("synth left %s in the temp folder, want nothing", e.Name())
			}
		})
	}
	r := runApp(t, map[string]any{"tenantsFile": tenantsFile})
	if r.code != 1 || !strings.Contains(r.out, `tenant "acme": registerUrl: missing`) {
		t.Errorf("without an endpoint: got status %d and %q, want 1 and the missing registerUrl named", r.code, r.out)
	}
}

// TestAppRegisterDesignContext: -c registerDesign=per-chunk synthesizes the design before the
// per-invocation cursor (a Map with one Register task per chunk), so both can be measured side by
// side; without it the segment loops on a cursor.
func TestAppRegisterDesignContext(t *testing.T) {
	tenantsFile := filepath.Join(mustAbs(t, "testdata"), "one-tenant.json")
	for _, tc := range []struct {
		design string
		want   string // a state only that design's segment has
		not    string
	}{
		{"", `\"NextChunks\":{\"Type\":\"Choice\"`, `\"Chunks\":`},
		{"per-invocation", `\"NextChunks\":{\"Type\":\"Choice\"`, `\"Chunks\":`},
		{"per-chunk", `\"Chunks\":{\"Type\":\"Map\"`, `\"NextChunks\":`},
	} {
		t.Run("design "+tc.design, func(t *testing.T) {
			ctx := map[string]any{"tenantsFile": tenantsFile}
			if tc.design != "" {
				ctx["registerDesign"] = tc.design
			}
			r := runApp(t, ctx)
			if r.code != 0 {
				t.Fatalf("got exit status %d, want 0:\n%s", r.code, r.out)
			}
			b, err := os.ReadFile(filepath.Join(r.outdir, "TenantPipeline-Tenants-1.template.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tc.want) || strings.Contains(string(b), tc.not) {
				t.Errorf("got a template without %s or with %s", tc.want, tc.not)
			}
		})
	}
}

// TestSynthLeavesNothingInTempFolder: the Lambda binaries are built inside the cloud assembly, so
// a synth leaves nothing behind in the system's temp folder (it used to leave about 30 MB each time).
func TestSynthLeavesNothingInTempFolder(t *testing.T) {
	r := runApp(t, map[string]any{"tenantsFile": filepath.Join(mustAbs(t, "testdata"), "one-tenant.json")})
	if r.code != 0 {
		t.Fatalf("got exit status %d, want 0:\n%s", r.code, r.out)
	}
	left, _ := os.ReadDir(r.tmp)
	for _, e := range left {
		t.Errorf("synth left %s in the temp folder, want nothing", e.Name())
	}
	assets, _ := filepath.Glob(filepath.Join(r.outdir, "asset.*", "bootstrap"))
	if len(assets) != 3 {
		t.Errorf("got %d bundled bootstrap binaries in the assembly, want 3 (controller, split, register)", len(assets))
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
