package localrun

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestStartRejectsUnknownSequencers(t *testing.T) {
	_, err := Start(context.Background(), Config{Faults: Faults{Sequencers: "sorted"}})
	if err == nil || !strings.Contains(err.Error(), `sequencers "sorted": want "per-key" or "global"`) {
		t.Errorf("got %v, want the sequencers value named", err)
	}
}

// sortedKeys are a map's keys in order, for the tests' stable output.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
