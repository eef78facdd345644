package spec

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md's generated tenant field table")

// The markers around the generated table in docs/configuration.md.
const (
	tableBegin = "<!-- tenant fields: generated from package spec by `go test ./spec -run TestConfigurationTable -update`; edit spec/tenant.go, not this table -->"
	tableEnd   = "<!-- end of the generated tenant fields -->"
)

// TestConfigurationTable fails when docs/configuration.md's tenant field table is not the one the
// spec's declarations give: every field, its Go name, its JSON type and its default, read from
// the field's comment. -update rewrites it.
func TestConfigurationTable(t *testing.T) {
	const path = "../docs/configuration.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	begin, end := strings.Index(s, tableBegin), strings.Index(s, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no %q … %q markers", path, tableBegin, tableEnd)
	}
	want := s[:begin] + tableBegin + "\n" + fieldTable(t) + tableEnd + s[end+len(tableEnd):]
	if want == s {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the tenant field table is stale: run go test ./spec -run TestConfigurationTable -update", path)
}

// fieldTable renders the table of Tenant's fields, DynamoDB's beneath "dynamodb".
func fieldTable(t *testing.T) string {
	comments := fieldComments(t)
	var b strings.Builder
	b.WriteString("| field | Go (`tenantpipeline.Tenant`) | type | default |\n|---|---|---|---|\n")
	var rows func(rt reflect.Type, jsonPrefix, goPrefix string)
	rows = func(rt reflect.Type, jsonPrefix, goPrefix string) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fmt.Fprintf(&b, "| `%s%s` | `%s%s` | %s | %s |\n", jsonPrefix, name, goPrefix, f.Name, jsonType(f.Type), defaultOf(comments[rt.Name()+"."+f.Name]))
			if f.Type == reflect.TypeFor[*DynamoDB]() {
				rows(f.Type.Elem(), name+".", f.Name+".")
			}
		}
	}
	rows(reflect.TypeFor[Tenant](), "", "")
	return b.String()
}

// fieldComments are the doc comments of the struct fields of tenant.go, by "Type.Field".
func fieldComments(t *testing.T) map[string]string {
	f, err := parser.ParseFile(token.NewFileSet(), "tenant.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		if st, ok := ts.Type.(*ast.StructType); ok {
			for _, field := range st.Fields.List {
				for _, name := range field.Names {
					out[ts.Name.Name+"."+name.Name] = field.Doc.Text()
				}
			}
		}
		return false
	})
	return out
}

// defaultOf is the default a field's comment states: the words after "Default:" up to the end of
// their sentence, or "required".
func defaultOf(comment string) string {
	text := strings.Join(strings.Fields(comment), " ")
	_, def, ok := strings.Cut(text, "Default: ")
	if !ok {
		if strings.Contains(text, "Required") {
			return "required"
		}
		return "none"
	}
	for i := 0; i < len(def); i++ {
		if def[i] == '.' && (i+1 == len(def) || def[i+1] == ' ') {
			def = def[:i]
			break
		}
	}
	return strings.ReplaceAll(def, "|", `\|`)
}

func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		return "array of " + jsonType(t.Elem()) + "s"
	case reflect.Pointer:
		return "object"
	}
	return t.String()
}
