package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const defaultStackPrefix = "TenantPipeline"

const usageText = `pipectl: operate the tenant pipeline's tenants

usage: pipectl [--stack-prefix P | --stack S] [--json] COMMAND [ARGS] [FLAGS]

commands:
  status [TENANT...]                      tier, policy, paused, blocked, queue depth, head file, last failure; pools
  files TENANT [--limit N]                the tenant's recent files, newest first (N 1-1000, default 20)
  results TENANT KEY|EXECUTION [--out DIR]
                                          a file's summary (counts, failure); --out downloads its results
                                          (quote a KEY with spaces)
  reconcile TENANT --since DATE [--lookup sample|all|none] [--sample N]
                                          proof of what arrived: per file, records sent,
                                          acknowledged, rejected and found in the core system
  pause TENANT [--reason T]               stop processing: a silo tenant's event source mapping is
                                          disabled; a pooled tenant's message group is held (audited)
  resume TENANT                           restart processing
  skip TENANT EXECUTION --reason TEXT     release a halted tenant by skipping its blocking file (audited)
  redrive TENANT [EXECUTION] [--reason T] [--force] [--out-of-order] [--accept-duplicates]
                                          resume a failed file from its failed segment, in order
                                          (--force: also a file that failed validation;
                                          --out-of-order: also one later files passed, audited;
                                          --accept-duplicates: re-send records past the core
                                          system's idempotencyRetention without a lookupUrl)
  pause|resume|skip|redrive SELECTOR [--dry-run] [--yes] [--rate N]
                                          the same on many tenants: --all-halted, --core-system NAME,
                                          --pool NAME, --tenants FILE (together: the intersection)
  replay TENANT KEY [--version-id V] [--reason T] [--out-of-order]
                                          register a file again, behind what is queued, with new keys
  replay TENANT --from-dlq                re-send the events on the rule target's dead-letter queue
  sequence skip TENANT N --reason TEXT    a sequenced tenant: skip its missing number N, so the files
                                          held after it run (audited)
  sequence set TENANT N --reason TEXT     a sequenced tenant: the number it expects next (audited)
  core status [NAME]                      core systems: limits, running and waiting files, pause,
                                          override, maintenance windows
  core pause NAME --reason TEXT           admit no new file of a core system; running files finish (audited)
  core resume NAME [--reason T]           lift a core system's pause; wake its waiting files (audited)
  core limit NAME N --until TIME --reason TEXT
                                          override maxRunningFiles until TIME, at most maxRequestsInFlight;
                                          core limit NAME --clear removes it (audited)
  health POOL [--minutes N]               a pool's tenants over its per-tenant alarms' thresholds
  upload TENANT FILE... [--name NAME]     put files under the tenant's prefix, in the order given
  upload-url TENANT NAME [--expires D] [--allow-long] [--bytes N] [--max-bytes M] [--role]
                                          print a single-use presigned PUT URL for NAME under the
                                          tenant's prefix and the headers it signs (default 15m,
                                          at most 1h; --role: signed by the tenant's uploader role)
  validate TENANT FILE... [--out DIR] [--tenants FILE]
                                          check local files as Split would, before upload (the
                                          deployed settings unless --tenants or ./tenants.json has them)

  completion bash|zsh|fish                 print the shell's completion script (subcommands, tenants)

` + globalFlagsText + `
'pipectl help COMMAND' or 'pipectl COMMAND -h' says more about one command.
`

const globalFlagsText = `global flags (before or after the arguments):
  --stack-prefix P   start of the stack names (default TenantPipeline)
  --stack S          the one stack whose outputs describe the tenants (an app of your own);
                     without either flag, every stack is read when no TenantPipeline-* stack has one
  --json             print one JSON document instead of a table

exit status: 0 ok, 1 failure or refused, 2 bad usage. docs/operations.md has the details.
`

