//go:build e2e

package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalRunWithoutRegisterURL runs `go run ./cmd/local` as a new user would, on a tenants file
// whose tenants have no registerUrl, one silo and one pooled: the run supplies its own endpoint
// (here the embedded sink), so synth must accept it, and both tenants' files must be registered.
func TestLocalRunWithoutRegisterURL(t *testing.T) {
	t.Parallel() // child processes only, never this binary's jsii runtime
	if testing.Short() {
		t.Skip("starts the local emulators")
	}
	dir := t.TempDir()
	tenantsFile := filepath.Join(dir, "tenants.json")
	inbox := filepath.Join(dir, "inbox")
	for _, id := range []string{"acme", "hooli"} {
		if err := os.MkdirAll(filepath.Join(inbox, id), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{
		tenantsFile: `{"tenants": [{"id": "acme"}, {"id": "hooli", "tier": "pool"}]}`,
		filepath.Join(inbox, "acme", "orders.csv"):  "id,amount\n1,10\n2,20\n",
		filepath.Join(inbox, "hooli", "orders.csv"): "id,amount\n3,30\n",
	} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "run", "./cmd/local", "--tenants", tenantsFile, "--inbox", inbox, "--work", filepath.Join(dir, "work"), "--timeout", "5m")
	cmd.Dir = ".."
	// CI= : under CI=true synth refuses to write the stack assignment this temp tenants file lacks.
	cmd.Env = append(os.Environ(), "CI=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./cmd/local: %v\n%s", err, out)
	}
	for _, want := range []string{"tenants: silo: acme; pool default: hooli", "inbox/acme/orders.csv", "pools/default/hooli/orders.csv", "invariants: OK"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("got output without %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if (strings.Contains(line, "inbox/acme/orders.csv") || strings.Contains(line, "pools/default/hooli/orders.csv")) && strings.Contains(line, "FAILED") {
			t.Errorf("a file failed: %s", line)
		}
	}
	if n := strings.Count(string(out), "SUCCEEDED"); n != 2 {
		t.Errorf("got %d SUCCEEDED files, want 2:\n%s", n, out)
	}
}
