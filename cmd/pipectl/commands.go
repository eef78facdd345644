package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/ops"
	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/sequence"
	"github.com/example/tenantpipeline/internal/termtable"
	"github.com/example/tenantpipeline/spec"
)

// commands are pipectl's subcommands, as docs/operations.md spells them.
var commands = []command{
	{name: "status", minArgs: 0, maxArgs: -1, args: "[TENANT...]", run: runStatus,
		short: "tier, policy, paused, blocked, queue depth, head file, last failure; pools",
		long: `Shows every tenant (or the ones named): its tier, onFailure policy, whether it is paused
or blocked, its queue depth, the file at its head and its last failure; then each pool, its
admission, its core systems, and the objects no tenant's prefix routes.`},
	{name: "files", minArgs: 1, maxArgs: 1, args: "TENANT [--limit N]", flags: filesFlags, run: runFiles,
		short: "the tenant's recent files, newest first",
		long: `Lists the tenant's recent files, newest first: key, execution, status, records, start,
stop and error.

  --limit N   how many files (1-1000, default 20)`},
	{name: "results", minArgs: 2, maxArgs: -1, args: "TENANT KEY|EXECUTION [--out DIR]", flags: resultsFlags, run: runResults,
		short: "what became of a file: its summary, and its results files",
		long: `Prints the summary of a file's execution (results/<tenant>/<execution>/summary.json): status,
counts, failure and the results files. KEY is the file's object key (its newest execution is
taken) or EXECUTION its execution name. An execution name is 1-80 of A-Z a-z 0-9 - _; anything
else is a key, and a file name without a "/" is the key under the tenant's prefix (stderr says
so). Quote a key with spaces. --json prints summary.json as stored.

  --out DIR   download the results files (summary.json, rejected.*, unprocessed.*) into DIR`},
	reconcileCommand,
	{name: "pause", minArgs: 0, maxArgs: 1, args: "TENANT [--reason TEXT] | SELECTOR [--dry-run] [--yes]", flags: withBulk(reasonFlag),
		run:   bulkOr("pause", 1, "pause TENANT [--reason TEXT] | SELECTOR", runPause(true)),
		short: "stop processing a tenant (or many)",
		long: `Stops processing: a silo tenant's event source mapping is disabled; a pooled tenant's
message group is held by a pause marker (audited). Files keep queuing and nothing is lost.

  --reason TEXT   why (kept in the audit trail)
` + bulkHelp},
	{name: "resume", minArgs: 0, maxArgs: 1, args: "TENANT | SELECTOR [--dry-run] [--yes]", flags: withBulk(nil),
		run:   bulkOr("resume", 1, "resume TENANT | SELECTOR", runPause(false)),
		short: "restart processing a tenant (or many)",
		long: `Restarts processing of a paused tenant.
` + bulkHelp},
	{name: "skip", minArgs: 0, maxArgs: 2, args: "TENANT EXECUTION --reason TEXT | SELECTOR --reason TEXT [--dry-run] [--yes]", flags: withBulk(skipFlags),
		run:   bulkOr("skip", 2, "skip TENANT EXECUTION --reason TEXT | SELECTOR --reason TEXT", runSkip),
		short: "release a halted tenant by skipping its blocking file",
		long: `Releases a halted tenant by skipping its blocking file: writes the skip marker, which the
controller reads at its next check (audited).

  --reason TEXT   why the file is skipped (required: it is the audit record)

With a selector, skips each selected tenant's halted head: the file it is halted at, the one
single-tenant skip names as EXECUTION. A selected tenant that is not halted is skipped over
(its outcome says so); nothing else of it is touched.
` + bulkHelp},
	{name: "redrive", minArgs: 0, maxArgs: 2, args: "TENANT [EXECUTION] [--reason TEXT] [--force] [--out-of-order] [--accept-duplicates] | SELECTOR [--dry-run] [--yes]", flags: withBulk(redriveFlags),
		run:   bulkOr("redrive", 1, "redrive TENANT [EXECUTION] | SELECTOR", runRedrive),
		short: "resume a failed file from its failed segment, in order",
		long: `Resumes a failed file from its failed segment, in order: the blocking file of a halted
tenant at once, any other failed file behind the tenant's current files.

  --reason TEXT   why (kept in the audit trail)
  --force         also redrive a file that failed validation (it fails again unless the
                  file changed)
  --out-of-order  redrive it even though later files of the tenant ran after it: its records
                  are then registered after theirs. Without it such a redrive is refused, naming
                  the later files (a continue tenant's failed file that later files passed, a
                  halt tenant's skipped file). Needs --reason; audited in the control message
                  and in the file's results folder (out-of-order.json, shown by pipectl results)
  --accept-duplicates
                  redrive it even though its records were first sent longer ago than the core
                  system's idempotencyRetention and the core system has no lookupUrl to look
                  them up: those it still has are registered again. Audited in
                  work/<tenant>/<execution>/accept-duplicates.json

With a selector, redrives each selected tenant's file as "pipectl redrive TENANT" does: a halted
tenant's blocking file, a continue tenant's newest failed one (refused, and the tenant skipped
over, when later files passed it, unless --out-of-order).
` + bulkHelp},
	{name: "replay", minArgs: 1, maxArgs: 2, args: "TENANT KEY [--version-id V] [--reason TEXT] | TENANT --from-dlq", flags: replayFlags, run: runReplay,
		short: "register a file again, or re-send the dead-letter queue's events",
		long: `Registers a file again, behind what is queued, with new keys; or, with --from-dlq,
re-sends the events on the rule target's dead-letter queue in order.

  --version-id V  the object version to replay (default: the current one)
  --reason TEXT   why (kept in the audit trail)
  --from-dlq      re-send the dead-letter queue's events instead (TENANT only)
  --out-of-order  replay it even though later files of the tenant ran after the version's first
                  execution: its records are then registered after theirs (refused otherwise,
                  naming them; a tenant with a DynamoDB sink keeps the newest record per key and
                  is not refused). Needs --reason; audited as for redrive`},
	{name: "sequence skip", minArgs: 2, maxArgs: 2, args: "TENANT N --reason TEXT", flags: reasonFlag, numbers: true, run: runSequence(false),
		short: "skip a sequenced tenant's missing number, so the files held after it run",
		long: `Skips the missing number N of a tenant whose sequence is of kind number, so that the files
held after it run: sends a sequence-skip control message into the tenant's message group
(audited: who, why, when, a request id), which the controller performs at the head of the
group, after the files queued before it. A file of number N that arrives later is refused as
late. Refused: a tenant without a sequence or with names, N below the number the tenant
expects next, N whose file is held, runs or was skipped already.

  --reason TEXT   why the number is skipped (required: it is the audit record)`},
	{name: "sequence set", minArgs: 2, maxArgs: 2, args: "TENANT N --reason TEXT", flags: reasonFlag, numbers: true, run: runSequence(true),
		short: "set the number a sequenced tenant expects next",
		long: `Sets the number N that a tenant whose sequence is of kind number expects next: for a tenant
that starts mid-stream, or to go back to a number it passed. Sends a sequence-set control message
into the tenant's message group (audited: who, why, when, a request id), which the controller
performs at the head of the group, after the files queued before it. Moving it forward skips
the numbers passed over (a file of one of them that arrives later is refused as late). It reads
no state. Refused: a tenant without a sequence or with names.

  --reason TEXT   why (required: it is the audit record)`},
	{name: "health", minArgs: 1, maxArgs: 1, args: "POOL [--minutes N]", flags: healthFlags, run: runHealth,
		short: "a pool's tenants over its per-tenant alarms' thresholds",
		long: `Names, for each per-tenant alarm of a pool (TenantBlocked, TenantFailedFiles,
TenantHeadRunning, TenantHeadQueued), the tenants whose value reached the alarm's threshold in a
5-minute period of the window, highest first, from the alarm's Contributor Insights rule
(GetInsightRuleReport, at most 100 tenants a rule).

  --minutes N   the window, up to now (1-1440, default 15: the alarms' 3 periods)`},
	{name: "upload", minArgs: 2, maxArgs: -1, args: "TENANT FILE... [--name NAME]", flags: uploadFlags, run: runUpload,
		short: "put files under the tenant's prefix, in the order given",
		long: `Puts each local FILE under the tenant's prefix as <prefix><file base name>, one after
another in the order given: each upload has finished before the next starts, so the pipeline
processes them in that order. Prints each file's key and version as it is put. A name may hold
letters, digits, ! - _ . * ' ( ), spaces and non-ASCII characters (Japanese, accents), and nothing
needs escaping beyond the shell's own quoting. Every file and name is checked before the first
upload, so bad input uploads nothing. A file is at most 5 GiB (one PUT). An upload never
overwrites: it sends If-None-Match: * (and, with a customer-managed key, the bucket's encryption
headers), as upload-url's URL does, so a name that exists is refused; choose another.

  --name NAME   the object's name under the prefix, for one FILE (folders with "/")`},
	{name: "upload-url", minArgs: 2, maxArgs: 2, args: "TENANT NAME [--expires D] [--allow-long] [--bytes N] [--max-bytes M] [--role]", flags: uploadURLFlags, run: runUploadURL,
		short: "print a presigned PUT URL for a name under the tenant's prefix",
		long: `Prints a presigned URL that lets whoever holds it PUT one object, <prefix>NAME, once, until
it expires; the file is then processed like any other. Nothing is written. The URL signs
headers the uploader must send exactly, printed after it one "Name: value" a line, then a curl
command that sends them:

  If-None-Match: *        the PUT creates the object or fails (412 PreconditionFailed): the URL
                          can neither overwrite a file nor be used twice
  Content-Length: N       with --bytes: S3 refuses any other size (SignatureDoesNotMatch)
  x-amz-meta-max-bytes: M with --max-bytes below 5 GiB and no --bytes: S3 takes any size, and
                          the pipeline fails a larger file before registering anything
  x-amz-server-side-encryption, x-amz-server-side-encryption-aws-kms-key-id
                          when the bucket is encrypted with a customer-managed key

With --json: {"url", "key", "expires", "headers": {name: value}}, "bytes" with --bytes,
"maxBytes" with --max-bytes alone and "role" with --role.

The URL is signed with your credentials, or with --role by a session of the tenant's uploader
role, which may put under that tenant's prefix only: a silo tenant's own (its "uploaders"), or
its pool's, tagged tenant=TENANT. A URL is a bearer token: anyone who holds it may use it until
it expires, and nothing revokes it short of the credentials that signed it. So it lasts 15
minutes by default and at most 1 hour, which bounds the damage of one that leaks; --allow-long
lifts the cap to S3's 7 days, and a URL never outlives the temporary credentials that sign it
(pipectl refuses an expiry past theirs). With --role the cap stays 1 hour, the session's.

  --expires D      how long the URL is valid (Go duration: 90s, 15m, 2h; default 15m, at most 1h)
  --allow-long     allow --expires up to 168h (not with --role)
  --bytes N        the file's exact size in bytes (1 or more): the URL takes no other
  --max-bytes M    the largest size allowed (default and most 5 GiB, one PUT's limit); a presigned
                   PUT can sign an exact size but no range, so without --bytes the URL signs M as
                   the object's metadata, and a larger file is stored but never registered
  --role           sign with a session of the tenant's uploader role (its own, or its pool's)`},
	{name: "validate", minArgs: 2, maxArgs: -1, args: "TENANT FILE... [--out DIR] [--tenants FILE]", flags: validateFlags, run: runValidate,
		short: "check local files as Split would, before upload",
		long: `Reads each local FILE with the tenant's settings (format, encoding, delimiter,
maxFieldBytes, onInvalidRecord, maxInvalidRecords) through the code Split runs, and prints per
file its records, valid and rejected records and the verdict, then the first 10 rejected records
with their lines. Exit status 0 if every file would be accepted, 1 if not.

The settings come from the first of:
  1. --tenants FILE, when given: that file only (an error if it does not name TENANT);
  2. ./tenants.json, when it exists and names TENANT;
  3. the deployed tenant, found as the other commands find it (--stack-prefix, --stack): a silo
     controller's TENANT variable, or the pool's settings file in its controller's code.
A note on stderr says which, unless --tenants was given. Only --tenants guarantees that no AWS
access is needed.

  --out DIR       write DIR/<file base name>.rejected.csv (.rejected.jsonl for JSON Lines) as
                  results/ would hold it, and .rejected.jsonl beside it for the rows that are not
                  valid CSV; with one FILE, also DIR/rejected.csv (rejected.jsonl); none when no
                  record is rejected
  --tenants FILE  read the settings from this tenants file only, without AWS`},
}

