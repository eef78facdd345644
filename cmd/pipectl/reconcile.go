package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/example/tenantpipeline/internal/ops"
)

// pipectl reconcile's flags.
var (
	flagSince  string
	flagLookup string
	flagSample int
)

var reconcileCommand = command{name: "reconcile", minArgs: 1, maxArgs: 1, args: "TENANT --since DATE [--lookup sample|all|none] [--sample N]",
	flags: reconcileFlags, run: runReconcile,
	short: "proof of what arrived: per file, sent, acknowledged, rejected and found in the core system",
	long: `Accounts for each of the tenant's files since DATE (the newest 1,000): the records sent,
acknowledged by the core system, rejected and never sent, from the files' results, and, when the
tenant's core system has a lookupUrl, how many of a sample of each file's records (or all) the
core system finds by their Idempotency-Key. Every disagreement is listed. The report is also
written to the tenant's results area, results/<tenant>/reconcile/<time>.json (the output names it).

  --since DATE    the files started at or after DATE (RFC 3339, or YYYY-MM-DD in UTC); required
  --lookup MODE   sample (default), all or none
  --sample N      records of each file a sample looks up (default 20)`}

func reconcileFlags(fs *flag.FlagSet) func() error {
	fs.StringVar(&flagSince, "since", "", "the files started at or after DATE")
	fs.StringVar(&flagLookup, "lookup", ops.LookupSample, "sample, all or none")
	fs.IntVar(&flagSample, "sample", ops.DefaultReconcileSample, "records of each file a sample looks up")
	return func() error {
		if _, err := parseSince(flagSince); err != nil {
			return err
		}
		switch flagLookup {
		case ops.LookupSample, ops.LookupAll, ops.LookupNone:
		default:
			return usagef("--lookup %q must be sample, all or none", flagLookup)
		}
		if flagSample < 1 {
			return usagef("--sample %d must be at least 1", flagSample)
		}
		return nil
	}
}

// parseSince reads --since: an RFC 3339 time, or a date in UTC.
func parseSince(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, usagef("--since DATE is required (RFC 3339, or YYYY-MM-DD in UTC)")
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("--since %q is not a date: want RFC 3339 (2026-12-01T00:00:00Z) or YYYY-MM-DD", v)
}

func runReconcile(ctx context.Context, e *env, args []string) (any, error) {
	since, err := parseSince(flagSince)
	if err != nil {
		return nil, err
	}
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	rep, err := o.Reconcile(ctx, args[0], ops.ReconcileOptions{Since: since, Lookup: flagLookup, Sample: flagSample})
	e.human = func(any) string { return reconcileText(rep) }
	return rep, err
}

// reconcileText is the report as a table, then each file's differences, then where it is kept.
func reconcileText(rep ops.ReconcileReport) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "FILE\tEXECUTION\tSTATUS\tRECORDS\tSENT\tACKNOWLEDGED\tREJECTED\tUNPROCESSED\tFOUND")
	for _, f := range rep.Files {
		found := "-"
		if f.LookedUp > 0 {
			found = fmt.Sprintf("%d/%d", f.Found, f.LookedUp)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", orDash(f.File.Key), f.Execution, f.Status, f.Records, f.Sent, f.Acknowledged, f.Rejected, f.Unprocessed, found)
	}
	w.Flush()
	for _, f := range rep.Files {
		for _, d := range f.Differences {
			fmt.Fprintf(&b, "difference: %s: %s\n", f.Execution, d)
		}
	}
	lookups := "lookups: " + rep.Lookup
	if rep.Lookup == ops.LookupNone && rep.CoreSystem != "" {
		lookups += " (core system " + rep.CoreSystem + " has no lookupUrl, or --lookup none)"
	}
	fmt.Fprintf(&b, "%d files since %s, %d differences; %s\n", len(rep.Files), rep.Since.Format(time.RFC3339), rep.Differences, lookups)
	fmt.Fprintf(&b, "written to %s\n", rep.Written)
	return b.String()
}
