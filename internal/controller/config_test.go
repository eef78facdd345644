package controller

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/testfake"
)

func TestConfigFromEnv(t *testing.T) {
	cfg := mustConfig(t, map[string]string{
		pipeline.EnvOnFailure:              "",
		pipeline.EnvIdempotencyKey:         "",
		pipeline.EnvHaltWaitSeconds:        "",
		pipeline.EnvFirstWaitMillis:        "",
		pipeline.EnvPollBudgetSeconds:      "",
		pipeline.EnvRegisterTimeoutSeconds: "",
		pipeline.EnvWakeEvents:             "",
		pipeline.EnvSafetyNetSeconds:       "",
	})
	checks := []struct {
		what      string
		got, want any
	}{
		{"tenant id", cfg.Tenant.ID, "acme"},
		{"tenant chunk size", cfg.Tenant.ChunkSize, 100},
		{"on failure default", cfg.OnFailure, pipeline.OnFailureContinue},
		{"idempotency key default", cfg.IdempotencyKey, pipeline.IdempotencyEventID},
		{"max wait", cfg.MaxWait, time.Minute},
		{"halt wait default", cfg.HaltWait, 5 * time.Minute},
		{"first wait default", cfg.FirstWait, time.Second},
		{"poll budget default", cfg.PollBudget, 10 * time.Second},
		{"metrics namespace default", cfg.MetricsNamespace, pipeline.DefaultMetricsNamespace},
		{"execution ARN", cfg.ExecutionARN("x"), testExecPrefix + "x"},
		// Unset, a stopped file waits as long as any Lambda invocation can run: Lambda's maximum
		// timeout, 900 s (https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html).
		{"register timeout default", cfg.RegisterTimeout, 900 * time.Second},
		{"segment state machine", cfg.SegmentStateMachineARN, testSegmentSM},
		{"segment execution prefix", cfg.segmentExecutionPrefix, testSegPrefix},
		// Wake-up events are off unless the construct's rule is there; the safety net is 5 minutes.
		{"wake events default", cfg.WakeEvents, false},
		{"safety net default", cfg.SafetyNet, 5 * time.Minute},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
}

// Every invalid variable is named in the error.
func TestConfigFromEnvRejects(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"missing state machine", map[string]string{pipeline.EnvStateMachineARN: ""}, []string{"STATE_MACHINE_ARN: is required"}},
		{"execution ARN as state machine", map[string]string{pipeline.EnvStateMachineARN: testExecPrefix + "x"}, []string{"STATE_MACHINE_ARN:"}},
		{"state machine version ARN", map[string]string{pipeline.EnvStateMachineARN: testStateMachine + ":1"}, []string{"STATE_MACHINE_ARN:"}},
		{"relative queue URL", map[string]string{pipeline.EnvQueueURL: "acme.fifo"}, []string{"QUEUE_URL:"}},
		{"tenant not JSON", map[string]string{pipeline.EnvTenant: "acme"}, []string{"TENANT:"}},
		{"tenant without id", map[string]string{pipeline.EnvTenant: `{"format":"csv"}`}, []string{"TENANT: id"}},
		{"tenant id with a slash", map[string]string{pipeline.EnvTenant: `{"id":"a/b"}`}, []string{"TENANT: id"}},
		{"prefix without slash", map[string]string{pipeline.EnvTenantPrefix: "inbox/acme"}, []string{"TENANT_PREFIX:"}},
		{"prefix in reserved space", map[string]string{pipeline.EnvTenantPrefix: "control/acme/"}, []string{"TENANT_PREFIX:", "reserved"}},
		{"missing bucket", map[string]string{pipeline.EnvBucket: ""}, []string{"INGEST_BUCKET: is required"}},
		{"bad policy", map[string]string{pipeline.EnvOnFailure: "stop"}, []string{"ON_FAILURE:"}},
		{"bad idempotency key", map[string]string{pipeline.EnvIdempotencyKey: "etag"}, []string{"IDEMPOTENCY_KEY:"}},
		{"missing max wait", map[string]string{pipeline.EnvMaxWaitSeconds: ""}, []string{"MAX_WAIT_SECONDS: is required"}},
		{"max wait above 12 h", map[string]string{pipeline.EnvMaxWaitSeconds: "43201"}, []string{"MAX_WAIT_SECONDS:"}},
		{"halt wait zero", map[string]string{pipeline.EnvHaltWaitSeconds: "0"}, []string{"HALT_WAIT_SECONDS:"}},
		{"first wait not a number", map[string]string{pipeline.EnvFirstWaitMillis: "1s"}, []string{"FIRST_WAIT_MILLIS:"}},
		{"first wait above max wait", map[string]string{pipeline.EnvFirstWaitMillis: "61000"}, []string{"FIRST_WAIT_MILLIS:"}},
		{"negative poll budget", map[string]string{pipeline.EnvPollBudgetSeconds: "-1"}, []string{"POLL_BUDGET_SECONDS:"}},
		{"huge number", map[string]string{pipeline.EnvMaxWaitSeconds: "99999999999999999"}, []string{"MAX_WAIT_SECONDS:"}},
		{"missing segment state machine", map[string]string{pipeline.EnvSegmentStateMachineARN: ""}, []string{"SEGMENT_STATE_MACHINE_ARN: is required"}},
		{"segment state machine is an execution", map[string]string{pipeline.EnvSegmentStateMachineARN: testSegPrefix + "x"}, []string{"SEGMENT_STATE_MACHINE_ARN:"}},
		{"segment state machine is the file state machine", map[string]string{pipeline.EnvSegmentStateMachineARN: testStateMachine}, []string{"SEGMENT_STATE_MACHINE_ARN:", "segment"}},
		{"register timeout zero", map[string]string{pipeline.EnvRegisterTimeoutSeconds: "0"}, []string{"REGISTER_TIMEOUT_SECONDS:"}},
		{"register timeout above Lambda's maximum", map[string]string{pipeline.EnvRegisterTimeoutSeconds: "901"}, []string{"REGISTER_TIMEOUT_SECONDS:", "1 to 900"}},
		{"register timeout not a number", map[string]string{pipeline.EnvRegisterTimeoutSeconds: "15m"}, []string{"REGISTER_TIMEOUT_SECONDS:"}},
		{"wake events not a boolean", map[string]string{pipeline.EnvWakeEvents: "yes"}, []string{"WAKE_EVENTS:", `"yes"`}},
		{"wake events upper case", map[string]string{pipeline.EnvWakeEvents: "TRUE"}, []string{"WAKE_EVENTS:"}},
		{"control prefix protected not a boolean", map[string]string{pipeline.EnvControlPrefixProtected: "1"}, []string{"CONTROL_PREFIX_PROTECTED:", `"1"`}},
		{"safety net zero", map[string]string{pipeline.EnvSafetyNetSeconds: "0"}, []string{"SAFETY_NET_SECONDS:"}},
		{"safety net above 12 h", map[string]string{pipeline.EnvSafetyNetSeconds: "43201"}, []string{"SAFETY_NET_SECONDS:", "1 to 43200"}},
		// The queue's visibility timeout (MAX_WAIT_SECONDS) must grow to hold the safety net.
		{"safety net longer than the visibility timeout", map[string]string{pipeline.EnvWakeEvents: "true", pipeline.EnvSafetyNetSeconds: "300", pipeline.EnvMaxWaitSeconds: "299"},
			[]string{"SAFETY_NET_SECONDS:", "MAX_WAIT_SECONDS=4m59s", "visibility timeout"}},
		{"default safety net with the old 30 s visibility timeout", map[string]string{pipeline.EnvWakeEvents: "true", pipeline.EnvMaxWaitSeconds: "30"},
			[]string{"SAFETY_NET_SECONDS: 5m0s is longer than MAX_WAIT_SECONDS=30s"}},
		{"several at once", map[string]string{pipeline.EnvBucket: "", pipeline.EnvOnFailure: "x"}, []string{"INGEST_BUCKET:", "ON_FAILURE:"}},
		{"sequence without its group", map[string]string{pipeline.EnvTenant: `{"id":"acme","sequence":{"pattern":"^orders-([0-9]+)$"}}`},
			[]string{"TENANT: sequence.pattern:", "exactly one named group"}},
		{"sequence settle on a number", map[string]string{pipeline.EnvTenant: `{"id":"acme","sequence":{"pattern":"(?P<seq>[0-9]+)","settle":"5s"}}`},
			[]string{"TENANT: sequence.settle:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := baseEnv()
			for k, v := range tt.env {
				env[k] = v
			}
			_, err := ConfigFromEnv(func(k string) string { return env[k] })
			if err == nil {
				t.Fatalf("got no error, want one naming %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestExecutionPrefix(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{testStateMachine, testExecPrefix},
		{"arn:aws-cn:states:cn-north-1:123456789012:stateMachine:m", "arn:aws-cn:states:cn-north-1:123456789012:execution:m:"},
		{"arn:aws-us-gov:states:us-gov-west-1:123456789012:stateMachine:m-1_x", "arn:aws-us-gov:states:us-gov-west-1:123456789012:execution:m-1_x:"},
		{"arn:aws:states:eu-west-1:123456789012:stateMachine:", ""},
		{"arn:aws:lambda:eu-west-1:123456789012:function:f", ""},
		{"arn:aws:states:eu-west-1:123456789012:stateMachine:m:prod", ""},
	}
	for _, tt := range tests {
		got, err := executionPrefix(tt.in)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("executionPrefix(%q): got %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

// The safety net only has to fit the visibility timeout when wake-up events are on.
func TestConfigWakeEvents(t *testing.T) {
	tests := []struct {
		name          string
		env           map[string]string
		wantWake      bool
		wantSafetyNet time.Duration
		wantProtected bool
	}{
		{"on, safety net equal to the visibility timeout", map[string]string{pipeline.EnvWakeEvents: "true", pipeline.EnvSafetyNetSeconds: "300", pipeline.EnvMaxWaitSeconds: "300"}, true, 5 * time.Minute, false},
		{"on, default safety net", map[string]string{pipeline.EnvWakeEvents: "true", pipeline.EnvMaxWaitSeconds: "900"}, true, 5 * time.Minute, false},
		{"off: an unused safety net may exceed the visibility timeout", map[string]string{pipeline.EnvWakeEvents: "false", pipeline.EnvSafetyNetSeconds: "600"}, false, 10 * time.Minute, false},
		{"on, control prefix protected", map[string]string{pipeline.EnvWakeEvents: "true", pipeline.EnvMaxWaitSeconds: "900", pipeline.EnvControlPrefixProtected: "true"}, true, 5 * time.Minute, true},
		{"on, control prefix not protected", map[string]string{pipeline.EnvWakeEvents: "true", pipeline.EnvMaxWaitSeconds: "900", pipeline.EnvControlPrefixProtected: "false"}, true, 5 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustConfig(t, tt.env)
			if cfg.WakeEvents != tt.wantWake || cfg.SafetyNet != tt.wantSafetyNet || cfg.ControlPrefixProtected != tt.wantProtected {
				t.Errorf("got wake events %v, safety net %v, control prefix protected %v, want %v, %v, %v",
					cfg.WakeEvents, cfg.SafetyNet, cfg.ControlPrefixProtected, tt.wantWake, tt.wantSafetyNet, tt.wantProtected)
			}
		})
	}
}

// A silo controller fills its tenant's core system table from CORE_SYSTEM_TABLES, and refuses a
// core system without one, or pool gate variables.
func TestConfigCoreSystemTable(t *testing.T) {
	const ledger = `{"id":"acme","weight":2,"coreSystem":{"name":"ledger","maxRunningFiles":5,"table":""}}`
	cfg := mustConfig(t, map[string]string{
		pipeline.EnvTenant:           ledger,
		pipeline.EnvCoreSystemTables: `{"ledger":"TenantPipeline-Ingest-ledger-ABC"}`,
	})
	want := pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 5, Table: "TenantPipeline-Ingest-ledger-ABC"}
	if got := cfg.Tenant.CoreSystem; got == nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("got core system %+v, want %+v", got, want)
	}
	if cfg.PoolAdmissionTable != "" || cfg.PoolMaxRunningFiles != 0 {
		t.Errorf("got pool admission table %q, max running files %d, want none in a silo", cfg.PoolAdmissionTable, cfg.PoolMaxRunningFiles)
	}
	if got := mustConfig(t, nil).Tenant.CoreSystem; got != nil {
		t.Errorf("without a core system: got %+v, want nil", got)
	}

	for _, tt := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"no CORE_SYSTEM_TABLES", map[string]string{pipeline.EnvTenant: ledger}, []string{`CORE_SYSTEM_TABLES: has no table for core system "ledger", which tenant "acme" names`}},
		{"another core system's table", map[string]string{pipeline.EnvTenant: ledger, pipeline.EnvCoreSystemTables: `{"crm":"crm-admission"}`},
			[]string{`CORE_SYSTEM_TABLES: has no table for core system "ledger"`}},
		{"not JSON", map[string]string{pipeline.EnvTenant: ledger, pipeline.EnvCoreSystemTables: "ledger"}, []string{"CORE_SYSTEM_TABLES: is not a JSON object"}},
		{"not a table name", map[string]string{pipeline.EnvTenant: ledger, pipeline.EnvCoreSystemTables: `{"ledger":"x"}`},
			[]string{`CORE_SYSTEM_TABLES: core system "ledger": table "x" is not a DynamoDB table name`}},
		{"weight out of range", map[string]string{pipeline.EnvTenant: `{"id":"acme","weight":11}`}, []string{"TENANT: weight 11, want 1 to 10"}},
		{"negative rate", map[string]string{pipeline.EnvTenant: `{"id":"acme","maxRecordsPerSecond":-1}`}, []string{"TENANT: maxRecordsPerSecond -1"}},
		{"core system without a name", map[string]string{pipeline.EnvTenant: `{"id":"acme","coreSystem":{"maxRunningFiles":1}}`}, []string{"TENANT: coreSystem has no name"}},
		{"pool gate in a silo", map[string]string{pipeline.EnvPoolAdmissionTable: "t-admission", pipeline.EnvPoolMaxRunningFiles: "5"},
			[]string{"POOL_ADMISSION_TABLE: is set, but a silo controller", "POOL_MAX_RUNNING_FILES: is set"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := baseEnv()
			for k, v := range tt.env {
				env[k] = v
			}
			_, err := ConfigFromEnv(func(k string) string { return env[k] })
			if err == nil {
				t.Fatalf("got no error, want one naming %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// The execution input carries the tenant's core system with its table, so Register gets it.
func TestStartInputCarriesCoreSystemTable(t *testing.T) {
	r := newRig(t, map[string]string{
		pipeline.EnvTenant:           `{"id":"acme","coreSystem":{"name":"ledger","maxRunningFiles":5,"adaptive":true,"table":""}}`,
		pipeline.EnvCoreSystemTables: `{"ledger":"TenantPipeline-Ingest-ledger-ABC"}`,
	})
	if _, err := r.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", eventBody(t, evID1, key1), 1)}}); err != nil {
		t.Fatal(err)
	}
	want := pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 5, Adaptive: true, Table: "TenantPipeline-Ingest-ledger-ABC"}
	if got := r.sfn.input(t, arn1).Tenant.CoreSystem; got == nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("got core system %+v in the execution input, want %+v", got, want)
	}
}

// A tenant's key order settings that the tenants file's rules refuse fail the configuration,
// a silo controller's at start and a pool tenant's row when it is first served: its files are
// held, never registered out of order.
func TestConfigKeyOrder(t *testing.T) {
	const ledger = `"coreSystem":{"name":"ledger","maxRunningFiles":4,"maxRequestsInFlight":%s,"table":""}`
	for _, tt := range []struct {
		name     string
		settings string // the tenant's settings, without their braces and id
		want     string // "": accepted
	}{
		{"file order", `"recordOrder":"file"`, ""},
		{"small-file bound", `"smallFileBytes":65536`, ""},
		{"no small-file path", `"smallFileBytes":-1`, ""},
		{"small-file bound too large", `"smallFileBytes":4194305`, `smallFileBytes 4194305, want 1 to 4194304, -1 for none, or 0 for the state machine's bound`},
		{"key order", `"recordOrder":"key","keyColumns":["customer","region"],"maxRecordsInFlight":64`, ""},
		{"key order, default in flight", `"recordOrder":"key","keyColumns":["customer"]`, ""},
		{"requests in flight", `"recordOrder":"key","keyColumns":["customer"],` + fmt.Sprintf(ledger, "32"), ""},
		{"unknown recordOrder", `"recordOrder":"customer"`, `recordOrder "customer", want "file" or "key"`},
		{"key without keyColumns", `"recordOrder":"key"`, `recordOrder "key" without keyColumns, want at least one column`},
		{"empty column", `"recordOrder":"key","keyColumns":["customer",""]`, `keyColumns column 2 is empty, want a column name`},
		{"duplicate column", `"recordOrder":"key","keyColumns":["customer","customer"]`, `keyColumns "customer" is listed twice, want each column once`},
		{"keyColumns in file order", `"keyColumns":["customer"]`, `keyColumns ["customer"], want none without recordOrder "key"`},
		{"maxRecordsInFlight in file order", `"maxRecordsInFlight":4`, `maxRecordsInFlight 4, want none without recordOrder "key"`},
		{"maxRecordsInFlight too many", `"recordOrder":"key","keyColumns":["c"],"maxRecordsInFlight":65`, `maxRecordsInFlight 65, want 1 to 64, or 0 for 8`},
		{"maxRecordsInFlight negative", `"recordOrder":"key","keyColumns":["c"],"maxRecordsInFlight":-1`, `maxRecordsInFlight -1, want 1 to 64, or 0 for 8`},
		{"batch mode", `"recordOrder":"key","keyColumns":["c"],"registerMode":"batch"`,
			`recordOrder "key" with registerMode "batch", which has its own ordering: want registerMode "record"`},
		{"dynamodb sink", `"recordOrder":"key","keyColumns":["c"],"dynamodb":{"key":["id"],"concurrency":16}`,
			`recordOrder "key" with the dynamodb sink, which has its own ordering: want no recordOrder`},
		{"requests in flight below running files", fmt.Sprintf(ledger, "3"),
			`coreSystem "ledger": maxRequestsInFlight 3, want its maxRunningFiles 4 to 10000, or 0 for maxRunningFiles`},
		{"requests in flight over the bound", fmt.Sprintf(ledger, "10001"),
			`coreSystem "ledger": maxRequestsInFlight 10001, want its maxRunningFiles 4 to 10000`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tables := `{"ledger":"TenantPipeline-Ingest-ledger-ABC"}`
			env := baseEnv()
			env[pipeline.EnvTenant] = `{"id":"acme",` + tt.settings + `}`
			env[pipeline.EnvCoreSystemTables] = tables
			_, err := ConfigFromEnv(func(k string) string { return env[k] })
			check := func(tier string, err error, want string) {
				switch {
				case want == "" && err != nil:
					t.Errorf("%s: got %v, want no error", tier, err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("%s: got %v, want an error containing %q", tier, err, want)
				}
			}
			want := tt.want
			if want != "" {
				want = pipeline.EnvTenant + ": " + want
			}
			check("silo", err, want)

			path := testfake.WritePoolSettings(t, t.TempDir(), "keyed", `{"pool":"shared-1","prefix":"inbox/","tenants":[
				{"settings":{"id":"acme",`+tt.settings+`},"prefix":"inbox/acme/"},
				{"settings":{"id":"initech"},"prefix":"inbox/initech/"}]}`)
			pc := mustPoolConfig(t, map[string]string{pipeline.EnvPoolSettings: path, pipeline.EnvCoreSystemTables: tables})
			_, err = pc.tenantConfig("acme")
			want = tt.want
			if want != "" {
				want = pipeline.EnvPoolSettings + `: tenant "acme" settings: ` + want
			}
			check("pool row", err, want)
			if _, err := pc.tenantConfig("initech"); err != nil {
				t.Errorf("pool: another tenant: got %v, want its Config (a bad row holds only its tenant)", err)
			}
		})
	}
}