// Command flags. Each command's flag set is new per run, so these hold one run's values.
var (
	flagMinutes    int
	flagLimit      int
	flagReason     string
	flagVersionID  string
	flagFromDLQ    bool
	flagForce      bool
	flagOutOfOrder bool
	flagOut        string

	flagAcceptDuplicates bool // redrive --accept-duplicates
)

func resultsFlags(fs *flag.FlagSet) func() error {
	fs.StringVar(&flagOut, "out", "", "download the results files into this folder")
	return func() error { return nil }
}

func runResults(ctx context.Context, e *env, args []string) (any, error) {
	if len(args) > 2 {
		// A shell splits an unquoted key with spaces into several words.
		return nil, usagef("results takes one KEY or EXECUTION after TENANT, got %d words; quote a key with spaces: pipectl results %s %s",
			len(args)-1, ops.ShellQuote(args[0]), ops.ShellQuote(strings.Join(args[1:], " ")))
	}
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	rep, err := o.Results(ctx, args[0], args[1], flagOut)
	if err != nil {
		return nil, err
	}
	if rep.Note != "" {
		fmt.Fprintln(e.errOut, "pipectl: note: "+rep.Note)
	}
	e.human = func(any) string { return resultsText(rep) }
	return rep.Raw, nil
}

// resultsText is pipectl results' summary, one fact a line.
func resultsText(rep ops.ResultsReport) string {
	s := rep.Summary
	var b strings.Builder
	rows := [][]string{
		{"tenant", s.Tenant + " (" + orDash(s.Tier) + ")"},
		{"file", "s3://" + s.Source.Bucket + "/" + s.Source.Key},
		{"execution", rep.Execution},
		{"status", s.Status},
	}
	if s.Sequence != "" {
		rows = append(rows, []string{"sequence", s.Sequence})
	}
	if s.Refusal != "" {
		rows = append(rows, []string{"refusal", s.Refusal + ": " + refusalMeaning[s.Refusal]})
	}
	rows = append(rows, [][]string{
		{"records", fmt.Sprint(s.Records)},
		{"registered", fmt.Sprint(s.Registered)},
		{"rejected", fmt.Sprint(s.Rejected)},
		{"unprocessed", fmt.Sprint(s.Unprocessed)},
	}...)
	if len(s.RegisteredAfterHalt) > 0 {
		// A file in key order: records of other keys after the failed one, registered already.
		rows = append(rows, []string{"registered after halt", recordRanges(s.RegisteredAfterHalt, 10)})
	}
	if o := rep.OutOfOrder; o != nil {
		// An operator ran the file after later files of the tenant, on purpose.
		rows = append(rows, []string{"out of order", fmt.Sprintf("%s after %d later and %d queued file(s), by %s at %s: %s",
			o.Action, o.LaterCount, o.Queued, o.RequestedBy, o.RequestedAt.UTC().Format(time.RFC3339), oneLine(o.Reason))})
	}
	if s.Failure != nil {
		f := s.Failure.Type + ": " + oneLine(s.Failure.Message)
		if s.Failure.Line > 0 {
			f += fmt.Sprintf(" (line %d)", s.Failure.Line)
		}
		rows = append(rows, []string{"failure", f})
	}
	for _, f := range [][2]string{{"summary", s.Files.Summary}, {"rejected file", s.Files.Rejected}, {"rejected, not CSV", s.Files.RejectedNotCSV}, {"unprocessed file", s.Files.Unprocessed}} {
		if f[1] != "" {
			rows = append(rows, []string{f[0], f[1]})
		}
	}
	for _, p := range rep.Downloaded {
		rows = append(rows, []string{"downloaded", p})
	}
	b.WriteString(termtable.Render(rows))
	return b.String()
}

