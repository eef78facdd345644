package tenants

import (
	"github.com/example/tenantpipeline/spec"
	"reflect"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
)

func TestSinkDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       pipeline.Tenant // only the sink fields are compared
		needsURL   bool
	}{
		{"record mode is left empty", `{"id": "a", "registerUrl": "https://core.example.com/r"}`,
			pipeline.Tenant{}, true},
		{"batch gets 5 MiB", `{"id": "a", "registerMode": "batch", "chunkSize": 1000, "registerUrl": "https://core.example.com/r"}`,
			pipeline.Tenant{Tenant: spec.Tenant{RegisterMode: "batch", MaxBatchBytes: 5242880}}, true},
		{"batch keeps its limit", `{"id": "a", "registerMode": "batch", "maxBatchBytes": 1024}`,
			pipeline.Tenant{Tenant: spec.Tenant{RegisterMode: "batch", MaxBatchBytes: 1024}}, true},
		{"dynamodb gets concurrency 16", `{"id": "a", "dynamodb": {"key": ["id"]}}`,
			pipeline.Tenant{Tenant: spec.Tenant{DynamoDB: &pipeline.DynamoDBSink{Key: []string{"id"}, Concurrency: 16}}}, false},
		{"dynamodb as given", `{"id": "a", "dynamodb": {"key": ["pk", "sk"], "table": "Orders.v2", "concurrency": 1}}`,
			pipeline.Tenant{Tenant: spec.Tenant{DynamoDB: &pipeline.DynamoDBSink{Key: []string{"pk", "sk"}, Table: "Orders.v2", Concurrency: 1}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(`{"tenants": [`+tc.json+`]}`), sinkOptions)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			s := pipeline.SettingsOf(f.Tenants[0])
			got := pipeline.Tenant{Tenant: spec.Tenant{RegisterMode: s.RegisterMode, MaxBatchBytes: s.MaxBatchBytes, DynamoDB: s.DynamoDB}}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v (dynamodb %+v), want %+v (dynamodb %+v)", got, got.DynamoDB, tc.want, tc.want.DynamoDB)
			}
			if n := f.Tenants[0].NeedsRegisterURL(); n != tc.needsURL {
				t.Errorf("NeedsRegisterURL: got %v, want %v", n, tc.needsURL)
			}
		})
	}
}

