package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
	"golang.org/x/time/rate"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/termtable"
)

// Bulk actions: redrive, skip, pause and resume take a selector instead of a tenant
// (ops/bulk.go, docs/operations.md "Acting on many tenants").

// bulkFlags are a bulk action's flags; one run's values, like the other command flags.
type bulkFlags struct {
	allHalted        bool
	coreSystem, pool string
	tenantsFile      string
	dryRun, yes      bool
	rate             float64
	progressEvery    int
	selectorGiven    bool
	bulkOnlyFlagUsed bool
}

var flagBulk bulkFlags

// The terminal a bulk action asks for confirmation on; tests replace them.
var (
	confirmIn io.Reader = os.Stdin
	// A character device is not enough: /dev/null is one.
	stdinIsTerminal = func() bool { return term.IsTerminal(int(os.Stdin.Fd())) }
)

// bulkHelp is the selector part of each bulk-capable command's help.
const bulkHelp = `
With a selector instead of TENANT, acts on every tenant it picks, one audited action per tenant,
exactly as for one tenant, and prints each tenant's outcome (done, skipped with the reason,
failed with the error) and a summary; exit status 1 if any tenant failed. Several selectors
pick the tenants all of them pick.

  --all-halted        the tenants halted at a failed file (status: blocked)
  --core-system NAME  the tenants that register into core system NAME
  --pool NAME         the tenants of pool NAME
  --tenants FILE      the tenants listed in FILE, one id a line ("#" starts a comment)
  --dry-run           list what would be done, and do nothing
  --yes               do not ask for confirmation (required when stdin is no terminal)
  --rate N            AWS control-plane calls per second, all services together (default 5;
                      docs/operations.md names the quotas); throttled calls are retried
  --progress-every N  a progress line on stderr every N tenants (default 25) or 5 seconds`

// addBulkFlags registers the selector flags.
func addBulkFlags(fs *flag.FlagSet) {
	flagBulk = bulkFlags{}
	fs.BoolVar(&flagBulk.allHalted, "all-halted", false, "the tenants halted at a failed file")
	fs.StringVar(&flagBulk.coreSystem, "core-system", "", "the tenants of this core system")
	fs.StringVar(&flagBulk.pool, "pool", "", "the tenants of this pool")
	fs.StringVar(&flagBulk.tenantsFile, "tenants", "", "the tenants listed in this file, one id a line")
	fs.BoolVar(&flagBulk.dryRun, "dry-run", false, "list what would be done, and do nothing")
	fs.BoolVar(&flagBulk.yes, "yes", false, "do not ask for confirmation")
	fs.Float64Var(&flagBulk.rate, "rate", ops.DefaultRate, "AWS control-plane calls per second")
	fs.IntVar(&flagBulk.progressEvery, "progress-every", 25, "a progress line every N tenants")
}

// withBulk registers flags and the selector flags, and validates both.
func withBulk(flags func(fs *flag.FlagSet) func() error) func(fs *flag.FlagSet) func() error {
	return func(fs *flag.FlagSet) func() error {
		validate := func() error { return nil }
		if flags != nil {
			validate = flags(fs)
		}
		addBulkFlags(fs)
		return func() error {
			b := &flagBulk
			b.selectorGiven = b.allHalted || b.coreSystem != "" || b.pool != "" || b.tenantsFile != ""
			fs.Visit(func(f *flag.Flag) {
				switch f.Name {
				case "dry-run", "yes", "rate", "progress-every":
					b.bulkOnlyFlagUsed = true
				}
			})
			switch {
			case !b.selectorGiven && b.bulkOnlyFlagUsed:
				return usagef("--dry-run, --yes, --rate and --progress-every go with a selector (--all-halted, --core-system, --pool, --tenants)")
			case b.rate <= 0:
				return usagef("--rate %v must be above 0 calls per second", b.rate)
			case b.progressEvery < 1:
				return usagef("--progress-every %d must be 1 or more", b.progressEvery)
			}
			return validate()
		}
	}
}

// bulkOr runs the bulk action with a selector, else the single-tenant command, which takes
// between minArgs and maxArgs arguments.
func bulkOr(action string, minArgs int, usage string, single func(ctx context.Context, e *env, args []string) (any, error)) func(ctx context.Context, e *env, args []string) (any, error) {
	return func(ctx context.Context, e *env, args []string) (any, error) {
		if !flagBulk.selectorGiven {
			if len(args) < minArgs {
				return nil, usagef("usage: pipectl %s", usage)
			}
			return single(ctx, e, args)
		}
		if len(args) > 0 {
			return nil, usagef("%s: a selector (--all-halted, --core-system, --pool, --tenants) picks the tenants: give no TENANT or EXECUTION too (got %s)",
				action, strings.Join(args, " "))
		}
		return runBulk(ctx, e, action)
	}
}

