package stacks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/tenants"
	"github.com/example/tenantpipeline/spec"
)

// Stack assignment.
//
// CloudFormation replaces a resource that moves to another stack: it deletes it in the old stack
// and creates it anew in the other, and a queue deleted that way loses the files it holds. So a
// tenant must never change stacks because the tenants file was edited. Grouping by position in
// the file breaks that as soon as a tenant is inserted or removed in the middle; a hash of the id
// needs hundreds of stacks to keep every stack under its size bound by chance alone, and would
// move every tenant of an app that was deployed with positional grouping.
//
// Synth therefore keeps the assignment in a file beside the tenants file, as the CDK CLI keeps
// cdk.context.json, and the user commits it (under CI=true, or -c strictAssignment=true, synth
// refuses to create or change it, so that a deploy never rests on an assignment nobody committed):
//   - a tenant with a stack field goes to that stack (a deliberate move);
//   - a tenant already in the file stays in its stack;
//   - a new tenant goes to the lowest-numbered stack with room (TenantsPerStack), else a new one.
//
// With no file yet this is exactly the old grouping by position, so an app deployed before keeps
// every tenant where it is. Removing a tenant frees its slot; nobody else moves.

// assignmentDoc is the assignment file.
type assignmentDoc struct {
	Note   string            `json:"//"`
	Stacks map[string]string `json:"stacks"`
	// Pools holds the pool of each pooled tenant; Stacks holds the silo tenants only.
	Pools map[string]string `json:"pools,omitempty"`
	// PoolPrefixes holds the prefix of each pool with tenants. A pooled tenant's prefix is
	// "<pool prefix><id>/", unless Prefixes holds another, so that 100,000 tenants add no line
	// of their own. Absent in a file written before prefixes were recorded: nothing to compare.
	PoolPrefixes map[string]string `json:"poolPrefixes,omitempty"`
	// Prefixes holds the prefix of each pooled tenant whose prefix is not "<pool prefix><id>/".
	Prefixes map[string]string `json:"prefixes,omitempty"`
	// PoolIntakeGroups holds the intakeGroups of each pool with tenants: a tenant's events go to
	// the intake group of the first character of its id, modulo intakeGroups, so changing it moves
	// tenants to other groups. Absent in a file written before it was recorded: nothing to compare.
	PoolIntakeGroups map[string]int `json:"poolIntakeGroups,omitempty"`
	// PoolKeys holds the key layout of each pool with tenants (pipeline.KeysPerPool or
	// KeysPerTenant): where its tenants' objects lie, which a change would leave behind. A pool
	// in PoolPrefixes and not here was deployed before the layout was recorded: KeysPerTenant.
	PoolKeys map[string]string `json:"poolKeys,omitempty"`
}

// keysOf is pool name's key layout: the tenants file's "keys", else the recorded one, else
// KeysPerTenant for a pool recorded before layouts were (its tenants' objects lie there), else,
// for a new pool, KeysPerPool.
func (d assignmentDoc) keysOf(file *tenants.File, name string) string {
	if k := file.Pool(name).Keys; k != "" {
		return k
	}
	if k, ok := d.PoolKeys[name]; ok {
		return k
	}
	if _, deployed := d.PoolPrefixes[name]; deployed {
		return pipeline.KeysPerTenant
	}
	return pipeline.KeysPerPool
}

// withKeys records the key layout of the file's pools, each as old gives it (keysOf).
func (d assignmentDoc) withKeys(file *tenants.File, old assignmentDoc) assignmentDoc {
	d.PoolKeys = nil
	for _, name := range file.PoolNames() {
		if d.PoolKeys == nil {
			d.PoolKeys = map[string]string{}
		}
		d.PoolKeys[name] = old.keysOf(file, name)
	}
	return d
}

// recordedPrefix is the prefix the file recorded for the pooled tenant id of pool, if it did.
func (d assignmentDoc) recordedPrefix(id, pool string) (string, bool) {
	if p, ok := d.Prefixes[id]; ok {
		return p, true
	}
	p, ok := d.PoolPrefixes[pool]
	return p + id + "/", ok
}

