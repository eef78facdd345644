package stacks

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/example/tenantpipeline/constructs/tenantpipeline"
	"github.com/example/tenantpipeline/internal/tenants"
)

// appOnlyFields are tenants-file fields that configure the app, not the pipeline: they have no
// counterpart in the construct's Tenant (the app picks the construct, TenantPipeline or TenantPool, by tier;
// a silo tenant's uploaders become Props.Uploaders, principals rather than ARNs).
var appOnlyFields = map[string]bool{"Stack": true, "Tier": true, "Pool": true, "Uploaders": true}

// Every field of a tenants-file entry reaches the construct's public Tenant, with its value.
func TestPipelineTenantCopiesEveryField(t *testing.T) {
	var in tenants.Tenant
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(fmt.Sprintf("value-%d", i))
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(1000 + i))
		case reflect.Float64:
			f.SetFloat(0.5 + float64(i))
		case reflect.Slice: // rejectStatuses, uploaders
			if f.Type().Elem().Kind() == reflect.String {
				f.Set(reflect.ValueOf([]string{fmt.Sprintf("value-%d", i)}))
				continue
			}
			f.Set(reflect.ValueOf([]int{400 + i%100}))
		case reflect.Pointer:
			// The sink settings: every field set, compared below by their printed values, since the two
			// packages' struct types differ.
			f.Set(reflect.ValueOf(&tenants.DynamoDB{Key: []string{"pk", "sk"}, Table: fmt.Sprintf("table-%d", i), Concurrency: 1000 + i}))
		default:
			t.Fatalf("field %s: kind %s not covered by this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	// The core system is the app's construct of the name the entry gives.
	core := &tenantpipeline.CoreSystem{Props: tenantpipeline.CoreSystemProps{Name: in.CoreSystem}}
	pt := pipelineTenant(in, map[string]*tenantpipeline.CoreSystem{in.CoreSystem: core, "other": {}})
	if pt.CoreSystem != core {
		t.Errorf("CoreSystem: got %p, want the app's construct %p of core system %q", pt.CoreSystem, core, in.CoreSystem)
	}
	out := reflect.ValueOf(pt)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if appOnlyFields[name] || name == "CoreSystem" {
			continue
		}
		got := out.FieldByName(name)
		if !got.IsValid() {
			t.Errorf("tenantpipeline.Tenant has no field %s: add it, or list it in appOnlyFields", name)
			continue
		}
		// %+v of the value pointed to: the two packages' sink types differ but share field names.
		if g, w := fmt.Sprintf("%+v", reflect.Indirect(got)), fmt.Sprintf("%+v", reflect.Indirect(v.Field(i))); g != w {
			t.Errorf("%s: got %s, want %s", name, g, w)
		}
	}
	if n, m := out.NumField(), v.NumField()-len(appOnlyFields); n != m {
		t.Errorf("got %d fields in tenantpipeline.Tenant, want %d (one per pipeline field of the tenants file)", n, m)
	}
}
