package tenantpipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/workflows"
)

// These tests need no jsii runtime: validation runs on plain Go values before anything is created.

type fakeBucket struct{ awss3.IBucket }
type fakeFunction struct{ awslambda.IFunction }

func valid() Props {
	return Props{Tenant: Tenant{ID: "acme", RegisterURL: "https://core.example.com/r"}, Bucket: fakeBucket{}}
}

func TestDefaults(t *testing.T) {
	p := valid().withDefaults()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"VisibilityTimeout (safety net + 30 s)", p.VisibilityTimeout, 330 * time.Second},
		{"SafetyNetInterval", p.SafetyNetInterval, 5 * time.Minute},
		{"WakeEvents", p.WakeEvents(), true},
		{"PollBudget", p.PollBudget(), time.Duration(0)},
		{"ControllerTimeout", p.ControllerTimeout, 20 * time.Second},
		{"ControllerReservedConcurrency", p.ControllerReservedConcurrency, 0},
		{"WorkflowTimeout", p.WorkflowTimeout, 24 * time.Hour},
		{"SplitTimeout", p.SplitTimeout, 5 * time.Minute},
		{"RegisterTimeout", p.RegisterTimeout, 2 * time.Minute},
		{"RegisterHTTPTimeout", p.RegisterHTTPTimeout, 10 * time.Second},
		{"HaltedRecheck", p.HaltedRecheck, 5 * time.Minute},
		{"Tenant.Prefix", p.Tenant.Prefix, "inbox/acme/"},
		{"Tenant.ChunkSize", p.Tenant.ChunkSize, 100},
		{"RegisterDesign", p.RegisterDesign, workflows.DesignPerInvocation},
		{"RequestShares", p.RequestShares, pipeline.RequestSharesShared},
		{"RegisterMemoryMB", p.RegisterMemoryMB, 128},
		{"SplitMemoryMB", p.SplitMemoryMB, 256},
		{"Alarms.HeadQueued", p.Alarms.HeadQueued, 2 * time.Hour},
		{"Alarms.BacklogMessages", p.Alarms.BacklogMessages, 100},
		{"len(Operators.PrincipalARNs)", len(p.Operators.PrincipalARNs), 0},
		{"RolePath", p.RolePath, "/tenantpipeline/"},
		{"DefaultSmallFileBytes", p.DefaultSmallFileBytes, 1 << 20},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if err := p.validate(); err != nil {
		t.Errorf("defaults must validate: %v", err)
	}
}

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Props)
		want   string
	}{
		{"no bucket", func(p *Props) { p.Bucket = nil }, `tenant "acme": Bucket is required`},
		{"role path without slashes", func(p *Props) { p.RolePath = "ops" }, `role path "ops" is not an IAM path: set RolePath to`},
		{"role path not ending in a slash", func(p *Props) { p.RolePath = "/ops" }, `role path "/ops" is not an IAM path: set RolePath to`},
		{"operator ARN of every role", func(p *Props) {
			p.Operators.PrincipalARNs = []string{"arn:aws:iam::123456789012:role/*"}
		}, `"arn:aws:iam::123456789012:role/*" would make every role of the account an operator`},
		{"operator ARN of a session", func(p *Props) {
			p.Operators.PrincipalARNs = []string{"arn:aws:sts::123456789012:assumed-role/Ops/alice"}
		}, `"arn:aws:sts::123456789012:assumed-role/Ops/alice" is not an IAM role or user ARN`},
		{"no register url", func(p *Props) { p.Tenant.RegisterURL = "" }, `registerUrl is required unless Props.RegisterFunction`},
		{"bad tenant id", func(p *Props) { p.Tenant.ID = "A B" }, `Tenant.ID (tenant "A B"): "A B" is invalid`},
		{"chunk size", func(p *Props) { p.Tenant.ChunkSize = 5000 }, `Tenant.ChunkSize (tenant "acme"): 5000 is out of range`},
		{"on invalid record", func(p *Props) { p.Tenant.OnInvalidRecord = "skip" }, `Tenant.OnInvalidRecord (tenant "acme"): "skip" is invalid: use "failFile" or "skipRecord"`},
		{"max invalid records under failFile", func(p *Props) { p.Tenant.MaxInvalidRecords = 5 }, `Tenant.MaxInvalidRecords (tenant "acme"): 5 is set, but onInvalidRecord is "failFile"`},
		{"max invalid records out of range", func(p *Props) { p.Tenant.OnInvalidRecord = "skipRecord"; p.Tenant.MaxInvalidRecords = -2 },
			`Tenant.MaxInvalidRecords (tenant "acme"): -2 is out of range`},
		{"controller not below visibility", func(p *Props) { p.DisableWakeEvents = true; p.ControllerTimeout = 30 * time.Second },
			`controller timeout 30s must be shorter than the queue visibility timeout 30s`},
		{"visibility too long", func(p *Props) { p.VisibilityTimeout = 13 * time.Hour }, `visibility timeout 13h0m0s is invalid`},
		{"visibility fractional", func(p *Props) { p.VisibilityTimeout = 1500 * time.Millisecond }, `visibility timeout 1.5s is invalid`},
		{"split timeout", func(p *Props) { p.SplitTimeout = 16 * time.Minute }, `split timeout 16m0s is invalid`},
		{"register memory", func(p *Props) { p.RegisterMemoryMB = 64 }, `register memory 64 MB is invalid`},
		{"register design", func(p *Props) { p.RegisterDesign = "per-file" }, `register design "per-file" is invalid: use "per-invocation" or "per-chunk"`},
		{"request shares", func(p *Props) { p.RequestShares = "even" }, `request shares "even" is invalid: set RequestShares to "shared" or "static"`},
		{"small-file bound too large", func(p *Props) { p.DefaultSmallFileBytes = 4<<20 + 1 },
			`small-file bound 4194305 bytes is invalid: set DefaultSmallFileBytes to 1 up to 4194304 (4 MiB), or -1 to turn the small-file path off`},
		{"small-file bound negative", func(p *Props) { p.DefaultSmallFileBytes = -2 },
			`small-file bound -2 bytes is invalid: set DefaultSmallFileBytes to 1 up to 4194304 (4 MiB), or -1 to turn the small-file path off`},
		{"reserved concurrency", func(p *Props) { p.ControllerReservedConcurrency = 5000 }, `controller reserved concurrency 5000 is invalid`},
		{"workflow timeout near retention", func(p *Props) { p.WorkflowTimeout = 10 * 24 * time.Hour }, `workflow timeout 240h0m0s is invalid`},
		{"workflow timeout tiny", func(p *Props) { p.WorkflowTimeout = time.Second }, `workflow timeout 1s is invalid`},
		{"halted recheck", func(p *Props) { p.HaltedRecheck = 24 * time.Hour }, `halted recheck 24h0m0s is invalid`},
		{"alarm age", func(p *Props) { p.Alarms.OldestMessageAge = time.Second }, `alarm oldest message age 1s is invalid`},
		{"alarm backlog", func(p *Props) { p.Alarms.BacklogMessages = -1 }, `alarm backlog -1 is invalid`},
		{"alarm head queued", func(p *Props) { p.Alarms.HeadQueued = time.Second }, `alarm head queued 1s is invalid`},
		{"alarm period", func(p *Props) { p.Alarms.EvaluationMinutes = 2000 }, `alarm evaluation period 2000 minutes is invalid`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(&p)
			err := p.withDefaults().validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestSmallFiles: the bound the file state machine routes by; none (the path off) when turned off,
// with a register function of the caller's own, or under the per-chunk design, none of which has
// the SmallFile task.
func TestSmallFiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Props)
		want   int
	}{
		{"default", func(*Props) {}, 1 << 20},
		{"set", func(p *Props) { p.DefaultSmallFileBytes = 1000 }, 1000},
		{"turned off", func(p *Props) { p.DefaultSmallFileBytes = -1 }, 0},
		{"own register function", func(p *Props) { p.RegisterFunction = fakeFunction{} }, 0},
		{"own register function, per-invocation", func(p *Props) {
			p.RegisterFunction, p.RegisterDesign = fakeFunction{}, workflows.DesignPerInvocation
		}, 0},
		{"per-chunk design", func(p *Props) { p.RegisterDesign = workflows.DesignPerChunk }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(&p)
			d := p.withDefaults()
			if got := d.smallFiles(d.RegisterFunction != nil); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// TestRegisterMemoryFor: 128 MB unless a batch tenant's maxBatchBytes needs more (the measured
// 24 MiB base plus 6 bytes per batch byte, a third of headroom, in 64 MB steps).
func TestRegisterMemoryFor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tenant Tenant
		want   int
	}{
		{"record mode", Tenant{ID: "a"}, 128},
		{"batch, default 5 MiB", Tenant{ID: "a", RegisterMode: "batch"}, 128},
		{"batch, 16 MiB", Tenant{ID: "a", RegisterMode: "batch", MaxBatchBytes: 16 << 20}, 192},
		{"batch, the 64 MiB maximum", Tenant{ID: "a", RegisterMode: "batch", MaxBatchBytes: 64 << 20}, 576},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RegisterMemoryFor(tc.tenant); got != tc.want {
				t.Errorf("got %d MB, want %d", got, tc.want)
			}
		})
	}
}

