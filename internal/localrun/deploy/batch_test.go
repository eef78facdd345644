//go:build e2e

package deploy

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The batch synthesizer writes the assembly cdk synth writes: the same files, byte for byte, for a
// tenants file of both tiers with extra context, and a second app in the same process gets its own
// assets (never a path into the first app's assembly). A failed synth says why, once, and the next
// app still synthesizes.
func TestBatchSynthIsCDKSynth(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("CI") // the temp tenants files have no committed stack assignment
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name, "tenants.json")
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const tenants = `{"tenants": [
  {"id": "silo1", "registerUrl": "https://core.example.com/records"},
  {"id": "pooled", "tier": "pool", "registerUrl": "https://core.example.com/records"}
]}`
	extra := map[string]string{"registerDesign": "per-chunk"}
	cli, batched := filepath.Join(dir, "cli.out"), filepath.Join(dir, "batch.out")
	if err := Synth(ctx, root, write("cli", tenants), cli, extra); err != nil {
		t.Fatal(err)
	}
	b := &Batch{Bin: filepath.Join(dir, "synthbatch")}
	defer b.Close()
	// The first app of the process is another one, so a cached asset would show.
	if err := b.Synth(ctx, root, write("first", `{"tenants": [{"id": "other", "tier": "pool", "registerUrl": "https://core.example.com/x"}]}`), filepath.Join(dir, "first.out"), nil); err != nil {
		t.Fatal(err)
	}
	err = b.Synth(ctx, root, write("bad", `{"tenants": [{"id": "Bad"}]}`), filepath.Join(dir, "bad.out"), nil)
	if err == nil || !strings.Contains(err.Error(), `tenants[0].id (tenant "Bad")`) || strings.Count(err.Error(), "synth failed") != 1 {
		t.Errorf("a bad tenants file: got %v, want one synth failed naming the tenant", err)
	}
	if err := b.Synth(ctx, root, write("batch", tenants), batched, extra); err != nil {
		t.Fatal(err)
	}
	want, got := files(t, cli), files(t, batched)
	// The app writes the CLI's performance report only when its synthesis took more than 10 s a
	// stack (awscdk.AppProps.PerformanceReporting), so on a loaded machine and only there: it is
	// the machine's timing, not the assembly.
	delete(want, "performance-counters.json")
	delete(got, "performance-counters.json")
	if strings.Join(keysOf(want), "\n") != strings.Join(keysOf(got), "\n") {
		t.Fatalf("got files\n%s\nwant cdk synth's\n%s", strings.Join(keysOf(got), "\n"), strings.Join(keysOf(want), "\n"))
	}
	for name, w := range want {
		g := got[name]
		// The tenants file's path differs (cli/ and batch/), as it would between two folders.
		g = bytes.ReplaceAll(g, []byte(filepath.Join(dir, "batch")), []byte(filepath.Join(dir, "cli")))
		if !bytes.Equal(g, w) {
			t.Errorf("%s differs from cdk synth's", name)
		}
	}
	for name, g := range got {
		if bytes.Contains(g, []byte("first.out")) {
			t.Errorf("%s names the first app's assembly", name)
		}
	}
}

// files reads an assembly: each file by its path inside it, and each folder as an empty entry.
func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if rel == "tenantpipeline-build" {
				return filepath.SkipDir // the bundler's own builds, hard-linked into the assets
			}
			out[rel+"/"] = nil
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func keysOf(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