// refusalMeaning says what each refusal of a sequenced tenant's file means (docs/operations.md,
// "Sequenced tenants").
var refusalMeaning = map[string]string{
	sequence.RefusedUnmatched: "its name does not match the tenant's sequence pattern",
	sequence.RefusedDuplicate: "its value was processed, is held already or runs",
	sequence.RefusedLate:      "its value was skipped, or comes after a later one was processed",
}

// recordRanges prints record ranges as "124-126, 130, 141-150", the first most of them, then how
// many more (--json has them all).
func recordRanges(rs []pipeline.RecordRange, most int) string {
	var parts []string
	var n int64
	for i, r := range rs {
		n += r.Last - r.First + 1
		if i >= most {
			continue
		}
		if r.First == r.Last {
			parts = append(parts, fmt.Sprint(r.First))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.First, r.Last))
		}
	}
	s := strings.Join(parts, ", ")
	if len(rs) > most {
		s += fmt.Sprintf(", and %d more ranges (--json lists them)", len(rs)-most)
	}
	noun := "records"
	if n == 1 {
		noun = "record"
	}
	return fmt.Sprintf("%d %s: %s", n, noun, s)
}

func filesFlags(fs *flag.FlagSet) func() error {
	fs.IntVar(&flagLimit, "limit", 20, "how many files")
	return func() error {
		// ListExecutions returns at most 1,000 executions a page.
		// https://docs.aws.amazon.com/step-functions/latest/apireference/API_ListExecutions.html
		if flagLimit < 1 || flagLimit > 1000 {
			return usagef("--limit %d is out of range, want 1 to 1000", flagLimit)
		}
		return nil
	}
}