func TestSinkRejects(t *testing.T) {
	long := strings.Repeat("k", 256)
	for _, tc := range []struct {
		name, json string
		want       []string
	}{
		{"register mode", `{"id": "a", "registerMode": "bulk"}`, []string{`registerMode (tenant "a"): "bulk" is invalid: use "record" or "batch"`}},
		{"max batch bytes in record mode", `{"id": "a", "maxBatchBytes": 4096}`, []string{`maxBatchBytes (tenant "a"): 4096 is set, but only registerMode "batch"`}},
		{"max batch bytes too small", `{"id": "a", "registerMode": "batch", "maxBatchBytes": 1023}`, []string{`maxBatchBytes (tenant "a"): 1023 is out of range: use 1024 to 67108864 bytes`}},
		{"max batch bytes too big", `{"id": "a", "registerMode": "batch", "maxBatchBytes": 67108865}`, []string{`maxBatchBytes (tenant "a"): 67108865 is out of range`}},
		{"max batch bytes negative", `{"id": "a", "registerMode": "batch", "maxBatchBytes": -1}`, []string{`maxBatchBytes (tenant "a"): -1 is out of range`}},
		{"batch chunk size still at most 1000", `{"id": "a", "registerMode": "batch", "chunkSize": 1001}`, []string{`chunkSize (tenant "a"): 1001 is out of range`}},
		{"dynamodb no key", `{"id": "a", "dynamodb": {"key": []}}`, []string{`dynamodb.key (tenant "a"): has 0 fields: use 1 (partition key) or 2`}},
		{"dynamodb key missing", `{"id": "a", "dynamodb": {}}`, []string{`dynamodb.key (tenant "a"): has 0 fields`}},
		{"dynamodb three keys", `{"id": "a", "dynamodb": {"key": ["a", "b", "c"]}}`, []string{`dynamodb.key (tenant "a"): has 3 fields`}},
		{"dynamodb empty key", `{"id": "a", "dynamodb": {"key": [""]}}`, []string{`dynamodb.key (tenant "a"): field 1 is empty`}},
		{"dynamodb same key twice", `{"id": "a", "dynamodb": {"key": ["id", "id"]}}`, []string{`dynamodb.key (tenant "a"): "id" appears twice`}},
		{"dynamodb reserved _seq", `{"id": "a", "dynamodb": {"key": ["_seq"]}}`, []string{`dynamodb.key (tenant "a"): "_seq" is reserved`}},
		{"dynamodb reserved _meta", `{"id": "a", "dynamodb": {"key": ["id", "_meta"]}}`, []string{`dynamodb.key (tenant "a"): "_meta" is reserved`}},
		{"dynamodb key too long", `{"id": "a", "dynamodb": {"key": ["` + long + `"]}}`, []string{`dynamodb.key (tenant "a"): field 1 is 256 bytes: a key attribute name is at most 255`}},
		{"dynamodb table short", `{"id": "a", "dynamodb": {"key": ["id"], "table": "ab"}}`, []string{`dynamodb.table (tenant "a"): "ab" is invalid: use 3-255 letters`}},
		{"dynamodb table bad char", `{"id": "a", "dynamodb": {"key": ["id"], "table": "my table"}}`, []string{`dynamodb.table (tenant "a"): "my table" is invalid`}},
		{"dynamodb concurrency", `{"id": "a", "dynamodb": {"key": ["id"], "concurrency": 257}}`, []string{`dynamodb.concurrency (tenant "a"): 257 is out of range: use 1 to 256`}},
		{"dynamodb concurrency negative", `{"id": "a", "dynamodb": {"key": ["id"], "concurrency": -1}}`, []string{`dynamodb.concurrency (tenant "a"): -1 is out of range`}},
		{"dynamodb with registerUrl", `{"id": "a", "registerUrl": "https://core.example.com/r", "dynamodb": {"key": ["id"]}}`, []string{`registerUrl (tenant "a"): is set with dynamodb`}},
		{"dynamodb with registerMode", `{"id": "a", "registerMode": "batch", "dynamodb": {"key": ["id"]}}`, []string{`registerMode (tenant "a"): "batch" is set with dynamodb`}},
		{"dynamodb with secret", `{"id": "a", "registerAuthSecretArn": "arn:aws:secretsmanager:x", "dynamodb": {"key": ["id"]}}`, []string{`registerAuthSecretArn (tenant "a"): is set with dynamodb`}},
		{"dynamodb unknown field", `{"id": "a", "dynamodb": {"key": ["id"], "tabel": "x"}}`, []string{`tenants[0] ("a"): dynamodb: unknown field "tabel" (did you mean "table"?)`}},
		{"dynamodb mis-cased field", `{"id": "a", "dynamodb": {"Key": ["id"]}}`, []string{`tenants[0] ("a"): dynamodb: unknown field "Key" (did you mean "key"?)`}},
		{"dynamodb not an object", `{"id": "a", "dynamodb": ["id"]}`, []string{`tenants[0] ("a")`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(`{"tenants": [`+tc.json+`]}`), sinkOptions)
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

func TestSinkAccepts(t *testing.T) {
	for _, tc := range []struct{ name, json string }{
		{"record explicit", `{"id": "a", "registerMode": "record"}`},
		{"batch bounds", `{"id": "a", "registerMode": "batch", "maxBatchBytes": 1024}, {"id": "b", "registerMode": "batch", "maxBatchBytes": 67108864}`},
		{"batch 1000 records", `{"id": "a", "registerMode": "batch", "chunkSize": 1000}`},
		{"dynamodb without registerUrl", `{"id": "a", "dynamodb": {"key": ["id"]}}`},
		{"dynamodb two keys, table, concurrency bounds", `{"id": "a", "dynamodb": {"key": ["pk", "sk"], "table": "a_b-c.d", "concurrency": 256}}, {"id": "b", "dynamodb": {"key": ["k"], "concurrency": 1}}`},
		{"dynamodb jsonl", `{"id": "a", "format": "jsonl", "dynamodb": {"key": ["order.id"]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(`{"tenants": [`+tc.json+`]}`), sinkOptions); err != nil {
				t.Errorf("got %v, want no error", err)
			}
		})
	}
}

// sinkOptions gives HTTP tenants of these tests an endpoint, as -c registerUrl would, so that only
// the sink fields under test decide the outcome.
var sinkOptions = Options{RegisterURL: "https://core.example.com/records"}