// withPrefixes records the prefixes and intake groups of the file's pools and the prefixes of the
// pooled tenants that have their own.
func (d assignmentDoc) withPrefixes(file *tenants.File) assignmentDoc {
	d.PoolPrefixes, d.Prefixes, d.PoolIntakeGroups = nil, nil, nil
	for _, name := range file.PoolNames() {
		if d.PoolPrefixes == nil {
			d.PoolPrefixes, d.PoolIntakeGroups = map[string]string{}, map[string]int{}
		}
		d.PoolPrefixes[name] = file.Pool(name).Prefix
		d.PoolIntakeGroups[name] = file.Pool(name).IntakeGroups
	}
	for _, t := range file.Tenants {
		if t.Pooled() && t.Prefix != file.Pool(t.Pool).Prefix+t.ID+"/" {
			if d.Prefixes == nil {
				d.Prefixes = map[string]string{}
			}
			d.Prefixes[t.ID] = t.Prefix
		}
	}
	return d
}

const assignmentNote = "Written by synth from %s: the stack of each silo tenant, and the pool of each pooled tenant. Commit this file. " +
	"A tenant keeps its stack while the tenants file changes, because moving it would replace its queue; set the tenant's \"stack\" field " +
	"to move it on purpose. A move between tiers or pools also replaces its queue: synth refuses it until -c moveTenants=<id> confirms it."

func loadAssignment(path string) (map[string]string, error) {
	stacks, _, err := loadAssignments(path)
	return stacks, err
}

// loadAssignments reads the silo tenants' stacks and the pooled tenants' pools.
func loadAssignments(path string) (stacks, pools map[string]string, err error) {
	doc, err := readAssignment(path)
	return doc.Stacks, doc.Pools, err
}

// readAssignment reads the assignment file; a missing file is an empty one.
func readAssignment(path string) (assignmentDoc, error) {
	doc := assignmentDoc{}
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return doc, fmt.Errorf("stack assignment: %w", err)
	}
	if err == nil {
		if err := json.Unmarshal(b, &doc); err != nil {
			return doc, fmt.Errorf("stack assignment %s: %v; restore it from version control (deleting it regroups tenants by their position in the tenants file)", path, err)
		}
	}
	for id, s := range doc.Stacks {
		if !tenants.StackPattern.MatchString(s) {
			return doc, fmt.Errorf("stack assignment %s: tenant %q: stack %q is invalid: use 1-32 letters, digits and hyphens", path, id, s)
		}
	}
	if doc.Stacks == nil {
		doc.Stacks = map[string]string{}
	}
	if doc.Pools == nil {
		doc.Pools = map[string]string{}
	}
	return doc, nil
}

// saveAssignment writes the assignment when it changed, so an unchanged app leaves the file alone.
// When strict, it writes nothing and fails instead: the file would be created or changed, and a
// deploy from a synth whose assignment nobody commits can move a tenant on the next synth.
func saveAssignment(path, tenantsFile string, persisted, stackOf map[string]string, strict bool) error {
	return saveAssignments(path, tenantsFile, persisted, stackOf, nil, nil, strict)
}

// saveAssignments is saveAssignment with the pooled tenants' pools.
func saveAssignments(path, tenantsFile string, persisted, stackOf, persistedPools, poolOf map[string]string, strict bool) error {
	return saveAssignmentDoc(path, tenantsFile, assignmentDoc{Stacks: persisted, Pools: persistedPools}, assignmentDoc{Stacks: stackOf, Pools: poolOf}, strict)
}

