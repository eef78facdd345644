package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/termtable"
)

// The core group steers a core system at run time (docs/operations.md, "Steering a core system").
func init() {
	groupShort["core"] = "a core system: its limits and state; pause, resume, or override its limit (audited)"
	commands = append(commands, coreCommands...)
}

var coreCommands = []command{
	{name: "core status", minArgs: 0, maxArgs: 1, args: "[NAME]", run: runCoreStatus,
		short: "every core system (or one): limits, running and waiting files, pause, override, maintenance",
		long: `Shows every core system the tenants name (or the one named): its limit as configured
(maxRunningFiles), the effective limit and why, the adaptive limit, its running files and waiting
tenants, whether it is paused (by whom, when, why), its limit override and until when, and its
maintenance windows: whether one is open now, and when the next starts.`},
	{name: "core pause", minArgs: 1, maxArgs: 1, args: "NAME --reason TEXT", flags: coreReasonFlags, run: runCorePause,
		short: "admit no new file of a core system; running files finish (audited)",
		long: `Pauses a core system: admission starts no new file of any tenant naming it, in both tiers,
until core resume; the files running now finish. Waiting files keep their place. The pause is
kept in the core system's admission table and survives a redeploy.

  --reason TEXT   why (required: it is the audit record)`},
	{name: "core resume", minArgs: 1, maxArgs: 1, args: "NAME [--reason TEXT]", flags: reasonFlag, run: runCoreResume,
		short: "lift a core system's pause and wake the files its free slots go to (audited)",
		long: `Lifts a core system's pause, and hands its free running-file slots to the waiting files
at once (the gate's reconciler), waking them.

  --reason TEXT   why (kept in the audit trail)`},
	{name: "core limit", minArgs: 1, maxArgs: 2, args: "NAME N --until TIME --reason TEXT | NAME --clear", flags: coreLimitFlags, run: runCoreLimit,
		short: "override a core system's maxRunningFiles until a time, or clear the override (audited)",
		long: `Overrides the core system's running-file limit (maxRunningFiles) with N until TIME: N is
from 1 to the core system's maxRequestsInFlight. The adaptive limit stays at or below N. After
TIME the override no longer counts. With --clear, the override is removed now. A raised limit
hands the free slots to waiting files at once. The override survives a redeploy.

  --until TIME    when the override ends: RFC 3339 (2026-12-06T03:00:00Z) or a duration from
                  now (90m, 2h); required with N
  --reason TEXT   why (required with N: it is the audit record)
  --clear         remove the override instead`},
}

var (
	flagUntil string
	flagClear bool
)

func coreReasonFlags(fs *flag.FlagSet) func() error {
	reasonFlag(fs)
	return func() error {
		if strings.TrimSpace(flagReason) == "" {
			return usagef("--reason is required: it is the audit record")
		}
		return nil
	}
}

func coreLimitFlags(fs *flag.FlagSet) func() error {
	reasonFlag(fs)
	fs.StringVar(&flagUntil, "until", "", "when the override ends (RFC 3339, or a duration from now)")
	fs.BoolVar(&flagClear, "clear", false, "remove the override")
	return func() error { return nil }
}

// parseUntil reads --until: an RFC 3339 time, or a Go duration from now.
func parseUntil(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("--until %q is neither an RFC 3339 time (2026-12-06T03:00:00Z) nor a positive duration from now (2h)", v)
	}
	return now.Add(d), nil
}

func runCoreStatus(ctx context.Context, e *env, args []string) (any, error) {
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	name := ""
	if len(args) == 1 {
		name = args[0]
	}
	rep, err := o.CoreStatus(ctx, name)
	e.human = func(any) string { return coreStatusText(rep) }
	return rep, err
}

// coreStatusText is one table row per core system, then a line per pause, override and window.
func coreStatusText(cs []ops.CoreStatus) string {
	if len(cs) == 0 {
		return "no tenant of the stacks names a core system\n"
	}
	var b strings.Builder
	rows := [][]string{{"CORE SYSTEM", "LIMIT", "WHY", "CONFIGURED", "ADAPTIVE", "RUNNING", "WAITING", "PAUSED", "OVERRIDE", "MAINTENANCE"}}
	for _, c := range cs {
		adaptive := "-"
		if c.AdaptiveLimit != nil {
			adaptive = strconv.Itoa(*c.AdaptiveLimit)
		}
		override := "-"
		if o := c.Override; o != nil {
			override = fmt.Sprintf("%d until %s", o.Limit, stamp(&o.Until))
			if o.Expired {
				override += " (expired)"
			}
		}
		rows = append(rows, []string{c.Name, strconv.Itoa(c.Limit), c.LimitReason, strconv.Itoa(c.MaxRunningFiles), adaptive,
			strconv.Itoa(c.RunningFiles), strconv.Itoa(c.WaitingTenants), yesNo(c.Paused), override, maintenanceCell(c.Maintenance)})
	}
	b.WriteString(termtable.Render(rows))
	for _, c := range cs {
		if p := c.Pause; p != nil {
			fmt.Fprintf(&b, "core system %s paused at %s by %s: %s\n", c.Name, stamp(&p.At), p.By, orDash(p.Reason))
		}
		if o := c.Override; o != nil && !o.Expired {
			fmt.Fprintf(&b, "core system %s limit override %d (maxRequestsInFlight %d) until %s, set at %s by %s: %s\n",
				c.Name, o.Limit, c.MaxRequestsInFlight, stamp(&o.Until), stamp(&o.SetAt), o.By, orDash(o.Reason))
		}
		for _, w := range c.Maintenance.Windows {
			fmt.Fprintf(&b, "core system %s maintenance window: cron %q for %s (UTC)\n", c.Name, w.Cron, w.Duration)
		}
	}
	return b.String()
}

