package localrun

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
)

// Run is the harness around the emulated account: what the account holds belongs to Cloud, and
// Run keeps to uploads, waits, reports and the sinks. Its field count is the guard that the two
// stay apart.
func TestRunKeepsToTheHarness(t *testing.T) {
	const most = 20
	for _, tc := range []struct {
		typ  reflect.Type
		most int
	}{
		{reflect.TypeFor[Run](), most},
	} {
		if got := tc.typ.NumField(); got > tc.most {
			t.Errorf("%s: got %d fields, want at most %d: the emulated account's state belongs to Cloud", tc.typ, got, tc.most)
		}
	}
}

// No source file under internal/ grows past a length a reader can hold: a file that does has
// more than one concern, and the concern it is missing a name for wants a file of its own.
func TestInternalFilesStayShort(t *testing.T) {
	const most = 800
	wd, _ := os.Getwd()
	root, err := deploy.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "internal")
	seen := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		seen++
		if n := bytes.Count(b, []byte("\n")); n > most {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s: got %d lines, want at most %d", rel, n, most)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatalf("no Go file under %s: the walk found nothing to check", dir)
	}
}