// usageError is bad usage: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// globals are the flags every command takes.
type globals struct {
	stackPrefix prefixFlag
	stack       string
	json        bool
}

// prefixFlag is --stack-prefix, which remembers whether it was given: only its default falls
// back to every stack (ops.Ops.AnyStack).
type prefixFlag struct {
	value string
	set   bool
}

func (f *prefixFlag) String() string { return f.value }

func (f *prefixFlag) Set(s string) error {
	f.value, f.set = s, true
	return nil
}

// register adds the global flags to fs, keeping the values already parsed (a command's flag set
// parses them again after the command name).
func (g *globals) register(fs *flag.FlagSet) {
	fs.Var(&g.stackPrefix, "stack-prefix", "start of the stack names")
	fs.StringVar(&g.stack, "stack", g.stack, "the one stack whose outputs describe the tenants")
	fs.BoolVar(&g.json, "json", g.json, "print one JSON document")
}

// command is one subcommand: its flags and what it does with its positional arguments.
type command struct {
	name    string
	short   string // one line
	long    string // what `pipectl help NAME` says
	minArgs int
	maxArgs int // -1: any
	args    string
	flags   func(fs *flag.FlagSet) func() error // registers flags; the returned func validates them
	// numbers: an argument may be a negative number, read as an argument (and refused with the
	// command's reason), not as an unknown flag.
	numbers bool
	run     func(ctx context.Context, e *env, args []string) (any, error)
}

// env is what a command runs with.
type env struct {
	g      globals
	newOps newOpsFunc
	out    io.Writer
	errOut io.Writer          // notes beside the output (stderr)
	human  func(v any) string // set by the command for its table
}

// run is pipectl. It returns the exit status. The commands are a cobra tree (help per command,
// `pipectl completion bash|zsh|fish` and the dynamic completion behind it); each command parses
// its own arguments with the flag package as before, so flags keep their spelling and their
// errors, and may stand before or after the arguments.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, newOps newOpsFunc) int {
	root := newRoot(newOps, stdout)
	// cobra reads os.Args for nil.
	root.SetArgs(append([]string{}, args...))
	root.SetOut(stdout)
	root.SetErr(stderr)
	requireShell(root) // after SetOut: the completion command keeps the writer it finds
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitFailure
	var ue *usageError
	if errors.As(err, &ue) {
		code = exitUsage
	} else if msg, ok := unreachable(err); ok {
		err = errors.New(msg)
	}
	// One clear line.
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	fmt.Fprintln(stderr, "pipectl: "+msg)
	if code == exitUsage {
		fmt.Fprintln(stderr, "run 'pipectl help' for usage")
	}
	return code
}

// newRoot is pipectl's command tree. The root runs what cobra routes to no subcommand: global
// flags before an unknown word, no command at all, --help.
func newRoot(newOps newOpsFunc, stdout io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:                "pipectl",
		Short:              "operate the tenant pipeline's tenants",
		Args:               cobra.ArbitraryArgs,
		DisableFlagParsing: true,
		SilenceErrors:      true,
		SilenceUsage:       true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return dispatch(cmd, args, newOps, stdout, "")
		},
	}
	// The global flags, declared only so that cobra tells a flag's value from a command name
	// (`pipectl --json sequence skip ...` is the sequence skip command, not skip): every command
	// parses them itself.
	root.PersistentFlags().String("stack-prefix", defaultStackPrefix, "start of the stack names")
	root.PersistentFlags().String("stack", "", "the one stack whose outputs describe the tenants")
	root.PersistentFlags().Bool("json", false, "print one JSON document")
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		path := strings.TrimPrefix(cmd.CommandPath(), root.Name()+" ")
		if c, ok := commandNamed(path); ok && cmd != root {
			fmt.Fprint(cmd.OutOrStdout(), c.helpText())
			return
		}
		if isGroup(path) {
			fmt.Fprint(cmd.OutOrStdout(), groupHelp(path))
			return
		}
		fmt.Fprint(cmd.OutOrStdout(), usageText)
	})
	groups := map[string]*cobra.Command{}
	for _, c := range commands {
		parent, use := root, c.name+" "+c.args
		if group, sub, ok := strings.Cut(c.name, " "); ok {
			if groups[group] == nil {
				groups[group] = &cobra.Command{
					Use:                group + " SUBCOMMAND",
					Short:              groupShort[group],
					Args:               cobra.ArbitraryArgs,
					DisableFlagParsing: true,
					SilenceErrors:      true,
					SilenceUsage:       true,
					RunE: func(cmd *cobra.Command, args []string) error {
						return dispatch(cmd, args, newOps, stdout, group)
					},
				}
				root.AddCommand(groups[group])
			}
			parent, use = groups[group], sub+" "+c.args
		}
		parent.AddCommand(&cobra.Command{
			Use:                use,
			Short:              c.short,
			Long:               c.long,
			DisableFlagParsing: true,
			SilenceErrors:      true,
			SilenceUsage:       true,
			ValidArgsFunction:  completeTenants(c, newOps),
			RunE: func(cmd *cobra.Command, args []string) error {
				return runCommand(cmd.Context(), c, args, newOps, stdout, cmd.ErrOrStderr())
			},
		})
	}
	return root
}

