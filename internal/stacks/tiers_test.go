package stacks

import (
	"github.com/example/tenantpipeline/spec"

	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/tenantpipeline/internal/pipeline"
	"github.com/example/tenantpipeline/internal/tenants"
)

// A tenant that changes tier or pool since the assignment was written gets another queue: synth
// refuses it, naming the tenant, both places and the way to confirm, until it is confirmed.
func TestTierMoves(t *testing.T) {
	o := Options{StackPrefix: "TP"}
	stacks := map[string]string{"acme": "1", "keep": "1"}
	pools := map[string]string{"hooli": "default", "wayne": "big"}
	silo := func(id string) spec.Tenant { return spec.Tenant{ID: id, Tier: tenants.TierSilo} }
	pooled := func(id, pool string) spec.Tenant {
		return spec.Tenant{ID: id, Tier: tenants.TierPool, Pool: pool}
	}
	cases := []struct {
		name    string
		ts      []spec.Tenant
		confirm []string
		want    []string // substrings of the error; none: no error
	}{
		{"nobody moves", []spec.Tenant{silo("acme"), silo("keep"), pooled("hooli", "default"), pooled("wayne", "big"), pooled("new", "default")}, nil, nil},
		{"silo to pool", []spec.Tenant{pooled("acme", "default")}, nil,
			[]string{`tenant "acme" moves from silo stack TP-Tenants-1 to pool default (stack TP-Pool-default)`, "Drain it first", "-c moveTenants=acme"}},
		{"pool to pool", []spec.Tenant{pooled("hooli", "big")}, nil,
			[]string{`tenant "hooli" moves from pool default (stack TP-Pool-default) to pool big (stack TP-Pool-big)`}},
		{"pool to silo", []spec.Tenant{silo("wayne")}, nil, []string{`tenant "wayne" moves from pool big (stack TP-Pool-big) to the silo tier`}},
		{"confirmed", []spec.Tenant{pooled("acme", "default"), silo("wayne")}, []string{"acme", "wayne"}, nil},
		{"one of two confirmed", []spec.Tenant{pooled("acme", "default"), silo("wayne")}, []string{"acme"}, []string{`tenant "wayne"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o.MoveTenants = tc.confirm
			err := tierMoves(tc.ts, stacks, pools, o)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.name == "one of two confirmed" && strings.Contains(err.Error(), `"acme"`) {
				t.Errorf("error %q names the confirmed tenant", err)
			}
		})
	}
}

// The assignment file records each silo tenant's stack and each pooled tenant's pool, and reads
// them back.
func TestAssignmentRecordsPools(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tenants.stacks.json")
	stacks := map[string]string{"acme": "1"}
	pools := map[string]string{"hooli": "default"}
	if err := saveAssignments(path, filepath.Join(dir, "tenants.json"), nil, stacks, nil, pools, false); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"pools": {`) || !strings.Contains(string(b), `"hooli": "default"`) {
		t.Errorf("assignment file:\n%s\nwant the pooled tenant's pool", b)
	}
	gotStacks, gotPools, err := loadAssignments(path)
	if err != nil {
		t.Fatal(err)
	}
	if gotStacks["acme"] != "1" || gotPools["hooli"] != "default" || len(gotStacks) != 1 || len(gotPools) != 1 {
		t.Errorf("read back stacks %v pools %v", gotStacks, gotPools)
	}
	// Strict (CI): a new pooled tenant is a change to commit, named as such.
	err = saveAssignments(path, filepath.Join(dir, "tenants.json"), stacks, stacks, pools, map[string]string{"hooli": "default", "new": "default"}, true)
	if err == nil || !strings.Contains(err.Error(), "new in pool default") {
		t.Errorf("strict save with a new pooled tenant: got %v", err)
	}
}

// A pooled tenant removed from the tenants file, or whose prefix changes, would leave its queued
// files to no one: synth refuses it, with the drain steps, until it is confirmed.
func TestPoolEdits(t *testing.T) {
	o := Options{StackPrefix: "TP"}
	old := assignmentDoc{
		Stacks:       map[string]string{"acme": "1"},
		Pools:        map[string]string{"hooli": "default", "wayne": "default", "own": "default"},
		PoolPrefixes: map[string]string{"default": "pools/default/"},
		Prefixes:     map[string]string{"own": "pools/default/own-x/"},
	}
	tenant := func(id, prefix string) string {
		if prefix == "" {
			return fmt.Sprintf(`{"id": %q, "tier": "pool"}`, id)
		}
		return fmt.Sprintf(`{"id": %q, "tier": "pool", "prefix": %q}`, id, prefix)
	}
	file := func(pools string, ts ...string) *tenants.File {
		t.Helper()
		f, err := tenants.Parse([]byte(`{`+pools+`"tenants": [{"id": "acme"}, `+strings.Join(ts, ", ")+`]}`), tenants.Options{RegisterURL: "https://core.example.com/records"})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// "own" had a prefix of its own when pooled tenants could; now a pooled tenant's prefix is always
	// "<pool prefix><id>/", so the old file's record of it is a prefix change.
	all := []string{tenant("hooli", ""), tenant("wayne", ""), tenant("own", "")}
	oldOwn := old
	oldOwn.Prefixes = nil
	cases := []struct {
		name            string
		f               *tenants.File
		old             assignmentDoc
		remove, confirm []string
		want            []string // substrings of the error; none: no error
	}{
		{"nothing changes", file("", all...), oldOwn, nil, nil, nil},
		{"a new tenant", file("", append(all, tenant("new", ""))...), oldOwn, nil, nil, nil},
		{"removed", file("", all[1:]...), oldOwn, nil, nil, []string{
			`tenant "hooli" is removed from pool default (stack TP-Pool-default)`,
			"stop new files for the tenant", "pipectl status hooli shows no queued or running file", "-c removeTenants=hooli"}},
		{"removed, confirmed", file("", all[1:]...), oldOwn, []string{"hooli"}, nil, nil},
		{"removal confirmed by moveTenants is not confirmed", file("", all[1:]...), oldOwn, nil, []string{"hooli"}, []string{"-c removeTenants=hooli"}},
		{"a recorded prefix of its own becomes the derived one", file("", all...), old, nil, nil, []string{
			`tenant "own"'s prefix changes from "pools/default/own-x/" to "pools/default/own/" in pool default`, "pipectl status own", "-c moveTenants=own"}},
		{"prefix change confirmed", file("", all...), old, nil, []string{"own"}, nil},
		{"pool prefix changes: told once, for the pool", file(`"pools": {"default": {"prefix": "p/"}}, `, all...), oldOwn, nil, nil, []string{
			`pool default's prefix changes from "pools/default/" to "p/"`, "-c moveTenants=pool:default"}},
		{"pool prefix change confirmed", file(`"pools": {"default": {"prefix": "p/"}}, `, all...), oldOwn, nil, []string{"pool:default"}, nil},
		{"a file that recorded no prefixes compares none", file(`"pools": {"default": {"prefix": "p/"}}, `, all...),
			assignmentDoc{Pools: old.Pools}, nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o.RemoveTenants, o.MoveTenants = tc.remove, tc.confirm
			err := poolEdits(tc.f, tc.old, o)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.name == "pool prefix changes: told once, for the pool" && (strings.Contains(err.Error(), `"hooli"`) || strings.Contains(err.Error(), `"wayne"`)) {
				t.Errorf("error %q names tenants whose prefix follows the pool's", err)
			}
		})
	}
}

// A pool whose intakeGroups changes would route a tenant's new events beside its events still on
// the intake queue: synth refuses it, naming the pool, both values and the confirming flag, until
// -c regroupIntake=<pool> confirms it.
func TestPoolIntakeRegrouping(t *testing.T) {
	o := Options{StackPrefix: "TP"}
	old := assignmentDoc{
		Pools:            map[string]string{"hooli": "default", "wayne": "big"},
		PoolPrefixes:     map[string]string{"default": "pools/default/", "big": "pools/big/"},
		PoolIntakeGroups: map[string]int{"default": 16, "big": 8},
	}
	file := func(pools string) *tenants.File {
		t.Helper()
		f, err := tenants.Parse([]byte(`{`+pools+`"tenants": [{"id": "hooli", "tier": "pool"}, {"id": "wayne", "tier": "pool", "pool": "big"}]}`),
			tenants.Options{RegisterURL: "https://core.example.com/records"})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	const sharded = `"pools": {"default": {"intake": "sharded"}, "big": {"intake": "sharded"}}, `
	for _, tc := range []struct {
		name    string
		f       *tenants.File
		old     assignmentDoc
		confirm []string
		want    []string // substrings of the error; none: no error
		notWant string
	}{
		{"unchanged", file(`"pools": {"default": {"intake": "sharded"}, "big": {"intakeGroups": 8}}, `), old, nil, nil, ""},
		{"default pool regrouped", file(`"pools": {"default": {"intakeGroups": 4}, "big": {"intakeGroups": 8}}, `), old, nil, []string{
			"pool default's intakeGroups changes from 16 to 4", "Intake queue of stack TP-Pool-default holds no message", "-c regroupIntake=default"}, "pool big"},
		{"back to the default groups", file(sharded), old, nil, []string{"pool big's intakeGroups changes from 8 to 16", "-c regroupIntake=big"}, "pool default"},
		{"confirmed", file(sharded), old, []string{"big"}, nil, ""},
		{"another pool's confirmation is none", file(sharded), old, []string{"default"}, []string{"-c regroupIntake=big"}, ""},
		// The per-tenant intake (the default) moves every tenant to a group of its own.
		{"to the per-tenant intake", file(`"pools": {"default": {"intake": "sharded"}}, `), old, nil, []string{
			`pool big's intakeGroups changes from 8 to one per tenant (intake "tenant")`, "-c regroupIntake=big"}, "pool default"},
		{"per-tenant confirmed", file(`"pools": {"default": {"intake": "sharded"}}, `), old, []string{"big"}, nil, ""},
		{"a file that recorded no intake groups compares none", file(`"pools": {"default": {"intakeGroups": 4}}, `),
			assignmentDoc{Pools: old.Pools, PoolPrefixes: old.PoolPrefixes}, nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o.RegroupIntake = tc.confirm
			err := poolEdits(tc.f, tc.old, o)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("error %q names %q, which did not change", err, tc.notWant)
			}
		})
	}
}

// The assignment file records each pool's prefix, and a pooled tenant's only when it is not
// "<pool prefix><id>/": 100,000 tenants at their derived prefix add no line each.
func TestAssignmentRecordsPrefixes(t *testing.T) {
	f, err := tenants.Parse([]byte(`{"pools": {"big": {"prefix": "in/big/"}}, "tenants": [{"id": "acme"}, {"id": "hooli", "tier": "pool"}, `+
		`{"id": "own", "tier": "pool"}, {"id": "wayne", "tier": "pool", "pool": "big"}]}`),
		tenants.Options{RegisterURL: "https://core.example.com/records"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "tenants.stacks.json")
	doc := assignmentDoc{Stacks: map[string]string{"acme": "1"}, Pools: map[string]string{"hooli": "default", "own": "default", "wayne": "big"}}.withPrefixes(f)
	if err := saveAssignmentDoc(path, filepath.Join(dir, "tenants.json"), assignmentDoc{}, doc, false); err != nil {
		t.Fatal(err)
	}
	got, err := readAssignment(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"default": "pools/default/", "big": "in/big/"}; !maps.Equal(got.PoolPrefixes, want) {
		t.Errorf("got pool prefixes %v, want %v", got.PoolPrefixes, want)
	}
	// Both pools have the per-tenant intake, recorded as 0 groups.
	if want := map[string]int{"default": 0, "big": 0}; !maps.Equal(got.PoolIntakeGroups, want) {
		t.Errorf("got pool intake groups %v, want %v", got.PoolIntakeGroups, want)
	}
	if want := map[string]string(nil); !maps.Equal(got.Prefixes, want) {
		t.Errorf("got tenant prefixes %v, want %v (the others are derived)", got.Prefixes, want)
	}
	for _, tc := range []struct{ id, pool, want string }{{"hooli", "default", "pools/default/hooli/"}, {"own", "default", "pools/default/own/"}, {"wayne", "big", "in/big/wayne/"}} {
		if p, ok := got.recordedPrefix(tc.id, tc.pool); !ok || p != tc.want {
			t.Errorf("%s: got recorded prefix %q (%v), want %q", tc.id, p, ok, tc.want)
		}
	}
	// Strict (CI): a newly recorded prefix is a change to commit, named as such.
	old := got
	old.PoolPrefixes, old.PoolIntakeGroups = nil, nil
	if err := os.WriteFile(path, []byte(`{"stacks": {"acme": "1"}, "pools": {"hooli": "default", "own": "default", "wayne": "big"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err = saveAssignmentDoc(path, filepath.Join(dir, "tenants.json"), old, doc, true)
	if err == nil || !strings.Contains(err.Error(), "prefixes: pool big in/big/, pool default pools/default/") {
		t.Errorf("strict save recording prefixes: got %v", err)
	}
	// A silo-only app's file is as it was: nothing recorded.
	silo, _ := tenants.Parse([]byte(`{"tenants": [{"id": "acme"}]}`), tenants.Options{RegisterURL: "https://core.example.com/records"})
	if d := (assignmentDoc{Stacks: map[string]string{"acme": "1"}}).withPrefixes(silo); d.PoolPrefixes != nil || d.Prefixes != nil || d.PoolIntakeGroups != nil {
		t.Errorf("silo only: got %v %v, want nothing recorded", d.PoolPrefixes, d.Prefixes)
	}
}

// A pool's key layout: a new pool's keys carry the pool; a pool the assignment file recorded
// before layouts were keeps its tenants' keys where they are (KeysPerTenant); a recorded layout
// stays; the tenants file's "keys" chooses. A change of a deployed pool's layout, which would
// leave its tenants' parked files and state behind, is refused until -c moveTenants=keys:<pool>.
func TestPoolKeysLayout(t *testing.T) {
	file := func(pools string) *tenants.File {
		t.Helper()
		f, err := tenants.Parse([]byte(`{`+pools+`"tenants": [{"id": "hooli", "tier": "pool"}]}`), tenants.Options{RegisterURL: "https://core.example.com/records"})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	deployedBefore := assignmentDoc{Pools: map[string]string{"hooli": "default"}, PoolPrefixes: map[string]string{"default": "pools/default/"}}
	recorded := func(k string) assignmentDoc {
		d := deployedBefore
		d.PoolKeys = map[string]string{"default": k}
		return d
	}
	for _, tc := range []struct {
		name string
		old  assignmentDoc
		f    *tenants.File
		want string
	}{
		{"a new pool", assignmentDoc{}, file(""), pipeline.KeysPerPool},
		{"a pool deployed before layouts were recorded", deployedBefore, file(""), pipeline.KeysPerTenant},
		{"a recorded layout stays", recorded(pipeline.KeysPerPool), file(""), pipeline.KeysPerPool},
		{"the file chooses", recorded(pipeline.KeysPerTenant), file(`"pools": {"default": {"keys": "pool"}}, `), pipeline.KeysPerPool},
		{"the file chooses for a new pool too", assignmentDoc{}, file(`"pools": {"default": {"keys": "tenant"}}, `), pipeline.KeysPerTenant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (assignmentDoc{}).withKeys(tc.f, tc.old).PoolKeys["default"]; got != tc.want {
				t.Errorf("got keys %q, want %q", got, tc.want)
			}
		})
	}

	o := Options{StackPrefix: "TP"}
	moved := file(`"pools": {"default": {"keys": "pool"}}, `)
	err := poolEdits(moved, deployedBefore, o)
	for _, w := range []string{`pool default's keys change from "tenant" to "pool"`, "parked files", "-c moveTenants=keys:default"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("got %v, want an error containing %q", err, w)
		}
	}
	o.MoveTenants = []string{"keys:default"}
	if err := poolEdits(moved, deployedBefore, o); err != nil {
		t.Errorf("confirmed: got %v, want no error", err)
	}
	if err := poolEdits(file(""), recorded(pipeline.KeysPerPool), Options{StackPrefix: "TP"}); err != nil {
		t.Errorf("unchanged: got %v, want no error", err)
	}
	if err := poolEdits(moved, assignmentDoc{}, Options{StackPrefix: "TP"}); err != nil {
		t.Errorf("a new pool: got %v, want no error", err)
	}
}
