package ops

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/example/tenantpipeline/internal/pipeline"
)

// Bulk actions: redrive, skip, pause and resume on the tenants a selector picks, each tenant's
// action the single-tenant one (so audited exactly as it is), a few tenants at a time, every AWS
// call within the rate Limit sets. A refused action (the tenant is not halted, its redrive would
// break its order, ...) skips the tenant with the refusal as its reason; any other error fails
// it; neither stops the run. docs/operations.md, "Acting on many tenants".

// The bulk actions.
const (
	BulkRedrive = "redrive"
	BulkSkip    = "skip"
	BulkPause   = "pause"
	BulkResume  = "resume"
)

// The outcomes of a tenant in a bulk run.
const (
	OutcomeDone    = "done"
	OutcomeSkipped = "skipped"
	OutcomeFailed  = "failed"
	// OutcomePlanned is a tenant a dry run would act on.
	OutcomePlanned = "planned"
)

// Selector picks tenants; the criteria given intersect.
type Selector struct {
	// AllHalted: the tenants halted at a failed file (status "blocked").
	AllHalted bool `json:"allHalted,omitempty"`
	// CoreSystem: the tenants whose settings name this core system.
	CoreSystem string `json:"coreSystem,omitempty"`
	// Pool: the pooled tenants of this pool.
	Pool string `json:"pool,omitempty"`
	// Tenants: these ids (pipectl --tenants FILE, ReadTenantList); nil when not given.
	Tenants []string `json:"tenants,omitempty"`
}

// IsSet reports whether the selector has a criterion.
func (s Selector) IsSet() bool {
	return s.AllHalted || s.CoreSystem != "" || s.Pool != "" || s.Tenants != nil
}