// groupShort is what each group of commands (the first word of a two-word command) is for.
var groupShort = map[string]string{
	"sequence": "a sequenced tenant: skip a missing number, or set the next one",
}

// isGroup reports whether name is a group of commands ("sequence").
func isGroup(name string) bool {
	_, ok := groupShort[name]
	return ok
}

// groupHelp is `pipectl help GROUP`: its commands, one a line.
func groupHelp(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: pipectl %s SUBCOMMAND [ARGS] [FLAGS]\n\n%s\n\ncommands:\n", group, groupShort[group])
	for _, c := range commands {
		if strings.HasPrefix(c.name, group+" ") {
			fmt.Fprintf(&b, "  %s %s\n      %s\n", c.name, c.args, c.short)
		}
	}
	fmt.Fprintf(&b, "\n'pipectl help %s SUBCOMMAND' says more about one.\n\n%s", group, globalFlagsText)
	return b.String()
}

// groupSubcommands names a group's subcommands, "skip or set".
func groupSubcommands(group string) string {
	var subs []string
	for _, c := range commands {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
			subs = append(subs, sub)
		}
	}
	return strings.Join(subs, " or ")
}

// requireShell makes `pipectl completion` without a shell, or with one cobra has no script for,
// bad usage (exit 2) naming the shells, where cobra would print the help and exit 0.
func requireShell(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, comp := range root.Commands() {
		if comp.Name() != "completion" {
			continue
		}
		var shells []string
		for _, sh := range comp.Commands() {
			shells = append(shells, sh.Name())
		}
		valid := strings.Join(shells[:len(shells)-1], ", ") + " or " + shells[len(shells)-1]
		comp.Args = cobra.ArbitraryArgs
		comp.RunE = func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("completion needs a shell: pipectl completion SHELL, SHELL one of %s", valid)
			}
			return usagef("completion: no script for shell %q; SHELL is one of %s", args[0], valid)
		}
	}
}

func commandNamed(name string) (command, bool) {
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		return command{}, false
	}
	return commands[i], true
}

// helpText is `pipectl help COMMAND` and `pipectl COMMAND -h`.
func (c command) helpText() string {
	return fmt.Sprintf("usage: pipectl %s %s\n\n%s\n\n%s", c.name, c.args, strings.TrimSpace(c.long), globalFlagsText)
}

