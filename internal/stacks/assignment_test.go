package stacks

import (
	"github.com/example/tenantpipeline/internal/tenants"
	"github.com/example/tenantpipeline/spec"

	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func ids(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("t%02d", i))
	}
	return out
}

func tenantList(ids []string) []spec.Tenant {
	var ts []spec.Tenant
	for _, id := range ids {
		ts = append(ts, spec.Tenant{ID: id})
	}
	return ts
}

// TestAssignFresh: with no assignment file, tenants are grouped by position, as the app always
// did, so an app deployed before keeps every tenant where it is.
func TestAssignFresh(t *testing.T) {
	got, err := assign(tenantList(ids(25)), map[string]string{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids(25) {
		want := fmt.Sprint(i/10 + 1)
		if got[id] != want {
			t.Errorf("tenant %s: got stack %q, want %q", id, got[id], want)
		}
	}
}

// TestAssignKeepsEveryTenant: inserting, removing and reordering tenants never moves another one.
func TestAssignKeepsEveryTenant(t *testing.T) {
	base := ids(25)
	first, err := assign(tenantList(base), map[string]string{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(base)
	slices.Reverse(reversed)
	for _, tc := range []struct {
		name string
		ids  []string
		// new tenants and where they go: the lowest-numbered stack with room
		want map[string]string
	}{
		{"insert at the front", append([]string{"new"}, base...), map[string]string{"new": "3"}},
		{"insert in the middle", slices.Insert(slices.Clone(base), 5, "new"), map[string]string{"new": "3"}},
		{"remove from the middle", slices.Delete(slices.Clone(base), 3, 5), nil},
		{"remove, then insert: the freed slot is reused", append(slices.Delete(slices.Clone(base), 3, 4), "new"), map[string]string{"new": "1"}},
		{"reorder", reversed, nil},
		{"fill stack 3, then open stack 4", append(slices.Clone(base), "n1", "n2", "n3", "n4", "n5", "n6"),
			map[string]string{"n1": "3", "n5": "3", "n6": "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := assign(tenantList(tc.ids), first, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range tc.ids {
				if want, old := first[id]; old && got[id] != want {
					t.Errorf("tenant %s moved: got stack %q, want %q", id, got[id], want)
				}
			}
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("new tenant %s: got stack %q, want %q", id, got[id], want)
				}
			}
			if len(got) != len(tc.ids) {
				t.Errorf("got %d assignments, want %d (removed tenants are dropped)", len(got), len(tc.ids))
			}
		})
	}
}

func TestAssignStackField(t *testing.T) {
	first, _ := assign(tenantList(ids(12)), map[string]string{}, 10)
	ts := tenantList(ids(12))
	ts[0].Stack = "big"
	ts[11].Stack = "1" // an explicit numbered stack counts against its room
	got, err := assign(append(ts, spec.Tenant{ID: "new"}), first, 10)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"t00": "big", "t11": "1", "t01": "1", "t10": "2", "new": "2"} {
		if got[id] != want {
			t.Errorf("tenant %s: got stack %q, want %q", id, got[id], want)
		}
	}
	// A stack field that puts more than MaxTenantsPerStack tenants in one stack fails.
	over := tenantList(ids(MaxTenantsPerStack + 1))
	for i := range over {
		over[i].Stack = "x"
	}
	want := fmt.Sprintf(`stack "x" would hold %d tenants`, MaxTenantsPerStack+1)
	if _, err := assign(over, map[string]string{}, 10); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want an error containing %q", err, want)
	}
}

// TestAssignmentFileRoundTrip: the file is written on the first synth, read back on the next, and
// left untouched when nothing changed.
func TestAssignmentFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tenants.stacks.json")
	got, err := loadAssignment(path)
	if err != nil || len(got) != 0 {
		t.Fatalf("missing file: got %v, %v, want an empty assignment", got, err)
	}
	want := map[string]string{"acme": "1", "globex": "2"}
	if err := saveAssignment(path, filepath.Join(dir, "tenants.json"), got, want, false); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"acme": "1"`) || !strings.Contains(string(b), "Commit this file") {
		t.Errorf("got file %s, want the assignment and the note", b)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(path, old, old)
	if err := saveAssignment(path, filepath.Join(dir, "tenants.json"), got, want, false); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); !fi.ModTime().Equal(old) {
		t.Errorf("got the file rewritten, want it untouched when the assignment did not change")
	}
	got, err = loadAssignment(path)
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("got %v, %v, want %v", got, err, want)
	}
	os.WriteFile(path, []byte(`{"stacks": `), 0o644)
	if _, err := loadAssignment(path); err == nil || !strings.Contains(err.Error(), "restore it from version control") {
		t.Errorf("got %v, want an error saying how to recover", err)
	}
}

func TestStackNamesOrder(t *testing.T) {
	got := stackNames(map[string]string{"a": "10", "b": "2", "c": "big", "d": "1", "e": "2", "f": "abc"})
	if want := []string{"1", "2", "10", "abc", "big"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestStrictAssignmentRefusesToWrite: under strict assignment a missing or stale file is an error
// naming the file and what would change, and the file is left as it was; a current file passes.
func TestStrictAssignmentRefusesToWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tenants.stacks.json")
	tenantsFile := filepath.Join(dir, "tenants.json")
	want := map[string]string{"acme": "1", "globex": "2"}

	err := saveAssignment(path, tenantsFile, map[string]string{}, want, true)
	for _, w := range []string{path + " does not exist", "new: acme in stack 1, globex in stack 2", "commit " + path} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing file: got %v, want an error containing %q", err, w)
		}
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("missing file: got it written, want no file")
	}

	if err := saveAssignment(path, tenantsFile, nil, map[string]string{"acme": "1", "initech": "1"}, false); err != nil {
		t.Fatal(err)
	}
	stale, _ := os.ReadFile(path)
	err = saveAssignment(path, tenantsFile, map[string]string{"acme": "2", "initech": "1"}, want, true)
	for _, w := range []string{path + " is out of date", "new: globex in stack 2", "moved: acme from stack 2 to 1", "removed: initech", "commit " + path} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("stale file: got %v, want an error containing %q", err, w)
		}
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, stale) {
		t.Errorf("stale file: got it rewritten to %s, want it untouched", b)
	}

	if err := saveAssignment(path, tenantsFile, nil, want, false); err != nil {
		t.Fatal(err)
	}
	if err := saveAssignment(path, tenantsFile, want, want, true); err != nil {
		t.Errorf("current file: got %v, want no error", err)
	}
}

// TestNewTenantsPerStackWithKey: with a customer-managed key a new tenant's stack holds at most
// MaxTenantsPerStackWithKey tenants, whatever tenantsPerStack asks; without one, what it asks.
func TestNewTenantsPerStackWithKey(t *testing.T) {
	for _, tc := range []struct {
		asked int
		key   *tenants.Encryption
		want  int
	}{
		{10, nil, 10},
		{11, nil, 11},
		{10, &tenants.Encryption{Key: "create"}, MaxTenantsPerStackWithKey},
		{11, &tenants.Encryption{KeyARN: "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"}, MaxTenantsPerStackWithKey},
		{5, &tenants.Encryption{Key: "create"}, 5},
	} {
		if got := newTenantsPerStack(Options{TenantsPerStack: tc.asked}, &tenants.File{Encryption: tc.key}); got != tc.want {
			t.Errorf("tenantsPerStack %d, key %v: got %d, want %d", tc.asked, tc.key != nil, got, tc.want)
		}
	}
}
