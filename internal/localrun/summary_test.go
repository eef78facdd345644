package localrun

import (
	"bytes"
	"encoding/json"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/localrun/report"
	"strings"
	"testing"
	"time"
)

// The report's "violations" is [] when nothing broke, never null.
func TestViolationsEmptyIsArray(t *testing.T) {
	r := &Run{Sink: &emulate.Sink{}}
	rep := &report.Report{Tenants: map[string]*report.TenantReport{}}
	rep.Violations = r.checkInvariants(rep)
	b, _ := json.Marshal(rep)
	if !strings.Contains(string(b), `"violations":[]`) {
		t.Errorf("got %s, want \"violations\":[]", b)
	}
}

// The runner's hints are pipectl's: a halt at a core system's failure can be redriven too.
func TestHaltCommands(t *testing.T) {
	started := time.Unix(1_800_000_000, 0)
	halt := &Tenant{ID: "h", Config: map[string]any{"id": "h", "onFailure": "halt"}}
	for _, tc := range []struct {
		name, errName, cause string
		want                 []string
	}{
		{"validation", "ValidationError", `{"errorType":"ValidationError","errorMessage":"line 6"}`,
			[]string{"pipectl skip h h-2 --reason '<why this file is skipped>'"}},
		{"a segment's PermanentError", "States.TaskFailed", `PermanentError: {"errorType":"PermanentError","errorMessage":"record 15: rejected"}`,
			[]string{"pipectl skip h h-2 --reason '<why this file is skipped>'", "pipectl redrive h h-2"}},
		{"a segment's ValidationError", "States.TaskFailed", `ValidationError: {"errorType":"ValidationError","errorMessage":"line 6"}`,
			[]string{"pipectl skip h h-2 --reason '<why this file is skipped>'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := report.FileReport{Key: "inbox/h/bad.csv", ExecutionName: "h-2", Status: "FAILED", Error: tc.errName, Cause: tc.cause, StartedAt: &started, StoppedAt: &started}
			h := halted(halt, &report.TenantReport{Files: []report.FileReport{f}, Queued: 1})
			if h == nil {
				t.Fatal("got no halt, want one")
			}
			if got := h.Commands("h"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHalted(t *testing.T) {
	started := time.Unix(1_800_000_000, 0)
	halt := &Tenant{ID: "h", Config: map[string]any{"id": "h", "onFailure": "halt"}}
	cont := &Tenant{ID: "c", Config: map[string]any{"id": "c"}}
	failed := report.FileReport{Key: "inbox/h/bad.csv", ExecutionName: "h-2", Status: "FAILED", Error: "ValidationError",
		Cause: `{"errorType":"ValidationError","errorMessage":"inbox/h/bad.csv line 6: 1 fields, want 2"}`, StartedAt: &started, StoppedAt: &started}
	ok := report.FileReport{Key: "inbox/h/a.csv", ExecutionName: "h-1", Status: "SUCCEEDED", StartedAt: &started, StoppedAt: &started}
	waiting := report.FileReport{Key: "inbox/h/c.csv", Status: "WAITING"}
	for _, tc := range []struct {
		name   string
		tenant *Tenant
		tr     report.TenantReport
		want   string // halted execution, "" for none
	}{
		{"halt tenant, failed head, queue holds it", halt, report.TenantReport{Files: []report.FileReport{ok, failed, waiting}, Queued: 2}, "h-2"},
		{"released: queue empty", halt, report.TenantReport{Files: []report.FileReport{ok, failed}}, ""},
		{"continue tenant never halts", cont, report.TenantReport{Files: []report.FileReport{ok, failed, waiting}, Queued: 1}, ""},
		{"a later file started (skipped)", halt, report.TenantReport{Files: []report.FileReport{failed, ok}, Queued: 1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := halted(tc.tenant, &tc.tr)
			got := ""
			if h != nil {
				got = h.ExecutionName
			}
			if got != tc.want {
				t.Fatalf("got halted %q, want %q", got, tc.want)
			}
			if h == nil {
				return
			}
			var b bytes.Buffer
			report.WriteHalt(&b, "h", h)
			for _, want := range []string{
				"line 6", // the cause names the line
				"pipectl skip h h-2 --reason '<why this file is skipped>'\n",
			} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("got %q, want it to contain %q", b.String(), want)
				}
			}
			// pipectl refuses to redrive a file that failed validation: the runner does not suggest it.
			if strings.Contains(b.String(), "pipectl redrive") {
				t.Errorf("got %q, want no redrive hint for a ValidationError", b.String())
			}
		})
	}
}
