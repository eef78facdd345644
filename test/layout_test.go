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

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/internal/stacks"
	"github.com/example/tenantpipeline/internal/tenants"
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

// TestCommentsNameLiveCode: a comment points where the code is. The Lambdas' logic lives in
// internal/<role>, so a comment names no file of lambdas/<fn>/ but main.go and no identifier of a
// lambdas/<fn> package; and a declaration's doc comment that opens with an identifier opens with
// the declaration's own name, not one it had before a rename or one of the code above it.
func TestCommentsNameLiveCode(t *testing.T) {
	// Known, in files another change rewrites: remove an entry once its comment is fixed.
	known := map[string]bool{}
	oldPath := regexp.MustCompile(`lambdas/(?:controller|split|register)(?:/[\w.]+|\.\w+|'s|, \w+\.go)`)
	hump := regexp.MustCompile(`[a-z0-9][A-Z]`)
	ident := regexp.MustCompile(`^[A-Za-z_]\w*$`)
	var problems []string
	report := func(file, what string) {
		if !known[file+": "+what] {
			problems = append(problems, file+": "+what)
		}
	}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel("..", path)
		rel = filepath.ToSlash(rel)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, cg := range f.Comments {
			for _, m := range oldPath.FindAllString(cg.Text(), -1) {
				if m != "lambdas/controller/main.go" && m != "lambdas/split/main.go" && m != "lambdas/register/main.go" {
					report(rel, m)
				}
			}
		}
		checkDoc := func(doc *ast.CommentGroup, name string) {
			if doc == nil || name == "_" {
				return
			}
			words := strings.Fields(doc.Text())
			if len(words) == 0 {
				return
			}
			first := strings.TrimRight(words[0], ",.:;")
			if first != name && ident.MatchString(first) && (strings.EqualFold(first, name) || hump.MatchString(first)) {
				report(rel, first+" above "+name)
			}
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if n := decl.Name.Name; !strings.HasPrefix(n, "Test") && !strings.HasPrefix(n, "Benchmark") && !strings.HasPrefix(n, "Example") && !strings.HasPrefix(n, "Fuzz") {
					checkDoc(decl.Doc, n)
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					doc := decl.Doc
					if len(decl.Specs) > 1 {
						doc = nil
					}
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						checkDoc(cmpDoc(spec.Doc, doc), spec.Name.Name)
					case *ast.ValueSpec:
						if len(spec.Names) == 1 {
							checkDoc(cmpDoc(spec.Doc, doc), spec.Names[0].Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: the comment names code that is not there; point it at internal/<role> or the declaration it sits on", p)
	}
}

// cmpDoc is a spec's own doc comment, else its declaration's.
func cmpDoc(own, decl *ast.CommentGroup) *ast.CommentGroup {
	if own != nil {
		return own
	}
	return decl
}

// TestConstructsNeverEndTheProcess: a library imported into someone's CDK app returns its errors;
// it never imports a test package, and calls os.Exit in one place only: answer, which ends a synth
// that CDK's own validation failure would end with a goroutine dump (TestOwnAppFailsAsCDKDoes).
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
		for _, decl := range f.Decls {
			fn, _ := decl.(*ast.FuncDecl)
			ast.Inspect(decl, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && sel.Sel.Name == "Exit" &&
						(fn == nil || fn.Name.Name != "answer" || filepath.Base(path) != "errors.go") {
						t.Errorf("%s: os.Exit in the construct library (return the error instead)", fset.Position(sel.Pos()))
					}
				}
				return true
			})
		}
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

// TestDocsFiguresAgree: a figure README.md and docs/ both give is the code's, in each place; and
// what docs once said wrong stays fixed (the admission table's encryption, the redrive's resend).
func TestDocsFiguresAgree(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	n := func(v int) string { return regexp.QuoteMeta(strconv.Itoa(v)) }
	thousands := func(v int) string { // 1000 as 1000 or 1,000
		s := strconv.Itoa(v)
		if len(s) > 3 {
			return "(?:" + s + "|" + s[:len(s)-3] + "," + s[len(s)-3:] + ")"
		}
		return s
	}
	cases := []struct {
		name, file string
		want       string // a regular expression the file must match
	}{
		{"chunkSize default and range", "README.md", "`chunkSize` \\| `" + n(pipeline.DefaultChunkSize) + "` \\| records per chunk, 1–" + thousands(pipeline.MaxChunkSize)},
		// docs/configuration.md's first table is generated from the spec's declarations; its
		// defaults are the godoc's words, so they are checked against the code here too.
		{"chunkSize default", "docs/configuration.md", "`chunkSize` \\| `ChunkSize` \\| integer \\| " + n(pipeline.DefaultChunkSize) + " when left out"},
		{"chunkSize range", "docs/configuration.md", "`chunkSize` \\| records per Register task, 1–" + thousands(pipeline.MaxChunkSize)},
		{"maxInvalidRecords default", "README.md", "`failFile`; " + thousands(pipeline.DefaultMaxInvalidRecords) + " \\|"},
		{"maxInvalidRecords default", "docs/configuration.md", "`maxInvalidRecords` \\| `MaxInvalidRecords` \\| integer \\| " + thousands(pipeline.DefaultMaxInvalidRecords) + " under skipRecord"},
		{"maxInvalidRecords range", "docs/configuration.md", "`maxInvalidRecords` \\| `skipRecord` only, 1–" + thousands(pipeline.MaxMaxInvalidRecords)},
		{"maxBatchBytes default", "README.md", "`record`; " + n(pipeline.DefaultMaxBatchBytes>>20) + " MiB"},
		{"maxBatchBytes default", "docs/configuration.md", "`maxBatchBytes` \\| `MaxBatchBytes` \\| integer \\| " + n(pipeline.DefaultMaxBatchBytes>>20) + " MiB in batch mode"},
		{"maxRecordsInFlight default and range", "README.md", "`file`; none; `" + n(pipeline.DefaultMaxRecordsInFlight) + "` \\|.* up to " + n(pipeline.MinMaxRecordsInFlight) + "–" + n(pipeline.MaxMaxRecordsInFlight)},
		{"maxRecordsInFlight default", "docs/configuration.md", "`maxRecordsInFlight` \\| `MaxRecordsInFlight` \\| integer \\| " + n(pipeline.DefaultMaxRecordsInFlight) + " under \"key\""},
		{"maxRecordsInFlight range", "docs/configuration.md", "`maxRecordsInFlight` \\| .*, " + n(pipeline.MinMaxRecordsInFlight) + "–" + n(pipeline.MaxMaxRecordsInFlight)},
		{"weight default and range", "README.md", "none; `" + n(pipeline.DefaultWeight) + "` \\| .*its share \\(" + n(pipeline.MinWeight) + "–" + n(pipeline.MaxWeight) + "\\)"},
		{"weight default", "docs/configuration.md", "`weight` \\| `Weight` \\| integer \\| " + n(pipeline.DefaultWeight) + " \\(left at 0\\)"},
		{"weight range", "docs/configuration.md", "`weight` \\| " + n(pipeline.MinWeight) + "–" + n(pipeline.MaxWeight)},
		{"pool maximumConcurrency", "README.md", "`maximumConcurrency` \\(" + n(tenants.DefaultPoolMaximumConcurrency) + ":"},
		{"pool maximumConcurrency", "docs/configuration.md", "`maximumConcurrency` \\| `" + n(tenants.DefaultPoolMaximumConcurrency) + "` \\| " + n(tenants.MinPoolMaximumConcurrency) + "–" + thousands(tenants.MaxPoolMaximumConcurrency)},
		{"pool maxRunningFiles", "README.md", "`maxRunningFiles` \\(" + n(tenants.DefaultPoolMaxRunningFiles) + ":"},
		{"pool maxRunningFiles", "docs/configuration.md", "`maxRunningFiles` \\| `" + n(tenants.DefaultPoolMaxRunningFiles) + "` \\| 1–" + thousands(tenants.MaxRunningFiles)},
		{"pool intakeGroups", "README.md", "`intakeGroups` \\(" + n(tenants.DefaultPoolIntakeGroups) + "\\)"},
		{"pool intakeGroups", "docs/configuration.md", "`intakeGroups` \\| `" + n(tenants.DefaultPoolIntakeGroups) + "` \\| 1–" + n(tenants.MaxPoolIntakeGroups)},
		{"pool maxQueuedFilesPerTenant", "README.md", "`maxQueuedFilesPerTenant` \\(" + n(schema.DefaultMaxQueued) + "\\)"},
		{"pool maxQueuedFilesPerTenant", "docs/configuration.md", "`maxQueuedFilesPerTenant` \\| `" + n(schema.DefaultMaxQueued) + "` \\|"},
		{"small-file bound default", "README.md", "`SmallFileBytes`, " + n(pipeline.DefaultSmallFileBytes>>20) + " MiB"},
		{"small-file bound default", "docs/configuration.md", "`smallFileBytes` \\| `" + n(pipeline.DefaultSmallFileBytes) + "` \\(" + n(pipeline.DefaultSmallFileBytes>>20) + " MiB\\)"},
		{"tenants per stack", "docs/configuration.md", "`tenantsPerStack` \\| `10` \\| room per silo stack for new tenants, 1–" + n(stacks.MaxTenantsPerStack)},
		{"tenants per stack", "docs/quotas-and-cost.md", n(stacks.MaxTenantsPerStack) + " tenants per stack at most"},
		// With a top-level encryption the admission tables take the app's key (encryption.go).
		{"admission table encryption", "docs/configuration.md", "An admission table has [^.]*AWS-managed encryption, or the app's key with a\\s+top-level `encryption`"},
		// A redrive resumes the failed segment at its progress: it re-sends at most the failed
		// invocation's records, not the segment's from its first chunk.
		{"halt redrive resumes at the progress", "docs/controller.md", "Register\\s+resumes that segment at the progress it kept in the work bucket"},
		{"redrive resumes at the progress", "docs/operations.md", "A redrive resumes at\\s+the failed segment, at the progress Register kept for it"},
	}
	for _, c := range cases {
		t.Run(c.file+": "+c.name, func(t *testing.T) {
			if !regexp.MustCompile(c.want).MatchString(read(c.file)) {
				t.Errorf("got no match of %q in %s: the figure there is not the code's, or the text changed; fix the wrong copy", c.want, c.file)
			}
		})
	}
	if strings.Contains(read("docs/controller.md"), "registered again from its first chunk") {
		t.Error("docs/controller.md: got a redrive that registers the failed segment again from its first chunk, want the resume at the segment's progress")
	}
}
