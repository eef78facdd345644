package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/s3event"
	"github.com/example/tenantpipeline/internal/schema"
	"github.com/example/tenantpipeline/internal/shares"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var (
	acme   = opsfake.Tenant("acme", pipeline.OnFailureHalt)
	globex = opsfake.Tenant("globex", pipeline.OnFailureContinue)
	zeta   = opsfake.Tenant("zeta", pipeline.OnFailureContinue)
)

// world is two tenant stacks of the default prefix and one of another prefix:
//   - acme (halt) is blocked at acme-2 (FAILED), with 2 files visible and its head in flight;
//   - globex (continue) is paused, runs globex-3, and failed globex-1 an hour ago.
func world() *opsfake.World {
	w := opsfake.New(now)
	w.Stacks = append(w.Stacks, opsfakeStack("TenantPipeline-Ingest"))
	w.AddTenant("TenantPipeline-Tenants-1", acme)
	w.AddTenant("TenantPipeline-Tenants-2", globex)
	w.AddTenant("Other-Tenants-1", zeta)
	w.AddTenant("TenantPipelineX-Tenants-1", opsfake.Tenant("xeno", pipeline.OnFailureContinue))

	w.AddExecution(acme, "acme-1", sfntypes.ExecutionStatusSucceeded, "inbox/acme/a.csv", now.Add(-20*time.Minute))
	w.AddExecution(acme, "acme-2", sfntypes.ExecutionStatusFailed, "inbox/acme/bad.csv", now.Add(-10*time.Minute))
	w.Queues[acme.QueueURL].Visible, w.Queues[acme.QueueURL].InFlight = 2, 1

	w.AddExecution(globex, "globex-1", sfntypes.ExecutionStatusFailed, "inbox/globex/old.csv", now.Add(-time.Hour))
	w.AddExecution(globex, "globex-2", sfntypes.ExecutionStatusSucceeded, "inbox/globex/b.csv", now.Add(-30*time.Minute))
	big := w.AddExecution(globex, "globex-3", sfntypes.ExecutionStatusRunning, "inbox/globex/big.csv", now.Add(-30*time.Second))
	// 250,000 records at 100 a chunk are 3 segments of 100,000 records; 2 are done.
	big.History = opsfake.SplitHistory(250_000, 3, 2)
	w.Queues[globex.QueueURL].InFlight = 1
	for i := range w.Mappings {
		if aws.ToString(w.Mappings[i].UUID) == globex.EventSourceMappingUUID {
			w.Mappings[i].State = aws.String("Disabled")
		}
	}
	return w
}

// runIn runs pipectl against the world, with the world's clock and request id "req-1".
func runIn(t *testing.T, w *opsfake.World, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	newOps := func(_ context.Context, prefix string) (*ops.Ops, error) {
		o := ops.New(w.Clients(), prefix)
		o.HTTP = w.HTTPClient()
		o.Now = func() time.Time { return w.Now }
		o.NewRequestID = func() string { return "req-1" }
		return o, nil
	}
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut, newOps)
	return code, out.String(), errOut.String()
}

func TestUsageAndExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantCode   int
		wantStderr string // "" means stderr must be empty
		wantStdout string
	}{
		{nil, 2, "pipectl: no command given", ""},
		{[]string{"frobnicate"}, 2, `pipectl: unknown command "frobnicate"`, ""},
		{[]string{"status", "--bogus"}, 2, "pipectl: status: flag provided but not defined: -bogus", ""},
		{[]string{"--bogus", "status"}, 2, "pipectl: flag provided but not defined: -bogus", ""},
		{[]string{"files"}, 2, "pipectl: usage: pipectl files TENANT [--limit N]", ""},
		{[]string{"files", "acme", "--limit", "0"}, 2, "--limit 0 is out of range, want 1 to 1000", ""},
		{[]string{"files", "acme", "--limit", "x"}, 2, `invalid value "x" for flag -limit`, ""},
		{[]string{"skip", "acme", "acme-2"}, 2, "--reason is required", ""},
		{[]string{"pause", "acme", "extra"}, 2, "usage: pipectl pause TENANT", ""},
		{[]string{"replay", "acme"}, 2, "usage: pipectl replay TENANT KEY", ""},
		{[]string{"replay", "acme", "inbox/acme/a.csv", "--from-dlq"}, 2, "replay --from-dlq takes only TENANT", ""},
		{[]string{"help"}, 0, "", "usage: pipectl"},
		{[]string{"status", "-h"}, 0, "", "usage: pipectl"},
		{[]string{"status", "nobody"}, 1, `pipectl: tenant "nobody" not found; tenants: acme, globex`, ""},
		{[]string{"--stack-prefix", "Nothing", "pause", "acme"}, 1, `no stack named Nothing-* has an output PipelineTenant*`, ""},
		{[]string{"status"}, 0, "", "TENANT"},
		{[]string{"--stack-prefix", "Nothing", "status"}, 1, "pipectl: no tenants found in stacks named Nothing-*", ""},
		{[]string{"status", "--stack-prefix", "Nothing", "--json"}, 1, "pipectl: no tenants found in stacks named Nothing-*", ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runIn(t, world(), tc.args...)
			if code != tc.wantCode {
				t.Errorf("got exit %d, want %d; stderr %q", code, tc.wantCode, stderr)
			}
			if tc.wantStderr == "" && stderr != "" {
				t.Errorf("got stderr %q, want none", stderr)
			}
			if !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("got stderr %q, want it to contain %q", stderr, tc.wantStderr)
			}
			if !strings.Contains(stdout, tc.wantStdout) {
				t.Errorf("got stdout %q, want it to contain %q", stdout, tc.wantStdout)
			}
			// Errors are one clear line (plus the usage hint for bad usage).
			wantLines := map[int]int{0: 0, 1: 1, 2: 2}[tc.wantCode]
			if n := strings.Count(stderr, "\n"); n != wantLines {
				t.Errorf("got %d stderr lines, want %d: %q", n, wantLines, stderr)
			}
		})
	}
}

// Flags may come before or after the arguments, as people type them.
func TestFlagsAnywhere(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantIDs []string
	}{
		{[]string{"status", "acme", "--json"}, []string{"acme"}},
		{[]string{"--json", "status", "acme"}, []string{"acme"}},
		{[]string{"status", "--json", "globex", "acme"}, []string{"globex", "acme"}},
		{[]string{"status", "--json"}, []string{"acme", "globex"}},
		{[]string{"--stack-prefix", "Other", "status", "--json"}, []string{"zeta"}},
		{[]string{"status", "zeta", "--stack-prefix=Other", "-json"}, []string{"zeta"}},
		{[]string{"status", "--json", "--", "acme"}, []string{"acme"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runIn(t, world(), tc.args...)
			if code != 0 {
				t.Fatalf("got exit %d (%s), want 0", code, stderr)
			}
			var rep ops.StatusReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout)
			}
			var ids []string
			for _, r := range rep.Tenants {
				ids = append(ids, r.ID)
			}
			if !slices.Equal(ids, tc.wantIDs) {
				t.Errorf("got tenants %v, want %v", ids, tc.wantIDs)
			}
		})
	}
}

