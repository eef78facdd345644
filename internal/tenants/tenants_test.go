package tenants

import (
	"github.com/example/tenantpipeline/spec"

	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/records"
)

func TestParseDefaults(t *testing.T) {
	f, err := Parse([]byte(`{"tenants": [{"id": "acme"}, {"id": "globex", "encoding": "cp932", "onFailure": "halt", "format": "csv"}]}`),
		Options{RegisterURL: "https://core.example.com/records"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	got := f.Tenants[0]
	want := spec.Tenant{ID: "acme", Prefix: "inbox/acme/", Format: "csv", Encoding: "utf-8", Delimiter: ",", ChunkSize: 100,
		MaxFieldBytes: 65536, OnFailure: "continue", IdempotencyKey: "object-version", RegisterURL: "https://core.example.com/records", Tier: "silo",
		OnInvalidRecord: "failFile"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
	if g := f.Tenants[1]; g.Encoding != "cp932" || g.OnFailure != "halt" || g.Prefix != "inbox/globex/" {
		t.Errorf("globex: got %+v", g)
	}
	if s := pipeline.SettingsOf(f.Tenants[1]); s.ID != "globex" || s.Encoding != "cp932" || s.ChunkSize != 100 {
		t.Errorf("Settings: got %+v", s)
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       []string // every fragment must appear in the error
	}{
		{"unknown field", `{"tenants": [{"id": "acme", "chunksize": 5}]}`, []string{`tenants[0] ("acme")`, `unknown field "chunksize"`}},
		{"unknown top-level field", `{"tenant": []}`, []string{`unknown field "tenant"`}},
		{"no tenants", `{"tenants": []}`, []string{`"tenants" is empty`}},
		{"duplicate id", `{"tenants": [{"id": "acme"}, {"id": "acme", "prefix": "in/acme2/"}]}`, []string{`tenants[1].id (tenant "acme"): duplicate of tenants[0]`}},
		{"id upper case", `{"tenants": [{"id": "Acme"}]}`, []string{`id (tenant "Acme"): "Acme" is invalid`}},
		{"id with dot", `{"tenants": [{"id": "ac.me"}]}`, []string{`id (tenant "ac.me")`}},
		{"id empty", `{"tenants": [{"id": ""}]}`, []string{`tenants[0].id: ""`}},
		{"id too long", `{"tenants": [{"id": "` + strings.Repeat("a", 33) + `"}]}`, []string{`tenants[0].id (tenant "aaaa`}},
		{"prefix without slash", `{"tenants": [{"id": "acme", "prefix": "inbox/acme"}]}`, []string{`prefix (tenant "acme"): "inbox/acme" is invalid`}},
		{"prefix leading slash", `{"tenants": [{"id": "acme", "prefix": "/inbox/acme/"}]}`, []string{`prefix (tenant "acme"): "/inbox/acme/" is invalid`}},
		{"prefix in work", `{"tenants": [{"id": "acme", "prefix": "work/acme/"}]}`, []string{`prefix (tenant "acme"): "work/acme/" overlaps "work/"`}},
		{"prefix in results", `{"tenants": [{"id": "acme", "prefix": "results/acme/"}]}`, []string{`prefix (tenant "acme"): "results/acme/" overlaps "results/"`}},
		{"prefix above quarantine", `{"tenants": [{"id": "acme", "prefix": "q/"}, {"id": "b", "prefix": "quarantine/"}]}`, []string{`prefix (tenant "b"): "quarantine/" overlaps "quarantine/"`}},
		{"overlapping prefixes", `{"tenants": [{"id": "acme", "prefix": "in/"}, {"id": "globex", "prefix": "in/globex/"}]}`,
			[]string{`prefix (tenant "globex"): "in/globex/" overlaps tenant "acme"'s prefix "in/"`}},
		{"same prefix", `{"tenants": [{"id": "a", "prefix": "in/x/"}, {"id": "b", "prefix": "in/x/"}]}`, []string{`prefix (tenant "b")`}},
		{"chunk size negative", `{"tenants": [{"id": "acme", "chunkSize": -1}]}`, []string{`chunkSize (tenant "acme"): -1 is out of range: use 1 to 1000 records, or leave it out for 100`}},
		{"chunk size too big", `{"tenants": [{"id": "acme", "chunkSize": 1001}]}`, []string{`chunkSize (tenant "acme"): 1001 is out of range`}},
		{"format", `{"tenants": [{"id": "acme", "format": "xml"}]}`, []string{`tenants[0].format (tenant "acme"): "xml" is invalid`}},
		{"encoding", `{"tenants": [{"id": "acme", "encoding": "sjis"}]}`, []string{`encoding (tenant "acme"): "sjis" is invalid: use "utf-8" or "cp932"`}},
		{"on failure", `{"tenants": [{"id": "acme", "onFailure": "stop"}]}`, []string{`onFailure (tenant "acme"): "stop" is invalid`}},
		{"idempotency key", `{"tenants": [{"id": "acme", "idempotencyKey": "etag"}]}`, []string{`idempotencyKey (tenant "acme"): "etag" is invalid`}},
		{"register url", `{"tenants": [{"id": "acme", "registerUrl": "core.example.com/x"}]}`, []string{`registerUrl (tenant "acme"): "core.example.com/x" is invalid`}},
		{"secret arn", `{"tenants": [{"id": "acme", "registerAuthSecretArn": "my-secret"}]}`, []string{`registerAuthSecretArn (tenant "acme"): "my-secret" is invalid`}},
		{"delimiter two chars", `{"tenants": [{"id": "acme", "delimiter": ";;"}]}`, []string{`delimiter (tenant "acme"): ";;" is invalid: use exactly one character`}},
		{"delimiter quote", `{"tenants": [{"id": "acme", "delimiter": "\""}]}`, []string{`delimiter (tenant "acme"): "\"" is invalid`}},
		{"delimiter cp932 cannot encode", `{"tenants": [{"id": "acme", "encoding": "cp932", "delimiter": "é"}]}`, []string{`delimiter (tenant "acme"): "é" is invalid for cp932`}},
		{"delimiter on jsonl", `{"tenants": [{"id": "acme", "format": "jsonl", "delimiter": ";"}]}`, []string{`delimiter (tenant "acme"): ";" is set, but only CSV`}},
		{"max field bytes", `{"tenants": [{"id": "acme", "maxFieldBytes": 2000000}]}`, []string{`maxFieldBytes (tenant "acme"): 2000000 is out of range`}},
		{"small-file bound too large", `{"tenants": [{"id": "acme", "smallFileBytes": 4194305}]}`,
			[]string{`smallFileBytes (tenant "acme"): 4194305 is out of range: use 1 to 4194304 bytes (4 MiB), -1 for no small-file path, or leave it out for the app's bound`}},
		{"sequence without its group", `{"tenants": [{"id": "acme", "sequence": {"pattern": "^orders-[0-9]+$"}}]}`,
			[]string{`tenants[0].sequence.pattern (tenant "acme"): "^orders-[0-9]+$" must have exactly one named group, (?P<seq>...), and no other named group`}},
		{"sequence unknown field", `{"tenants": [{"id": "acme", "sequence": {"pattern": "(?P<seq>\\d+)", "gapTimout": "5m"}}]}`,
			[]string{`gapTimout`}},
		{"sequence settle on a number", `{"tenants": [{"id": "acme", "sequence": {"pattern": "(?P<seq>\\d+)", "settle": "5s"}}]}`,
			[]string{`tenants[0].sequence.settle (tenant "acme"): is set, but only kind "name" waits to settle`}},
		{"small-file bound negative", `{"tenants": [{"id": "acme", "smallFileBytes": -2}]}`, []string{`smallFileBytes (tenant "acme"): -2 is out of range`}},
		{"every problem at once", `{"tenants": [{"id": "acme", "format": "xml", "chunkSize": 5000}, {"id": "B"}]}`,
			[]string{`format (tenant "acme")`, `chunkSize (tenant "acme")`, `id (tenant "B")`}},
		{"not json", `{"tenants": [`, []string{`line 1, column 14: JSON syntax error: unexpected end of JSON input`}},
		{"stack", `{"tenants": [{"id": "acme", "stack": "a b"}]}`, []string{`stack (tenant "acme"): "a b" is invalid`}},
		{"on invalid record", `{"tenants": [{"id": "acme", "onInvalidRecord": "skip"}]}`, []string{`onInvalidRecord (tenant "acme"): "skip" is invalid: use "failFile" or "skipRecord"`}},
		{"max invalid records under failFile", `{"tenants": [{"id": "acme", "maxInvalidRecords": 5}]}`,
			[]string{`maxInvalidRecords (tenant "acme"): 5 is set, but onInvalidRecord is "failFile"`}},
		{"max invalid records negative", `{"tenants": [{"id": "acme", "onInvalidRecord": "skipRecord", "maxInvalidRecords": -1}]}`,
			[]string{`maxInvalidRecords (tenant "acme"): -1 is out of range: use 1 to 100000 records, or leave it out for 1000`}},
		{"max invalid records too many", `{"tenants": [{"id": "acme", "onInvalidRecord": "skipRecord", "maxInvalidRecords": 100001}]}`,
			[]string{`maxInvalidRecords (tenant "acme"): 100001 is out of range`}},
		{"reject statuses without skipRecord", `{"tenants": [{"id": "acme", "rejectStatuses": [422]}]}`,
			[]string{`rejectStatuses (tenant "acme"): [422] is set, but it only has effect with "onInvalidRecord": "skipRecord"`}},
		{"reject status 408", `{"tenants": [{"id": "acme", "onInvalidRecord": "skipRecord", "rejectStatuses": [408]}]}`,
			[]string{`rejectStatuses (tenant "acme"): 408 is retried by Register`}},
		{"reject status 429", `{"tenants": [{"id": "acme", "onInvalidRecord": "skipRecord", "rejectStatuses": [422, 429]}]}`,
			[]string{`rejectStatuses (tenant "acme"): 429 is retried by Register`}},
		{"reject status 5xx", `{"tenants": [{"id": "acme", "onInvalidRecord": "skipRecord", "rejectStatuses": [500]}]}`,
			[]string{`rejectStatuses (tenant "acme"): 500 is not a 4xx status`}},
		{"reject status 2xx", `{"tenants": [{"id": "acme", "onInvalidRecord": "skipRecord", "rejectStatuses": [200]}]}`,
			[]string{`rejectStatuses (tenant "acme"): 200 is not a 4xx status`}},
		{"reject status twice", `{"tenants": [{"id": "acme", "onInvalidRecord": "skipRecord", "rejectStatuses": [422, 400, 422]}]}`,
			[]string{`rejectStatuses (tenant "acme"): 422 is listed twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json), Options{})
			if err == nil {
				t.Fatalf("got no error, want one containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestParseInvalidRecordPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       pipeline.Tenant // only the two fields
	}{
		{"default", `{"id": "acme"}`, pipeline.Tenant{Tenant: spec.Tenant{OnInvalidRecord: "failFile"}}},
		{"failFile", `{"id": "acme", "onInvalidRecord": "failFile"}`, pipeline.Tenant{Tenant: spec.Tenant{OnInvalidRecord: "failFile"}}},
		{"skipRecord, default limit", `{"id": "acme", "onInvalidRecord": "skipRecord"}`, pipeline.Tenant{Tenant: spec.Tenant{OnInvalidRecord: "skipRecord", MaxInvalidRecords: 1000}}},
		{"skipRecord, own limit", `{"id": "acme", "onInvalidRecord": "skipRecord", "maxInvalidRecords": 3}`, pipeline.Tenant{Tenant: spec.Tenant{OnInvalidRecord: "skipRecord", MaxInvalidRecords: 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(`{"tenants": [`+tc.json+`]}`), Options{RegisterURL: "https://core.example.com/records"})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			s := pipeline.SettingsOf(f.Tenants[0])
			if got := (pipeline.Tenant{Tenant: spec.Tenant{OnInvalidRecord: s.OnInvalidRecord, MaxInvalidRecords: s.MaxInvalidRecords}}); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got settings %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The rejectStatuses a tenant lists travel in its settings, so Register can tell them.
func TestSettingsRejectStatuses(t *testing.T) {
	f, err := Parse([]byte(`{"tenants": [{"id": "a", "onInvalidRecord": "skipRecord", "rejectStatuses": [422, 400]}, {"id": "b"}]}`),
		Options{RegisterURL: "https://core.example.com/records"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	for _, tc := range []struct {
		tenant int
		status int
		want   bool
	}{{0, 422, true}, {0, 400, true}, {0, 409, false}, {0, 500, false}, {1, 422, false}} {
		if got := pipeline.SettingsOf(f.Tenants[tc.tenant]).RejectsStatus(tc.status); got != tc.want {
			t.Errorf("tenant %d status %d: got %v, want %v", tc.tenant, tc.status, got, tc.want)
		}
	}
	b, err := json.Marshal(pipeline.SettingsOf(f.Tenants[0]))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"onInvalidRecord":"skipRecord","maxInvalidRecords":1000,"rejectStatuses":[400,422]`) {
		t.Errorf("got %s, want the policy and the statuses in ascending order", b)
	}
	if b, _ := json.Marshal(pipeline.SettingsOf(f.Tenants[1])); strings.Contains(string(b), "rejectStatuses") {
		t.Errorf("got %s, want no rejectStatuses for a tenant without them", b)
	}
}

// TestSettingsSmallFileBytes: a tenant's small-file bound travels in its settings, which the file
// state machine's FileSize choice reads; a tenant without one has none there (the app's bound).
func TestSettingsSmallFileBytes(t *testing.T) {
	f, err := Parse([]byte(`{"tenants": [{"id": "a", "smallFileBytes": 65536}, {"id": "b", "smallFileBytes": -1}, {"id": "c"}]}`),
		Options{RegisterURL: "https://core.example.com/records"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	for i, want := range []string{`"smallFileBytes":65536`, `"smallFileBytes":-1`, ""} {
		b, _ := json.Marshal(pipeline.SettingsOf(f.Tenants[i]))
		if got := string(b); want != "" && !strings.Contains(got, want) || want == "" && strings.Contains(got, "smallFileBytes") {
			t.Errorf("tenant %d: got settings %s, want %q", i, got, want)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct{ name, json string }{
		{"jsonl without delimiter", `{"tenants": [{"id": "acme", "format": "jsonl"}]}`},
		{"cp932 with tab", `{"tenants": [{"id": "acme", "encoding": "cp932", "delimiter": "\t"}]}`},
		{"cp932 with pipe (a trail byte of ポ)", `{"tenants": [{"id": "acme", "encoding": "cp932", "delimiter": "|"}]}`},
		{"cp932 with backslash (a trail byte of ソ)", `{"tenants": [{"id": "acme", "encoding": "cp932", "delimiter": "\\"}]}`},
		{"utf-8 with pipe", `{"tenants": [{"id": "acme", "delimiter": "|"}]}`},
		{"sibling prefixes", `{"tenants": [{"id": "a", "prefix": "in/a/"}, {"id": "ab", "prefix": "in/ab/"}]}`},
		{"every safe character", `{"tenants": [{"id": "acme", "prefix": "in/Az09!-_.*'()/acme/"}]}`},
		{"dots inside a segment", `{"tenants": [{"id": "acme", "prefix": "in/.acme../"}]}`},
		{"bounds", `{"tenants": [{"id": "a", "chunkSize": 1}, {"id": "b", "chunkSize": 1000}]}`},
		{"reject statuses", `{"tenants": [{"id": "a", "onInvalidRecord": "skipRecord", "rejectStatuses": [400, 409, 422, 499]}]}`},
		{"small-file bounds", `{"tenants": [{"id": "a", "smallFileBytes": 1}, {"id": "b", "smallFileBytes": 4194304}, {"id": "c", "smallFileBytes": -1}]}`},
		{"full", `{"tenants": [{"id": "acme", "prefix": "in/acme/", "format": "csv", "encoding": "utf-8", "delimiter": ";", "chunkSize": 50,
			"maxFieldBytes": 1024, "onFailure": "halt", "idempotencyKey": "object-version", "registerUrl": "https://core.example.com/records",
			"registerAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:core-AbCdEf"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.json), Options{RegisterURL: "https://core.example.com/records"}); err != nil {
				t.Errorf("got %v, want no error", err)
			}
		})
	}
}

func TestLoadShippedFile(t *testing.T) {
	f, err := Load(filepath.Join("..", "..", "tenants.json"), Options{})
	if err != nil {
		t.Fatalf("the shipped tenants.json must load: %v", err)
	}
	if len(f.Tenants) < 2 {
		t.Errorf("got %d sample tenants, want at least 2", len(f.Tenants))
	}
}

func TestLoadNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(p, []byte(`{"tenants": [{"id": "x", "chunkSize": 0.5}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, Options{})
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("got %v, want an error naming %s", err, p)
	}
}

// TestDelimiterRuleIsShared: tenants.json validation and the Lambdas' records.FormatOf accept and
// reject the same delimiters (they once disagreed on CP932: the tenants file refused '|' and '\',
// which the parser handles because it reads decoded text). Known answers, checked against both.
func TestDelimiterRuleIsShared(t *testing.T) {
	tests := []struct {
		delim, encoding string
		ok              bool
	}{
		{",", "cp932", true}, {"\t", "cp932", true}, {"|", "cp932", true}, {`\`, "cp932", true}, {"@", "cp932", true},
		{"ソ", "cp932", true}, {"、", "cp932", true}, {"é", "cp932", false}, {"é", "utf-8", true},
		{"|", "utf-8", true}, {"\x00", "utf-8", false}, {"\ufeff", "cp932", false}, {"\ufeff", "utf-8", false},
		{`"`, "utf-8", false}, {"\r", "cp932", false}, {"\n", "utf-8", false}, {";;", "utf-8", false}, {"\xff", "utf-8", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q in %s", tt.delim, tt.encoding), func(t *testing.T) {
			b, _ := json.Marshal(map[string]any{"tenants": []map[string]string{{"id": "acme", "encoding": tt.encoding, "delimiter": tt.delim, "registerUrl": "https://core.example.com/records"}}})
			_, err := Parse(b, Options{})
			if got := err == nil; got != tt.ok {
				t.Errorf("tenants: got accepted=%v (%v), want %v", got, err, tt.ok)
			}
			_, err = records.FormatOf(pipeline.Tenant{Tenant: spec.Tenant{Format: "csv", Encoding: tt.encoding, Delimiter: tt.delim}})
			if got := err == nil; got != tt.ok {
				t.Errorf("records: got accepted=%v (%v), want %v", got, err, tt.ok)
			}
		})
	}
}

// TestParseReportsEveryProblem: a missing registerUrl, an unknown field or a value of the wrong
// JSON type is reported beside every other problem, never instead of them.
func TestParseReportsEveryProblem(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       []string
	}{
		{"missing registerUrl beside other problems", `{"tenants": [{"id": "acme", "format": "xml"}, {"id": "b", "registerUrl": "https://core.example.com/b"}]}`,
			[]string{`registerUrl (tenant "acme"): missing`, `tenants[0].format (tenant "acme"): "xml" is invalid`}},
		{"unknown field beside other problems", `{"tenants": [{"id": "acme", "chunksize": 5, "format": "xml"}, {"id": "B"}]}`,
			[]string{`tenants[0] ("acme"): unknown field "chunksize" (did you mean "chunkSize"?)`, `tenants[0].format (tenant "acme"): "xml" is invalid`,
				`registerUrl (tenant "acme"): missing`, `id (tenant "B"): "B" is invalid`, `registerUrl (tenant "B"): missing`}},
		{"unknown top-level field beside other problems", `{"tenant": [], "tenants": [{"id": "Bad", "registerUrl": "https://core.example.com/b"}]}`,
			[]string{`unknown field "tenant" (did you mean "tenants"?)`, `id (tenant "Bad"): "Bad" is invalid`}},
		{"wrong type beside other problems", `{"tenants": [{"id": "x", "chunkSize": "5", "format": "xml", "registerUrl": "https://core.example.com/x"}]}`,
			[]string{`tenants[0] ("x"): chunkSize: got JSON string, want a whole number`, `format (tenant "x"): "xml" is invalid`}},
		{"fraction", `{"tenants": [{"id": "x", "chunkSize": 0.5}]}`,
			[]string{`chunkSize: got JSON number 0.5, want a whole number`, `registerUrl (tenant "x"): missing`}},
		{"tenant not an object", `{"tenants": [5, {"id": "Y"}]}`, []string{`tenants[0]: got JSON number, want an object`, `id (tenant "Y")`}},
		{"invalid default registerUrl", `{"tenants": [{"id": "x"}]}`, []string{`default registerUrl "ftp://x" is invalid`, `registerUrl (tenant "x"): missing`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{}
			if strings.Contains(tc.name, "default registerUrl") {
				o.RegisterURL = "ftp://x"
			}
			_, err := Parse([]byte(tc.json), o)
			if err == nil {
				t.Fatalf("got no error, want one containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestParseOneMistakeOneMessage: a value that cannot be read (a misspelt field, a nested one too,
// or one of the wrong JSON type) is one message; the checks of the field it should have set are
// skipped, and the fields after it are still read and checked. A duplicate id is one message too.
func TestParseOneMistakeOneMessage(t *testing.T) {
	const url = `"registerUrl": "https://core.example.com/r"`
	for _, tc := range []struct {
		name, json string
		want       []string // the error's lines, each by its start, in order
	}{
		{"misspelt nested field", `{"id": "acme", "dynamodb": {"tabel": "orders", "key": ["id"]}}`,
			[]string{`tenants[0] ("acme"): dynamodb: unknown field "tabel" (did you mean "table"?)`}},
		{"mis-cased nested field", `{"id": "acme", "dynamodb": {"Key": ["id"]}}`,
			[]string{`tenants[0] ("acme"): dynamodb: unknown field "Key" (did you mean "key"?)`}},
		{"fields after a bad nested field are read", `{"id": "acme", "dynamodb": {"tabel": "orders", "key": ["id"]}, "chunkSize": 5000}`,
			[]string{`tenants[0] ("acme"): dynamodb: unknown field "tabel"`, `tenants[0].chunkSize (tenant "acme"): 5000 is out of range`}},
		{"nested object of the wrong type", `{"id": "acme", "dynamodb": 5}`,
			[]string{`tenants[0] ("acme"): dynamodb: got JSON number, want an object`}},
		{"nested field of the wrong type", `{"id": "acme", "dynamodb": {"key": "id"}}`,
			[]string{`tenants[0] ("acme"): dynamodb.key: got JSON string, want an array`}},
		{"id of the wrong type", `{"id": 7, ` + url + `}`, []string{`tenants[0]: id: got JSON number, want a string`}},
		{"id of the wrong type, its problems named by position", `{"id": 7, "chunkSize": 0}, {"id": true, "chunkSize": -1}`,
			[]string{`tenants[0]: id: got JSON number, want a string`, `tenants[0].chunkSize: 0 is out of range`, `tenants[1]: id: got JSON bool, want a string`,
				`tenants[1].chunkSize: -1 is out of range`, `tenants[0].registerUrl: missing`, `tenants[1].registerUrl: missing`}},
		{"no id", `{` + url + `}`, []string{`tenants[0].id: "" is invalid`}},
		{"duplicate id", `{"id": "acme", ` + url + `}, {"id": "acme", ` + url + `}`,
			[]string{`tenants[1].id (tenant "acme"): duplicate of tenants[0]; ids must be unique`}},
		{"explicit chunkSize 0", `{"id": "acme", "chunkSize": 0, ` + url + `}`,
			[]string{`tenants[0].chunkSize (tenant "acme"): 0 is out of range: use 1 to 1000 records, or leave it out for 100`}},
		{"explicit chunkSize 0 of a tenant with other problems", `{"id": "acme", "chunkSize": 0, "format": "xml", ` + url + `}`,
			[]string{`tenants[0].chunkSize (tenant "acme"): 0 is out of range`, `tenants[0].format (tenant "acme"): "xml" is invalid`}},
		{"misspelt registerUrl", `{"id": "acme", "registerurl": "https://core.example.com/r"}`,
			[]string{`tenants[0] ("acme"): unknown field "registerurl" (did you mean "registerUrl"?)`}},
		{"two values of the wrong type", `{"id": "acme", "chunkSize": "5", "format": 5, ` + url + `}`,
			[]string{`tenants[0] ("acme"): chunkSize: got JSON string, want a whole number`, `tenants[0] ("acme"): format: got JSON number, want a string`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(`{"tenants": [`+tc.json+`]}`), Options{})
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			got := strings.Split(err.Error(), "\n")
			ok := len(got) == len(tc.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.HasPrefix(got[i], tc.want[i])
			}
			if !ok {
				t.Errorf("got %d messages:\n%s\nwant %d, starting with:\n%s", len(got), err, len(tc.want), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestParseByteOrderMark: a tenants file saved as UTF-8 with a byte order mark reads as the same
// file without one, and a syntax error after the mark is still placed by the characters a reader sees.
func TestParseByteOrderMark(t *testing.T) {
	const bom = "\xef\xbb\xbf"
	const body = `{"tenants": [{"id": "acme", "registerUrl": "https://core.example.com/r"}]}`
	want, err := Parse([]byte(body), Options{})
	if err != nil {
		t.Fatalf("Parse without a BOM: %v", err)
	}
	got, err := Parse([]byte(bom+body), Options{})
	if err != nil {
		t.Fatalf("Parse with a BOM: got %v, want no error", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with a BOM: got %+v, want %+v", got, want)
	}
	path := filepath.Join(t.TempDir(), "tenants.json")
	if err := os.WriteFile(path, []byte(bom+body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, Options{}); err != nil {
		t.Errorf("Load with a BOM: got %v, want no error", err)
	}
	if _, err := Parse([]byte(bom+`{"tenants": [`), Options{}); err == nil || !strings.HasPrefix(err.Error(), "line 1, column 14: ") {
		t.Errorf("syntax error after a BOM: got %v, want it at line 1, column 14", err)
	}
}

// TestParseSyntaxErrorPosition: a JSON syntax error names its line and column (characters, from 1),
// counted by hand for each input.
func TestParseSyntaxErrorPosition(t *testing.T) {
	for _, tc := range []struct{ name, json, want string }{
		{"trailing comma", "{\"tenants\": [\n  {\"id\": \"acme\",}\n]}", "line 2, column 17: "},
		{"missing comma", "{\"tenants\": [\n  {\"id\": \"a\"}\n  {\"id\": \"b\"}\n]}", "line 3, column 3: "},
		{"ends early", `{"tenants": [`, "line 1, column 14: "},
		{"multi-byte characters count once", `{"tenants": [{"id": "受信",,`, "line 1, column 26: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json), Options{})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got %v, want an error starting with %q", err, tc.want)
			}
		})
	}
}

// TestParseDefaultRegisterURL: tenants without registerUrl take the supplied one; a tenant's own
// registerUrl wins.
func TestParseDefaultRegisterURL(t *testing.T) {
	f, err := Parse([]byte(`{"tenants": [{"id": "a"}, {"id": "b", "registerUrl": "https://own.example.com/b"}]}`),
		Options{RegisterURL: "http://127.0.0.1:9/local"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"http://127.0.0.1:9/local", "https://own.example.com/b"} {
		if got := f.Tenants[i].RegisterURL; got != want {
			t.Errorf("tenant %s: got registerUrl %q, want %q", f.Tenants[i].ID, got, want)
		}
	}
}
