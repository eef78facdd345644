package spec

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// Problem is one broken rule of a tenant: the field it is about, by its JSON path ("prefix",
// "dynamodb.key"), and what is wrong with the value and what to use instead. A front end renders
// it (Render) with its own names for the fields, so one rule reads right in a tenants file and in
// a Go app.
type Problem struct {
	// Path is the JSON path of the field, inside the tenant: "smallFileBytes", "dynamodb.key".
	Path   string
	format string
	args   []any
}

// Field is an argument of a problem's message that names another field of the tenant, by its
// JSON path: each front end names it in its own words (Names.Ref).
type Field string

// Problemf is a problem of the field at path; args of type Field are names of fields.
func Problemf(path, format string, args ...any) Problem {
	return Problem{Path: path, format: format, args: args}
}

// Message is what the problem says after the field's name, with the fields it mentions named by
// ref.
func (p Problem) Message(ref func(path string) string) string {
	args := make([]any, len(p.args))
	for i, a := range p.args {
		if f, ok := a.(Field); ok {
			a = ref(string(f))
		}
		args[i] = a
	}
	return fmt.Sprintf(p.format, args...)
}

// Names is how a front end names a tenant's fields.
type Names struct {
	// Path names the field a problem is about: tenants[3].smallFileBytes, Tenant.SmallFileBytes.
	Path func(path string) string
	// Ref names another field its message mentions: smallFileBytes, Tenant.SmallFileBytes.
	Ref func(path string) string
}

// FileNames names the fields of the tenants file's entry at entry ("tenants[3]") by their JSON
// paths: a problem is about tenants[3].smallFileBytes, and its message mentions recordOrder.
func FileNames(entry string) Names {
	return Names{
		Path: func(path string) string { return entry + "." + path },
		Ref:  func(path string) string { return path },
	}
}

// GoNames names the fields of a Tenant value that a Go app wrote at expr ("Tenant",
// "PoolProps.Tenants[3]") by their Go names, found from the JSON names by reflection:
// Tenant.SmallFileBytes, Tenant.DynamoDB.Key.
func GoNames(expr string) Names {
	name := func(path string) string { return expr + "." + GoPath(path) }
	return Names{Path: name, Ref: name}
}

// Render is the problem as one line: the field, the tenant when its id is known, and the message,
// `tenants[3].smallFileBytes (tenant "acme"): 5000000 is out of range: …`.
func (p Problem) Render(n Names, id string) string {
	head := n.Path(p.Path)
	if id != "" {
		head += fmt.Sprintf(" (tenant %q)", id)
	}
	return head + ": " + p.Message(n.Ref)
}

// Error renders the problem with the tenants file's names, for a problem that meets no front end.
func (p Problem) Error() string {
	return p.Path + ": " + p.Message(func(path string) string { return path })
}

// goPaths caches GoPath's answers: the paths are few, the lookups many.
var goPaths sync.Map

// GoPath is the Go path of a Tenant field given its JSON path: "dynamodb.key" is "DynamoDB.Key".
// A path that names no field is returned as it is.
func GoPath(jsonPath string) string {
	if v, ok := goPaths.Load(jsonPath); ok {
		return v.(string)
	}
	t := reflect.TypeFor[Tenant]()
	var out []string
	for _, seg := range strings.Split(jsonPath, ".") {
		f, ok := fieldByJSON(t, seg)
		if !ok {
			return jsonPath
		}
		out = append(out, f.Name)
		t = f.Type
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
	}
	goPath := strings.Join(out, ".")
	goPaths.Store(jsonPath, goPath)
	return goPath
}

// fieldByJSON is the field of the struct type t whose JSON name is name.
func fieldByJSON(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n == name && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