// TestRegisterDesignDefault: the bundled Register loops on a cursor; a user's own function keeps
// the one-chunk contract it was written against unless RegisterDesign says otherwise.
func TestRegisterDesignDefault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Props)
		want   string
	}{
		{"bundled register", func(*Props) {}, workflows.DesignPerInvocation},
		{"own register function", func(p *Props) { p.RegisterFunction = fakeFunction{} }, workflows.DesignPerChunk},
		{"own register function, per-invocation asked", func(p *Props) {
			p.RegisterFunction = fakeFunction{}
			p.RegisterDesign = workflows.DesignPerInvocation
		}, workflows.DesignPerInvocation},
		{"bundled register, per-chunk asked", func(p *Props) { p.RegisterDesign = workflows.DesignPerChunk }, workflows.DesignPerChunk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(&p)
			if got := p.withDefaults().RegisterDesign; got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	p := valid()
	p.Bucket = nil
	p.Tenant.Format = "xml"
	p.ControllerTimeout = time.Minute
	p.DisableWakeEvents = true
	err := p.withDefaults().validate()
	for _, want := range []string{"Bucket is required", `Tenant.Format (tenant "acme"): "xml"`, "controller timeout 1m0s must be shorter"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to contain %q", err, want)
		}
	}
}

func TestValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Props)
	}{
		{"custom register function without url", func(p *Props) { p.Tenant.RegisterURL = ""; p.RegisterFunction = fakeFunction{} }},
		{"unreserved controller", func(p *Props) { p.ControllerReservedConcurrency = -1 }},
		{"per-chunk register design", func(p *Props) { p.RegisterDesign = workflows.DesignPerChunk }},
		{"small-file path off", func(p *Props) { p.DefaultSmallFileBytes = -1 }},
		{"small-file bound at its largest", func(p *Props) { p.DefaultSmallFileBytes = 4 << 20 }},
		{"long visibility", func(p *Props) {
			p.VisibilityTimeout = 11*time.Hour + 45*time.Minute
			p.ControllerTimeout = 15 * time.Minute
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(&p)
			if err := p.withDefaults().validate(); err != nil {
				t.Errorf("got %v, want no error", err)
			}
		})
	}
}