// saveAssignmentDoc writes doc, the assignment of this synth, where old was read.
func saveAssignmentDoc(path, tenantsFile string, old, doc assignmentDoc, strict bool) error {
	persisted, stackOf, persistedPools, poolOf := old.Stacks, doc.Stacks, old.Pools, doc.Pools
	doc.Note = fmt.Sprintf(assignmentNote, tenantsFileName(tenantsFile))
	if len(poolOf) == 0 {
		doc.Pools = nil
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	was, readErr := os.ReadFile(path)
	if readErr == nil && bytes.Equal(was, b) {
		return nil
	}
	if strict {
		state := "is out of date"
		if errors.Is(readErr, fs.ErrNotExist) {
			state = "does not exist"
		}
		return fmt.Errorf("stack assignment %s %s (%s), and strict assignment (CI=true or -c %s=true) forbids synth to write it: "+
			"a tenant whose stack changes gets a new queue, stranding the files queued in the old one. "+
			"Run the synth once without CI=true, review the file and commit %s",
			path, state, strings.TrimPrefix(assignmentChanges(persisted, stackOf)+poolChanges(persistedPools, poolOf)+prefixChanges(old, doc), "same tenants and stacks, another header; "), CtxStrictAssignment, path)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("stack assignment: %w (synth keeps each tenant's stack in this file)", err)
	}
	return nil
}

// assignmentChanges says how the assignment differs from the persisted one, e.g.
// "new: acme in stack 1; moved: globex from stack 1 to 2; removed: initech".
func assignmentChanges(persisted, stackOf map[string]string) string {
	var added, moved, removed []string
	for _, id := range slices.Sorted(maps.Keys(stackOf)) {
		switch old, ok := persisted[id]; {
		case !ok:
			added = append(added, fmt.Sprintf("%s in stack %s", id, stackOf[id]))
		case old != stackOf[id]:
			moved = append(moved, fmt.Sprintf("%s from stack %s to %s", id, old, stackOf[id]))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(persisted)) {
		if _, ok := stackOf[id]; !ok {
			removed = append(removed, id)
		}
	}
	var parts []string
	for _, p := range []struct {
		name string
		ids  []string
	}{{"new", added}, {"moved", moved}, {"removed", removed}} {
		if len(p.ids) > 0 {
			parts = append(parts, p.name+": "+strings.Join(p.ids, ", "))
		}
	}
	if len(parts) == 0 {
		return "same tenants and stacks, another header"
	}
	return strings.Join(parts, "; ")
}

func tenantsFileName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// assign gives every tenant its stack: the stack field, else the persisted one, else the
// lowest-numbered stack with fewer than perStack tenants. The result holds the tenants of ts only.
func assign(ts []spec.Tenant, persisted map[string]string, perStack int) (map[string]string, error) {
	out := map[string]string{}
	count := map[string]int{}
	for _, t := range ts {
		s := t.Stack
		if s == "" {
			s = persisted[t.ID]
		}
		if s != "" {
			out[t.ID] = s
			count[s]++
		}
	}
	next := 1
	for _, t := range ts {
		if _, ok := out[t.ID]; ok {
			continue
		}
		for count[strconv.Itoa(next)] >= perStack {
			next++
		}
		s := strconv.Itoa(next)
		out[t.ID] = s
		count[s]++
	}
	var errs []error
	for _, s := range stackNames(out) {
		if count[s] > MaxTenantsPerStack {
			var ids []string
			for _, t := range ts {
				if out[t.ID] == s {
					ids = append(ids, t.ID)
				}
			}
			errs = append(errs, fmt.Errorf("stack %q would hold %d tenants (%s), more than %d, and exceed CloudFormation's 500 resources: give some of them another \"stack\"",
				s, count[s], strings.Join(ids, ", "), MaxTenantsPerStack))
		}
	}
	return out, errors.Join(errs...)
}

// stackNames lists the distinct stacks of an assignment: numbered ones by number, then the others
// by name.
func stackNames(stackOf map[string]string) []string {
	seen := map[string]bool{}
	var names []string
	for _, s := range stackOf {
		if !seen[s] {
			seen[s] = true
			names = append(names, s)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		na, ea := strconv.Atoi(a)
		nb, eb := strconv.Atoi(b)
		switch {
		case ea == nil && eb == nil:
			return na - nb
		case ea == nil:
			return -1
		case eb == nil:
			return 1
		}
		return strings.Compare(a, b)
	})
	return names
}

// poolChanges says how the pooled tenants' pools differ, e.g. "; pooled: acme in pool default".
func poolChanges(persisted, poolOf map[string]string) string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(poolOf)) {
		if old, ok := persisted[id]; !ok || old != poolOf[id] {
			parts = append(parts, fmt.Sprintf("%s in pool %s", id, poolOf[id]))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(persisted)) {
		if _, ok := poolOf[id]; !ok {
			parts = append(parts, fmt.Sprintf("%s left pool %s", id, persisted[id]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; pooled: " + strings.Join(parts, ", ")
}

// tierMoves refuses a tenant that changes tier or pool since the assignment was written, unless
// confirmed lists it: its files would queue in another queue, and those still in the old one
// would be processed beside the new ones, or stranded when the old queue goes.
func tierMoves(ts []spec.Tenant, stacks, pools map[string]string, o Options) error {
	var errs []error
	where := func(silo bool, name string) string {
		if silo {
			return fmt.Sprintf("silo stack %s-Tenants-%s", o.StackPrefix, name)
		}
		return fmt.Sprintf("pool %s (stack %s-Pool-%s)", name, o.StackPrefix, name)
	}
	for _, t := range ts {
		oldStack, wasSilo := stacks[t.ID]
		oldPool, wasPooled := pools[t.ID]
		if !wasSilo && !wasPooled {
			continue
		}
		var from, to string
		switch {
		case t.Pooled() && wasSilo:
			from, to = where(true, oldStack), where(false, t.Pool)
		case t.Pooled() && wasPooled && oldPool != t.Pool:
			from, to = where(false, oldPool), where(false, t.Pool)
		case !t.Pooled() && wasPooled:
			from, to = where(false, oldPool), "the silo tier"
		default:
			continue
		}
		if slices.Contains(o.MoveTenants, t.ID) {
			continue
		}
		errs = append(errs, fmt.Errorf("tenant %q moves from %s to %s: its files will queue in another queue, and files still queued in the old one "+
			"would run beside the new ones or be lost with it. Drain it first: stop new files for the tenant, wait until pipectl status shows "+
			"its queue empty and nothing running, copy its sequence state and pause marker to its new keys if a pool's keys carry the pool "+
			"(docs/operations.md, \"A pool's key layout\"), then synth and deploy with -c %s=%s", t.ID, from, to, CtxMoveTenants, t.ID))
	}
	return errors.Join(errs...)
}

// prefixChanges says how the recorded prefixes differ, e.g. "; prefixes: pool default pools/p/".
func prefixChanges(old, doc assignmentDoc) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(doc.PoolPrefixes)) {
		if p, ok := old.PoolPrefixes[name]; !ok || p != doc.PoolPrefixes[name] {
			parts = append(parts, fmt.Sprintf("pool %s %s", name, doc.PoolPrefixes[name]))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(doc.Prefixes)) {
		if p, ok := old.Prefixes[id]; !ok || p != doc.Prefixes[id] {
			parts = append(parts, fmt.Sprintf("%s %s", id, doc.Prefixes[id]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(doc.PoolIntakeGroups)) {
		if n, ok := old.PoolIntakeGroups[name]; !ok || n != doc.PoolIntakeGroups[name] {
			parts = append(parts, fmt.Sprintf("pool %s intakeGroups %d", name, doc.PoolIntakeGroups[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(doc.PoolKeys)) {
		if k, ok := old.PoolKeys[name]; !ok || k != doc.PoolKeys[name] {
			parts = append(parts, fmt.Sprintf("pool %s keys %s", name, doc.PoolKeys[name]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; prefixes: " + strings.Join(parts, ", ")
}

// drainSteps is how to empty a pooled tenant's part of its pool's queue before a change that
// would leave its queued files to no one, confirmed by -c key=confirm. A paused tenant's files
// keep queuing (pipectl pause), so pausing would not drain it.
func drainSteps(id, key, confirm string) string {
	return fmt.Sprintf("Drain it first: stop new files for the tenant (not with pipectl pause, which holds its queued files instead of running them), "+
		"wait until pipectl status %s shows no queued or running file, then synth and deploy with -c %s=%s", id, key, confirm)
}

// poolEdits refuses the edits of the tenants file that would leave a pooled tenant's queued files
// to no one, unless o confirms them:
//   - a pooled tenant removed from the file (RemoveTenants): the pool's controller keeps a message
//     of no tenant of the pool in its queue, unprocessed, and the tenant's later files behind it;
//   - a pooled tenant whose prefix changes, alone or with its pool's (MoveTenants): its queued
//     files lie under the old prefix, which is no longer the tenant's;
//   - a pool whose intakeGroups changes (RegroupIntake): a tenant's new events go to another
//     intake group than its events still on the intake queue, and the two groups are routed at
//     once, so a newer file could reach the pool queue before an older one.
//
// A tenant that changes tier or pool is tierMoves' to refuse. A silo tenant's queues are retained
// when it is removed (README, "Removing a tenant"), so its removal stays as it was.
func poolEdits(file *tenants.File, old assignmentDoc, o Options) error {
	var errs []error
	inFile := make(map[string]bool, len(file.Tenants))
	for _, t := range file.Tenants {
		inFile[t.ID] = true
	}
	for _, id := range slices.Sorted(maps.Keys(old.Pools)) {
		if pool := old.Pools[id]; !inFile[id] && !slices.Contains(o.RemoveTenants, id) {
			errs = append(errs, fmt.Errorf("tenant %q is removed from pool %s (stack %s-Pool-%s): files of it still queued in the pool's queue would stay there unprocessed, "+
				"since the pool no longer knows the tenant. %s", id, pool, o.StackPrefix, pool, drainSteps(id, CtxRemoveTenants, id)))
		}
	}
	movedPools := map[string]bool{}
	for _, name := range file.PoolNames() {
		was, ok := old.PoolPrefixes[name]
		now := file.Pool(name).Prefix
		if !ok || was == now {
			continue
		}
		movedPools[name] = true
		if confirm := "pool:" + name; !slices.Contains(o.MoveTenants, confirm) {
			errs = append(errs, fmt.Errorf("pool %s's prefix changes from %q to %q, and with it the prefix of each of its tenants: files still queued under the old prefix "+
				"are no longer their tenant's. Drain the pool first: stop new files for its tenants, wait until pipectl status shows no queued or running file in the pool, "+
				"then synth and deploy with -c %s=%s", name, was, now, CtxMoveTenants, confirm))
		}
	}
	for _, name := range file.PoolNames() {
		_, deployed := old.PoolPrefixes[name]
		was, now := old.keysOf(&tenants.File{Pools: map[string]*tenants.PoolConfig{}}, name), old.keysOf(file, name)
		if !deployed || was == now || slices.Contains(o.MoveTenants, "keys:"+name) {
			continue
		}
		errs = append(errs, fmt.Errorf("pool %s's keys change from %q to %q: its tenants' parked files, sequence state, pause markers and results "+
			"would stay under the old keys, where the pool's functions no longer look. Drain the pool first: stop new files for its tenants, "+
			"wait until pipectl status shows no queued, parked or running file in the pool, copy what must carry over (docs/operations.md, "+
			"\"A pool's key layout\"), then synth and deploy with -c %s=keys:%s", name, was, now, CtxMoveTenants, name))
	}
	for _, name := range file.PoolNames() {
		was, ok := old.PoolIntakeGroups[name]
		now := file.Pool(name).IntakeGroups
		if !ok || was == now || slices.Contains(o.RegroupIntake, name) {
			continue
		}
		errs = append(errs, fmt.Errorf("pool %s's intakeGroups changes from %s to %s: a tenant's new events would go to another intake group than its events "+
			"still on the intake queue, and the groups are routed at once, so a newer file could be queued before an older one. "+
			"Drain the pool's intake first: stop new files for its tenants, wait until the Intake queue of stack %s-Pool-%s holds no message "+
			"(aws sqs get-queue-attributes: ApproximateNumberOfMessages and ApproximateNumberOfMessagesNotVisible both 0), then synth and deploy with -c %s=%s",
			name, intakeGroupsText(was), intakeGroupsText(now), o.StackPrefix, name, CtxRegroupIntake, name))
	}
	for _, t := range file.Tenants {
		if !t.Pooled() || old.Pools[t.ID] != t.Pool {
			continue // new here, or moved between tiers or pools (tierMoves)
		}
		was, ok := old.recordedPrefix(t.ID, t.Pool)
		if !ok || was == t.Prefix || slices.Contains(o.MoveTenants, t.ID) {
			continue
		}
		_, ownWas := old.Prefixes[t.ID]
		if movedPools[t.Pool] && !ownWas && t.Prefix == file.Pool(t.Pool).Prefix+t.ID+"/" {
			continue // the pool's change, told once for the pool
		}
		errs = append(errs, fmt.Errorf("tenant %q's prefix changes from %q to %q in pool %s: files of it still queued under the old prefix are no longer the tenant's. %s",
			t.ID, was, t.Prefix, t.Pool, drainSteps(t.ID, CtxMoveTenants, t.ID)))
	}
	return errors.Join(errs...)
}

// intakeGroupsText says a pool's recorded intakeGroups: 0 is the per-tenant intake, which has a
// message group for each tenant.
func intakeGroupsText(n int) string {
	if n == 0 {
		return "one per tenant (intake \"tenant\")"
	}
	return strconv.Itoa(n)
}
