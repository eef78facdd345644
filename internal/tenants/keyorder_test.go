package tenants

import (
	"github.com/example/tenantpipeline/spec"
	"reflect"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// TestKeyOrderSettings: the key order fields travel, defaulted, in a silo and a pooled tenant's
// settings, and a core system's maxRequestsInFlight in its settings; a file-order tenant's
// settings are as before.
func TestKeyOrderSettings(t *testing.T) {
	f, err := Parse([]byte(`{
		"coreSystems": {"ledger": {"maxRunningFiles": 4, "maxRequestsInFlight": 32}, "crm": {"maxRunningFiles": 3}},
		"tenants": [
			{"id": "silo", "recordOrder": "key", "keyColumns": ["customer", "region"], "coreSystem": "ledger"},
			{"id": "pooled", "tier": "pool", "recordOrder": "key", "keyColumns": ["customer"], "maxRecordsInFlight": 64, "coreSystem": "crm"},
			{"id": "plain"},
			{"id": "explicit", "recordOrder": "file"}
		]}`), sinkOptions)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	silo, pooled, plain, explicit := pipeline.SettingsOf(f.Tenants[0]), pipeline.SettingsOf(f.Tenants[1]), pipeline.SettingsOf(f.Tenants[2]), pipeline.SettingsOf(f.Tenants[3])
	checks := []struct {
		what      string
		got, want any
	}{
		{"silo recordOrder", silo.RecordOrder, pipeline.RecordOrderKey},
		{"silo keyColumns", silo.KeyColumns, []string{"customer", "region"}},
		{"silo maxRecordsInFlight defaulted", silo.MaxRecordsInFlight, pipeline.DefaultMaxRecordsInFlight},
		{"pooled recordOrder", pooled.RecordOrder, pipeline.RecordOrderKey},
		{"pooled keyColumns", pooled.KeyColumns, []string{"customer"}},
		{"pooled maxRecordsInFlight", pooled.MaxRecordsInFlight, 64},
		{"plain settings unchanged", plain, pipeline.Tenant{Tenant: spec.Tenant{ID: "plain", Format: "csv", Encoding: "utf-8", Delimiter: ",", ChunkSize: 100, MaxFieldBytes: pipeline.DefaultMaxFieldBytes, RegisterURL: sinkOptions.RegisterURL, OnInvalidRecord: pipeline.OnInvalidFailFile}}},
		{"explicit file order", explicit.RecordOrder, pipeline.RecordOrderFile},
		{"explicit file order in flight", explicit.MaxRecordsInFlight, 0},
		{"ledger maxRequestsInFlight", f.CoreSystemSettings("ledger").MaxRequestsInFlight, 32},
		{"crm maxRequestsInFlight left at 0 (maxRunningFiles)", f.CoreSystemSettings("crm").MaxRequestsInFlight, 0},
		{"crm requests in flight", f.CoreSystemSettings("crm").RequestsInFlight(), 3},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.what, c.got, c.want)
		}
	}
}

