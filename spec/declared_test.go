package spec

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A tenant's fields are declared once: of every non-test Go file of the module, only spec.Tenant
// declares a struct field named like one of them. A second struct with such a field is a copy that
// a converter would have to keep in step, which is how a field got lost before.
func TestTenantFieldsDeclaredOnce(t *testing.T) {
	watched := []string{"SmallFileBytes", "RecordOrder", "KeyColumns"}
	found := map[string][]string{}
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "cdk.out", ".build", ".git", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, field := range st.Fields.List {
				for _, name := range field.Names {
					if slices.Contains(watched, name.Name) {
						rel, _ := filepath.Rel(root, path)
						found[name.Name] = append(found[name.Name], f.Name.Name+"."+ts.Name.Name+" ("+filepath.ToSlash(rel)+")")
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range watched {
		if got, want := found[name], []string{"spec.Tenant (spec/tenant.go)"}; !slices.Equal(got, want) {
			t.Errorf("field %s: declared by %v, want only %v", name, got, want)
		}
	}
}