// dispatch reads the global flags before the command name (within group, the subcommand's name,
// for a group's own command), then runs the command.
func dispatch(cmd *cobra.Command, args []string, newOps newOpsFunc, stdout io.Writer, group string) error {
	g := globals{stackPrefix: prefixFlag{value: defaultStackPrefix}}
	top := flag.NewFlagSet("pipectl", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	g.register(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if group != "" {
				fmt.Fprint(stdout, groupHelp(group))
			} else {
				fmt.Fprint(stdout, usageText)
			}
			return nil
		}
		return &usageError{err.Error()}
	}
	rest := top.Args()
	// The global flags parsed here are parsed again with the command's.
	before := args[: len(args)-len(rest) : len(args)-len(rest)]
	if group == "" {
		switch {
		case len(rest) == 0:
			return usagef("no command given")
		case rest[0] == "help":
			fmt.Fprint(stdout, usageText)
			return nil
		case isGroup(rest[0]):
			group, rest = rest[0], rest[1:]
		}
	}
	name := ""
	if group != "" {
		if len(rest) == 0 {
			return usagef("%s needs a subcommand: %s", group, groupSubcommands(group))
		}
		name = group + " "
	}
	name += rest[0]
	c, ok := commandNamed(name)
	if !ok {
		return usagef("unknown command %q", name)
	}
	return runCommand(cmd.Context(), c, append(before, rest[1:]...), newOps, stdout, cmd.ErrOrStderr())
}

// runCommand parses a command's arguments (global flags included, wherever they stand) and runs it.
func runCommand(ctx context.Context, c command, args []string, newOps newOpsFunc, stdout, stderr io.Writer) (ret error) {
	g := globals{stackPrefix: prefixFlag{value: defaultStackPrefix}}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	validate := func() error { return nil }
	if c.flags != nil {
		validate = c.flags(fs)
	}
	if c.numbers {
		args = numbersAsArgs(fs, args)
	}
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, c.helpText())
		return nil
	}
	if err != nil {
		return &usageError{fmt.Sprintf("%s: %v", c.name, err)}
	}
	if len(pos) < c.minArgs || (c.maxArgs >= 0 && len(pos) > c.maxArgs) {
		return usagef("usage: pipectl %s %s", c.name, c.args)
	}
	if err := validate(); err != nil {
		return &usageError{fmt.Sprintf("%s: %v", c.name, err)}
	}

	e := &env{g: g, newOps: newOps, out: stdout, errOut: stderr}
	v, err := c.run(ctx, e, pos)
	var failed *bulkFailed
	if err != nil && !errors.Is(err, errNotAccepted) && !errors.As(err, &failed) {
		return err
	}
	defer func() {
		if err != nil {
			ret = err // printed, then exit 1
		}
	}()
	if g.json {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprint(stdout, e.human(v))
	return nil
}

// parseInterspersed parses flags wherever they stand among the arguments, as people type them
// (`pipectl status acme --json`). Everything after "--" is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, tail = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(pos, tail...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// negativeNumber is an argument the flag package would read as a flag: -1, -20.
var negativeNumber = regexp.MustCompile(`^-[0-9]+$`)

// numbersAsArgs moves the negative numbers among args that are no flag's value after "--", ahead
// of what already stood after one, so that the flag package reads them as arguments.
func numbersAsArgs(fs *flag.FlagSet, args []string) []string {
	end := slices.Index(args, "--")
	if end < 0 {
		end = len(args)
	}
	var rest, nums []string
	for i := 0; i < end; i++ {
		a := args[i]
		if negativeNumber.MatchString(a) {
			nums = append(nums, a)
			continue
		}
		rest = append(rest, a)
		if takesValue(fs, a) && i+1 < end {
			i++
			rest = append(rest, args[i])
		}
	}
	if len(nums) == 0 {
		return args
	}
	out := append(append(rest, "--"), nums...)
	if end < len(args) {
		out = append(out, args[end+1:]...)
	}
	return out
}

// takesValue reports whether a is a flag of fs written without "=" that takes the next argument
// as its value (every flag but a boolean one).
func takesValue(fs *flag.FlagSet, a string) bool {
	if !strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimLeft(a, "-"))
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}