// TestKeyOrderRejects: each key order mistake is refused with one message naming the field.
func TestKeyOrderRejects(t *testing.T) {
	const url = `"registerUrl": "https://core.example.com/r"`
	for _, tc := range []struct {
		name, json string
		want       string
	}{
		{"unknown recordOrder", `{"id": "a", "recordOrder": "customer"}`,
			`tenants[0].recordOrder (tenant "a"): "customer" is invalid: use "file" (one record at a time, in file order: the default) or "key" (a key's records in file order, several keys at once, with keyColumns)`},
		{"key without keyColumns", `{"id": "a", "recordOrder": "key"}`,
			`tenants[0].keyColumns (tenant "a"): is missing: recordOrder "key" needs the columns whose values make a record's key (CSV header names, or JSON Lines fields), e.g. ["customerId"]`},
		{"key with empty keyColumns", `{"id": "a", "recordOrder": "key", "keyColumns": []}`,
			`tenants[0].keyColumns (tenant "a"): is missing: recordOrder "key" needs the columns`},
		{"empty column", `{"id": "a", "recordOrder": "key", "keyColumns": ["customer", " "]}`,
			`tenants[0].keyColumns (tenant "a"): column 2 is empty: name a CSV header column or a JSON Lines field`},
		{"NUL in a column", `{"id": "a", "recordOrder": "key", "keyColumns": ["cust\u0000omer"]}`,
			`tenants[0].keyColumns (tenant "a"): column 1 holds a NUL character, which no header name has`},
		{"duplicate column", `{"id": "a", "recordOrder": "key", "keyColumns": ["customer", "region", "customer"]}`,
			`tenants[0].keyColumns (tenant "a"): "customer" appears twice: list each column once`},
		{"keyColumns without key order", `{"id": "a", "keyColumns": ["customer"]}`,
			`tenants[0].keyColumns (tenant "a"): ["customer"] is set, but recordOrder is "file": only recordOrder "key" reads a record's key; set recordOrder to "key", or leave keyColumns out`},
		{"keyColumns with file order", `{"id": "a", "recordOrder": "file", "keyColumns": ["customer"]}`,
			`tenants[0].keyColumns (tenant "a"): ["customer"] is set, but recordOrder is "file"`},
		{"maxRecordsInFlight without key order", `{"id": "a", "maxRecordsInFlight": 4}`,
			`tenants[0].maxRecordsInFlight (tenant "a"): 4 is set, but recordOrder is "file", which sends one record at a time; set recordOrder to "key", or leave maxRecordsInFlight out`},
		{"maxRecordsInFlight too many", `{"id": "a", "recordOrder": "key", "keyColumns": ["c"], "maxRecordsInFlight": 65}`,
			`tenants[0].maxRecordsInFlight (tenant "a"): 65 is out of range: use 1 to 64 requests in flight per file, or leave it out for 8`},
		{"maxRecordsInFlight negative", `{"id": "a", "recordOrder": "key", "keyColumns": ["c"], "maxRecordsInFlight": -1}`,
			`tenants[0].maxRecordsInFlight (tenant "a"): -1 is out of range: use 1 to 64`},
		{"maxRecordsInFlight zero", `{"id": "a", "recordOrder": "key", "keyColumns": ["c"], "maxRecordsInFlight": 0}`,
			`tenants[0].maxRecordsInFlight (tenant "a"): 0 is out of range: use 1 to 64 requests in flight per file, or leave it out for 8`},
		{"key with batch mode", `{"id": "a", "recordOrder": "key", "keyColumns": ["c"], "registerMode": "batch"}`,
			`tenants[0].recordOrder (tenant "a"): "key" is set with registerMode "batch": batch mode sends a chunk's records in one request, in file order, so it has no key order; use registerMode "record", or leave recordOrder out`},
		{"key with the dynamodb sink", `{"id": "a", "recordOrder": "key", "keyColumns": ["c"], "dynamodb": {"key": ["id"]}}`,
			`tenants[0].recordOrder (tenant "a"): "key" is set with dynamodb: the DynamoDB sink orders its writes by its own key; remove recordOrder or dynamodb`},
		{"keyColumns not strings", `{"id": "a", "recordOrder": "key", "keyColumns": [1]}`,
			`tenants[0] ("a"): keyColumns: got JSON number, want a string`},
		{"misspelt recordOrder", `{"id": "a", "recordorder": "key"}`,
			`tenants[0] ("a"): unknown field "recordorder" (did you mean "recordOrder"?)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := tc.json
			if !strings.Contains(doc, "dynamodb") {
				doc = strings.Replace(doc, "{", "{"+url+", ", 1)
			}
			_, err := Parse([]byte(`{"tenants": [`+doc+`]}`), Options{})
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			if got := err.Error(); !strings.HasPrefix(got, tc.want) || strings.Contains(got, "\n") {
				t.Errorf("got\n%v\nwant one message starting %q", got, tc.want)
			}
		})
	}
}

// TestRequestsInFlightRejects: a core system's maxRequestsInFlight below its maxRunningFiles could
// not be honoured, and one over the bound is a typo.
func TestRequestsInFlightRejects(t *testing.T) {
	for _, tc := range []struct {
		name, core string
		want       string
	}{
		{"below maxRunningFiles", `{"maxRunningFiles": 10, "maxRequestsInFlight": 4}`,
			`coreSystems.ledger.maxRequestsInFlight 4 is below coreSystems.ledger.maxRunningFiles 10: each running file sends at least one request, so 10 running files could not keep within 4; raise it to at least 10, or leave it out for 10 (one request per running file)`},
		{"negative", `{"maxRunningFiles": 2, "maxRequestsInFlight": -1}`,
			`coreSystems.ledger.maxRequestsInFlight -1 is below coreSystems.ledger.maxRunningFiles 2`},
		{"over the bound", `{"maxRunningFiles": 10, "maxRequestsInFlight": 10001}`,
			`coreSystems.ledger.maxRequestsInFlight 10001 is over 10000, a bound against typos (10,000 requests in flight at 10 ms each is a million records a second): use 10 to 10000, or leave it out for coreSystems.ledger.maxRunningFiles`},
		{"zero", `{"maxRunningFiles": 10, "maxRequestsInFlight": 0}`,
			`coreSystems.ledger.maxRequestsInFlight 0 must be at least maxRunningFiles, or left out for maxRunningFiles (one request per running file)`},
		{"not a number", `{"maxRunningFiles": 10, "maxRequestsInFlight": "8"}`,
			`coreSystems.ledger: maxRequestsInFlight: got JSON string, want a whole number`},
		{"with an invalid maxRunningFiles, only its own message", `{"maxRunningFiles": 0, "maxRequestsInFlight": 5}`,
			`coreSystems.ledger.maxRunningFiles 0 must be 1 to 1000`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(`{"coreSystems": {"ledger": `+tc.core+`}, "tenants": [{"id": "a", "coreSystem": "ledger"}]}`), sinkOptions)
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			if got := err.Error(); !strings.HasPrefix(got, tc.want) || strings.Contains(got, "\n") {
				t.Errorf("got\n%v\nwant one message starting %q", got, tc.want)
			}
		})
	}
}

func TestKeyOrderAccepts(t *testing.T) {
	for _, tc := range []struct{ name, json string }{
		{"key, defaults", `{"id": "a", "recordOrder": "key", "keyColumns": ["customer"]}`},
		{"key, bounds", `{"id": "a", "recordOrder": "key", "keyColumns": ["c", "d"], "maxRecordsInFlight": 1}, {"id": "b", "recordOrder": "key", "keyColumns": ["c"], "maxRecordsInFlight": 64}`},
		{"key, jsonl, skipRecord", `{"id": "a", "format": "jsonl", "recordOrder": "key", "keyColumns": ["order.customer"], "onInvalidRecord": "skipRecord"}`},
		{"file explicit", `{"id": "a", "recordOrder": "file"}`},
		{"key, record mode explicit", `{"id": "a", "recordOrder": "key", "keyColumns": ["c"], "registerMode": "record"}`},
		{"requests in flight at the bounds", `{"id": "a", "coreSystem": "one"}, {"id": "b", "coreSystem": "two"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"coreSystems": {"one": {"maxRunningFiles": 7, "maxRequestsInFlight": 7}, "two": {"maxRunningFiles": 1000, "maxRequestsInFlight": 10000}}, "tenants": [` + tc.json + `]}`
			if !strings.Contains(tc.json, "coreSystem") {
				doc = `{"tenants": [` + tc.json + `]}`
			}
			if _, err := Parse([]byte(doc), sinkOptions); err != nil {
				t.Errorf("got %v, want no error", err)
			}
		})
	}
}
