package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// TestBulkCommands: a selector instead of a tenant acts on every tenant it picks, after a
// confirmation on a terminal or --yes; a dry run does nothing; a selector with a tenant, or the
// bulk flags without a selector, are bad usage.
func TestBulkCommands(t *testing.T) {
	list := filepath.Join(t.TempDir(), "tenants.txt")
	if err := os.WriteFile(list, []byte("# the ERP's tenants\nacme\n\nglobex # continue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		terminal   bool
		answer     string
		setup      func(w *opsfake.World)
		wantCode   int
		wantOut    string // in stdout
		wantErr    string // in stderr
		wantActed  int    // RedriveExecution calls plus skip markers written
		wantMarker bool
	}{
		{name: "a selector and a tenant", args: []string{"redrive", "acme", "--all-halted"}, wantCode: 2,
			wantErr: "give no TENANT or EXECUTION too (got acme)"},
		{name: "--dry-run without a selector", args: []string{"redrive", "acme", "--dry-run"}, wantCode: 2,
			wantErr: "go with a selector"},
		{name: "no tenant and no selector", args: []string{"redrive"}, wantCode: 2, wantErr: "usage: pipectl redrive TENANT [EXECUTION] | SELECTOR"},
		{name: "--rate 0", args: []string{"redrive", "--all-halted", "--rate", "0"}, wantCode: 2, wantErr: "--rate 0 must be above 0"},
		{name: "no terminal, no --yes: refused, nothing done", args: []string{"redrive", "--all-halted"}, wantCode: 2,
			wantErr: "pass --yes to go ahead"},
		{name: "dry run lists and does nothing", args: []string{"redrive", "--all-halted", "--dry-run"},
			wantOut: "redrive (dry run, nothing done): 1 of 2 tenants selected: 1 planned"},
		{name: "--yes redrives each halted tenant", args: []string{"redrive", "--all-halted", "--yes"}, wantActed: 1,
			wantOut: "redrive: 1 of 2 tenants selected: 1 done, 0 skipped, 0 failed"},
		{name: "confirmed on a terminal", args: []string{"redrive", "--all-halted"}, terminal: true, answer: "yes\n", wantActed: 1,
			wantErr: "pipectl: redrive 1 of 2 tenants: acme\nType yes to go on: "},
		{name: "declined on a terminal", args: []string{"redrive", "--all-halted"}, terminal: true, answer: "n\n", wantCode: 1,
			wantErr: "not confirmed: nothing done"},
		{name: "a list: the continue tenant's redrive is refused (later files passed it) and skipped", args: []string{"redrive", "--tenants", list, "--yes"},
			wantActed: 1, wantOut: "redrive: 2 of 2 tenants selected: 1 done, 1 skipped, 0 failed"},
		{name: "a failure: reported, exit 1", args: []string{"redrive", "--all-halted", "--yes"}, wantCode: 1, wantActed: 1,
			setup:   func(w *opsfake.World) { w.Err["RedriveExecution"] = errors.New("ThrottlingException: Rate exceeded") },
			wantOut: "1 failed", wantErr: "pipectl: 1 of 1 tenants failed"},
		{name: "skip needs a reason", args: []string{"skip", "--all-halted", "--yes"}, wantCode: 2, wantErr: "--reason is required"},
		{name: "skip each halted head", args: []string{"skip", "--all-halted", "--yes", "--reason", "ERP lost the batch"}, wantMarker: true,
			wantOut: "skip: 1 of 2 tenants selected: 1 done"},
		{name: "an unknown tenant in the list", args: []string{"pause", "--tenants", list, "--pool", "nope", "--yes"}, wantCode: 1,
			wantErr: "no pool named nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			for _, e := range w.Executions {
				if e.Error != "" {
					e.Error, e.Cause = pipeline.ErrPermanent, `{"errorMessage":"core system answered 503","errorType":"PermanentError"}`
				}
			}
			if tc.setup != nil {
				tc.setup(w)
			}
			stdinIsTerminal = func() bool { return tc.terminal }
			confirmIn = strings.NewReader(tc.answer)
			defer func() { stdinIsTerminal, confirmIn = func() bool { return false }, strings.NewReader("") }()
			args := tc.args
			if !slices.Contains(args, "--rate") && (slices.Contains(args, "--all-halted") || slices.Contains(args, "--tenants")) {
				args = append(slices.Clone(args), "--rate", "1000") // the fake has no quota to respect
			}
			code, stdout, stderr := runIn(t, w, args...)
			if code != tc.wantCode {
				t.Fatalf("got exit %d (stdout %q, stderr %q), want %d", code, stdout, stderr, tc.wantCode)
			}
			if !strings.Contains(stdout, tc.wantOut) || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("got stdout %q, stderr %q; want %q and %q in them", stdout, stderr, tc.wantOut, tc.wantErr)
			}
			_, marker := w.Body("ingest", "control/acme/skip/acme-2")
			if len(w.Redrives) != tc.wantActed || marker != tc.wantMarker {
				t.Errorf("got %d redrives, skip marker %v; want %d, %v", len(w.Redrives), marker, tc.wantActed, tc.wantMarker)
			}
			if len(w.Queues[globex.QueueURL].Sent) != 0 {
				t.Errorf("got a control message to globex, want none (its redrive would break its order)")
			}
		})
	}
}

// TestBulkJSON: --json is the report: the counts and each tenant's outcome.
func TestBulkJSON(t *testing.T) {
	w := world()
	code, stdout, stderr := runIn(t, w, "pause", "--tenants", writeList(t, "acme\nglobex\n"), "--yes", "--json", "--reason", "ERP window", "--rate", "1000")
	if code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr)
	}
	var rep ops.BulkReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("got %q: %v", stdout, err)
	}
	// globex's mapping is disabled already: skipped, "already paused".
	if rep.Action != "pause" || rep.Selected != 2 || rep.Done != 1 || rep.Skipped != 1 || rep.Tenants[1].Reason != "already paused" {
		t.Errorf("got %+v, want acme paused and globex skipped as already paused", rep)
	}
	if len(w.Updates) != 1 || aws.ToString(w.Updates[0].UUID) != acme.EventSourceMappingUUID {
		t.Errorf("got mapping updates %+v, want acme's only", w.Updates)
	}
}

func writeList(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "tenants.txt")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
