//go:build e2e

package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeTest runs `make test` on a small package (testdata/maketest; setup and vet assumed done):
// each test is printed as it ends, then the failures with their output, the slowest tests and packages, and
// gotestsum's DONE line last; a failing test fails make test. make test runs both lanes (the package's
// e2e-tagged test too), make test-fast the untagged tests alone.
func TestMakeTest(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	const pkg = "test/testdata/maketest"
	for _, tc := range []struct {
		name   string
		target string
		fail   bool
		want   []string // in this order
		done   string   // the start of the last line
	}{
		{"passing", "test", false, []string{"PASS " + pkg + ".TestEndToEndLane (", "PASS " + pkg + ".TestPasses (", "slowest tests:", "pass github.com/example/tenantpipeline/" + pkg + ".TestPasses\n",
			"slowest packages:", "pass github.com/example/tenantpipeline/" + pkg + "\n"},
			"DONE 3 tests in "},
		{"fast lane", "test-fast", false, []string{"PASS " + pkg + ".TestPasses (", "slowest tests:", "slowest packages:"}, "DONE 2 tests in "},
		{"failing", "test", true, []string{"PASS " + pkg + ".TestPasses (", "FAIL " + pkg + ".TestFailsWhenAsked (",
			"=== FAIL: " + pkg + " TestFailsWhenAsked", "failing, as MAKETEST_FAIL asks", "slowest tests:", "fail github.com/example/tenantpipeline/" + pkg + ".TestFailsWhenAsked\n",
			"slowest packages:", "fail github.com/example/tenantpipeline/" + pkg + "\n"},
			"DONE 3 tests, 1 failure in "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("make", "--no-print-directory", "-o", "setup", "-o", "vet", tc.target,
				"GO_TEST_PACKAGES=./"+pkg, "GO_TEST_FLAGS=-count=1", "TEST_JSON="+filepath.Join(t.TempDir(), "events.json"))
			cmd.Dir = ".."
			// Not the variables of a make test this test may run under.
			cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
			if tc.fail {
				cmd.Env = append(cmd.Env, "MAKETEST_FAIL=1")
			}
			b, err := cmd.CombinedOutput()
			out := string(b)
			if _, failed := err.(*exec.ExitError); failed != tc.fail || (err != nil && !failed) {
				t.Fatalf("got %v, want make %s to fail: %v:\n%s", err, tc.target, tc.fail, out)
			}
			if ran := strings.Contains(out, "TestEndToEndLane"); ran != (tc.target == "test") {
				t.Errorf("make %s: got the e2e-tagged test run: %v, want %v:\n%s", tc.target, ran, tc.target == "test", out)
			}
			rest := out
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("got output without %q (after the lines before it):\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			var last string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(l, "make: ***") { // make's own line for a failed recipe
					last = l
				}
			}
			if !strings.HasPrefix(last, tc.done) {
				t.Errorf("got last line %q, want gotestsum's %q…:\n%s", last, tc.done, out)
			}
		})
	}
}
