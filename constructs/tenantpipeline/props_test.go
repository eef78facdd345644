package tenantpipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
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
		{"VisibilityTimeout", p.VisibilityTimeout, 30 * time.Second},
		{"ControllerTimeout", p.ControllerTimeout, 20 * time.Second},
		{"ControllerReservedConcurrency", p.ControllerReservedConcurrency, 0},
		{"WorkflowTimeout", p.WorkflowTimeout, 24 * time.Hour},
		{"SplitTimeout", p.SplitTimeout, 5 * time.Minute},
		{"RegisterTimeout", p.RegisterTimeout, 2 * time.Minute},
		{"HaltedRecheck", p.HaltedRecheck, 5 * time.Minute},
		{"Tenant.Prefix", p.Tenant.Prefix, "inbox/acme/"},
		{"Tenant.ChunkSize", p.Tenant.ChunkSize, 100},
		{"Alarms.HeadQueued", p.Alarms.HeadQueued, 2 * time.Hour},
		{"Alarms.BacklogMessages", p.Alarms.BacklogMessages, 100},
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
		{"no register url", func(p *Props) { p.Tenant.RegisterURL = "" }, `registerUrl is required unless Props.RegisterFunction`},
		{"bad tenant id", func(p *Props) { p.Tenant.ID = "A B" }, `tenant "A B": id: "A B" is invalid`},
		{"chunk size", func(p *Props) { p.Tenant.ChunkSize = 5000 }, `chunkSize: 5000 is out of range`},
		{"controller not below visibility", func(p *Props) { p.ControllerTimeout = 30 * time.Second },
			`controller timeout 30s must be shorter than the queue visibility timeout 30s`},
		{"visibility too long", func(p *Props) { p.VisibilityTimeout = 13 * time.Hour }, `visibility timeout 13h0m0s is invalid`},
		{"visibility fractional", func(p *Props) { p.VisibilityTimeout = 1500 * time.Millisecond }, `visibility timeout 1.5s is invalid`},
		{"split timeout", func(p *Props) { p.SplitTimeout = 16 * time.Minute }, `split timeout 16m0s is invalid`},
		{"register memory", func(p *Props) { p.RegisterMemoryMB = 64 }, `register memory 64 MB is invalid`},
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

func TestValidateReportsEveryProblem(t *testing.T) {
	p := valid()
	p.Bucket = nil
	p.Tenant.Format = "xml"
	p.ControllerTimeout = time.Minute
	err := p.withDefaults().validate()
	for _, want := range []string{"Bucket is required", `format: "xml"`, "controller timeout 1m0s must be shorter"} {
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
		{"long visibility", func(p *Props) { p.VisibilityTimeout = 12 * time.Hour; p.ControllerTimeout = 15 * time.Minute }},
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
