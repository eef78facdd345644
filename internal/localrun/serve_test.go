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
	"sync"
	"testing"
	"time"
)

// These tests drive the local run as --serve does: an operator's clients (the pipectl binary, the
// aws CLI) reach it only through the environment Run.Env exports.

var pipectlBuild struct {
	once sync.Once
	bin  string
	err  error
}

// pipectlBinary builds cmd/pipectl once per test binary.
func pipectlBinary(t *testing.T, root string) string {
	t.Helper()
	pipectlBuild.once.Do(func() {
		bin := filepath.Join(shared, "pipectl")
		out, err := exec.Command("go", "build", "-C", root, "-o", bin, "./cmd/pipectl").CombinedOutput()
		if err != nil {
			pipectlBuild.err = fmt.Errorf("go build ./cmd/pipectl: %v\n%s", err, out)
		}
		pipectlBuild.bin = bin
	})
	if pipectlBuild.err != nil {
		t.Fatal(pipectlBuild.err)
	}
	return pipectlBuild.bin
}

// operatorEnv is a clean environment with only the run's exports (no real credentials or config).
func operatorEnv(t *testing.T, r *Run) []string {
	dir := t.TempDir()
	env := append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "credentials"),
	}, r.Env()...)
	return append(env, "AWS_ACCESS_KEY_ID=tester") // the operator STS names (the last value wins)
}

