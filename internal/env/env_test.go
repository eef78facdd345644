package env

import (
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Every bad variable is reported at once, each under its own name; good and empty optional ones
// read as their values and defaults.
func TestReaderReportsEveryProblem(t *testing.T) {
	vars := map[string]string{
		"NAME": " acme ", "COUNT": "12", "BIG": "2000", "WORD": "ten", "WAIT": "90", "LONG": "99999",
		"ON": "true", "MAYBE": "yes", "QUEUE": "sqs/queue", "TABLE": "ab", "PREFIX": "inbox",
	}
	e := NewReader(func(k string) string { return vars[k] })
	if got := e.Required("NAME"); got != "acme" {
		t.Errorf("Required: got %q, want acme (trimmed)", got)
	}
	if got := e.Optional("UNSET", "default"); got != "default" {
		t.Errorf("Optional: got %q, want the default", got)
	}
	if got := e.Number("COUNT", vars["COUNT"], 1, 100); got != 12 {
		t.Errorf("Number: got %d, want 12", got)
	}
	if got := e.Duration("WAIT", vars["WAIT"], time.Second, time.Second, time.Hour); got != 90*time.Second {
		t.Errorf("Duration: got %v, want 90s", got)
	}
	if !e.Boolean("ON") || e.Boolean("UNSET") {
		t.Error("Boolean: got ON false or UNSET true, want true and false")
	}
	if e.Err() != nil {
		t.Fatalf("got %v before any bad variable, want nil", e.Err())
	}
	e.Required("MISSING")
	e.Number("BIG", vars["BIG"], 1, 1000)
	e.Number("WORD", vars["WORD"], 1, 1000)
	e.Duration("LONG", vars["LONG"], time.Second, time.Second, time.Hour)
	_ = e.Boolean("MAYBE")
	CheckURL("QUEUE", vars["QUEUE"], e.Bad)
	CheckTableName("TABLE", vars["TABLE"], e.Bad)
	CheckPrefix("PREFIX", vars["PREFIX"], e.Bad)
	err := e.Err()
	for _, want := range []string{
		"MISSING: is required",
		"BIG: 2000 is out of range, want 1 to 1000",
		`WORD: "ten" is not a whole number`,
		"LONG: 99999 is out of range, want 1 to 3600",
		`MAYBE: "yes", want "true" or "false"`,
		`QUEUE: "sqs/queue" is not an absolute URL`,
		`TABLE: table "ab" is not a DynamoDB table name`,
		`PREFIX: "inbox" must end with '/'`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to contain %q", err, want)
		}
	}
}

// A pool's functions read the pool their tenants' keys carry: their own pool, or none (the
// earlier layout); another pool's name stops them, naming the variable.
func TestKeysPool(t *testing.T) {
	for _, tc := range []struct {
		name, keysPool, want, wantErr string
	}{
		{"the function's pool", "shared", "shared", ""},
		{"unset: the earlier layout", "", "", ""},
		{"another pool's", "other", "", `KEYS_POOL "other" is not the function's pool "shared"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{pipeline.EnvKeysPool: tc.keysPool, pipeline.EnvMetricsPool: "shared"}
			got, err := pipeline.SplitRegisterKeysPool(func(k string) string { return vars[k] })
			if tc.wantErr == "" && (err != nil || got != tc.want) || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Split or Register: got %q, %v; want %q, %q", got, err, tc.want, tc.wantErr)
			}
			r := NewReader(func(k string) string { return vars[k] })
			got = r.KeysPool("shared")
			err = r.Err()
			if tc.wantErr == "" && (err != nil || got != tc.want) || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), "KEYS_POOL")) {
				t.Errorf("controller or router: got %q, %v; want %q, an error naming KEYS_POOL: %v", got, err, tc.want, tc.wantErr != "")
			}
		})
	}
}