func healthFlags(fs *flag.FlagSet) func() error {
	fs.IntVar(&flagMinutes, "minutes", 15, "the window, up to now")
	return func() error {
		if flagMinutes < 1 || flagMinutes > 1440 {
			return usagef("--minutes %d is out of range, want 1 to 1440", flagMinutes)
		}
		return nil
	}
}

func reasonFlag(fs *flag.FlagSet) func() error {
	fs.StringVar(&flagReason, "reason", "", "why (kept in the audit trail)")
	return func() error { return nil }
}

func skipFlags(fs *flag.FlagSet) func() error {
	reasonFlag(fs)
	return func() error {
		if strings.TrimSpace(flagReason) == "" {
			return usagef("--reason is required: it is the audit record")
		}
		return nil
	}
}

func redriveFlags(fs *flag.FlagSet) func() error {
	reasonFlag(fs)
	fs.BoolVar(&flagForce, "force", false, "redrive a file that failed validation anyway")
	outOfOrderFlag(fs)
	// The idempotency horizon: re-send records the core system may have forgotten (audited).
	fs.BoolVar(&flagAcceptDuplicates, "accept-duplicates", false,
		"re-send records first sent longer ago than the core system's idempotencyRetention, when it has no lookupUrl (audited)")
	return checkOutOfOrder
}