// bulkFailed is exit status 1 after the report is printed: a tenant failed.
type bulkFailed struct{ failed, selected int }

func (e *bulkFailed) Error() string {
	return fmt.Sprintf("%d of %d tenants failed", e.failed, e.selected)
}

// errNotConfirmed is a bulk action the operator did not confirm.
var errNotConfirmed = errors.New("not confirmed: nothing done")

func runBulk(ctx context.Context, e *env, action string) (any, error) {
	sel := ops.Selector{AllHalted: flagBulk.allHalted, CoreSystem: flagBulk.coreSystem, Pool: flagBulk.pool}
	if flagBulk.tenantsFile != "" {
		f, err := os.Open(flagBulk.tenantsFile)
		if err != nil {
			return nil, usagef("--tenants: %v", err)
		}
		ids, err := ops.ReadTenantList(f)
		f.Close()
		if err != nil {
			return nil, usagef("--tenants %s: %v", flagBulk.tenantsFile, err)
		}
		sel.Tenants = ids
	}
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	o.Limit(rate.NewLimiter(rate.Limit(flagBulk.rate), 1))
	picked, err := o.Select(ctx, sel)
	if err != nil {
		return nil, err
	}
	opt := ops.BulkOptions{Action: action, Reason: flagReason, Force: flagForce, OutOfOrder: flagOutOfOrder, DryRun: flagBulk.dryRun,
		Progress: e.errOut, ProgressEvery: flagBulk.progressEvery}
	if !flagBulk.dryRun && len(picked.Tenants) > 0 && !flagBulk.yes {
		if err := confirm(e, action, picked); err != nil {
			return nil, err
		}
	}
	rep, err := o.Bulk(ctx, sel, picked.Tenants, opt)
	if err != nil {
		return nil, err
	}
	e.human = func(any) string { return bulkTable(rep, picked.Of) }
	if rep.Failed > 0 {
		return rep, &bulkFailed{failed: rep.Failed, selected: rep.Selected}
	}
	return rep, nil
}

// confirm asks on the terminal before a bulk action; without a terminal it refuses, naming --yes.
func confirm(e *env, action string, picked ops.Selected) error {
	n := len(picked.Tenants)
	if !stdinIsTerminal() {
		return usagef("%s would act on %d tenant(s) and stdin is no terminal to confirm on: pass --yes to go ahead (or --dry-run to list them)", action, n)
	}
	var ids []string
	for i, t := range picked.Tenants {
		if i == 10 {
			ids = append(ids, fmt.Sprintf("and %d more", n-10))
			break
		}
		ids = append(ids, t.ID)
	}
	fmt.Fprintf(e.errOut, "pipectl: %s %d of %d tenants: %s\nType yes to go on: ", action, n, picked.Of, strings.Join(ids, ", "))
	line, _ := bufio.NewReader(confirmIn).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "yes" && a != "y" {
		return errNotConfirmed
	}
	return nil
}

// bulkTable is one row per tenant, then the summary.
func bulkTable(rep ops.BulkReport, of int) string {
	var b strings.Builder
	rows := [][]string{{"TENANT", "OUTCOME", "EXECUTION", "DETAIL"}}
	for _, it := range rep.Tenants {
		detail := it.Detail
		switch it.Outcome {
		case ops.OutcomeSkipped:
			detail = it.Reason
		case ops.OutcomeFailed:
			detail = it.Error
		}
		rows = append(rows, []string{it.Tenant, it.Outcome, orDash(it.Execution), orDash(oneLine(detail))})
	}
	if len(rep.Tenants) > 0 {
		b.WriteString(termtable.Render(rows))
	}
	if rep.DryRun {
		fmt.Fprintf(&b, "%s (dry run, nothing done): %d of %d tenants selected: %d planned, %d skipped, %d failed\n",
			rep.Action, rep.Selected, of, rep.Planned, rep.Skipped, rep.Failed)
		return b.String()
	}
	fmt.Fprintf(&b, "%s: %d of %d tenants selected: %d done, %d skipped, %d failed\n", rep.Action, rep.Selected, of, rep.Done, rep.Skipped, rep.Failed)
	return b.String()
}