// The JSON shape is the issue's, field for field, with null for what does not apply.
func TestStatusJSON(t *testing.T) {
	code, stdout, stderr := runIn(t, world(), "status", "--json")
	if code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got, exp any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("got\n%s\nwant\n%s", stdout, want)
	}
}

func TestStatusNulls(t *testing.T) {
	w := opsfake.New(now)
	w.AddTenant("TenantPipeline-Tenants-1", globex)
	code, stdout, _ := runIn(t, w, "status", "--json")
	if code != 0 {
		t.Fatalf("got exit %d, want 0", code)
	}
	want := `{"tenants":[{"id":"globex","tier":"silo","pool":null,"policy":"continue","paused":false,"blocked":false,"queue":{"visible":0,"inFlight":0},"head":null,"lastFailure":null,"parked":null,"queuedFiles":null,"next":null,"sequence":null}],"pools":[],"coreSystems":[]}`
	var got, exp any
	json.Unmarshal([]byte(stdout), &got)
	json.Unmarshal([]byte(want), &exp)
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("got %s, want %s", stdout, want)
	}
}

func TestStatusTable(t *testing.T) {
	code, stdout, _ := runIn(t, world(), "status")
	if code != 0 {
		t.Fatalf("got exit %d, want 0", code)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	for i, want := range [][]string{
		{"TENANT", "TIER", "POLICY", "PAUSED", "BLOCKED", "VISIBLE", "IN-FLIGHT", "HEAD", "EXECUTION", "STATUS", "RECORDS", "QUEUED", "RUNNING"},
		{"acme", "silo", "halt", "no", "yes", "2", "1", "inbox/acme/bad.csv", "acme-2", "FAILED", "-", "11m0s", "-"},
		{"globex", "silo", "continue", "yes", "no", "0", "1", "inbox/globex/big.csv", "globex-3", "RUNNING", ">=200000/250000", "1m30s", "30s"},
	} {
		if got := strings.Fields(lines[i]); !slices.Equal(got, want) {
			t.Errorf("line %d: got %q, want %q", i, got, want)
		}
	}
	if !strings.Contains(stdout, "\nRECORDS >=n/N: at least n of the head file's N records are registered") {
		t.Errorf("got %s, want the legend of the >= count under the table", stdout)
	}
	if !strings.Contains(stdout, "acme last failure: inbox/acme/bad.csv acme-2 FAILED: ValidationError: inbox/acme/bad.csv line 3") {
		t.Errorf("got %s, want acme's last failure line", stdout)
	}
	// The blocked tenant's next commands, as the local run prints them at a halt: a file that
	// failed validation is skipped, not redriven.
	next := "acme is halted at acme-2:\n" + ops.ReleaseText("  ", []string{"pipectl skip acme acme-2 --reason '<why this file is skipped>'"})
	if !strings.Contains(stdout, next) || strings.Contains(stdout, "pipectl redrive") || strings.Contains(stdout, "globex is halted") {
		t.Errorf("got %s, want acme's next commands %q, no redrive and nothing for globex", stdout, next)
	}
}

// A halted tenant's status names the commands that release it, by how its file failed: skip
// always, redrive unless the file failed validation. A tenant that is not blocked gets none.
func TestStatusHaltedNextCommands(t *testing.T) {
	skip := "pipectl skip acme acme-2 --reason '<why this file is skipped>'"
	for _, tc := range []struct {
		name         string
		error, cause string
		want         []string
	}{
		{"validation", pipeline.ErrValidation, `{"errorMessage":"line 3","errorType":"ValidationError"}`, []string{skip}},
		{"the core system", pipeline.ErrPermanent, `{"errorMessage":"core system answered 400","errorType":"PermanentError"}`, []string{skip, "pipectl redrive acme acme-2"}},
		{"a timeout", "States.Timeout", "", []string{skip, "pipectl redrive acme acme-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			for _, e := range w.Executions {
				if e.Name == "acme-2" {
					e.Error, e.Cause = tc.error, tc.cause
				}
			}
			_, stdout, _ := runIn(t, w, "status", "--json", "acme", "globex")
			var rep ops.StatusReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Tenants) != 2 {
				t.Fatalf("status --json: %v\n%s", err, stdout)
			}
			if got := rep.Tenants[0].Next; !slices.Equal(got, tc.want) {
				t.Errorf("acme: got next %q, want %q", got, tc.want)
			}
			if got := rep.Tenants[1].Next; got != nil {
				t.Errorf("globex (not blocked): got next %q, want none", got)
			}
			_, table, _ := runIn(t, w, "status", "acme")
			if want := "acme is halted at acme-2:\n" + ops.ReleaseText("  ", tc.want); !strings.Contains(table, want) {
				t.Errorf("got table\n%s\nwant it to contain\n%s", table, want)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	code, stdout, stderr := runIn(t, world(), "files", "globex", "--limit", "2", "--json")
	if code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr)
	}
	var rep struct {
		Tenant string           `json:"tenant"`
		Files  []map[string]any `json:"files"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 2 {
		t.Fatalf("got %d files, want 2 (--limit 2)", len(rep.Files))
	}
	// Newest first.
	if rep.Files[0]["executionName"] != "globex-3" || rep.Files[1]["executionName"] != "globex-2" {
		t.Errorf("got %v, %v, want globex-3, globex-2", rep.Files[0]["executionName"], rep.Files[1]["executionName"])
	}
	keys := func(m map[string]any) []string {
		var k []string
		for n := range m {
			k = append(k, n)
		}
		slices.Sort(k)
		return k
	}
	if got, want := keys(rep.Files[0]), []string{"error", "errorMessage", "errorType", "executionName", "key", "records", "refusal", "registered", "rejected", "sequence", "start", "status", "stop"}; !slices.Equal(got, want) {
		t.Errorf("got fields %v, want %v", got, want)
	}
	if rep.Files[0]["stop"] != nil || rep.Files[0]["error"] != nil || rep.Files[0]["records"] != 250000.0 {
		t.Errorf("got %v, want null stop and error and 250000 records (Split's count) for the running file", rep.Files[0])
	}
	if rep.Files[1]["records"] != nil {
		t.Errorf("got records %v, want null for a file whose history does not tell", rep.Files[1]["records"])
	}
}

// A failed file shows what failed and why, read out of the Lambda's JSON error response that Step
// Functions records as the cause, not the response itself.
func TestFilesFailure(t *testing.T) {
	code, stdout, stderr := runIn(t, world(), "files", "acme", "--json")
	if code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr)
	}
	var rep ops.FilesReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 2 {
		t.Fatalf("got %d files, want 2", len(rep.Files))
	}
	failed, ok := rep.Files[0], rep.Files[1]
	if failed.ExecutionName != "acme-2" || aws.ToString(failed.Error) != "ValidationError" || aws.ToString(failed.ErrorType) != "ValidationError" ||
		aws.ToString(failed.ErrorMessage) != "inbox/acme/bad.csv line 3: 2 fields, want 3" {
		t.Errorf("got %s error %q, type %q, message %q, want acme-2 ValidationError: inbox/acme/bad.csv line 3: 2 fields, want 3",
			failed.ExecutionName, aws.ToString(failed.Error), aws.ToString(failed.ErrorType), aws.ToString(failed.ErrorMessage))
	}
	if ok.Error != nil || ok.ErrorType != nil || ok.ErrorMessage != nil {
		t.Errorf("got error fields %v %v %v for a succeeded file, want null", ok.Error, ok.ErrorType, ok.ErrorMessage)
	}

	code, stdout, _ = runIn(t, world(), "files", "acme")
	if code != 0 {
		t.Fatalf("got exit %d, want 0", code)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[1], "ValidationError: inbox/acme/bad.csv line 3: 2 fields, want 3") {
		t.Errorf("got\n%s\nwant acme-2's row to end with its error type and message", stdout)
	}
	if strings.Contains(stdout, "errorMessage") {
		t.Errorf("got\n%s\nwant no JSON error response in the table", stdout)
	}
}

func TestPauseResume(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		wantEnabled *bool // the UpdateEventSourceMapping call, nil: none
		wantOut     string
	}{
		{[]string{"pause", "acme"}, aws.Bool(false), "paused acme: event source mapping esm-acme is Disabling"},
		{[]string{"resume", "globex"}, aws.Bool(true), "resumed globex: event source mapping esm-globex is Enabling"},
		{[]string{"pause", "globex"}, nil, "globex was already paused"},
		{[]string{"resume", "acme"}, nil, "acme was already resumed"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			w := world()
			code, stdout, stderr := runIn(t, w, tc.args...)
			if code != 0 {
				t.Fatalf("got exit %d (%s), want 0", code, stderr)
			}
			if !strings.Contains(stdout, tc.wantOut) {
				t.Errorf("got %q, want it to contain %q", stdout, tc.wantOut)
			}
			if tc.wantEnabled == nil {
				if len(w.Updates) != 0 {
					t.Errorf("got %d updates, want none", len(w.Updates))
				}
				return
			}
			if len(w.Updates) != 1 || aws.ToBool(w.Updates[0].Enabled) != *tc.wantEnabled || aws.ToString(w.Updates[0].UUID) != "esm-"+tc.args[1] {
				t.Errorf("got updates %+v, want one of esm-%s with Enabled=%v", w.Updates, tc.args[1], *tc.wantEnabled)
			}
		})
	}
	// status shows what pause did.
	w := world()
	runIn(t, w, "pause", "acme")
	_, stdout, _ := runIn(t, w, "status", "acme", "--json")
	if !strings.Contains(stdout, `"paused": true`) {
		t.Errorf("got %s, want acme paused", stdout)
	}
}

// Two pooled tenants read one queue through one event source mapping: pausing either would pause
// the pool, so pause and resume refuse and change nothing.
func TestPausePooledTenantRefused(t *testing.T) {
	w := world()
	pooled := func(id string) pipeline.TenantOutput {
		o := opsfake.Tenant(id, pipeline.OnFailureContinue)
		o.QueueURL, o.QueueARN = "https://sqs.eu-west-1.amazonaws.com/123456789012/pool-a.fifo", "arn:aws:sqs:eu-west-1:123456789012:pool-a.fifo"
		o.ControllerFunction, o.EventSourceMappingUUID = "pool-a-controller", "esm-pool-a"
		return o
	}
	w.AddTenant("TenantPipeline-Pool-a", pooled("p1"))
	w.AddTenant("TenantPipeline-Pool-a", pooled("p2"))
	for _, verb := range []string{"pause", "resume"} {
		code, _, stderr := runIn(t, w, verb, "p1")
		if code != 1 || !strings.Contains(stderr, "tenant p1 shares its queue") || !strings.Contains(stderr, "(p2)") || !strings.Contains(stderr, "the whole pool") {
			t.Errorf("%s p1: got exit %d, %q; want 1 and a refusal naming p2 and the pool", verb, code, stderr)
		}
	}
	if len(w.Updates) != 0 {
		t.Errorf("got %d event source mapping updates, want none", len(w.Updates))
	}
}

func TestSkip(t *testing.T) {
	markerKey := "control/acme/skip/acme-2"
	for _, tc := range []struct {
		name      string
		setup     func(w *opsfake.World)
		args      []string
		wantCode  int
		wantError string
	}{
		{name: "the blocking execution is skipped", args: []string{"skip", "acme", "acme-2", "--reason", "row 3 fixed upstream; file resent"}},
		{name: "flags first", args: []string{"skip", "--reason=row 3 fixed upstream; file resent", "acme", "acme-2"}},
		{name: "another execution is refused", args: []string{"skip", "acme", "acme-1", "--reason", "x"}, wantCode: 1,
			wantError: "execution acme-1 is not tenant acme's blocking execution (acme-2 is)"},
		{name: "a continue tenant is refused", args: []string{"skip", "globex", "globex-1", "--reason", "x"}, wantCode: 1,
			wantError: "tenant globex has policy continue"},
		{name: "an execution being redriven is not blocking", args: []string{"skip", "acme", "acme-2", "--reason", "x"}, wantCode: 1,
			setup: func(w *opsfake.World) {
				w.Executions[1].Status = sfntypes.ExecutionStatusRunning
			},
			wantError: "tenant acme is not blocked"},
		{name: "a drained tenant is not blocked", args: []string{"skip", "acme", "acme-2", "--reason", "x"}, wantCode: 1,
			setup: func(w *opsfake.World) {
				w.Queues[acme.QueueURL].Visible, w.Queues[acme.QueueURL].InFlight = 0, 0
			},
			wantError: "tenant acme is not blocked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			if tc.setup != nil {
				tc.setup(w)
			}
			code, stdout, stderr := runIn(t, w, tc.args...)
			if code != tc.wantCode {
				t.Fatalf("got exit %d (%s), want %d", code, stderr, tc.wantCode)
			}
			body, written := w.Body("ingest", markerKey)
			if tc.wantCode != 0 {
				if !strings.Contains(stderr, tc.wantError) {
					t.Errorf("got %q, want it to contain %q", stderr, tc.wantError)
				}
				if written {
					t.Errorf("got a skip marker written, want none")
				}
				return
			}
			want := "row 3 fixed upstream; file resent\nrequested-by: arn:aws:sts::123456789012:assumed-role/Operator/alice\nrequested-at: 2026-11-30T12:00:00Z\n"
			if body != want {
				t.Errorf("got marker %q, want %q", body, want)
			}
			if !strings.Contains(stdout, "s3://ingest/"+markerKey) {
				t.Errorf("got %q, want the marker's location", stdout)
			}
			// Once written, the tenant is no longer blocked.
			_, st, _ := runIn(t, w, "status", "acme", "--json")
			if !strings.Contains(st, `"blocked": false`) {
				t.Errorf("got %s, want acme not blocked after the skip", st)
			}
		})
	}
}

func TestRedrive(t *testing.T) {
	for _, tc := range []struct {
		name        string
		setup       func(w *opsfake.World)
		args        []string
		wantCode    int
		wantError   string
		wantRedrive string // execution redriven directly (halt)
		wantControl string // execution named by the control message sent (continue)
		// wantOutOfOrder: the control message and the audit record in the file's results folder
		// say out of order.
		wantOutOfOrder bool
	}{
		{name: "halt: the blocking execution is redriven", args: []string{"redrive", "acme"}, wantRedrive: "acme-2"},
		{name: "halt: naming the blocking execution", args: []string{"redrive", "acme", "acme-2"}, wantRedrive: "acme-2"},
		{name: "halt: another execution is refused", args: []string{"redrive", "acme", "acme-1"}, wantCode: 1,
			wantError: "execution acme-1 is not tenant acme's blocking execution (acme-2 is)"},
		{name: "halt: not blocked is refused", args: []string{"redrive", "acme"}, wantCode: 1, wantError: "tenant acme is not blocked",
			setup: func(w *opsfake.World) { w.Queues[acme.QueueURL].Visible, w.Queues[acme.QueueURL].InFlight = 0, 0 }},
		{name: "halt: stopped more than 14 days ago is refused", args: []string{"redrive", "acme"}, wantCode: 1,
			wantError: "stopped 2026-11-16T11:59:00Z, more than 14 days ago",
			setup:     func(w *opsfake.World) { w.Executions[1].Stop = aws.Time(now.Add(-14*24*time.Hour - time.Minute)) }},
		{name: "halt: not redrivable is refused with Step Functions' reason", args: []string{"redrive", "acme"}, wantCode: 1,
			wantError: "execution acme-2 is not redrivable: Execution history event limit exceeded.",
			setup: func(w *opsfake.World) {
				w.Executions[1].RedriveStatus = sfntypes.ExecutionRedriveStatusNotRedrivable
				w.Executions[1].RedriveReason = "Execution history event limit exceeded."
			}},
		// globex-1 failed and later files (globex-2, globex-3) ran after it: an out-of-order redrive.
		{name: "continue: goes through the FIFO group", args: []string{"redrive", "globex", "globex-1", "--reason", "core fixed", "--out-of-order"}, wantControl: "globex-1", wantOutOfOrder: true},
		{name: "continue: passed by later files, refused naming them", args: []string{"redrive", "globex", "globex-1", "--reason", "core fixed"}, wantCode: 1,
			wantError: "redrive of globex-1 refused: 2 later file(s) of tenant globex ran after it: inbox/globex/big.csv (globex-3, RUNNING), inbox/globex/b.csv (globex-2, SUCCEEDED)"},
		{name: "continue: --out-of-order without --reason is bad usage", args: []string{"redrive", "globex", "globex-1", "--out-of-order"}, wantCode: 2,
			wantError: "--out-of-order needs --reason"},
		{name: "continue: the newest failure by default", args: []string{"redrive", "globex", "--out-of-order", "--reason", "r"}, wantControl: "globex-1", wantOutOfOrder: true},
		{name: "continue: a succeeded execution is refused", args: []string{"redrive", "globex", "globex-2"}, wantCode: 1,
			wantError: "execution globex-2 is SUCCEEDED: only FAILED, TIMED_OUT or ABORTED executions can be redriven"},
		{name: "continue: an unknown execution is refused", args: []string{"redrive", "globex", "nope"}, wantCode: 1,
			wantError: "tenant globex has no execution nope"},
		{name: "halt: a file that failed validation is refused", args: []string{"redrive", "acme"}, wantCode: 1,
			setup: func(w *opsfake.World) { failValidation(w.Executions[1], "inbox/acme/bad.csv") },
			wantError: "pipectl: execution acme-2 failed validation (ValidationError: inbox/acme/bad.csv line 3: 2 fields, want 3): " +
				"a redrive reads the same file and fails the same way; a file that fails validation can only be skipped " +
				"(pipectl skip acme acme-2 --reason '<why this file is skipped>') or replaced (upload a corrected file); pass --force to redrive it anyway\n"},
		{name: "halt: --force redrives a file that failed validation", args: []string{"redrive", "acme", "--force"}, wantRedrive: "acme-2",
			setup: func(w *opsfake.World) { failValidation(w.Executions[1], "inbox/acme/bad.csv") }},
		{name: "continue: a file that failed validation is refused", args: []string{"redrive", "globex", "globex-1"}, wantCode: 1,
			setup: func(w *opsfake.World) { failValidation(w.Executions[2], "inbox/globex/old.csv") },
			// A continue tenant refuses a skip: the hint is what works for it.
			wantError: "can only be replaced (upload a corrected file); pass --force to redrive it anyway"},
		{name: "continue: a failure named only by its error is refused", args: []string{"redrive", "globex"}, wantCode: 1,
			setup: func(w *opsfake.World) {
				w.Executions[2].Error, w.Executions[2].Cause = pipeline.ErrValidation, "inbox/globex/old.csv line 1: not UTF-8"
			},
			wantError: "execution globex-1 failed validation (ValidationError: inbox/globex/old.csv line 1: not UTF-8)"},
		{name: "continue: --force queues a file that failed validation", args: []string{"redrive", "globex", "--force", "--out-of-order", "--reason", "r"}, wantControl: "globex-1", wantOutOfOrder: true,
			setup: func(w *opsfake.World) { failValidation(w.Executions[2], "inbox/globex/old.csv") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			// A redrive is for a failure that another try can fix: here the core system's.
			for _, e := range w.Executions {
				if e.Error != "" {
					e.Error, e.Cause = pipeline.ErrPermanent, `{"errorMessage":"core system answered 503 three times","errorType":"PermanentError"}`
				}
			}
			if tc.setup != nil {
				tc.setup(w)
			}
			code, _, stderr := runIn(t, w, tc.args...)
			if code != tc.wantCode {
				t.Fatalf("got exit %d (%s), want %d", code, stderr, tc.wantCode)
			}
			if !strings.Contains(stderr, tc.wantError) {
				t.Errorf("got %q, want it to contain %q", stderr, tc.wantError)
			}
			var redriven []string
			for _, r := range w.Redrives {
				redriven = append(redriven, aws.ToString(r.ExecutionArn))
			}
			var wantRedrives []string
			if tc.wantRedrive != "" {
				wantRedrives = []string{"arn:aws:states:eu-west-1:123456789012:execution:acme-files:" + tc.wantRedrive}
			}
			if !slices.Equal(redriven, wantRedrives) {
				t.Errorf("got RedriveExecution of %v, want %v", redriven, wantRedrives)
			}
			sent := w.Queues[globex.QueueURL].Sent
			if tc.wantControl == "" {
				if len(sent) != 0 {
					t.Errorf("got %d messages sent, want none", len(sent))
				}
				return
			}
			if len(sent) != 1 {
				t.Fatalf("got %d messages sent, want 1", len(sent))
			}
			if aws.ToString(sent[0].MessageGroupId) != "globex" || aws.ToString(sent[0].MessageDeduplicationId) != "req-1" {
				t.Errorf("got group %s, dedup id %s, want globex, req-1", aws.ToString(sent[0].MessageGroupId), aws.ToString(sent[0].MessageDeduplicationId))
			}
			m, err := pipeline.DecodeControl([]byte(aws.ToString(sent[0].MessageBody)))
			if err != nil {
				t.Fatalf("got an invalid control message: %v", err)
			}
			if m.Action != pipeline.ControlRedrive || m.ExecutionName != tc.wantControl || m.Tenant != "globex" ||
				m.RequestedBy != "arn:aws:sts::123456789012:assumed-role/Operator/alice" || m.RequestID != "req-1" || !m.RequestedAt.Equal(now) {
				t.Errorf("got %+v, want a redrive of %s by alice at %s", m, tc.wantControl, now)
			}
			audit, written := w.Body("ingest", "results/globex/"+tc.wantControl+"/out-of-order.json")
			if m.OutOfOrder != tc.wantOutOfOrder || written != tc.wantOutOfOrder {
				t.Errorf("got control outOfOrder %v, audit record written %v, want both %v", m.OutOfOrder, written, tc.wantOutOfOrder)
			}
			if tc.wantOutOfOrder && (m.Version != pipeline.ControlVersionOutOfOrder || !strings.Contains(audit, `"outOfOrder": true`) ||
				!strings.Contains(audit, `"reason": "`+m.Reason+`"`) || !strings.Contains(audit, `"laterCount": 2`)) {
				t.Errorf("got version %d, audit record %s; want version %d and a record with the reason %q and 2 later files", m.Version, audit, pipeline.ControlVersionOutOfOrder, m.Reason)
			}
		})
	}
}

// failValidation makes e a file that failed validation at line 3 of key, as Step Functions records it.
func failValidation(e *opsfake.Execution, key string) {
	e.Error, e.Cause = pipeline.ErrValidation, `{"errorMessage":"`+key+` line 3: 2 fields, want 3","errorType":"ValidationError"}`
}

func TestReplay(t *testing.T) {
	t.Run("a key is pinned to its current version and queued as a control message", func(t *testing.T) {
		w := world()
		code, stdout, stderr := runIn(t, w, "replay", "globex", "inbox/globex/b.csv", "--reason", "core lost it", "--json", "--out-of-order")
		if code != 0 {
			t.Fatalf("got exit %d (%s), want 0", code, stderr)
		}
		sent := w.Queues[globex.QueueURL].Sent
		if len(sent) != 1 {
			t.Fatalf("got %d messages, want 1", len(sent))
		}
		m, err := pipeline.DecodeControl([]byte(aws.ToString(sent[0].MessageBody)))
		if err != nil {
			t.Fatal(err)
		}
		want := pipeline.ControlSource{Bucket: "ingest", Key: "inbox/globex/b.csv", VersionID: "v-globex-2", ETag: `"etag-globex-2"`, Size: 12,
			LastModified:      w.Objects["ingest/inbox/globex/b.csv"].LastModified.UTC().Format(time.RFC3339Nano),
			OriginalExecution: "globex-2"}
		if want.LastModified == "0001-01-01T00:00:00Z" {
			t.Fatalf("the fake object has no LastModified, so this case cannot check it")
		}
		if m.Action != pipeline.ControlReplay || m.Source == nil || *m.Source != want || m.Reason != "core lost it" {
			t.Errorf("got %+v (source %+v), want a replay of %+v", m, m.Source, want)
		}
		if !strings.Contains(stdout, `"executionName": "rp-req-1"`) {
			t.Errorf("got %s, want the replay's execution name", stdout)
		}
	})
	// The original is the oldest execution of the version started after the version was written:
	// a later replay of it (rp-earlier) is not, nor is anything started before the write.
	t.Run("the original execution is the version's oldest", func(t *testing.T) {
		w := world()
		versionInput := w.Executions[len(w.Executions)-2].Input // globex-2's: inbox/globex/b.csv, v-globex-2
		before := &opsfake.Execution{Name: "globex-0", StateMachineARN: globex.StateMachineARN, Status: sfntypes.ExecutionStatusSucceeded,
			Input: versionInput, Start: now.Add(-2 * time.Hour)}
		later := &opsfake.Execution{Name: "rp-earlier", StateMachineARN: globex.StateMachineARN, Status: sfntypes.ExecutionStatusSucceeded,
			Input: versionInput, Start: now.Add(-time.Minute)}
		w.Executions = append(append([]*opsfake.Execution{before}, w.Executions...), later)
		code, stdout, stderr := runIn(t, w, "replay", "globex", "inbox/globex/b.csv", "--out-of-order", "--reason", "r")
		if code != 0 {
			t.Fatalf("got exit %d (%s), want 0", code, stderr)
		}
		m, err := pipeline.DecodeControl([]byte(aws.ToString(w.Queues[globex.QueueURL].Sent[0].MessageBody)))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Source.OriginalExecution; got != "globex-2" {
			t.Errorf("got original execution %q, want globex-2", got)
		}
		if !strings.Contains(stdout, "ranked as its original execution globex-2") {
			t.Errorf("got %q, want it to name the original", stdout)
		}
	})
	t.Run("a version no execution registered has no original", func(t *testing.T) {
		w := world()
		w.Objects["ingest/inbox/globex/new.csv"] = &opsfake.Object{VersionID: "v-new", ETag: `"etag-new"`, Body: "id\n1\n", LastModified: now.Add(-time.Minute)}
		code, stdout, stderr := runIn(t, w, "replay", "globex", "inbox/globex/new.csv", "--out-of-order", "--reason", "r")
		if code != 0 {
			t.Fatalf("got exit %d (%s), want 0", code, stderr)
		}
		m, err := pipeline.DecodeControl([]byte(aws.ToString(w.Queues[globex.QueueURL].Sent[0].MessageBody)))
		if err != nil {
			t.Fatal(err)
		}
		if m.Source.OriginalExecution != "" || !strings.Contains(stdout, "no original execution found") {
			t.Errorf("got original %q and %q, want none and a note", m.Source.OriginalExecution, stdout)
		}
	})
	for _, tc := range []struct {
		name      string
		args      []string
		wantError string
	}{
		{"outside the prefix", []string{"replay", "globex", "inbox/acme/a.csv"}, "key inbox/acme/a.csv is outside tenant globex's prefix inbox/globex/"},
		{"a missing object", []string{"replay", "globex", "inbox/globex/none.csv"}, "pipectl: no such object: s3://ingest/inbox/globex/none.csv\n"},
		{"a missing version", []string{"replay", "globex", "inbox/globex/b.csv", "--version-id", "old"},
			"pipectl: no such object version: s3://ingest/inbox/globex/b.csv has no version old (S3 answers 404); its versions: aws s3api list-object-versions --bucket ingest --prefix inbox/globex/b.csv\n"},
		{"no dead-letter queue", []string{"replay", "globex", "--from-dlq"}, "tenant globex's stack names no dead-letter queue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			code, _, stderr := runIn(t, w, tc.args...)
			if code != 1 || !strings.Contains(stderr, tc.wantError) {
				t.Errorf("got exit %d, %q, want 1 and %q", code, stderr, tc.wantError)
			}
			if n := len(w.Queues[globex.QueueURL].Sent); n != 0 {
				t.Errorf("got %d messages sent, want none", n)
			}
		})
	}
}

func TestReplayFromDLQ(t *testing.T) {
	w := opsfake.New(now)
	tn := opsfake.Tenant("globex", pipeline.OnFailureContinue)
	tn.DLQURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/globex-dlq"
	w.AddTenant("TenantPipeline-Tenants-1", tn)
	event := func(id, key string, at time.Time) sqstypes.Message {
		b, _ := json.Marshal(s3event.ObjectCreated(id, at, "ingest", s3event.Object{Key: key, Size: 3}))
		return sqstypes.Message{Body: aws.String(string(b)), ReceiptHandle: aws.String("rh-" + id)}
	}
	dlq := w.Queues[tn.DLQURL]
	dlq.Messages = []sqstypes.Message{
		event("e3", "inbox/globex/3.csv", now.Add(-1*time.Minute)),
		event("e1", "inbox/globex/1.csv", now.Add(-3*time.Minute)),
		{Body: aws.String("not an event"), ReceiptHandle: aws.String("rh-junk")},
		event("e2", "inbox/globex/2.csv", now.Add(-2*time.Minute)),
		event("eX", "inbox/acme/x.csv", now.Add(-2*time.Minute)),
	}
	code, stdout, stderr := runIn(t, w, "replay", "globex", "--from-dlq")
	if code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr)
	}
	var ids []string
	for _, s := range w.Queues[tn.QueueURL].Sent {
		ev, err := s3event.Parse([]byte(aws.ToString(s.MessageBody)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
		if aws.ToString(s.MessageGroupId) != "globex" || aws.ToString(s.MessageDeduplicationId) != ev.ID {
			t.Errorf("got group %s, dedup %s, want globex, %s", aws.ToString(s.MessageGroupId), aws.ToString(s.MessageDeduplicationId), ev.ID)
		}
	}
	if want := []string{"e1", "e2", "e3"}; !slices.Equal(ids, want) {
		t.Errorf("got events re-sent %v, want %v (oldest first)", ids, want)
	}
	if want := []string{"rh-e1", "rh-e2", "rh-e3"}; !slices.Equal(dlq.Deleted, want) {
		t.Errorf("got deleted %v, want %v (the junk and the other tenant's event stay)", dlq.Deleted, want)
	}
	if !strings.Contains(stdout, "re-sent 3 events") || !strings.Contains(stdout, "2 other messages left there") {
		t.Errorf("got %q, want 3 re-sent and 2 left", stdout)
	}
}

func TestDiscoveryRefusesATenantInTwoStacks(t *testing.T) {
	w := world()
	w.AddTenant("TenantPipeline-Tenants-3", acme)
	code, _, stderr := runIn(t, w, "status")
	if code != 1 || !strings.Contains(stderr, `tenant "acme" is described by two stacks, TenantPipeline-Tenants-1 and TenantPipeline-Tenants-3`) {
		t.Errorf("got exit %d, %q, want 1 and the two stacks named", code, stderr)
	}
}

func opsfakeStack(name string) cftypes.Stack {
	return cftypes.Stack{StackName: aws.String(name), Outputs: []cftypes.Output{{OutputKey: aws.String("BucketName"), OutputValue: aws.String("ingest")}}}
}

func TestStatusWithoutMapping(t *testing.T) {
	w := world()
	w.Mappings = nil
	code, stdout, _ := runIn(t, w, "status", "acme", "--json")
	if code != 0 || !strings.Contains(stdout, `"paused": null`) {
		t.Errorf("got exit %d, %s, want 0 and paused null", code, stdout)
	}
	code, _, stderr := runIn(t, w, "pause", "acme")
	if code != 1 || !strings.Contains(stderr, "tenant acme: no event source mapping of acme-controller reads arn:aws:sqs:eu-west-1:123456789012:acme.fifo") {
		t.Errorf("got exit %d, %q, want 1 and the missing mapping named", code, stderr)
	}
}

func TestServiceErrorIsOneLine(t *testing.T) {
	w := world()
	w.Err["ListExecutions"] = errors.Join(errors.New("operation error SFN: ListExecutions, exceeded maximum number of attempts"), errors.New("ThrottlingException: Rate exceeded"))
	code, stdout, stderr := runIn(t, w, "status")
	if code != 1 || stdout != "" {
		t.Errorf("got exit %d, stdout %q, want 1 and nothing on stdout", code, stdout)
	}
	if want := "pipectl: tenant acme: list running executions: operation error SFN: ListExecutions, exceeded maximum number of attempts; ThrottlingException: Rate exceeded\n"; stderr != want {
		t.Errorf("got %q, want %q", stderr, want)
	}
}

// Two writes of one key in one second are re-sent in S3's order: sequencers compare after
// left-padding to equal length, so 0A (10) comes before 09FF (2559), unlike as plain strings.
func TestReplayFromDLQSequencerLengths(t *testing.T) {
	w := opsfake.New(now)
	tn := opsfake.Tenant("globex", pipeline.OnFailureContinue)
	tn.DLQURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/globex-dlq"
	w.AddTenant("TenantPipeline-Tenants-1", tn)
	at := now.Add(-time.Minute)
	event := func(id, key, seq string) sqstypes.Message {
		b, _ := json.Marshal(s3event.ObjectCreated(id, at, "ingest", s3event.Object{Key: key, Size: 3, Sequencer: seq}))
		return sqstypes.Message{Body: aws.String(string(b)), ReceiptHandle: aws.String("rh-" + id)}
	}
	w.Queues[tn.DLQURL].Messages = []sqstypes.Message{
		event("second", "inbox/globex/a.csv", "09FF"),
		event("first", "inbox/globex/a.csv", "0A"),
		event("third", "inbox/globex/a.csv", "0000000A00"),
	}
	if code, _, stderr := runIn(t, w, "replay", "globex", "--from-dlq"); code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr)
	}
	var ids []string
	for _, s := range w.Queues[tn.QueueURL].Sent {
		ev, err := s3event.Parse([]byte(aws.ToString(s.MessageBody)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	if want := []string{"first", "second", "third"}; !slices.Equal(ids, want) {
		t.Errorf("got events re-sent %v, want %v", ids, want)
	}
}

// The text output has one line per core system of the tenants, and one per pool gate.
func TestStatusCoreSystemLines(t *testing.T) {
	w := opsfake.New(now)
	ledger := &pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 3, Adaptive: true}
	w.CoreSystemOf["hooli"] = ledger
	pool := opsfake.Pool("default")
	w.AddPool("TenantPipeline-Pool-default", pool, map[string]string{"hooli": pipeline.OnFailureContinue})
	for k, v := range map[string]string{pipeline.EnvCoreSystemTables: `{"ledger":"ledger-admission"}`, pipeline.EnvPoolAdmissionTable: "pool-admission",
		pipeline.EnvPoolMaxRunningFiles: "5", pipeline.EnvMaxWaitSeconds: "300"} {
		w.Env[pool.ControllerFunction][k] = v
	}
	w.AddLease("ledger-admission", schema.CoreGate("ledger"), 0, "hooli-1", "hooli", now)
	w.AddWaiter("ledger-admission", schema.CoreGate("ledger"), "other", 1, now.Add(-40*time.Second), now)
	w.AddLease("pool-admission", schema.PoolGate("default"), 0, "hooli-1", "hooli", now)
	w.SetShares("ledger-admission", "ledger", shares.Entry{Execution: "hooli-1", Demand: 8, Weight: 1, Grant: 2, Until: now.Add(time.Minute)})
	code, stdout, stderr := runIn(t, w, "status")
	if code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr)
	}
	for _, want := range []string{
		"pool default admission: 1 of 5 running files, 0 tenants waiting\n",
		"core system ledger: 1 of 3 running files (maxRunningFiles 3, adaptive), 2 of 3 requests in flight, 1 tenants waiting, oldest admission wait 40s; tenants hooli\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("got %s, want the line %q", stdout, want)
		}
	}
}

// pipectl files shows the counts of a file's summary.json, "-" (null in JSON) for a file without
// one of its current run: acme-2's summary is of another run (an earlier end of a redrive).
func TestFilesCounts(t *testing.T) {
	w := world()
	w.Objects[acme.Bucket+"/results/acme/acme-1/summary.json"] = &opsfake.Object{Body: `{"version":1,"execution":"acme-1","status":"SUCCEEDED","records":10,"registered":8,"rejected":2}`}
	w.Objects[acme.Bucket+"/results/acme/acme-2/summary.json"] = &opsfake.Object{Body: `{"version":1,"execution":"acme-2","redriveCount":3,"status":"FAILED","records":10,"registered":4,"rejected":0,"unprocessed":6}`}
	code, stdout, stderr := runIn(t, w, "files", "acme")
	if code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "RECORDS  REGISTERED  REJECTED") {
		t.Fatalf("got\n%s\nwant a header with REGISTERED and REJECTED after RECORDS", stdout)
	}
	cols := func(line string) []string { return strings.Fields(line) }
	for _, l := range lines[1:] {
		c := cols(l)
		switch c[1] {
		case "acme-1":
			if c[4] != "8" || c[5] != "2" {
				t.Errorf("acme-1: got registered %s rejected %s, want 8 2: %s", c[4], c[5], l)
			}
		case "acme-2":
			if c[4] != "-" || c[5] != "-" {
				t.Errorf("acme-2: got registered %s rejected %s, want - - (no summary): %s", c[4], c[5], l)
			}
		}
	}
	_, stdout, _ = runIn(t, w, "files", "acme", "--json")
	var rep ops.FilesReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Files {
		got := [2]string{knownCount(f.Registered), knownCount(f.Rejected)}
		want := map[string][2]string{"acme-1": {"8", "2"}, "acme-2": {"-", "-"}}[f.ExecutionName]
		if got != want {
			t.Errorf("%s: got registered, rejected %v, want %v", f.ExecutionName, got, want)
		}
	}
}

// pipectl results prints a file's summary found by execution or by key, --json prints summary.json
// as stored, and --out downloads the results files the summary names.
func TestResults(t *testing.T) {
	const summary = `{"version":1,"tenant":"acme","tier":"silo","execution":"acme-2","status":"FAILED",` +
		`"source":{"bucket":"b","key":"inbox/acme/bad.csv"},"records":5,"registered":2,"rejected":1,"unprocessed":2,` +
		`"failure":{"type":"ValidationError","message":"2 fields, want 3","line":3},` +
		`"files":{"summary":"s3://BUCKET/results/acme/acme-2/summary.json","rejected":"s3://BUCKET/results/acme/acme-2/rejected.csv",` +
		`"rejectedNotCsv":"s3://BUCKET/results/acme/acme-2/rejected.jsonl"}}`
	setup := func() *opsfake.World {
		w := world()
		body := strings.ReplaceAll(summary, "BUCKET", acme.Bucket)
		w.Objects[acme.Bucket+"/results/acme/acme-2/summary.json"] = &opsfake.Object{Body: body}
		w.Objects[acme.Bucket+"/results/acme/acme-2/rejected.csv"] = &opsfake.Object{Body: "_line,_record,_error,a,b\n"}
		w.Objects[acme.Bucket+"/results/acme/acme-2/rejected.jsonl"] = &opsfake.Object{Body: `{"line":4,"record":3,"error":"stray quote","raw":"\"x"}` + "\n"}
		return w
	}
	for _, ref := range []string{"acme-2", "inbox/acme/bad.csv"} {
		t.Run(ref, func(t *testing.T) {
			code, stdout, stderr := runIn(t, setup(), "results", "acme", ref)
			if code != 0 {
				t.Fatalf("got exit %d (%s), want 0", code, stderr)
			}
			for _, want := range []string{"acme-2", "FAILED", "registered", "ValidationError: 2 fields, want 3 (line 3)", "rejected.csv", "rejected, not CSV", "rejected.jsonl"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("got\n%s\nwant it to contain %q", stdout, want)
				}
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		_, stdout, _ := runIn(t, setup(), "results", "acme", "acme-2", "--json")
		var got, want map[string]any
		json.Unmarshal([]byte(stdout), &got)
		json.Unmarshal([]byte(strings.ReplaceAll(summary, "BUCKET", acme.Bucket)), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %s, want summary.json as stored", stdout)
		}
	})
	t.Run("out", func(t *testing.T) {
		dir := t.TempDir()
		code, _, stderr := runIn(t, setup(), "results", "acme", "acme-2", "--out", dir)
		if code != 0 {
			t.Fatalf("got exit %d (%s), want 0", code, stderr)
		}
		for _, f := range []string{"summary.json", "rejected.csv", "rejected.jsonl"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("got no %s in --out: %v", f, err)
			}
		}
	})
	t.Run("registered after halt", func(t *testing.T) {
		w := world()
		keyed := strings.Replace(strings.ReplaceAll(summary, "BUCKET", acme.Bucket), `"unprocessed":2,`,
			`"unprocessed":2,"registeredAfterHalt":[{"first":4,"last":4}],`, 1)
		w.Objects[acme.Bucket+"/results/acme/acme-2/summary.json"] = &opsfake.Object{Body: keyed}
		code, stdout, stderr := runIn(t, w, "results", "acme", "acme-2")
		if code != 0 || !strings.Contains(stdout, "registered after halt") || !strings.Contains(stdout, "1 record: 4") {
			t.Errorf("got exit %d (%s)\n%s\nwant a row of the records registered after the halt", code, stderr, stdout)
		}
		if _, plain, _ := runIn(t, setup(), "results", "acme", "acme-2"); strings.Contains(plain, "registered after halt") {
			t.Errorf("a file-order summary: got\n%s\nwant no registered-after-halt row", plain)
		}
	})
	t.Run("no summary", func(t *testing.T) {
		code, _, stderr := runIn(t, world(), "results", "acme", "acme-1")
		if code != 1 || !strings.Contains(stderr, "results/acme/acme-1/summary.json") {
			t.Errorf("got exit %d, stderr %q; want 1 naming the missing summary.json", code, stderr)
		}
	})
}

// pipectl results tells a file's key from an execution name, says how it read one that was not
// as it stood, and asks for quotes around a key split into words by the shell.
func TestResultsArgument(t *testing.T) {
	const summary = `{"version":1,"tenant":"acme","execution":"acme-2","status":"FAILED","source":{"bucket":"ingest","key":"inbox/acme/bad.csv"}}`
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string // each in stderr; none: stderr empty
	}{
		{"an execution name", []string{"acme-2"}, 0, "acme-2", nil},
		{"a key under the prefix", []string{"inbox/acme/bad.csv"}, 0, "acme-2", nil},
		{"a file name is the key under the prefix, and said so", []string{"bad.csv"}, 0, "acme-2",
			[]string{`pipectl: note: "bad.csv" is read as a file's key`, "under tenant acme's prefix: inbox/acme/bad.csv"}},
		{"a file name no execution read", []string{"other.csv"}, 1, "",
			[]string{"no execution of tenant acme read inbox/acme/other.csv", `"other.csv" is read as a file's key`}},
		{"a key outside the prefix is refused", []string{"inbox/globex/bad.csv"}, 1, "",
			[]string{`"inbox/globex/bad.csv" is read as a file's key`, "not under tenant acme's prefix inbox/acme/"}},
		{"a name without an extension is an execution name, with the key to try", []string{"bad"}, 1, "",
			[]string{`"bad" is read as an execution name`, "give its key, inbox/acme/bad"}},
		{"a key with spaces, unquoted", []string{"my", "bad", "file.csv"}, 2, "",
			[]string{"results takes one KEY or EXECUTION after TENANT, got 3 words; quote a key with spaces: pipectl results acme 'my bad file.csv'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			w.Objects[acme.Bucket+"/results/acme/acme-2/summary.json"] = &opsfake.Object{Body: summary}
			code, stdout, stderr := runIn(t, w, append([]string{"results", "acme"}, tc.args...)...)
			if code != tc.wantCode || !strings.Contains(stdout, tc.wantStdout) {
				t.Errorf("got exit %d, stdout %q; want %d and %q (stderr %q)", code, stdout, tc.wantCode, tc.wantStdout, stderr)
			}
			if len(tc.wantStderr) == 0 && stderr != "" {
				t.Errorf("got stderr %q, want none", stderr)
			}
			for _, want := range tc.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("got stderr %q, want it to contain %q", stderr, want)
				}
			}
		})
	}
}

func TestRecordRanges(t *testing.T) {
	for _, c := range []struct {
		rs   []pipeline.RecordRange
		most int
		want string
	}{
		{[]pipeline.RecordRange{{First: 4, Last: 4}}, 10, "1 record: 4"},
		{[]pipeline.RecordRange{{First: 124, Last: 126}, {First: 130, Last: 130}}, 10, "4 records: 124-126, 130"},
		{[]pipeline.RecordRange{{First: 1, Last: 2}, {First: 5, Last: 5}, {First: 9, Last: 9}}, 2, "4 records: 1-2, 5, and 1 more ranges (--json lists them)"},
	} {
		if got := recordRanges(c.rs, c.most); got != c.want {
			t.Errorf("recordRanges(%v, %d): got %q, want %q", c.rs, c.most, got, c.want)
		}
	}
}
