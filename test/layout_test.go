package test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The repository's shape is part of what a newcomer reads: README stays a first page, its Layout
// names every package, the Lambdas' main packages are wiring only, and the construct library never
// ends the process of the app that imports it. These tests hold that shape.

const readmeMaxLines = 400

func TestReadmeIsAFirstPage(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, want at most %d: move reference text to a docs/ page", n, readmeMaxLines)
	}
}

func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	layout := readmeLayout(t, string(b))
	for name := range layout {
		if _, err := os.Stat(filepath.Join("..", name)); err != nil {
			t.Errorf("README's Layout names %s, which does not exist", name)
		}
	}
	for _, dir := range goPackageDirs(t, "..") {
		if !layout[dir] {
			t.Errorf("package %s is not in README's Layout", dir)
		}
	}
}

// readmeLayout returns the first word of each line of the code block under "## Layout", trailing
// slash removed.
func readmeLayout(t *testing.T, readme string) map[string]bool {
	t.Helper()
	_, after, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		t.Fatal(`README.md has no "## Layout" section`)
	}
	_, block, ok := strings.Cut(after, "```\n")
	if !ok {
		t.Fatal("README's Layout has no code block")
	}
	block, _, _ = strings.Cut(block, "```")
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			names[strings.TrimSuffix(f[0], "/")] = true
		}
	}
	return names
}

// goPackageDirs lists the directories, relative to root, that hold a non-test Go file of this
// module (testdata, node_modules and build output left out).
func goPackageDirs(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", "cdk.out", ".build", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		if rel != "." && !seen[rel] {
			seen[rel] = true
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 10 {
		t.Fatalf("found %d package directories, want the module's (walked from %s)", len(dirs), root)
	}
	return dirs
}

const lambdaMainMaxLines = 150

func TestLambdaDirectoriesHoldOnlyWiring(t *testing.T) {
	dirs, err := os.ReadDir("../lambdas")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		entries, err := os.ReadDir(filepath.Join("../lambdas", d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "main.go" && e.Name() != "main_test.go" {
				t.Errorf("lambdas/%s/%s: a Lambda's directory holds only main.go (and main_test.go); move logic to internal/<role>", d.Name(), e.Name())
			}
		}
		b, err := os.ReadFile(filepath.Join("../lambdas", d.Name(), "main.go"))
		if err != nil {
			t.Errorf("lambdas/%s: %v", d.Name(), err)
			continue
		}
		if n := strings.Count(string(b), "\n"); n > lambdaMainMaxLines {
			t.Errorf("lambdas/%s/main.go has %d lines, want at most %d (configuration and wiring only)", d.Name(), n, lambdaMainMaxLines)
		}
	}
}

// TestConstructsNeverEndTheProcess: a library imported into someone's CDK app returns its errors;
// it never calls os.Exit and never imports a test package.
func TestConstructsNeverEndTheProcess(t *testing.T) {
	banned := regexp.MustCompile(`^(testing|testing/.*|github\.com/stretchr/.*)$`)
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir("../constructs", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		files++
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if banned.MatchString(p) {
				t.Errorf("%s imports %q in non-test code", path, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && sel.Sel.Name == "Exit" {
					t.Errorf("%s: os.Exit in the construct library (return the error instead)", fset.Position(sel.Pos()))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("found no construct sources")
	}
}

// TestDocsLinksResolve: every relative link in README and docs/ names a file that exists, so a
// page moved or renamed cannot leave a dead link behind.
func TestDocsLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, m[1])
			}
		}
	}
}
