package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/ops/opsfake"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/schema"
)

// coreWorld: pooled hooli names core system ledger (3 files, maxRequestsInFlight 6), which runs
// one file.
func coreWorld() *opsfake.World {
	w := opsfake.New(now)
	w.CoreSystemOf["hooli"] = &pipeline.CoreSystem{Name: "ledger", MaxRunningFiles: 3, MaxRequestsInFlight: 6}
	pool := opsfake.Pool("default")
	w.AddPool("TenantPipeline-Pool-default", pool, map[string]string{"hooli": pipeline.OnFailureContinue})
	w.Env[pool.ControllerFunction][pipeline.EnvCoreSystemTables] = `{"ledger":"ledger-admission"}`
	w.AddLease("ledger-admission", schema.CoreGate("ledger"), 0, "hooli-1", "hooli", now)
	return w
}

// Each core action prints one line, exits as documented, and what it set shows in core status
// and status.
func TestCoreCommands(t *testing.T) {
	w := coreWorld()
	until := now.Add(2 * time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		args       []string
		code       int
		out, inErr string
	}{
		{[]string{"core", "pause", "ledger"}, 2, "", "--reason is required: it is the audit record"},
		{[]string{"core", "pause", "ledger", "--reason", "ERP deploy"}, 0, "paused core system ledger (by arn:aws:sts::123456789012:assumed-role/Operator/alice, audit audit#", ""},
		{[]string{"core", "pause", "ledger", "--reason", "again"}, 0, "core system ledger was already paused; nothing changed\n", ""},
		{[]string{"status"}, 0, "core system ledger: paused (pipectl core resume ledger)\n", ""},
		{[]string{"core", "limit", "ledger", "4", "--reason", "r"}, 2, "", "--until is required"},
		{[]string{"core", "limit", "ledger", "4", "--until", "2h"}, 2, "", "--reason is required"},
		{[]string{"core", "limit", "ledger", "4", "--until", "soon", "--reason", "r"}, 2, "", `--until "soon" is neither an RFC 3339 time`},
		{[]string{"core", "limit", "ledger", "7", "--until", "2h", "--reason", "r"}, 1, "", "the limit must be from 1 to 6, the core system's maxRequestsInFlight"},
		{[]string{"core", "limit", "ledger", "5", "--until", "2h", "--reason", "catch up"}, 0, "core system ledger limit set to 5 until " + until, ""},
		{[]string{"core", "limit", "ledger", "--clear", "--until", "2h"}, 2, "", "--clear takes no N and no --until"},
		{[]string{"core", "resume", "ledger"}, 0, "resumed core system ledger (by arn:aws:sts::123456789012:assumed-role/Operator/alice, audit audit#", ""},
		{[]string{"core", "status"}, 0, "core system ledger limit override 5 (maxRequestsInFlight 6) until " + until, ""},
		{[]string{"core", "status", "erp"}, 1, "", `core system "erp" not found; core systems: ledger`},
		{[]string{"status"}, 0, "core system ledger: 1 of 5 running files", ""},
		{[]string{"status"}, 0, "core system ledger: limit override 5 until " + until + " by arn:aws:sts::123456789012:assumed-role/Operator/alice\n", ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runIn(t, w, tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.out) || !strings.Contains(stderr, tc.inErr) {
				t.Errorf("got exit %d, stdout %q, stderr %q; want %d, %q in stdout, %q in stderr", code, stdout, stderr, tc.code, tc.out, tc.inErr)
			}
			if tc.code == 0 && tc.args[0] == "core" && tc.args[1] != "status" && strings.Count(stdout, "\n") != 1 {
				t.Errorf("got %q, want one line", stdout)
			}
		})
	}
	code, stdout, stderr := runIn(t, w, "core", "status", "ledger", "--json")
	if code != 0 {
		t.Fatalf("core status --json: exit %d (%s)", code, stderr)
	}
	var cs []ops.CoreStatus
	if err := json.Unmarshal([]byte(stdout), &cs); err != nil || len(cs) != 1 {
		t.Fatalf("core status --json: %v: %s", err, stdout)
	}
	if c := cs[0]; c.Paused || c.Limit != 5 || c.LimitReason != "override" || c.Override == nil || c.Override.Limit != 5 || c.MaxRunningFiles != 3 || c.RunningFiles != 1 {
		t.Errorf("core status --json: got %+v, want resumed, limit 5 by override, maxRunningFiles 3, 1 running", c)
	}
	code, stdout, _ = runIn(t, w, "status", "--json")
	var rep ops.StatusReport
	if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil || len(rep.CoreSystems) != 1 {
		t.Fatalf("status --json: exit %d, %v: %s", code, err, stdout)
	}
	if c := rep.CoreSystems[0]; c.Paused || c.Override == nil || c.Override.Limit != 5 || !strings.Contains(stdout, `"paused": false`) {
		t.Errorf("status --json: got %+v, want the core system's paused (false) and override (5)", c)
	}
}