// pipectl runs the pipectl binary against the run; it fails the test on a non-zero exit.
func pipectl(t *testing.T, r *Run, args ...string) string {
	t.Helper()
	code, stdout, stderr := pipectlIn(t, r, "", args...)
	if code != 0 {
		t.Fatalf("pipectl %s: exit status %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout
}

// pipectlIn runs the pipectl binary against the run in the working directory dir ("": the
// test's) and returns its exit status and output, whatever the status.
func pipectlIn(t *testing.T, r *Run, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(pipectlBinary(t, moduleRoot(t)), args...)
	cmd.Env, cmd.Dir = operatorEnv(t, r), dir
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errOut.String()
	}
	if err != nil {
		t.Fatalf("pipectl %s: %v", strings.Join(args, " "), err)
	}
	return 0, out.String(), errOut.String()
}

type statusJSON struct {
	Tenants []struct {
		ID      string  `json:"id"`
		Tier    string  `json:"tier"`
		Pool    *string `json:"pool"`
		Policy  string  `json:"policy"`
		Paused  *bool   `json:"paused"`
		Blocked bool    `json:"blocked"`
		Queue   struct {
			Visible  *int `json:"visible"`
			InFlight *int `json:"inFlight"`
		} `json:"queue"`
		LastFailure *struct {
			Key, ExecutionName, Error, Cause string
		} `json:"lastFailure"`
	} `json:"tenants"`
}

func pipectlStatus(t *testing.T, r *Run, prefix string, tenants ...string) statusJSON {
	t.Helper()
	var st statusJSON
	out := pipectl(t, r, append([]string{"status", "--json", "--stack-prefix", prefix}, tenants...)...)
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st
}

// waitForStatus polls pipectl status of one tenant until cond holds.
func waitForStatus(t *testing.T, ctx context.Context, r *Run, prefix, tenant, what string, cond func(statusJSON) bool) statusJSON {
	t.Helper()
	for {
		st := pipectlStatus(t, r, prefix, tenant)
		if len(st.Tenants) == 1 && cond(st) {
			return st
		}
		select {
		case <-ctx.Done():
			last, _ := json.Marshal(st.Tenants)
			t.Fatalf("waiting until %s: %v; last status %s", what, ctx.Err(), last)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// assertOrderedOnce checks a tenant's registrations: files in the order given, each file's records
// 1..n in order (a file that comes back goes on at the next record, or starts again at 1 when
// replayed), every Idempotency-Key once.
func assertOrderedOnce(t *testing.T, r *Run, tenant string, want []string, records map[string]int64) {
	t.Helper()
	keys := map[string]bool{}
	var files []string
	next := map[string]int64{}
	for _, rec := range r.Sink.Registered(tenant) {
		if keys[rec.Key] {
			t.Errorf("%s: Idempotency-Key %s registered twice", tenant, rec.Key)
		}
		keys[rec.Key] = true
		id := rec.Source + "@" + rec.VersionID
		if len(files) == 0 || files[len(files)-1] != id {
			files = append(files, id)
			if rec.RecordNumber == 1 {
				next[id] = 0 // a replay starts again at record 1; a redrive goes on where it stopped
			}
		}
		if rec.RecordNumber != next[id]+1 {
			t.Errorf("%s: %s record %d after record %d", tenant, rec.Source, rec.RecordNumber, next[id])
		}
		next[id] = rec.RecordNumber
	}
	got := make([]string, len(files))
	for i, f := range files {
		got[i], _, _ = strings.Cut(f, "@")
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s: got files registered in order %v, want %v", tenant, got, want)
	}
	for f, n := range records {
		var c int64
		for _, rec := range r.Sink.Registered(tenant) {
			if rec.Source == f {
				c++
			}
		}
		if c != n {
			t.Errorf("%s: %s got %d records registered, want %d", tenant, f, c, n)
		}
	}
}

// pause, upload 3, nothing registered and status shows 3 visible; resume: all 3, in order.
func TestServeFixturePauseResume(t *testing.T) {
	t.Parallel()
	r := startFixture(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	st := pipectlStatus(t, r, "Fixture")
	if len(st.Tenants) != 2 || st.Tenants[0].ID != "acme" || st.Tenants[1].ID != "globex" {
		t.Fatalf("got tenants %+v, want acme and globex from DescribeStacks", st.Tenants)
	}
	if p := st.Tenants[0].Paused; p == nil || *p {
		t.Fatalf("got paused %v, want false", p)
	}
	pipectl(t, r, "pause", "acme", "--stack-prefix", "Fixture")
	files := []string{"inbox/acme/1.csv", "inbox/acme/2.csv", "inbox/acme/3.csv"}
	for i, f := range files {
		if _, err := r.Upload(ctx, "acme", strings.TrimPrefix(f, "inbox/acme/"), csv(3+i, false)); err != nil {
			t.Fatal(err)
		}
	}
	// The three files' messages have reached the queue and stay there: 3 visible, none in flight
	// (a mapping that still polled would have taken the head), and the controller never ran.
	st = waitForStatus(t, ctx, r, "Fixture", "acme", "the paused tenant's 3 messages wait in its queue", func(st statusJSON) bool {
		q := st.Tenants[0].Queue
		return q.Visible != nil && *q.Visible == 3 && q.InFlight != nil && *q.InFlight == 0
	})
	if got := st.Tenants[0]; got.Paused == nil || !*got.Paused {
		t.Errorf("paused: got paused %v, want true", got.Paused)
	}
	if fn := r.Function(controllerPkg, "acme"); fn == nil || fn.Invocations() != 0 {
		t.Errorf("paused: got controller %v invoked, want it never invoked while its mapping is disabled", fn)
	}
	if n := len(r.Sink.Registered("acme")); n != 0 {
		t.Errorf("paused: got %d records registered, want 0", n)
	}
	pipectl(t, r, "resume", "acme", "--stack-prefix", "Fixture")
	rep := drain(t, ctx, r)
	if len(rep.Violations) > 0 {
		t.Errorf("violations: %v", rep.Violations)
	}
	assertOrderedOnce(t, r, "acme", files, map[string]int64{files[0]: 3, files[1]: 4, files[2]: 5})
}

// A file uploaded by the real aws CLI, with only the exported environment, is processed and is a
// file of the run (in the report, not a violation).
func TestServeFixtureAWSCLIUpload(t *testing.T) {
	t.Parallel()
	aws, err := exec.LookPath("aws")
	if err != nil {
		t.Skip("SKIPPED: the aws CLI is not installed (no aws on PATH); the upload through a real client is not tested")
	}
	r := startFixture(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := filepath.Join(t.TempDir(), "x 日本.csv")
	os.WriteFile(src, csv(4, false), 0o644)
	cmd := exec.Command(aws, "s3", "cp", src, "s3://"+r.Bucket+"/inbox/acme/x 日本.csv")
	cmd.Env = operatorEnv(t, r)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("aws s3 cp: %v\n%s", err, out)
	}
	rep := drain(t, ctx, r)
	if len(rep.Violations) > 0 {
		t.Errorf("violations: %v", rep.Violations)
	}
	f := fileOf(t, rep, "acme", "x 日本.csv")
	if f.Status != "SUCCEEDED" || f.Records != 4 {
		t.Errorf("got %s with %d records, want SUCCEEDED with 4", f.Status, f.Records)
	}
	assertOrderedOnce(t, r, "acme", []string{"inbox/acme/x 日本.csv"}, nil)
}