func replayFlags(fs *flag.FlagSet) func() error {
	reasonFlag(fs)
	fs.StringVar(&flagVersionID, "version-id", "", "the object version to replay (default: the current one)")
	fs.BoolVar(&flagFromDLQ, "from-dlq", false, "re-send the events on the rule target's dead-letter queue")
	outOfOrderFlag(fs)
	return checkOutOfOrder
}

// outOfOrderFlag is --out-of-order: run a file after later files of the tenant, on purpose.
func outOfOrderFlag(fs *flag.FlagSet) {
	fs.BoolVar(&flagOutOfOrder, "out-of-order", false, "run the file even though later files of the tenant ran (audited; needs --reason)")
}

func checkOutOfOrder() error {
	if flagOutOfOrder && strings.TrimSpace(flagReason) == "" {
		return usagef("--out-of-order needs --reason TEXT: it is the audit record")
	}
	return nil
}

func (e *env) ops(ctx context.Context) (*ops.Ops, error) {
	o, err := e.newOps(ctx, e.g.stackPrefix.value)
	if err != nil {
		return nil, err
	}
	o.Stack, o.AnyStack = e.g.stack, !e.g.stackPrefix.set
	return o, nil
}

func runStatus(ctx context.Context, e *env, args []string) (any, error) {
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	rep, err := o.Status(ctx, args)
	e.human = func(any) string { return statusTable(rep) }
	return rep, err
}

func runHealth(ctx context.Context, e *env, args []string) (any, error) {
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	h, err := o.PoolHealth(ctx, args[0], time.Duration(flagMinutes)*time.Minute)
	e.human = func(any) string { return healthTable(h) }
	return h, err
}

// healthTable is one row per tenant over an alarm's threshold.
func healthTable(h ops.PoolHealth) string {
	var b strings.Builder
	rows := [][]string{{"ALARM", "TENANT", "VALUE", "RULE"}}
	for _, a := range h.Alarms {
		for _, tv := range a.Tenants {
			rows = append(rows, []string{a.Alarm, tv.Tenant, fmt.Sprint(tv.Value), a.Rule})
		}
		if a.Truncated {
			rows = append(rows, []string{a.Alarm, "(more)", "-", a.Rule})
		}
		if a.Missing {
			rows = append(rows, []string{a.Alarm, "(rule not deployed: deploy the pool again)", "-", a.Rule})
		}
	}
	if len(rows) == 1 {
		fmt.Fprintf(&b, "no tenant of pool %s reached a per-tenant alarm's threshold from %s to %s\n", h.Pool, stamp(&h.From), stamp(&h.To))
		return b.String()
	}
	b.WriteString(termtable.Render(rows))
	return b.String()
}

func runFiles(ctx context.Context, e *env, args []string) (any, error) {
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	rep, err := o.Files(ctx, args[0], flagLimit)
	e.human = func(any) string { return filesTable(rep) }
	return rep, err
}

func runPause(paused bool) func(ctx context.Context, e *env, args []string) (any, error) {
	return func(ctx context.Context, e *env, args []string) (any, error) {
		o, err := e.ops(ctx)
		if err != nil {
			return nil, err
		}
		res, err := o.SetPaused(ctx, args[0], paused, flagReason)
		e.human = func(any) string {
			verb, note := "resumed", "the controller reads the queue again"
			if paused {
				verb, note = "paused", "files keep queuing (14 days) and nothing is lost"
			}
			if res.Pool != "" {
				return pooledPauseLine(res, verb, paused)
			}
			if !res.Changed {
				return fmt.Sprintf("%s was already %s (event source mapping %s is %s)\n", res.Tenant, verb, res.UUID, res.State)
			}
			return fmt.Sprintf("%s %s: event source mapping %s is %s; %s\n", verb, res.Tenant, res.UUID, res.State, note)
		}
		return res, err
	}
}

// pooledPauseLine says what pause or resume did to a pooled tenant's message group.
func pooledPauseLine(res ops.MappingResult, verb string, paused bool) string {
	marker := fmt.Sprintf("s3://%s/%s", res.Bucket, res.MarkerKey)
	switch {
	case !res.Changed && paused:
		return fmt.Sprintf("%s was already paused (pause marker %s); the other tenants of pool %s flow\n", res.Tenant, marker, res.Pool)
	case paused:
		return fmt.Sprintf("paused %s (pool %s): pause marker %s written (version %s, by %s); the file running now finishes, "+
			"the next does not start; the pool's other tenants flow\n", res.Tenant, res.Pool, marker, orDash(res.VersionID), res.RequestedBy)
	}
	held := "no held message to release; the next delivery goes on"
	if res.Released {
		held = "its held message was made visible, so the controller goes on within seconds"
	}
	if !res.Changed {
		return fmt.Sprintf("%s was already %s (no pause marker %s); %s\n", res.Tenant, verb, marker, held)
	}
	return fmt.Sprintf("%s %s (pool %s): pause marker %s deleted; %s\n", verb, res.Tenant, res.Pool, marker, held)
}

