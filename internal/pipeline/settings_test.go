package pipeline

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/example/tenantpipeline/spec"
)

// The settings are one projection of the spec: every field travels as the spec has it, but for
// those that place the tenant in the app or travel beside the settings, which SettingsOf clears,
// and rejectStatuses, which it sorts.
func TestSettingsOfKeepsEveryOtherField(t *testing.T) {
	cleared := map[string]bool{"Stack": true, "Tier": true, "Pool": true, "Uploaders": true,
		"Prefix": true, "OnFailure": true, "IdempotencyKey": true, "CoreSystem": true}
	var in spec.Tenant
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("v" + v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(7 + i))
		case reflect.Float64:
			f.SetFloat(0.5 + float64(i))
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.String {
				f.Set(reflect.ValueOf([]string{"b", "a"}))
				continue
			}
			f.Set(reflect.ValueOf([]int{422, 409}))
		case reflect.Pointer:
			if f.Type() == reflect.TypeOf(&spec.Sequence{}) {
				start := int64(4)
				f.Set(reflect.ValueOf(&spec.Sequence{Pattern: "(?P<seq>[0-9]+)", Start: &start, GapTimeout: "5m", OnGap: spec.OnGapSkip}))
				continue
			}
			f.Set(reflect.ValueOf(&spec.DynamoDB{Key: []string{"pk"}, Table: "t", Concurrency: 3}))
		default:
			t.Fatalf("field %s: kind %s not covered", v.Type().Field(i).Name, f.Kind())
		}
	}
	got := reflect.ValueOf(SettingsOf(in).Tenant)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		g, w := got.Field(i), v.Field(i)
		switch {
		case cleared[name]:
			if !g.IsZero() {
				t.Errorf("%s: got %v, want it cleared", name, g)
			}
		case name == "RejectStatuses":
			if !reflect.DeepEqual(g.Interface(), []int{409, 422}) {
				t.Errorf("%s: got %v, want [409 422]", name, g)
			}
		case !reflect.DeepEqual(g.Interface(), w.Interface()):
			t.Errorf("%s: got %v, want %v", name, g, w)
		}
	}
	if s := SettingsOf(in); s.DynamoDB == in.DynamoDB || s.Sequence == in.Sequence || &s.KeyColumns[0] == &in.KeyColumns[0] {
		t.Error("the settings share the spec's sink or columns; want copies")
	}
}

// The settings' JSON keeps the names and the order the state machine's paths ($.tenant.chunkSize)
// and the golden templates rely on, the core system's settings in the place of its name.
func TestSettingsJSON(t *testing.T) {
	s := SettingsOf(spec.Tenant{ID: "acme", Prefix: "inbox/acme/", Format: "csv", Encoding: "utf-8", Delimiter: ",", ChunkSize: 100,
		MaxFieldBytes: 65536, OnFailure: "halt", RegisterURL: "https://core.example.com/r", CoreSystem: "core", Weight: 2,
		OnInvalidRecord: "skipRecord", MaxInvalidRecords: 10, RejectStatuses: []int{422, 409}, RecordOrder: "key", KeyColumns: []string{"c"},
		MaxRecordsInFlight: 4, SmallFileBytes: -1})
	s.CoreSystem = &CoreSystem{Name: "core", MaxRunningFiles: 4, Adaptive: true}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"acme","format":"csv","encoding":"utf-8","delimiter":",","chunkSize":100,"maxFieldBytes":65536,"registerUrl":"https://core.example.com/r",` +
		`"coreSystem":{"name":"core","maxRunningFiles":4,"adaptive":true,"table":""},"weight":2,"onInvalidRecord":"skipRecord","maxInvalidRecords":10,` +
		`"rejectStatuses":[409,422],"recordOrder":"key","keyColumns":["c"],"maxRecordsInFlight":4,"smallFileBytes":-1}`
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
	var back Tenant
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("round trip: got %+v, want %+v", back, s)
	}
	if b, _ := json.Marshal(SettingsOf(spec.Tenant{ID: "a"})); string(b) != `{"id":"a"}` {
		t.Errorf("without a core system: got %s", b)
	}
}
