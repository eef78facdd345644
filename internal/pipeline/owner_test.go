package pipeline

import (
	"strings"
	"testing"
)

// A tenant's keys lie under its root: its id in a silo or a pool of the earlier layout,
// pool.<pool>/<id> in a pool whose keys carry it. No root is a prefix of another owner's keys,
// so a grant on one owner's root reaches no other owner's objects.
func TestOwnerRoot(t *testing.T) {
	for _, tc := range []struct {
		owner Owner
		want  string
	}{
		{SiloOwner("acme"), "control/acme/paused.json"},
		{PoolOwner("", "acme"), "control/acme/paused.json"},
		{PoolOwner("default", "acme"), "control/pool.default/acme/paused.json"},
	} {
		if got := PauseMarkerKey(tc.owner); got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.owner, got, tc.want)
		}
	}
	owners := []Owner{SiloOwner("pool"), SiloOwner("a"), SiloOwner("a-b"), PoolOwner("p", "a"), PoolOwner("p", "a-b"), PoolOwner("pq", "a"), PoolOwner("q", "a")}
	for _, a := range owners {
		for _, b := range owners {
			if a != b && strings.HasPrefix(ControlDir(b), ControlDir(a)) {
				t.Errorf("%s is under %s", ControlDir(b), ControlDir(a))
			}
		}
	}
}