func runSkip(ctx context.Context, e *env, args []string) (any, error) {
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	res, err := o.Skip(ctx, args[0], args[1], flagReason)
	e.human = func(any) string {
		return fmt.Sprintf("skip marker written: s3://%s/%s (version %s, by %s); the controller releases %s at its next check\n",
			res.Bucket, res.MarkerKey, res.VersionID, res.RequestedBy, res.Tenant)
	}
	return res, err
}

func runRedrive(ctx context.Context, e *env, args []string) (any, error) {
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	exec := ""
	if len(args) == 2 {
		exec = args[1]
	}
	res, err := o.RedriveWith(ctx, args[0], exec, ops.RedriveOptions{Reason: flagReason, Force: flagForce, OutOfOrder: flagOutOfOrder,
		AcceptDuplicates: flagAcceptDuplicates})
	e.human = func(any) string {
		if res.OutOfOrder {
			return fmt.Sprintf("redrive of %s queued OUT OF ORDER, after %d later and %d queued file(s) of %s (request %s, message %s; audit record s3 key %s); the controller redrives it at the head\n",
				res.ExecutionName, res.LaterCount, res.Queued, res.Tenant, res.RequestID, res.MessageID, res.AuditKey)
		}
		if res.Mode == "redriven" {
			return fmt.Sprintf("redriven %s: it resumes at its failed segment; the controller releases %s when it succeeds\n", res.ExecutionName, res.Tenant)
		}
		return fmt.Sprintf("redrive of %s queued behind %s's current files (request %s, message %s); the controller redrives it at the head\n",
			res.ExecutionName, res.Tenant, res.RequestID, res.MessageID)
	}
	if human := e.human; res.DuplicatesAccepted != "" {
		e.human = func(v any) string {
			return human(v) + fmt.Sprintf("duplicates accepted: records first sent longer ago than the core system's idempotencyRetention are re-sent without a lookup (audit record %s)\n", res.DuplicatesAccepted)
		}
	}
	return res, err
}

// runSequence is sequence skip (set false) and sequence set: N is a whole number; a negative
// one is the tenant's to refuse, with its reason.
func runSequence(set bool) func(ctx context.Context, e *env, args []string) (any, error) {
	verb := map[bool]string{false: "skip", true: "set"}[set]
	return func(ctx context.Context, e *env, args []string) (any, error) {
		n, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			return nil, usagef("sequence %s %s: N %q is not a whole number", verb, args[0], args[1])
		}
		if strings.TrimSpace(flagReason) == "" {
			return nil, usagef("sequence %s %s: --reason is required: it is the audit record", verb, args[0])
		}
		o, err := e.ops(ctx)
		if err != nil {
			return nil, err
		}
		do := o.SequenceSkip
		if set {
			do = o.SequenceSet
		}
		res, err := do(ctx, args[0], n, flagReason)
		e.human = func(any) string { return sequenceLine(res) }
		return res, err
	}
}

// sequenceLine says what sequence skip or set asked for, and where it happens.
func sequenceLine(res ops.SequenceResult) string {
	what := fmt.Sprintf("sequence skip of number %d requested for %s, which expects %d next", res.Number, res.Tenant, aws.ToInt64(res.Next))
	then := fmt.Sprintf("the files held after %d then run in order", res.Number)
	if res.Action == pipeline.ControlSequenceSet {
		what = fmt.Sprintf("sequence set of the next number to %d requested for %s", res.Number, res.Tenant)
		then = fmt.Sprintf("%s then expects %d next", res.Tenant, res.Number)
	}
	return fmt.Sprintf("%s (request %s, message %s, by %s); the controller performs it at the head of %s's message group, after the files queued before it; %s\n",
		what, res.RequestID, res.MessageID, res.RequestedBy, res.Tenant, then)
}

func runReplay(ctx context.Context, e *env, args []string) (any, error) {
	switch {
	case flagFromDLQ && (len(args) != 1 || flagVersionID != ""):
		return nil, usagef("replay --from-dlq takes only TENANT")
	case !flagFromDLQ && len(args) != 2:
		return nil, usagef("usage: pipectl replay TENANT KEY [--version-id V] | TENANT --from-dlq")
	}
	o, err := e.ops(ctx)
	if err != nil {
		return nil, err
	}
	var res ops.ReplayResult
	if flagFromDLQ {
		res, err = o.ReplayFromDLQ(ctx, args[0])
		e.human = func(any) string {
			return fmt.Sprintf("re-sent %d events from %s's dead-letter queue in order; %d other messages left there\n", res.Resent, res.Tenant, res.Skipped)
		}
		return res, err
	}
	res, err = o.ReplayWith(ctx, args[0], args[1], flagVersionID, flagReason, flagOutOfOrder)
	e.human = func(any) string {
		rank := "ranked as its original execution " + res.OriginalExecution
		if res.OriginalExecution == "" {
			rank = "no original execution found: a DynamoDB sink only fills keys no item holds"
		}
		if res.OutOfOrder {
			rank += fmt.Sprintf("; OUT OF ORDER: after %d later and %d queued file(s) of the tenant, audited in its results folder", res.LaterCount, res.Queued)
		}
		return fmt.Sprintf("replay of %s (version %s) queued behind %s's current files as execution %s (new Idempotency-Keys; %s)\n",
			res.Key, res.VersionID, res.Tenant, res.ExecutionName, rank)
	}
	return res, err
}

