package tenantpipeline

import (
	"reflect"
	"strings"
	"testing"
)

const modulePath = "github.com/example/tenantpipeline"

// An app outside this module cannot import internal packages, so no exported field or method of
// the construct's API may have an internal type (test/deploy_test.go also compiles such an app).
func TestPublicAPIHasNoInternalTypes(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(typ reflect.Type, where string)
	walk = func(typ reflect.Type, where string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map || typ.Kind() == reflect.Array {
			if typ.Kind() == reflect.Map {
				walk(typ.Key(), where+"[key]")
			}
			typ = typ.Elem()
		}
		if seen[typ] || !strings.HasPrefix(typ.PkgPath(), modulePath) {
			return
		}
		seen[typ] = true
		if strings.Contains(typ.PkgPath(), "/internal/") {
			t.Errorf("%s: got type %s of %s, want a type of a public package", where, typ, typ.PkgPath())
			return
		}
		if typ.Kind() == reflect.Struct {
			for f := range typ.Fields() {
				if f.IsExported() {
					walk(f.Type, where+"."+f.Name)
				}
			}
		}
		for _, mt := range []reflect.Type{typ, reflect.PointerTo(typ)} {
			for m := range mt.Methods() {
				for i := 1; i < m.Type.NumIn(); i++ {
					walk(m.Type.In(i), where+"."+m.Name+"(arg)")
				}
				for i := range m.Type.NumOut() {
					walk(m.Type.Out(i), where+"."+m.Name+"(result)")
				}
			}
		}
	}
	for _, v := range []any{Props{}, Tenant{}, AlarmThresholds{}, Alarms{}, TenantPipeline{}, CoreSystemProps{}, CoreSystem{}, PoolProps{}, TenantPool{}, PoolAlarms{}} {
		walk(reflect.TypeOf(v), reflect.TypeOf(v).Name())
	}
	if !seen[reflect.TypeOf(Tenant{})] {
		t.Errorf("the walk did not reach Tenant; the test is broken")
	}
}