// TestValidateAcrossFields: each cross-field rule fails just past its boundary, with a message that
// names both fields and the fix, and passes at the boundary. The boundaries come from the
// functions' own constants (internal/register DefaultDeadlineMargin 2 s, HTTP_TIMEOUT_SECONDS 1-300;
// internal/controller deadlineMargin 5 s and its 10 s poll budget) and SQS's 12 h visibility cap
// counted from receipt.
func TestValidateAcrossFields(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Props)
		want   string // "" = valid
	}{
		{"register timeout equal to HTTP timeout plus margin", func(p *Props) { p.RegisterTimeout = 12 * time.Second },
			"register timeout 12s must be longer than the register HTTP timeout 10s plus the register deadline margin 2s, " +
				"or no record is ever sent: raise RegisterTimeout above 12s (e.g. 13s) or lower RegisterHTTPTimeout below 10s"},
		{"register timeout one second above the floor", func(p *Props) { p.RegisterTimeout = 13 * time.Second }, ""},
		{"register timeout below a raised HTTP timeout", func(p *Props) { p.RegisterHTTPTimeout = time.Minute; p.RegisterTimeout = 61 * time.Second },
			"register timeout 1m1s must be longer than the register HTTP timeout 1m0s plus the register deadline margin 2s"},
		{"short HTTP timeout allows a short register timeout", func(p *Props) { p.RegisterHTTPTimeout = 3 * time.Second; p.RegisterTimeout = 6 * time.Second }, ""},
		{"custom register function ignores the HTTP timeout", func(p *Props) {
			p.Tenant.RegisterURL = ""
			p.RegisterFunction = fakeFunction{}
			p.RegisterTimeout = 5 * time.Second
		}, ""},
		{"HTTP timeout fractional", func(p *Props) { p.RegisterHTTPTimeout = 1500 * time.Millisecond },
			"register HTTP timeout 1.5s is invalid: use whole seconds from 1s to 5m"},
		{"HTTP timeout too long", func(p *Props) { p.RegisterHTTPTimeout = 6 * time.Minute },
			"register HTTP timeout 6m0s is invalid: use whole seconds from 1s to 5m"},
		{"controller timeout below poll budget plus margin", func(p *Props) { p.DisableWakeEvents = true; p.ControllerTimeout = 14 * time.Second },
			"controller timeout 14s cannot hold the controller's in-process poll budget 10s plus its deadline margin 5s: " +
				"raise ControllerTimeout to at least 15s (and VisibilityTimeout above it)"},
		{"controller timeout exactly poll budget plus margin", func(p *Props) { p.DisableWakeEvents = true; p.ControllerTimeout = 15 * time.Second }, ""},
		{"wake events: no poll budget, so a short controller timeout is fine", func(p *Props) { p.ControllerTimeout = 5 * time.Second }, ""},
		{"halted recheck past the cap after a controller run", func(p *Props) { p.HaltedRecheck = 12 * time.Hour },
			"halted recheck 12h0m0s plus the controller timeout 20s exceeds SQS's 12h visibility cap, counted from the message's receipt, " +
				"so ChangeMessageVisibility would be rejected: use a HaltedRecheck of at most 11h59m40s, or a shorter ControllerTimeout"},
		{"halted recheck at the cap", func(p *Props) {
			p.HaltedRecheck = 12*time.Hour - 20*time.Second
			p.Alarms.EvaluationMinutes = 720
			p.Alarms.BlockedPeriods = 2
		}, ""},
		{"visibility timeout past the cap after a controller run", func(p *Props) { p.VisibilityTimeout = 12 * time.Hour },
			"visibility timeout 12h0m0s plus the controller timeout 20s exceeds SQS's 12h visibility cap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(&p)
			err := p.withDefaults().validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestDefaultsWithoutWakeEvents: without wake events the queue keeps its 30 s visibility and the
// controller polls in-process for ControllerPollBudget.
func TestDefaultsWithoutWakeEvents(t *testing.T) {
	p := valid()
	p.DisableWakeEvents = true
	p = p.withDefaults()
	if p.VisibilityTimeout != 30*time.Second || p.PollBudget() != 10*time.Second || p.WakeEvents() {
		t.Errorf("got visibility %v, poll budget %v, wake events %v, want 30s, 10s, false", p.VisibilityTimeout, p.PollBudget(), p.WakeEvents())
	}
	if err := p.validate(); err != nil {
		t.Errorf("got %v, want no error", err)
	}
}

// TestValidateSafetyNet: with wake events the controller waits up to the safety net for a running
// file and refuses to start when SAFETY_NET_SECONDS exceeds MAX_WAIT_SECONDS (the visibility
// timeout), so the construct refuses first; and the visibility timeout stays above the controller
// timeout (the event source mapping rejects a queue whose visibility timeout is below it:
// https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
func TestValidateSafetyNet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Props)
		want   string // "" = valid
	}{
		{"a longer safety net moves the default visibility", func(p *Props) { p.SafetyNetInterval = 10 * time.Minute }, ""},
		{"visibility below the safety net", func(p *Props) { p.VisibilityTimeout = 4 * time.Minute },
			"visibility timeout 4m0s is shorter than the safety net interval 5m0s: the controller waits up to the safety net for a running file, " +
				"so raise VisibilityTimeout to at least 5m0s (leave it unset for 5m30s), or shorten SafetyNetInterval to at most 4m0s"},
		{"visibility equal to the safety net", func(p *Props) { p.VisibilityTimeout = 5 * time.Minute }, ""},
		{"short safety net, short visibility", func(p *Props) { p.SafetyNetInterval = 20 * time.Second; p.VisibilityTimeout = 25 * time.Second }, ""},
		{"visibility not above the controller timeout", func(p *Props) { p.SafetyNetInterval = 20 * time.Second; p.VisibilityTimeout = 20 * time.Second },
			"controller timeout 20s must be shorter than the queue visibility timeout 20s, or the event source mapping is rejected: " +
				"raise VisibilityTimeout above 20s, or lower ControllerTimeout below 20s"},
		{"safety net fractional", func(p *Props) { p.SafetyNetInterval = 1500 * time.Millisecond },
			"safety net interval 1.5s is invalid: use whole seconds from 1s to 12h (default 5m)"},
		{"safety net past SQS's cap", func(p *Props) { p.SafetyNetInterval = 13 * time.Hour },
			"safety net interval 13h0m0s is invalid"},
		{"safety net ignored without wake events", func(p *Props) { p.DisableWakeEvents = true; p.SafetyNetInterval = 13 * time.Hour }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(&p)
			err := p.withDefaults().validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

type fakeTable struct{ awsdynamodb.ITable }

// TestValidateSink: a tenant has one sink. The DynamoDB sink needs no registerUrl; it cannot be
// combined with a registerUrl (Tenant.Validate), a RegisterFunction, or two tables; a table prop
// without the sink is a mistake.
func TestValidateSink(t *testing.T) {
	ddb := func(p *Props) { p.Tenant.RegisterURL = ""; p.Tenant.DynamoDB = &DynamoDB{Key: []string{"id"}} }
	for _, tc := range []struct {
		name   string
		change func(*Props)
		want   string // "" = valid
	}{
		{"dynamodb without registerUrl", ddb, ""},
		{"dynamodb with partition and sort key", func(p *Props) { ddb(p); p.Tenant.DynamoDB.Key = []string{"id", "at"} }, ""},
		{"dynamodb with an existing table by name", func(p *Props) { ddb(p); p.Tenant.DynamoDB.Table = "orders" }, ""},
		{"dynamodb with a table construct", func(p *Props) { ddb(p); p.DynamoDBTable = fakeTable{} }, ""},
		{"dynamodb with three key fields", func(p *Props) { ddb(p); p.Tenant.DynamoDB.Key = []string{"a", "b", "c"} },
			`Tenant.DynamoDB.Key (tenant "acme"): has 3 fields: use 1 (partition key) or 2 (partition key, sort key)`},
		{"dynamodb without key fields", func(p *Props) { ddb(p); p.Tenant.DynamoDB.Key = nil },
			`Tenant.DynamoDB.Key (tenant "acme"): has 0 fields: use 1 (partition key) or 2 (partition key, sort key)`},
		{"dynamodb with registerUrl", func(p *Props) { ddb(p); p.Tenant.RegisterURL = "https://core.example.com/r" },
			`Tenant.RegisterURL (tenant "acme"): is set with dynamodb: a tenant has one sink; remove registerUrl or dynamodb`},
		{"dynamodb with a register function", func(p *Props) { ddb(p); p.RegisterFunction = fakeFunction{} },
			`Props.RegisterFunction is set with a dynamodb sink: the bundled register function writes the table; remove RegisterFunction or the tenant's dynamodb`},
		{"dynamodb with a table construct and a table name", func(p *Props) { ddb(p); p.Tenant.DynamoDB.Table = "orders"; p.DynamoDBTable = fakeTable{} },
			`Props.DynamoDBTable is set and dynamodb.table names "orders": give the table once, by one or the other`},
		{"table construct without dynamodb", func(p *Props) { p.DynamoDBTable = fakeTable{} },
			`Props.DynamoDBTable is set, but the tenant has no dynamodb sink: add dynamodb {key: [...]} to the tenant, or remove DynamoDBTable`},
		{"neither registerUrl nor dynamodb", func(p *Props) { p.Tenant.RegisterURL = "" },
			`registerUrl is required unless Props.RegisterFunction replaces the bundled HTTP adapter, or the tenant has a dynamodb sink`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(&p)
			err := p.withDefaults().validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestTenantSmallFileBytes: a tenant's own small-file bound is checked as in the tenants file,
// with a message that names the prop, and travels in its settings, which the FileSize choice reads.
func TestTenantSmallFileBytes(t *testing.T) {
	for _, tc := range []struct {
		bytes int64
		want  string // "": accepted
	}{
		{0, ""}, {1, ""}, {4 << 20, ""}, {-1, ""},
		{4<<20 + 1, `Tenant.SmallFileBytes (tenant "acme"): 4194305 is out of range: use 1 to 4194304 bytes (4 MiB), -1 for no small-file path, or leave it out for the app's bound`},
		{-2, `Tenant.SmallFileBytes (tenant "acme"): -2 is out of range`},
	} {
		p := valid()
		p.Tenant.SmallFileBytes = tc.bytes
		err := p.withDefaults().validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%d: got %v, want no error", tc.bytes, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%d: got %v, want an error containing %q", tc.bytes, err, tc.want)
		}
	}
	if got := settings(Tenant{ID: "a", SmallFileBytes: 65536}.WithDefaults(), nil).SmallFileBytes; got != 65536 {
		t.Errorf("settings: got smallFileBytes %d, want 65536", got)
	}
}