// recordsLegend explains the head's RECORDS column: the execution history shows which segments
// finished, not how far the running one got, so the count is a lower bound.
const recordsLegend = "RECORDS >=n/N: at least n of the head file's N records are registered " +
	"(the records of its finished segments; the segment running now is not counted yet)"

// statusTable is one row per tenant, then the RECORDS legend when a count is a lower bound, then
// one line per last failure.
func statusTable(rep ops.StatusReport) string {
	var b strings.Builder
	rows := [][]string{{"TENANT", "TIER", "POLICY", "PAUSED", "BLOCKED", "VISIBLE", "IN-FLIGHT", "HEAD", "EXECUTION", "STATUS", "RECORDS", "QUEUED", "RUNNING"}}
	lowerBound := false
	for _, t := range rep.Tenants {
		paused := "?"
		if t.Paused != nil {
			paused = yesNo(*t.Paused)
		}
		visible, inflight := "-", "-"
		if t.Queue != nil {
			visible, inflight = count(t.Queue.Visible), count(t.Queue.InFlight)
		}
		tier := t.Tier
		if t.Pool != nil {
			tier = "pool:" + *t.Pool
		}
		head, exec, status, records, queued, running := "-", "-", "-", "-", "-", "-"
		if h := t.Head; h != nil {
			head, exec, status, queued, running = orDash(h.Key), h.ExecutionName, h.Status, dur(h.QueuedSeconds), dur(h.RunningSeconds)
			if p := h.Progress; p != nil {
				// Registered at segment granularity: at least this many.
				records = fmt.Sprintf(">=%d/%d", p.Registered, p.Records)
				lowerBound = true
			}
		}
		rows = append(rows, []string{t.ID, tier, t.Policy, paused, yesNo(t.Blocked), visible, inflight, head, exec, status, records, queued, running})
	}
	b.WriteString(termtable.Render(rows))
	if lowerBound {
		b.WriteString(recordsLegend + "\n")
	}
	for _, p := range rep.Pools {
		fmt.Fprintf(&b, "pool %s (%s): %d tenants, queue %s visible, %s in flight, oldest held head %s\n",
			p.Name, p.Stack, p.Tenants, count(p.Queue.Visible), count(p.Queue.InFlight), dur(p.OldestMessageAgeSeconds))
		if p.MaxRunningFiles != nil && p.RunningFiles != nil && p.WaitingTenants != nil {
			fmt.Fprintf(&b, "pool %s admission: %d of %d running files, %d tenants waiting\n", p.Name, *p.RunningFiles, *p.MaxRunningFiles, *p.WaitingTenants)
		}
		if p.UnroutedObjects != nil && *p.UnroutedObjects > 0 {
			keys := make([]string, len(p.UnroutedKeys))
			for i, k := range p.UnroutedKeys {
				keys[i] = ops.ShellQuote(k)
			}
			fmt.Fprintf(&b, "pool %s: %d objects under no tenant's prefix, their events on the pool's dead-letter queue; newest: %s\n",
				p.Name, *p.UnroutedObjects, strings.Join(keys, " "))
		}
	}
	for _, c := range rep.CoreSystems {
		limit := fmt.Sprintf("maxRunningFiles %d", c.MaxRunningFiles)
		if c.Adaptive {
			limit += ", adaptive"
		}
		fmt.Fprintf(&b, "core system %s: %d of %d running files (%s), %d of %d requests in flight, %d tenants waiting, oldest admission wait %s; tenants %s\n",
			c.Name, c.RunningFiles, c.Limit, limit, c.RequestsInFlight, c.MaxRequestsInFlight, c.WaitingTenants, dur(&c.OldestAdmissionWaitSeconds), strings.Join(c.Tenants, ", "))
		b.WriteString(breakerLine(c))
		b.WriteString(steeringLine(c))
	}
	for _, t := range rep.Tenants {
		if t.Parked != nil && t.QueuedFiles != nil && t.Pool != nil && (*t.Parked > 0 || *t.QueuedFiles > 0) {
			fmt.Fprintf(&b, "%s backlog: %d files queued in pool %s, %d parked outside it\n", t.ID, *t.QueuedFiles, *t.Pool, *t.Parked)
		}
	}
	for _, t := range rep.Tenants {
		if t.Sequence != nil {
			b.WriteString(sequenceStatusLine(t.ID, *t.Sequence))
		}
	}
	for _, t := range rep.Tenants {
		if f := t.LastFailure; f != nil {
			fmt.Fprintf(&b, "%s last failure: %s %s %s: %s: %s\n", t.ID, orDash(f.Key), f.ExecutionName, f.Status, orDash(f.ErrorType), orDash(oneLine(f.ErrorMessage)))
		}
	}
	for _, t := range rep.Tenants {
		if len(t.Next) > 0 {
			fmt.Fprintf(&b, "%s is halted at %s:\n%s", t.ID, t.Head.ExecutionName, ops.ReleaseText("  ", t.Next))
		}
	}
	return b.String()
}