// tenantID is a tenant id as the tenants file allows it (spec: 1-32 of a-z 0-9 -).
var tenantID = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// ReadTenantList reads a list of tenant ids, one a line. Blank lines and everything from a "#"
// are ignored; a line that is no tenant id is an error naming it; a repeated id counts once.
func ReadTenantList(r io.Reader) ([]string, error) {
	ids := []string{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	var bad []string
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		id := strings.TrimSpace(line)
		switch {
		case id == "":
		case !tenantID.MatchString(id):
			bad = append(bad, fmt.Sprintf("line %d: %q is no tenant id (1-32 of a-z 0-9 -)", n, id))
		case !seen[id]:
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, errors.New(strings.Join(bad, "; "))
	}
	return ids, nil
}

// Selected is the outcome of Select: the tenants picked, in id order.
type Selected struct {
	Tenants []pipeline.TenantOutput
	// Of is how many tenants the stacks describe.
	Of int
}

// Select returns the tenants the selector picks. A tenant id, pool or core system that no
// tenant has is an error: a typo must not act on nothing and read as success.
func (o *Ops) Select(ctx context.Context, sel Selector) (Selected, error) {
	all, err := o.Tenants(ctx)
	if err != nil {
		return Selected{}, err
	}
	if len(all) == 0 {
		return Selected{}, &NoTenantsError{StackPrefix: o.StackPrefix}
	}
	ts := all
	if sel.Tenants != nil {
		var unknown []string
		var picked []pipeline.TenantOutput
		for _, id := range sel.Tenants {
			t, err := o.pick(all, id)
			if err != nil {
				unknown = append(unknown, id)
				continue
			}
			picked = append(picked, t)
		}
		if len(unknown) > 0 {
			return Selected{}, refuse("the tenants list names %d tenant(s) no stack describes: %s", len(unknown), strings.Join(unknown, ", "))
		}
		ts = picked
	}
	if sel.Pool != "" {
		if _, ok := o.poolNamed(sel.Pool); !ok {
			return Selected{}, refuse("no pool named %s: the stacks describe %s", sel.Pool, o.poolNames())
		}
		ts = slices.DeleteFunc(slices.Clone(ts), func(t pipeline.TenantOutput) bool { return t.Pool != sel.Pool })
	}
	if sel.CoreSystem != "" {
		// Only the tenants picked so far are read (a silo tenant's settings cost a GetFunction);
		// all of them only when none names the core system, to tell a typo from an empty pick.
		keep, err := o.ofCoreSystem(ctx, ts, sel.CoreSystem)
		if err != nil {
			return Selected{}, err
		}
		if len(keep) == 0 {
			if err := o.knownCoreSystem(ctx, all, sel.CoreSystem); err != nil {
				return Selected{}, err
			}
		}
		ts = keep
	}
	if sel.AllHalted {
		halted := make([]bool, len(ts))
		errs := make([]error, len(ts))
		o.each(ctx, len(ts), func(i int) {
			st, err := o.state(ctx, ts[i])
			halted[i], errs[i] = st.blocking != nil, err
		})
		var keep []pipeline.TenantOutput
		for i, t := range ts {
			if errs[i] != nil {
				return Selected{}, fmt.Errorf("tenant %s: read whether it is halted: %w", t.ID, errs[i])
			}
			if halted[i] {
				keep = append(keep, t)
			}
		}
		ts = keep
	}
	sort := slices.Clone(ts)
	slices.SortFunc(sort, func(a, b pipeline.TenantOutput) int { return strings.Compare(a.ID, b.ID) })
	return Selected{Tenants: sort, Of: len(all)}, nil
}

// ofCoreSystem returns the tenants of ts whose settings name the core system.
func (o *Ops) ofCoreSystem(ctx context.Context, ts []pipeline.TenantOutput, name string) ([]pipeline.TenantOutput, error) {
	var keep []pipeline.TenantOutput
	for _, t := range ts {
		s, err := o.TenantSettings(ctx, t.ID)
		if err != nil {
			return nil, fmt.Errorf("read tenant %s's core system: %w", t.ID, err)
		}
		if s.CoreSystem != nil && s.CoreSystem.Name == name {
			keep = append(keep, t)
		}
	}
	return keep, nil
}

// knownCoreSystem refuses a core system that no tenant names, listing those they do.
func (o *Ops) knownCoreSystem(ctx context.Context, all []pipeline.TenantOutput, name string) error {
	known := map[string]bool{}
	for _, t := range all {
		s, err := o.TenantSettings(ctx, t.ID)
		if err != nil {
			return fmt.Errorf("read tenant %s's core system: %w", t.ID, err)
		}
		if s.CoreSystem != nil {
			known[s.CoreSystem.Name] = true
		}
	}
	if known[name] {
		return nil
	}
	return refuse("no tenant names core system %s; the tenants' core systems: %s", name, orNone(slices.Sorted(maps.Keys(known))))
}

func (o *Ops) poolNames() string {
	var names []string
	for _, p := range o.found.pools {
		names = append(names, p.out.Pool)
	}
	return orNone(names)
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// BulkOptions say what a bulk run does.
type BulkOptions struct {
	Action string
	// Reason is each tenant's action's reason (skip requires one).
	Reason string
	// Force and OutOfOrder are redrive's (RedriveOptions).
	Force, OutOfOrder bool
	// DryRun reads what each tenant's action would act on and does nothing.
	DryRun bool
	// Progress receives a line every ProgressEvery tenants (default 25) or ProgressInterval
	// (default 5 s), whichever comes first, and at the end; nil: none.
	Progress         io.Writer
	ProgressEvery    int
	ProgressInterval time.Duration
}

// BulkItem is one tenant's outcome. Result is the single-tenant action's result (RedriveResult,
// SkipResult, MappingResult) when it was done.
type BulkItem struct {
	Tenant    string `json:"tenant"`
	Outcome   string `json:"outcome"`
	Execution string `json:"executionName,omitempty"`
	// Detail says what was (or, in a dry run, would be) done.
	Detail string `json:"detail,omitempty"`
	// Reason is why a tenant was skipped; Error why it failed.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	Result any    `json:"result,omitempty"`
}

// BulkReport is a bulk run's summary (pipectl --json).
type BulkReport struct {
	Action   string     `json:"action"`
	DryRun   bool       `json:"dryRun"`
	Selector Selector   `json:"selector"`
	Selected int        `json:"selected"`
	Done     int        `json:"done"`
	Skipped  int        `json:"skipped"`
	Failed   int        `json:"failed"`
	Planned  int        `json:"planned"`
	Tenants  []BulkItem `json:"tenants"`
}

// bulkParallelism is how many tenants a bulk run acts on at once; the rate limiter, not this,
// bounds the calls.
const bulkParallelism = 4

// Bulk performs the action on each tenant, a few at a time, and reports each tenant's outcome
// in tenant order.
func (o *Ops) Bulk(ctx context.Context, sel Selector, ts []pipeline.TenantOutput, opt BulkOptions) (BulkReport, error) {
	switch opt.Action {
	case BulkRedrive, BulkSkip, BulkPause, BulkResume:
	default:
		return BulkReport{}, fmt.Errorf("no bulk action %q", opt.Action)
	}
	if opt.Action == BulkSkip && strings.TrimSpace(opt.Reason) == "" {
		return BulkReport{}, refuse("skip needs --reason: it is the audit record")
	}
	rep := BulkReport{Action: opt.Action, DryRun: opt.DryRun, Selector: sel, Selected: len(ts), Tenants: make([]BulkItem, len(ts))}
	p := newBulkProgress(opt, len(ts), o.Now)
	o.each(ctx, len(ts), func(i int) {
		item := o.bulkOne(ctx, ts[i], opt)
		rep.Tenants[i] = item
		p.add(item)
	})
	p.end()
	for _, it := range rep.Tenants {
		switch it.Outcome {
		case OutcomeDone:
			rep.Done++
		case OutcomeSkipped:
			rep.Skipped++
		case OutcomeFailed:
			rep.Failed++
		case OutcomePlanned:
			rep.Planned++
		}
	}
	return rep, ctx.Err()
}

// each calls f(0..n-1), bulkParallelism at a time, and returns when all have returned. Once ctx
// is done, the calls not started are not made.
func (o *Ops) each(ctx context.Context, n int, f func(i int)) {
	sem := make(chan struct{}, bulkParallelism)
	var wg sync.WaitGroup
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

// bulkOne performs (or plans) the action on one tenant.
func (o *Ops) bulkOne(ctx context.Context, t pipeline.TenantOutput, opt BulkOptions) BulkItem {
	item := BulkItem{Tenant: t.ID}
	if ctx.Err() != nil {
		return outcome(item, ctx.Err())
	}
	if opt.DryRun {
		return o.plan(ctx, t, opt, item)
	}
	switch opt.Action {
	case BulkRedrive:
		res, err := o.RedriveWith(ctx, t.ID, "", RedriveOptions{Reason: opt.Reason, Force: opt.Force, OutOfOrder: opt.OutOfOrder})
		if err == nil {
			item.Execution, item.Result = res.ExecutionName, res
			item.Detail = map[string]string{"redriven": "redriven: it resumes at its failed segment", "queued": "redrive queued behind the tenant's current files"}[res.Mode]
			if res.OutOfOrder {
				item.Detail += fmt.Sprintf(" (out of order, after %d later and %d queued file(s))", res.LaterCount, res.Queued)
			}
		}
		return outcome(item, err)
	case BulkSkip:
		st, err := o.state(ctx, t)
		if err != nil {
			return outcome(item, err)
		}
		if st.blocking == nil {
			return outcome(item, refuse("tenant %s is not halted: nothing to skip", t.ID))
		}
		item.Execution = aws.ToString(st.blocking.Name)
		res, err := o.Skip(ctx, t.ID, item.Execution, opt.Reason)
		if err == nil {
			item.Result, item.Detail = res, "skip marker written: s3://"+res.Bucket+"/"+res.MarkerKey
		}
		return outcome(item, err)
	default:
		paused := opt.Action == BulkPause
		res, err := o.SetPaused(ctx, t.ID, paused, opt.Reason)
		if err == nil {
			item.Result = res
			if !res.Changed {
				item.Outcome, item.Reason = OutcomeSkipped, map[bool]string{true: "already paused", false: "not paused"}[paused]
				return item
			}
			item.Detail = map[bool]string{true: "paused", false: "resumed"}[paused]
		}
		return outcome(item, err)
	}
}

// plan says what the action would do to one tenant, from its state, without doing it. A
// continue tenant's redrive is checked against the order guard; the checks that read the file
// (validation, work files) run only when it is done.
func (o *Ops) plan(ctx context.Context, t pipeline.TenantOutput, opt BulkOptions, item BulkItem) BulkItem {
	if opt.Action == BulkPause || opt.Action == BulkResume {
		item.Outcome, item.Detail = OutcomePlanned, "would "+opt.Action
		return item
	}
	st, err := o.state(ctx, t)
	if err != nil {
		return outcome(item, err)
	}
	switch {
	case st.blocking != nil:
		item.Execution = aws.ToString(st.blocking.Name)
	case opt.Action == BulkRedrive && t.Policy != pipeline.OnFailureHalt:
		for _, e := range st.recent {
			if !unsuccessful(e.Status) {
				continue
			}
			item.Execution = aws.ToString(e.Name)
			// A continue tenant's failed file may have been passed: the order guard says so now.
			if _, err := o.checkOrder(ctx, t, st, "redrive", item.Execution, aws.ToTime(e.StartDate), OutOfOrder{Allowed: opt.OutOfOrder, Reason: opt.Reason}); err != nil {
				return outcome(item, err)
			}
			break
		}
	}
	if item.Execution == "" {
		return outcome(item, refuse("tenant %s is not halted and has no failed file among its %d newest: nothing to %s", t.ID, recentExecutions, opt.Action))
	}
	item.Outcome, item.Detail = OutcomePlanned, "would "+opt.Action+" "+item.Execution
	return item
}

// outcome files an item under done, skipped (a refusal, with its reason) or failed.
func outcome(item BulkItem, err error) BulkItem {
	var refused *RefusedError
	var ooo *OutOfOrderError
	switch {
	case err == nil:
		if item.Outcome == "" {
			item.Outcome = OutcomeDone
		}
	case errors.As(err, &refused), errors.As(err, &ooo):
		item.Outcome, item.Reason = OutcomeSkipped, err.Error()
	default:
		item.Outcome, item.Error = OutcomeFailed, err.Error()
	}
	return item
}

// bulkProgress writes a progress line every so many tenants or seconds.
type bulkProgress struct {
	mu                     sync.Mutex
	w                      io.Writer
	every                  int
	interval               time.Duration
	now                    func() time.Time
	last                   time.Time
	action                 string
	total, n               int
	done, skipped, failed  int
	planned, sinceLastLine int
}

func newBulkProgress(opt BulkOptions, total int, now func() time.Time) *bulkProgress {
	p := &bulkProgress{w: opt.Progress, every: opt.ProgressEvery, interval: opt.ProgressInterval, now: now, action: opt.Action, total: total}
	if p.every <= 0 {
		p.every = 25
	}
	if p.interval <= 0 {
		p.interval = 5 * time.Second
	}
	p.last = now()
	return p
}

func (p *bulkProgress) add(it BulkItem) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.sinceLastLine++
	switch it.Outcome {
	case OutcomeDone:
		p.done++
	case OutcomeSkipped:
		p.skipped++
	case OutcomeFailed:
		p.failed++
	case OutcomePlanned:
		p.planned++
	}
	if p.n < p.total && (p.sinceLastLine >= p.every || p.now().Sub(p.last) >= p.interval) {
		p.line()
	}
}

func (p *bulkProgress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line()
}

func (p *bulkProgress) line() {
	p.sinceLastLine, p.last = 0, p.now()
	if p.w == nil {
		return
	}
	counts := fmt.Sprintf("%d done, %d skipped, %d failed", p.done, p.skipped, p.failed)
	if p.planned > 0 {
		counts = fmt.Sprintf("%d planned, %d skipped, %d failed", p.planned, p.skipped, p.failed)
	}
	fmt.Fprintf(p.w, "pipectl: %s: %d/%d tenants (%s)\n", p.action, p.n, p.total, counts)
}