func maintenanceCell(m ops.CoreMaintenance) string {
	switch {
	case m.Open:
		return "open until " + stamp(m.End)
	case m.Next != nil:
		return "next " + stamp(m.Next)
	}
	return "-"
}

func runCorePause(ctx context.Context, e *env, args []string) (any, error) {
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	res, err := o.CorePause(ctx, args[0], flagReason)
	e.human = func(any) string {
		if !res.Changed {
			return fmt.Sprintf("core system %s was already paused; nothing changed\n", res.CoreSystem)
		}
		return fmt.Sprintf("paused core system %s (by %s, audit %s in %s): no new file is admitted; running files finish\n",
			res.CoreSystem, res.RequestedBy, res.AuditSK, res.Table)
	}
	return res, err
}

func runCoreResume(ctx context.Context, e *env, args []string) (any, error) {
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	res, err := o.CoreResume(ctx, args[0], flagReason)
	e.human = func(any) string {
		if !res.Changed {
			return fmt.Sprintf("core system %s was not paused; nothing changed\n", res.CoreSystem)
		}
		return fmt.Sprintf("resumed core system %s (by %s, audit %s in %s): %d waiting files woken\n",
			res.CoreSystem, res.RequestedBy, res.AuditSK, res.Table, res.Woken)
	}
	return res, err
}

func runCoreLimit(ctx context.Context, e *env, args []string) (any, error) {
	name := args[0]
	if flagClear {
		if len(args) != 1 || flagUntil != "" {
			return nil, usagef("core limit %s --clear takes no N and no --until", name)
		}
	} else {
		switch {
		case len(args) != 2:
			return nil, usagef("usage: pipectl core limit NAME N --until TIME --reason TEXT | NAME --clear")
		case flagUntil == "":
			return nil, usagef("core limit %s: --until is required: when the override ends (RFC 3339, or a duration such as 2h)", name)
		case strings.TrimSpace(flagReason) == "":
			return nil, usagef("core limit %s: --reason is required: it is the audit record", name)
		}
	}
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	var res ops.CoreActionResult
	if flagClear {
		res, err = o.CoreLimitClear(ctx, name, flagReason)
	} else {
		n, perr := strconv.Atoi(args[1])
		if perr != nil {
			return nil, usagef("core limit %s: N %q is not a whole number", name, args[1])
		}
		until, perr := parseUntil(flagUntil, o.Now())
		if perr != nil {
			return nil, usagef("core limit %s: %v", name, perr)
		}
		res, err = o.CoreLimit(ctx, name, n, until, flagReason)
	}
	e.human = func(any) string {
		switch {
		case flagClear && !res.Changed:
			return fmt.Sprintf("core system %s has no limit override; nothing changed\n", res.CoreSystem)
		case flagClear:
			return fmt.Sprintf("cleared the limit override of core system %s (by %s, audit %s in %s): maxRunningFiles counts again; %d waiting files woken\n",
				res.CoreSystem, res.RequestedBy, res.AuditSK, res.Table, res.Woken)
		}
		return fmt.Sprintf("core system %s limit set to %d until %s (by %s, audit %s in %s); %d waiting files woken\n",
			res.CoreSystem, res.Override.Limit, stamp(&res.Override.Until), res.RequestedBy, res.AuditSK, res.Table, res.Woken)
	}
	return res, err
}

// steeringLine is status's line on a core system's pause and override, empty when neither is set.
func steeringLine(c ops.CoreSystemStatus) string {
	var parts []string
	if c.Paused {
		parts = append(parts, "paused (pipectl core resume "+c.Name+")")
	}
	if o := c.Override; o != nil {
		parts = append(parts, fmt.Sprintf("limit override %d until %s by %s", o.Limit, stamp(&o.Until), o.By))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("core system %s: %s\n", c.Name, strings.Join(parts, "; "))
}