// sequenceStatusLine is a sequenced tenant's place in its sequence, each part under its path in
// the JSON: sequence.next (or sequence.last), sequence.running, sequence.held (its count, then the
// first ops.MaxHeldListed values and how many more) and sequence.gapSince ("-" for null).
func sequenceStatusLine(id string, s ops.SequenceStatus) string {
	parts := []string{"sequence.next " + knownCount(s.Next)}
	if s.Kind != spec.SequenceNumber {
		parts = []string{"sequence.last " + quoted(s.Last)}
	}
	if s.Running != nil {
		parts = append(parts, "sequence.running "+quoted(s.Running))
	}
	held := fmt.Sprintf("sequence.held %d", s.HeldCount)
	if len(s.Held) > 0 {
		values := make([]string, len(s.Held))
		for i, v := range s.Held {
			values[i] = ops.ShellQuote(fmt.Sprint(v))
		}
		more := ""
		if n := s.HeldCount - len(s.Held); n > 0 {
			more = fmt.Sprintf(" and %d more", n)
		}
		held += " (" + strings.Join(values, ", ") + more + ")"
	}
	parts = append(parts, held, "sequence.gapSince "+stamp(s.GapSince))
	return fmt.Sprintf("%s: %s\n", id, strings.Join(parts, ", "))
}

// quoted is a value quoted for a POSIX shell, or "-" when there is none.
func quoted(s *string) string {
	if s == nil {
		return "-"
	}
	return ops.ShellQuote(*s)
}

// filesTable is one row per file; the SEQUENCE and REFUSAL columns only when a file has one.
func filesTable(rep ops.FilesReport) string {
	var b strings.Builder
	sequenced := slices.ContainsFunc(rep.Files, func(f ops.File) bool { return f.Sequence != nil })
	refused := slices.ContainsFunc(rep.Files, func(f ops.File) bool { return f.Refusal != nil })
	header := []string{"KEY", "EXECUTION", "STATUS", "RECORDS", "REGISTERED", "REJECTED", "START", "STOP", "ERROR"}
	if sequenced {
		header = slices.Insert(header, 1, "SEQUENCE")
	}
	if refused {
		header = slices.Insert(header, slices.Index(header, "STATUS")+1, "REFUSAL")
	}
	rows := [][]string{header}
	for _, f := range rep.Files {
		errName := "-"
		if f.ErrorType != nil {
			errName = orDash(*f.ErrorType)
			if f.ErrorMessage != nil && *f.ErrorMessage != "" {
				errName += ": " + oneLine(*f.ErrorMessage)
			}
		}
		records := "-"
		if f.Records != nil {
			records = fmt.Sprint(*f.Records)
		}
		row := []string{orDash(f.Key), f.ExecutionName, f.Status, records, knownCount(f.Registered), knownCount(f.Rejected), stamp(f.Start), stamp(f.Stop), errName}
		if sequenced {
			row = slices.Insert(row, 1, optional(f.Sequence))
		}
		if refused {
			row = slices.Insert(row, slices.Index(header, "REFUSAL"), optional(f.Refusal))
		}
		rows = append(rows, row)
	}
	b.WriteString(termtable.Render(rows))
	if len(rep.Files) == 0 {
		fmt.Fprintf(&b, "(%s has no files yet)\n", rep.Tenant)
	}
	return b.String()
}

// knownCount is a count, or "-" when it is not known.
func knownCount(n *int64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

// optional is a value, or "-" when there is none.
func optional(s *string) string {
	if s == nil {
		return "-"
	}
	return orDash(oneLine(*s))
}

// oneLine keeps a table row on one line whatever a message holds.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// count is an approximate count, or "?" where SQS counts nothing (a pooled tenant's message group).
func count(n *int64) string {
	if n == nil {
		return "?"
	}
	return fmt.Sprint(*n)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func dur(s *float64) string {
	if s == nil {
		return "-"
	}
	return time.Duration(*s * float64(time.Second)).Round(time.Second).String()
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
