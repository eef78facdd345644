package localrun

import (
	"context"
	"github.com/example/tenantpipeline/internal/localrun/emulate/testruntime"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestStartRejectsUnknownSequencers(t *testing.T) {
	_, err := Start(context.Background(), Config{S3: S3Options{Sequencers: "sorted"}})
	if err == nil || !strings.Contains(err.Error(), `sequencers "sorted": want "per-key" or "global"`) {
		t.Errorf("got %v, want the sequencers value named", err)
	}
}

// sortedKeys are a map's keys in order, for the tests' stable output.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// With LOCALRUN_TEST_RUNTIME=1 the test binary is a Lambda function process (testruntime): the
// tests of the mappings, events and asynchronous invocations run it as their function.
func init() { testruntime.ServeIfAsked() }
